// Copyright dreplay authors.

#include "tools/bench/peer_bench_redis_server.h"

#include <arpa/inet.h>
#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/status_macros.h"

namespace dreplay::tools {
namespace {

constexpr absl::Duration kStartTimeout = absl::Seconds(10);
constexpr absl::Duration kStopTimeout = absl::Seconds(10);
constexpr int kPortAttempts = 5;

// A port nobody listens on now, chosen by the OS.
absl::StatusOr<int> ProbeFreePort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  const bool ok = bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 &&
                  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
  const int err = errno;
  close(fd);
  if (!ok) return absl::InternalError(absl::StrCat("probing a port: ", std::strerror(err)));
  return static_cast<int>(ntohs(addr.sin_port));
}

// `binary` itself when it has a '/', else the first executable in PATH.
absl::StatusOr<std::string> Resolve(const std::string& binary) {
  if (binary.find('/') != std::string::npos) {
    if (access(binary.c_str(), X_OK) == 0) return binary;
  } else if (const char* path = std::getenv("PATH")) {
    for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
      std::string candidate = absl::StrCat(dir, "/", binary);
      if (access(candidate.c_str(), X_OK) == 0) return candidate;
    }
  }
  return absl::NotFoundError(absl::StrCat(
      binary, " not found (install redis-server: tools/install_deps.sh, or pass --redis_server)"));
}

std::string LogTail(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string s = text.str();
  if (s.size() > 600) s = s.substr(s.size() - 600);
  return s;
}

// The child: redis-server on 127.0.0.1:port in `dir`, no persistence.
pid_t Spawn(const std::string& path, const std::string& dir, int port) {
  std::vector<std::string> args = {path,
                                   "--port",
                                   std::to_string(port),
                                   "--bind",
                                   "127.0.0.1",
                                   "--dir",
                                   dir,
                                   "--save",
                                   "",
                                   "--appendonly",
                                   "no",
                                   "--protected-mode",
                                   "no",
                                   "--daemonize",
                                   "no",
                                   "--logfile",
                                   dir + "/redis.log",
                                   "--databases",
                                   "1"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid == 0) {
    // Only async-signal-safe calls between fork and exec.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != parent) _exit(127);
    execv(argv[0], argv.data());
    _exit(127);
  }
  return pid;
}

// Waits until the server on `port` answers PING, the child exits, or the
// deadline passes.
absl::Status WaitUntilUp(pid_t pid, int port, const std::string& log) {
  const absl::Time deadline = absl::Now() + kStartTimeout;
  while (absl::Now() < deadline) {
    int wstatus = 0;
    if (waitpid(pid, &wstatus, WNOHANG) == pid) {
      return absl::UnavailableError(absl::StrCat("redis-server exited at start: ", LogTail(log)));
    }
    timeval tv{0, 200000};
    redisContext* c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c != nullptr && c->err == 0) {
      auto* reply = static_cast<redisReply*>(redisCommand(c, "PING"));
      const bool up = reply != nullptr && reply->type == REDIS_REPLY_STATUS;
      if (reply != nullptr) freeReplyObject(reply);
      redisFree(c);
      if (up) return absl::OkStatus();
    } else if (c != nullptr) {
      redisFree(c);
    }
    absl::SleepFor(absl::Milliseconds(10));
  }
  return absl::UnavailableError(absl::StrCat("redis-server did not answer within ",
                                             absl::FormatDuration(kStartTimeout), ": ",
                                             LogTail(log)));
}

// SIGTERM, SIGKILL after the timeout; true when it exited with status 0.
bool StopChild(pid_t pid) {
  kill(pid, SIGTERM);
  const absl::Time deadline = absl::Now() + kStopTimeout;
  int wstatus = 0;
  while (waitpid(pid, &wstatus, WNOHANG) != pid) {
    if (absl::Now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &wstatus, 0);
      return false;
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  return WIFEXITED(wstatus) && WEXITSTATUS(wstatus) == 0;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisServerProcess>> RedisServerProcess::Start(
    const std::string& binary) {
  ASSIGN_OR_RETURN(std::string path, Resolve(binary));
  char tmpl[] = "/tmp/peer_bench_redis.XXXXXX";
  if (mkdtemp(tmpl) == nullptr) {
    return absl::InternalError(absl::StrCat("mkdtemp: ", std::strerror(errno)));
  }
  const std::string dir = tmpl;
  absl::Status last;
  for (int attempt = 0; attempt < kPortAttempts; ++attempt) {
    ASSIGN_OR_RETURN(int port, ProbeFreePort());
    const pid_t pid = Spawn(path, dir, port);
    if (pid < 0) {
      last = absl::InternalError(absl::StrCat("fork: ", std::strerror(errno)));
      break;
    }
    last = WaitUntilUp(pid, port, dir + "/redis.log");
    if (last.ok()) {
      return std::unique_ptr<RedisServerProcess>(new RedisServerProcess(dir, pid, port));
    }
    StopChild(pid);
    if (LogTail(dir + "/redis.log").find("already in use") == std::string::npos) break;
  }
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
  return last;
}

double RedisServerProcess::CpuSeconds() const {
  if (pid_ < 0) return 0;
  std::ifstream in(absl::StrCat("/proc/", pid_, "/stat"));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  // The fields after the command name, which is in parentheses: state is
  // field 3, utime and stime fields 14 and 15.
  const size_t close = text.rfind(')');
  if (close == std::string::npos || close + 2 > text.size()) return 0;
  std::vector<std::string> fields = absl::StrSplit(text.substr(close + 2), ' ');
  uint64_t utime = 0, stime = 0;
  if (fields.size() < 13 || !absl::SimpleAtoi(fields[11], &utime) ||
      !absl::SimpleAtoi(fields[12], &stime)) {
    return 0;
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

RedisServerProcess::~RedisServerProcess() { Stop().IgnoreError(); }

absl::Status RedisServerProcess::Stop() {
  if (pid_ < 0) return absl::OkStatus();
  const bool clean = StopChild(pid_);
  pid_ = -1;
  const std::string log = LogTail(dir_ + "/redis.log");
  std::error_code ignored;
  std::filesystem::remove_all(dir_, ignored);
  if (!clean) return absl::InternalError(absl::StrCat("redis-server did not stop cleanly: ", log));
  return absl::OkStatus();
}

}  // namespace dreplay::tools
