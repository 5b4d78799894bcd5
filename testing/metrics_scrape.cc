// Copyright dreplay authors.

#include "testing/metrics_scrape.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/unique_fd.h"

namespace dreplay::testing {
namespace {

absl::StatusOr<HttpResponse> ParseResponse(const std::string& raw) {
  const size_t end_of_headers = raw.find("\r\n\r\n");
  if (end_of_headers == std::string::npos) {
    return absl::DataLossError(absl::StrCat("no end of headers in: ", raw.substr(0, 200)));
  }
  const std::vector<std::string> lines =
      absl::StrSplit(raw.substr(0, end_of_headers), "\r\n", absl::SkipEmpty());
  HttpResponse r;
  // "HTTP/1.x CODE REASON"
  const std::vector<std::string> status_line = absl::StrSplit(lines.at(0), absl::MaxSplits(' ', 2));
  if (status_line.size() < 2 || !absl::StartsWith(status_line[0], "HTTP/") ||
      !absl::SimpleAtoi(status_line[1], &r.status)) {
    return absl::DataLossError(absl::StrCat("bad status line: ", lines[0]));
  }
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == std::string::npos) return absl::DataLossError("bad header: " + lines[i]);
    r.headers[absl::AsciiStrToLower(lines[i].substr(0, colon))] =
        std::string(absl::StripAsciiWhitespace(lines[i].substr(colon + 1)));
  }
  r.body = raw.substr(end_of_headers + 4);
  return r;
}

std::string FindPromtool() {
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH")) dirs = absl::StrSplit(path, ':', absl::SkipEmpty());
  dirs.push_back("/usr/bin");
  dirs.push_back("/usr/local/bin");
  for (const std::string& dir : dirs) {
    const std::string candidate = dir + "/promtool";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

}  // namespace

absl::StatusOr<HttpResponse> HttpGet(const std::string& host, uint16_t port,
                                     const std::string& path, const std::string& method,
                                     absl::Duration timeout) {
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(port);
  if (inet_pton(AF_INET, host.c_str(), &address.sin_addr) != 1) {
    return absl::InvalidArgumentError("not an IPv4 address: " + host);
  }
  UniqueFd fd(socket(AF_INET, SOCK_STREAM, 0));
  if (fd.get() < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  const timeval tv = absl::ToTimeval(timeout);
  setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd.get(), SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
  if (connect(fd.get(), reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) {
    return absl::UnavailableError(
        absl::StrCat("connect to ", host, ":", port, ": ", std::strerror(errno)));
  }
  const std::string request =
      absl::StrCat(method, " ", path, " HTTP/1.0\r\nHost: ", host, ":", port, "\r\n\r\n");
  if (send(fd.get(), request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    return absl::UnavailableError(absl::StrCat("send: ", std::strerror(errno)));
  }
  std::string raw;
  char buffer[4096];
  while (true) {
    const ssize_t n = recv(fd.get(), buffer, sizeof(buffer), 0);
    if (n == 0) break;
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return absl::DeadlineExceededError("no complete answer within the timeout");
      }
      return absl::UnavailableError(absl::StrCat("recv: ", std::strerror(errno)));
    }
    raw.append(buffer, static_cast<size_t>(n));
  }
  return ParseResponse(raw);
}

absl::StatusOr<PromtoolResult> PromtoolCheckMetrics(const std::string& text) {
  const std::string promtool = FindPromtool();
  if (promtool.empty()) {
    return absl::NotFoundError(
        "promtool is not installed (Debian's package prometheus, see tools/install_deps.sh): "
        "the text was not checked by promtool");
  }
  const char* tmpdir = std::getenv("TEST_TMPDIR");
  std::string file = absl::StrCat(tmpdir != nullptr ? tmpdir : "/tmp", "/metrics_XXXXXX");
  const int fd = mkstemp(file.data());
  if (fd < 0) return absl::InternalError(absl::StrCat("mkstemp: ", std::strerror(errno)));
  close(fd);
  {
    std::ofstream out(file, std::ios::trunc | std::ios::binary);
    out << text;
    if (!out) return absl::InternalError("cannot write " + file);
  }
  const std::string command = absl::StrCat("'", promtool, "' check metrics < '", file, "' 2>&1");
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return absl::InternalError(absl::StrCat("popen: ", std::strerror(errno)));
  PromtoolResult result;
  char buffer[1024];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = pclose(pipe);
  std::remove(file.c_str());
  if (status == -1 || !WIFEXITED(status)) {
    return absl::InternalError("promtool did not exit normally: " + result.output);
  }
  result.exit_status = WEXITSTATUS(status);
  return result;
}

}  // namespace dreplay::testing
