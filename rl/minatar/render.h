// Copyright dreplay authors.
//
// render.h: "pixels84", an 84x84 grayscale rendering of a MinAtar state, and
// the 4-deep frame stack of DQN's Atari preprocessing, so that MinAtar
// transitions weigh what Atari's do (4 x 84 x 84 bytes an observation,
// 56,448 bytes for a transition's s and s').
//
// This is a rendering of MinAtar's 10x10 grid, not Atari: it adds no
// information to the native state, only bytes and a realistic learner cost.
//
// The mapping, fixed:
//  - Each cell is a block of pixels: pixel (y, x) shows cell
//    (y * 10 / 84, x * 10 / 84), integer division, so cells are 8 or 9
//    pixels on a side.
//  - A cell with no active channel is 0 (black). Otherwise it shows its
//    highest active channel k of the game's C channels (the rule of
//    MinAtar's own display), at intensity (k + 1) * 255 / C, integer
//    division: evenly spaced grays, the last channel white. For example
//    Breakout (C = 4): paddle 63, ball 127, trail 191, brick 255.
//
//   std::vector<uint8_t> image(kPixels84Size);
//   RenderPixels84(env->State(), env->channels(), absl::MakeSpan(image));
//
// Thread safety: the functions are pure; a FrameStack is not thread-safe.

#ifndef DREPLAY_RL_MINATAR_RENDER_H_
#define DREPLAY_RL_MINATAR_RENDER_H_

#include <cstdint>
#include <vector>

#include "absl/types/span.h"

namespace dreplay::rl::minatar {

inline constexpr int kPixels84Side = 84;
inline constexpr int kPixels84Size = kPixels84Side * kPixels84Side;
inline constexpr int kFrameStackDepth = 4;

// The gray of channel `channel` of `channels`. REQUIRES: 0 <= channel <
// channels.
uint8_t ChannelIntensity(int channel, int channels);

// Renders a 10x10xC state (C order, bytes 0 or 1) into an 84x84 image,
// row-major. REQUIRES: state.size() == 100 * channels, image.size() ==
// kPixels84Size.
void RenderPixels84(absl::Span<const uint8_t> state, int channels, absl::Span<uint8_t> image);

// The last `depth` frames, oldest first, as DQN stacks Atari frames: an
// episode's first frame fills the whole stack.
class FrameStack {
 public:
  // REQUIRES: depth > 0, frame_size > 0.
  explicit FrameStack(int depth = kFrameStackDepth, int frame_size = kPixels84Size);

  // Starts an episode: every slot holds `frame`. REQUIRES: frame.size() ==
  // frame_size.
  void Reset(absl::Span<const uint8_t> frame);

  // Drops the oldest frame and appends `frame`. REQUIRES: frame.size() ==
  // frame_size and Reset() was called.
  void Push(absl::Span<const uint8_t> frame);

  // depth * frame_size bytes, oldest frame first.
  absl::Span<const uint8_t> frames() const { return frames_; }

 private:
  const int depth_;
  const int frame_size_;
  bool started_ = false;
  std::vector<uint8_t> frames_;
};

}  // namespace dreplay::rl::minatar

#endif  // DREPLAY_RL_MINATAR_RENDER_H_
