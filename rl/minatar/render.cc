// Copyright dreplay authors.

#include "rl/minatar/render.h"

#include <algorithm>
#include <cstring>

#include "glog/logging.h"
#include "rl/minatar/game.h"

namespace dreplay::rl::minatar {

uint8_t ChannelIntensity(int channel, int channels) {
  CHECK(channel >= 0 && channel < channels) << channel << " of " << channels;
  return static_cast<uint8_t>((channel + 1) * 255 / channels);
}

void RenderPixels84(absl::Span<const uint8_t> state, int channels, absl::Span<uint8_t> image) {
  CHECK_EQ(state.size(), static_cast<size_t>(kGridSize * kGridSize * channels));
  CHECK_EQ(image.size(), static_cast<size_t>(kPixels84Size));
  // The gray of each cell first, then the blocks.
  uint8_t cells[kGridSize * kGridSize];
  for (int cell = 0; cell < kGridSize * kGridSize; ++cell) {
    cells[cell] = 0;
    for (int k = channels - 1; k >= 0; --k) {
      if (state[cell * channels + k]) {
        cells[cell] = ChannelIntensity(k, channels);
        break;
      }
    }
  }
  for (int y = 0; y < kPixels84Side; ++y) {
    const int row = y * kGridSize / kPixels84Side;
    for (int x = 0; x < kPixels84Side; ++x) {
      image[y * kPixels84Side + x] = cells[row * kGridSize + x * kGridSize / kPixels84Side];
    }
  }
}

FrameStack::FrameStack(int depth, int frame_size)
    : depth_(depth), frame_size_(frame_size), frames_(static_cast<size_t>(depth) * frame_size) {
  CHECK_GT(depth, 0);
  CHECK_GT(frame_size, 0);
}

void FrameStack::Reset(absl::Span<const uint8_t> frame) {
  CHECK_EQ(frame.size(), static_cast<size_t>(frame_size_));
  for (int i = 0; i < depth_; ++i) {
    std::memcpy(frames_.data() + static_cast<size_t>(i) * frame_size_, frame.data(), frame_size_);
  }
  started_ = true;
}

void FrameStack::Push(absl::Span<const uint8_t> frame) {
  CHECK(started_) << "FrameStack::Push before Reset";
  CHECK_EQ(frame.size(), static_cast<size_t>(frame_size_));
  std::memmove(frames_.data(), frames_.data() + frame_size_, frames_.size() - frame_size_);
  std::memcpy(frames_.data() + frames_.size() - frame_size_, frame.data(), frame_size_);
}

}  // namespace dreplay::rl::minatar
