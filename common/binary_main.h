// Copyright dreplay authors.
//
// binary_main.h: what every dreplay binary's main() does before and after
// its own work: the command line (gflags, --help), logging, exit statuses
// and the messages that go with them.
//
//   DEFINE_string(server, "", "...");  // flags stay in the main's own file
//
//   int main(int argc, char** argv) {
//     dreplay::BinaryMain binary({"actor", kUsage, "actor_main"});
//     if (std::optional<int> done = binary.Init(argc, argv)) return *done;
//     ...
//     if (!options.ok()) return binary.BadFlag(options.status());
//     if (!run.ok()) return binary.Failure(run);
//     return dreplay::kExitSuccess;
//   }
//
// Exit statuses (the same for every binary): 0 success, 1 failure, 2 a bad
// flag; --help exits 0.
//
// Init() parses the command line with gflags and exits the process itself
// in gflags' two cases: 2 (kExitBadFlag) for a flag gflags cannot parse (an
// unknown flag, a malformed number), 0 after --help. --help lists only the
// flags defined in the binary's own file (BinaryOptions::flags_file);
// --helpfull lists every flag linked in. Logging (glog) goes to stderr.
//
// The signals that stop a binary are common/stop_signals.h's.
//
// Not thread-safe: one BinaryMain per process, used from main()'s thread.

#ifndef DREPLAY_COMMON_BINARY_MAIN_H_
#define DREPLAY_COMMON_BINARY_MAIN_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace dreplay {

inline constexpr int kExitSuccess = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitBadFlag = 2;

struct BinaryOptions {
  // The binary's name: messages on stderr start with "<name>: ".
  std::string name;
  // What --help prints above the flags: what the binary does, its exit
  // statuses, a usage line.
  std::string usage;
  // --help lists the flags of the files whose path contains this, e.g.
  // "actor_main" for actor_client/actor_main.cc.
  std::string flags_file;
  // Log only warnings and errors (a tool whose output is its view).
  bool warnings_only = false;
};

class BinaryMain {
 public:
  explicit BinaryMain(BinaryOptions options);
  BinaryMain(const BinaryMain&) = delete;
  BinaryMain& operator=(const BinaryMain&) = delete;

  // Parses the command line, handles --help and starts logging (see the
  // file comment; gflags' own errors and --help end the process). Returns
  // nothing when the binary should go on, or the status main() returns:
  // kExitBadFlag (with a message) for an argument that is not a flag.
  // Call once, first thing in main().
  std::optional<int> Init(int argc, char** argv);

  const std::string& name() const { return options_.name; }

  // Writes "<name>: <message>" on stderr and returns `exit_status`.
  int Exit(int exit_status, absl::string_view message) const;
  // A bad flag: "<name>: <status message>" (it names the flag and value);
  // returns kExitBadFlag.
  int BadFlag(const absl::Status& status) const;
  // A failure: "<name>: <status>" (code and message), or with `what`
  // "<name>: <what>: <status>"; returns kExitFailure.
  int Failure(const absl::Status& status) const;
  int Failure(absl::string_view what, const absl::Status& status) const;

 private:
  const BinaryOptions options_;
};

}  // namespace dreplay

#endif  // DREPLAY_COMMON_BINARY_MAIN_H_
