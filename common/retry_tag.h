// Copyright dreplay authors.
//
// retry_tag.h: the tag that marks a refusal's reason as temporary, so that a
// client tries again later instead of giving up. Every layer that refuses a
// connection (the listener's connection manager in verbs/, the handshake in
// protocol/) tags with this one string; protocol::IsRetryableRejection()
// recognises it.

#ifndef DREPLAY_COMMON_RETRY_TAG_H_
#define DREPLAY_COMMON_RETRY_TAG_H_

#include "absl/strings/string_view.h"

namespace dreplay {

inline constexpr absl::string_view kRetryLaterTag = "[retry later] ";

}  // namespace dreplay

#endif  // DREPLAY_COMMON_RETRY_TAG_H_
