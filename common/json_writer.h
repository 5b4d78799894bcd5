// Copyright dreplay authors.
//
// json_writer.h: JSON text for the binaries' reports (metrics lines,
// replay_top --json, the actor layout file), one object at a time.
//
//   const std::string line = JsonObject()
//                                .Add("type", "progress")
//                                .Add("train_steps", uint64_t{42})
//                                .Add("loss", 0.25)
//                                .Done();
//   // {"type":"progress","train_steps":42,"loss":0.25}
//
// Strings are escaped as RFC 8259 requires: `"` and `\` by a backslash,
// every control character below 0x20 as \u00xx. Integers are written
// exactly, doubles with printf's %.<N>g, and a non-finite double or an
// empty optional as null. Keys keep the order they were added in.
// Not thread-safe; build each object on one thread.

#ifndef DREPLAY_COMMON_JSON_WRITER_H_
#define DREPLAY_COMMON_JSON_WRITER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <type_traits>

#include "absl/strings/string_view.h"

namespace dreplay {

// `text` as a JSON string literal, quotes included.
std::string JsonString(absl::string_view text);

// Builds one JSON object.
class JsonObject {
 public:
  // Doubles written with %.10g.
  static constexpr int kDefaultDoubleDigits = 10;

  // Doubles are written with `double_digits` significant digits.
  explicit JsonObject(int double_digits = kDefaultDoubleDigits) : double_digits_(double_digits) {}

  JsonObject& Add(absl::string_view key, const std::string& value);
  JsonObject& Add(absl::string_view key, const char* value);
  JsonObject& Add(absl::string_view key, bool value);
  JsonObject& Add(absl::string_view key, double value);
  JsonObject& Add(absl::string_view key, const std::optional<double>& value);
  JsonObject& Add(absl::string_view key, const std::optional<uint64_t>& value);
  // Any integer type but bool, written exactly.
  template <typename Int,
            std::enable_if_t<std::is_integral_v<Int> && !std::is_same_v<Int, bool>, int> = 0>
  JsonObject& Add(absl::string_view key, Int value) {
    if constexpr (std::is_signed_v<Int>) {
      return AddSigned(key, static_cast<int64_t>(value));
    } else {
      return AddUnsigned(key, static_cast<uint64_t>(value));
    }
  }
  // `json` is already JSON text (an array, an object built elsewhere, null);
  // written as given.
  JsonObject& AddRaw(absl::string_view key, absl::string_view json);

  // The object's text. The builder may be used again afterwards.
  std::string Done() const { return out_ + "}"; }

 private:
  JsonObject& AddSigned(absl::string_view key, int64_t value);
  JsonObject& AddUnsigned(absl::string_view key, uint64_t value);
  void Key(absl::string_view key);

  const int double_digits_;
  std::string out_ = "{";
};

}  // namespace dreplay

#endif  // DREPLAY_COMMON_JSON_WRITER_H_
