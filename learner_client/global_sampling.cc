// Copyright dreplay authors.

#include "learner_client/global_sampling.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"

namespace dreplay::learner {

absl::Status GlobalSampler::SplitBatch(absl::Span<const double> priority_sums, int batch,
                                       std::vector<int>* counts) {
  if (batch < 1) {
    return absl::InvalidArgumentError(absl::StrCat("global sampling: batch ", batch, " < 1"));
  }
  if (priority_sums.empty()) return absl::InvalidArgumentError("global sampling: no node");
  double total = 0;
  for (size_t k = 0; k < priority_sums.size(); ++k) {
    const double s = priority_sums[k];
    if (!std::isfinite(s) || s < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("global sampling: node ", k, " has priority sum ", s, " (must be >= 0)"));
    }
    total += s;
  }
  if (!(total > 0) || !std::isfinite(total)) {
    return absl::InvalidArgumentError(
        absl::StrCat("global sampling: the nodes' priority sums add up to ", total));
  }
  counts->assign(priority_sums.size(), 0);
  std::uniform_real_distribution<double> uniform(0.0, total);
  for (int d = 0; d < batch; ++d) {
    const double u = uniform(rng_);
    // The node whose share of [0, total) holds u; rounding at the top end
    // falls to the last node with mass.
    double below = 0;
    size_t chosen = 0;
    for (size_t k = 0; k < priority_sums.size(); ++k) {
      if (priority_sums[k] <= 0) continue;
      chosen = k;
      below += priority_sums[k];
      if (u < below) break;
    }
    ++(*counts)[chosen];
  }
  return absl::OkStatus();
}

absl::Status BatchWeights(absl::Span<const double> priority_alpha, double beta,
                          absl::Span<float> weights) {
  if (priority_alpha.empty() || weights.size() != priority_alpha.size()) {
    return absl::InvalidArgumentError(absl::StrCat("global sampling: ", priority_alpha.size(),
                                                   " draws and ", weights.size(), " weights"));
  }
  if (!(beta >= 0) || !std::isfinite(beta)) {
    return absl::InvalidArgumentError(absl::StrCat("global sampling: beta ", beta, " < 0"));
  }
  double min_alpha = priority_alpha[0];
  for (size_t i = 0; i < priority_alpha.size(); ++i) {
    const double p = priority_alpha[i];
    if (!(p > 0) || !std::isfinite(p)) {
      return absl::InvalidArgumentError(
          absl::StrCat("global sampling: draw ", i, " has p^alpha ", p, " (must be > 0)"));
    }
    min_alpha = std::min(min_alpha, p);
  }
  // (N P_i)^-beta / max_j (N P_j)^-beta = (p_min / p_i)^beta, in ratio form
  // so that no probability however small overflows.
  for (size_t i = 0; i < priority_alpha.size(); ++i) {
    weights[i] = static_cast<float>(std::pow(min_alpha / priority_alpha[i], beta));
  }
  return absl::OkStatus();
}

}  // namespace dreplay::learner
