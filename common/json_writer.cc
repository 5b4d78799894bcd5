// Copyright dreplay authors.

#include "common/json_writer.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace dreplay {

std::string JsonString(absl::string_view text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out + "\"";
}

JsonObject& JsonObject::Add(absl::string_view key, const std::string& value) {
  Key(key);
  out_ += JsonString(value);
  return *this;
}

JsonObject& JsonObject::Add(absl::string_view key, const char* value) {
  return Add(key, std::string(value));
}

JsonObject& JsonObject::Add(absl::string_view key, bool value) {
  Key(key);
  out_ += value ? "true" : "false";
  return *this;
}

JsonObject& JsonObject::Add(absl::string_view key, double value) {
  Key(key);
  if (std::isfinite(value)) {
    absl::StrAppendFormat(&out_, "%.*g", double_digits_, value);
  } else {
    out_ += "null";
  }
  return *this;
}

JsonObject& JsonObject::Add(absl::string_view key, const std::optional<double>& value) {
  if (value.has_value()) return Add(key, *value);
  return AddRaw(key, "null");
}

JsonObject& JsonObject::Add(absl::string_view key, const std::optional<uint64_t>& value) {
  if (value.has_value()) return AddUnsigned(key, *value);
  return AddRaw(key, "null");
}

JsonObject& JsonObject::AddRaw(absl::string_view key, absl::string_view json) {
  Key(key);
  out_.append(json.data(), json.size());
  return *this;
}

JsonObject& JsonObject::AddSigned(absl::string_view key, int64_t value) {
  Key(key);
  absl::StrAppend(&out_, value);
  return *this;
}

JsonObject& JsonObject::AddUnsigned(absl::string_view key, uint64_t value) {
  Key(key);
  absl::StrAppend(&out_, value);
  return *this;
}

void JsonObject::Key(absl::string_view key) {
  if (out_.size() > 1) out_ += ',';
  out_ += JsonString(key);
  out_ += ':';
}

}  // namespace dreplay
