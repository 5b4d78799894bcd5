// Copyright dreplay authors.

#include "testing/server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "glog/logging.h"

extern char** environ;

namespace dreplay::testing {
namespace {

// How often the helpers look at a child or a file while they wait.
constexpr absl::Duration kPollInterval = absl::Milliseconds(5);

std::atomic<int> g_dir_counter{0};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int DecodeWaitStatus(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// Runfiles path of the children's ThreadSanitizer suppressions.
constexpr char kTsanSuppressions[] = "testing/tsan_child_suppressions.txt";
// ThreadSanitizer's largest history_size (2^(17 + n) accesses per thread).
constexpr int kTsanHistorySize = 7;

// The children's environment: ours, plus our suppressions file in
// TSAN_OPTIONS when we run under ThreadSanitizer (TSAN_OPTIONS set).
std::vector<std::string> ChildEnvironment() {
  std::vector<std::string> env;
  std::string tsan_options;
  for (char** e = environ; *e != nullptr; ++e) {
    if (absl::StartsWith(*e, "TSAN_OPTIONS=")) {
      tsan_options = *e + std::strlen("TSAN_OPTIONS=");
    } else {
      env.push_back(*e);
    }
  }
  if (!tsan_options.empty()) {
    // The soft NIC thread's placements are suppressed by function name
    // (verbs/soft/tsan_suppressions.cc), which needs their stacks: keep
    // the longest history, so that a busy server's old accesses can still
    // be restored.
    if (!absl::StrContains(tsan_options, "history_size=")) {
      absl::StrAppend(&tsan_options, ":history_size=", kTsanHistorySize);
    }
    std::error_code error;
    const std::filesystem::path supp = std::filesystem::absolute(kTsanSuppressions, error);
    if (!error && std::filesystem::exists(supp)) {
      absl::StrAppend(&tsan_options, ":suppressions=", supp.string());
    }
    env.push_back("TSAN_OPTIONS=" + tsan_options);
  }
  return env;
}

// Spawns argv with stdout and stderr redirected to the given files.
absl::StatusOr<pid_t> Spawn(const std::vector<std::string>& argv, const std::string& out_path,
                            const std::string& err_path) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, out_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, STDERR_FILENO, err_path.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const std::vector<std::string> env = ChildEnvironment();
  std::vector<char*> envp;
  for (const std::string& e : env) envp.push_back(const_cast<char*>(e.c_str()));
  envp.push_back(nullptr);
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    return absl::InternalError(
        absl::StrCat("cannot spawn ", absl::StrJoin(argv, " "), ": ", std::strerror(rc)));
  }
  return pid;
}

// Reaps `pid` if it exited; its exit status then.
std::optional<int> TryReap(pid_t pid) {
  int status = 0;
  const pid_t r = waitpid(pid, &status, WNOHANG);
  if (r == pid) return DecodeWaitStatus(status);
  return std::nullopt;
}

// Waits up to `timeout` for `pid` to exit.
std::optional<int> ReapWithin(pid_t pid, absl::Duration timeout) {
  const absl::Time deadline = absl::Now() + timeout;
  while (true) {
    if (std::optional<int> s = TryReap(pid)) return s;
    if (absl::Now() > deadline) return std::nullopt;
    absl::SleepFor(kPollInterval);
  }
}

int KillAndReap(pid_t pid) {
  kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return DecodeWaitStatus(status);
}

}  // namespace

std::string MakeTestDir(const std::string& name) {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const std::string base = tmp != nullptr ? tmp : "/tmp";
  const std::string dir = absl::StrCat(base, "/", name, ".", getpid(), ".", g_dir_counter++);
  std::filesystem::remove_all(dir);
  std::error_code error;
  std::filesystem::create_directories(dir, error);
  CHECK(!error) << "cannot create " << dir << ": " << error.message();
  return dir;
}

void WriteSecretFile(const std::string& path, const std::string& contents) {
  std::filesystem::remove(path);
  const int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  CHECK_GE(fd, 0) << "cannot create " << path;
  CHECK_EQ(write(fd, contents.data(), contents.size()), static_cast<ssize_t>(contents.size()));
  close(fd);
}

