// Copyright dreplay authors.
//
// flag_values.h: checks shared by the binaries' main() functions when they
// turn command-line values into options. Takes values, never reads flags.

#ifndef DREPLAY_COMMON_FLAG_VALUES_H_
#define DREPLAY_COMMON_FLAG_VALUES_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace dreplay {

// InvalidArgument "--<flag>=<value>: <why>".
absl::Status FlagError(const char* flag, const std::string& value, absl::string_view why);

// A non-negative number of seconds as a Duration. 0 means "no limit"
// (InfiniteDuration) when zero_is_infinite, and is refused otherwise.
absl::StatusOr<absl::Duration> Seconds(const char* flag, double value, bool zero_is_infinite);

// The auth token given either inline (--auth_token) or as the first line of
// a file (--auth_token_file; a trailing '\r' is dropped). InvalidArgument
// when both are given or the file cannot be read. May return "".
absl::StatusOr<std::string> ReadAuthToken(const std::string& token,
                                          const std::string& token_file);

}  // namespace dreplay

#endif  // DREPLAY_COMMON_FLAG_VALUES_H_
