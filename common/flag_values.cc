// Copyright dreplay authors.

#include "common/flag_values.h"

#include <fstream>

#include "absl/strings/str_cat.h"

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

absl::StatusOr<std::string> ReadAuthToken(const std::string& token,
                                          const std::string& token_file) {
  if (!token.empty() && !token_file.empty()) {
    return absl::InvalidArgumentError("give --auth_token or --auth_token_file, not both");
  }
  if (token_file.empty()) return token;
  std::ifstream in(token_file);
  if (!in) return FlagError("auth_token_file", token_file, "cannot be read");
  std::string line;
  std::getline(in, line);
  if (!line.empty() && line.back() == '\r') line.pop_back();
  return line;
}

}  // namespace dreplay
