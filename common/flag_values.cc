// Copyright dreplay authors.

#include "common/flag_values.h"

#include <sys/stat.h>

#include <fstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "glog/logging.h"

namespace dreplay {

absl::Status FlagError(const char* flag, const std::string& value, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, "=", value, ": ", why));
}

absl::StatusOr<absl::Duration> Seconds(const char* flag, double value, bool zero_is_infinite) {
  if (!(value >= 0) || value > 1e9) {
    return FlagError(flag, std::to_string(value), "must be a number of seconds >= 0");
  }
  if (value == 0) {
    if (zero_is_infinite) return absl::InfiniteDuration();
    return FlagError(flag, "0", "must be > 0");
  }
  return absl::Seconds(value);
}

absl::Status CheckAtLeast(const char* flag, int64_t value, int64_t min) {
  if (value < min) return FlagError(flag, std::to_string(value), absl::StrCat("must be >= ", min));
  return absl::OkStatus();
}

absl::Status CheckRange(const char* flag, int64_t value, int64_t lo, int64_t hi) {
  if (value < lo || value > hi) {
    return FlagError(flag, std::to_string(value), absl::StrCat("must be in [", lo, ", ", hi, "]"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> SizeList(const char* flag, const std::string& text) {
  std::vector<int> sizes;
  if (text.empty()) return sizes;
  for (absl::string_view part : absl::StrSplit(text, ',')) {
    int size = 0;
    if (!absl::SimpleAtoi(part, &size) || size < 1) {
      return FlagError(flag, text, "must be a comma-separated list of sizes >= 1");
    }
    sizes.push_back(size);
  }
  return sizes;
}

absl::StatusOr<std::string> ReadAuthToken(const std::string& token, const std::string& token_file,
                                          EmptyTokenFile empty, const char* flag) {
  if (!token.empty() && !token_file.empty()) {
    return absl::InvalidArgumentError("give --auth_token or --auth_token_file, not both");
  }
  if (!token.empty()) {
    LOG(WARNING) << "--auth_token is visible to every user of this host (ps, /proc); prefer "
                    "--auth_token_file";
  }
  if (token_file.empty()) return token;
  std::ifstream in(token_file);
  if (!in) return FlagError(flag, token_file, "cannot be read");
  struct stat st;
  if (stat(token_file.c_str(), &st) != 0) return FlagError(flag, token_file, "cannot be read");
  if ((st.st_mode & 077) != 0) {
    return FlagError(
        flag, token_file,
        absl::StrFormat("is open to group or others (mode %04o); a token file must be mode 0600 "
                        "or 0400: chmod 600 %s",
                        st.st_mode & 07777, token_file));
  }
  std::string line;
  std::getline(in, line);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  if (line.empty() && empty == EmptyTokenFile::kRefused) {
    return FlagError(flag, token_file, "holds no token");
  }
  return line;
}

}  // namespace dreplay
