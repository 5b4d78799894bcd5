// Copyright dreplay authors.
//
// flag_values.h: checks shared by the binaries' main() functions when they
// turn command-line values into options. Takes values, never reads flags.

#ifndef DREPLAY_COMMON_FLAG_VALUES_H_
#define DREPLAY_COMMON_FLAG_VALUES_H_

#include <cstdint>
#include <string>
#include <vector>

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

// OK when value >= min, else InvalidArgument "--<flag>=<value>: must be >= min".
absl::Status CheckAtLeast(const char* flag, int64_t value, int64_t min);

// OK when lo <= value <= hi, else InvalidArgument "--<flag>=<value>: must be
// in [lo, hi]".
absl::Status CheckRange(const char* flag, int64_t value, int64_t lo, int64_t hi);

// A comma-separated list of whole numbers >= 1 ("64,64"; "" is the empty
// list), e.g. the hidden layer sizes of a network.
absl::StatusOr<std::vector<int>> SizeList(const char* flag, const std::string& text);

// What an --auth_token_file without a token means: the empty token (no
// token, for a server that has none), or a mistake.
enum class EmptyTokenFile { kAllowed, kRefused };

// The auth token given either inline (--auth_token, with a warning: a
// command line is visible to every user of the host) or as the first line
// of a file (--auth_token_file, or the flag named `flag`; a trailing '\r' is
// dropped). InvalidArgument when both are given, the file cannot be read,
// is open to group or others (its mode has any of 077: the message names
// the mode and the chmod to run), or (kRefused) holds no token. May return
// "" otherwise. Lengths are the caller's to check.
absl::StatusOr<std::string> ReadAuthToken(const std::string& token, const std::string& token_file,
                                          EmptyTokenFile empty = EmptyTokenFile::kAllowed,
                                          const char* flag = "auth_token_file");

}  // namespace dreplay

#endif  // DREPLAY_COMMON_FLAG_VALUES_H_