absl::StatusOr<std::unique_ptr<ServerProcess>> ServerProcess::Start(
    const ServerProcessOptions& options) {
  std::unique_ptr<ServerProcess> p(new ServerProcess());
  p->dir_ = MakeTestDir("replay_server");
  const std::string port_file = p->dir_ + "/port";
  std::vector<std::string> argv = {options.binary, "--listen=" + options.listen,
                                   "--provider=" + options.provider, "--port_file=" + port_file};
  argv.insert(argv.end(), options.flags.begin(), options.flags.end());
  const bool has_token = std::any_of(options.flags.begin(), options.flags.end(), [](const auto& f) {
    return absl::StartsWith(f, "--auth_token") || absl::StrContains(f, "_token_file=") ||
           f == "--insecure";
  });
  if (!has_token) argv.push_back("--insecure");
  const absl::StatusOr<pid_t> pid = Spawn(argv, p->dir_ + "/stdout", p->dir_ + "/stderr");
  if (!pid.ok()) return pid.status();
  p->pid_ = *pid;
  p->host_ = options.listen.substr(0, options.listen.rfind(':'));

  const absl::Time deadline = absl::Now() + options.start_timeout;
  while (true) {
    // The server renames the file into place, so a present file is whole.
    if (std::filesystem::exists(port_file)) {
      uint32_t port = 0;
      const std::string text = ReadFile(port_file);
      if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &port) || port == 0 || port > 65535) {
        return absl::InternalError(absl::StrCat("bad port file content \"", text, "\""));
      }
      p->port_ = static_cast<uint16_t>(port);
      return p;
    }
    if (!p->Running()) {
      return absl::FailedPreconditionError(
          absl::StrCat("replay_server exited with status ", *p->exit_status_,
                       " before listening; its log ends with:\n", p->LogTail()));
    }
    if (absl::Now() > deadline) {
      p->exit_status_ = KillAndReap(p->pid_);
      return absl::DeadlineExceededError(absl::StrCat("replay_server did not listen within ",
                                                      absl::FormatDuration(options.start_timeout),
                                                      "; its log ends with:\n", p->LogTail()));
    }
    absl::SleepFor(kPollInterval);
  }
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0 && !exit_status_.has_value()) exit_status_ = KillAndReap(pid_);
}

std::string ServerProcess::address() const { return absl::StrCat(host_, ":", port_); }

bool ServerProcess::Running() {
  if (exit_status_.has_value()) return false;
  exit_status_ = TryReap(pid_);
  return !exit_status_.has_value();
}

absl::StatusOr<int> ServerProcess::Stop(int signal, absl::Duration timeout) {
  if (!Running()) return *exit_status_;
  kill(pid_, signal);
  exit_status_ = ReapWithin(pid_, timeout);
  if (!exit_status_.has_value()) {
    exit_status_ = KillAndReap(pid_);
    return absl::DeadlineExceededError(
        absl::StrCat("replay_server did not exit within ", absl::FormatDuration(timeout),
                     " of signal ", signal, "; killed. Its log ends with:\n", LogTail()));
  }
  return *exit_status_;
}

std::string ServerProcess::LogTail(size_t bytes) const {
  const std::string log = ReadFile(dir_ + "/stderr");
  return log.size() <= bytes ? log : log.substr(log.size() - bytes);
}

absl::StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                         absl::Duration timeout) {
  const std::string dir = MakeTestDir("command");
  const absl::StatusOr<pid_t> pid = Spawn(argv, dir + "/stdout", dir + "/stderr");
  if (!pid.ok()) return pid.status();
  const std::optional<int> status = ReapWithin(*pid, timeout);
  if (!status.has_value()) {
    KillAndReap(*pid);
    return absl::DeadlineExceededError(
        absl::StrCat(absl::StrJoin(argv, " "), " did not exit within ",
                     absl::FormatDuration(timeout), "; stderr:\n", ReadFile(dir + "/stderr")));
  }
  CommandResult r;
  r.exit_status = *status;
  r.out = ReadFile(dir + "/stdout");
  r.err = ReadFile(dir + "/stderr");
  return r;
}

}  // namespace dreplay::testing
