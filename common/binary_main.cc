// Copyright dreplay authors.

#include "common/binary_main.h"

#include <cstdlib>
#include <iostream>
#include <utility>

#include "gflags/gflags.h"
#include "glog/logging.h"

// gflags' own; --help is narrowed to the binary's file.
DECLARE_bool(help);
DECLARE_string(helpmatch);

// gflags ends the process through this hook (exit(1) by default) on a flag
// it cannot parse, and after --help. Exported by libgflags, not declared in
// its headers.
namespace google {
extern void (*gflags_exitfunc)(int);
}  // namespace google

namespace dreplay {
namespace {

[[noreturn]] void ExitBadFlag(int) { std::exit(kExitBadFlag); }
[[noreturn]] void ExitAfterHelp(int) { std::exit(kExitSuccess); }

}  // namespace

BinaryMain::BinaryMain(BinaryOptions options) : options_(std::move(options)) {}

std::optional<int> BinaryMain::Init(int argc, char** argv) {
  gflags::SetUsageMessage(options_.usage);
  google::gflags_exitfunc = &ExitBadFlag;
  gflags::ParseCommandLineNonHelpFlags(&argc, &argv, /*remove_flags=*/true);
  google::gflags_exitfunc = &ExitAfterHelp;
  if (FLAGS_help) {
    FLAGS_help = false;
    FLAGS_helpmatch = options_.flags_file;
  }
  gflags::HandleCommandLineHelpFlags();
  google::InitGoogleLogging(argv[0]);
  FLAGS_logtostderr = true;
  if (options_.warnings_only) FLAGS_minloglevel = google::GLOG_WARNING;
  if (argc > 1) {
    return Exit(kExitBadFlag, std::string("unexpected argument \"") + argv[1] + "\"");
  }
  return std::nullopt;
}

int BinaryMain::Exit(int exit_status, absl::string_view message) const {
  std::cerr << options_.name << ": " << message << "\n";
  return exit_status;
}

int BinaryMain::BadFlag(const absl::Status& status) const {
  return Exit(kExitBadFlag, status.message());
}

int BinaryMain::Failure(const absl::Status& status) const {
  return Exit(kExitFailure, status.ToString());
}

int BinaryMain::Failure(absl::string_view what, const absl::Status& status) const {
  return Exit(kExitFailure, std::string(what) + ": " + status.ToString());
}

}  // namespace dreplay
