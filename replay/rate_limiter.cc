// Copyright dreplay authors.

#include "replay/rate_limiter.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace dreplay::replay {

absl::Status RateLimiterOptions::Validate(uint32_t batch_size) const {
  if (!std::isfinite(samples_per_insert) || samples_per_insert < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("samples_per_insert=", samples_per_insert, " must be finite and >= 0"));
  }
  if (min_size_to_sample < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_size_to_sample=", min_size_to_sample, " must be >= 1"));
  }
  if (!std::isfinite(error_buffer) || error_buffer < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("spi_error_buffer=", error_buffer, " must be finite and >= 0"));
  }
  if (samples_per_insert > 0 && error_buffer < batch_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "spi_error_buffer=", error_buffer, " must cover one batch (", batch_size,
        " transitions) when samples_per_insert is set, or no batch could ever be sampled"));
  }
  return absl::OkStatus();
}

RateLimiter::RateLimiter(const RateLimiterOptions& options) : options_(options) {}

double RateLimiter::Budget() const {
  return options_.samples_per_insert *
         (static_cast<double>(inserted_) - static_cast<double>(options_.min_size_to_sample));
}

bool RateLimiter::CanSample(uint64_t n, uint64_t size) const {
  if (size < options_.min_size_to_sample) return false;
  if (options_.samples_per_insert == 0) return true;
  return static_cast<double>(sampled_ + n) <= Budget() + options_.error_buffer;
}

bool RateLimiter::InsertsBlocked(uint64_t size) const {
  if (!options_.block_inserts || options_.samples_per_insert == 0) return false;
  if (size < options_.min_size_to_sample) return false;  // only inserts can refill it
  return Budget() - static_cast<double>(sampled_) > options_.error_buffer;
}

void RateLimiter::Reset(uint64_t inserted, uint64_t sampled) {
  inserted_ = inserted;
  sampled_ = sampled;
}

double RateLimiter::achieved_samples_per_insert() const {
  return inserted_ == 0 ? 0.0 : static_cast<double>(sampled_) / static_cast<double>(inserted_);
}

}  // namespace dreplay::replay
