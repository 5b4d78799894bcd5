// Copyright dreplay authors.
//
// global_sampling.h: exact prioritized sampling over several replay nodes
// (edge sites), from what each node stages.
//
// Node k holds transitions with priorities p_i and samples its own batches
// with probability p_i^alpha / S_k, S_k being the sum of p^alpha over its
// memory. A learner that takes draws from K nodes samples exactly by global
// priority, P(i) = p_i^alpha / sum_k S_k, when each of its draws first picks
// node k with probability S_k / sum S and then takes the next of node k's
// own draws: S_k / sum S * p_i^alpha / S_k = p_i^alpha / sum S. Each node's
// staged draws are independent draws from its distribution, so taking the
// first n_k of them is taking n_k such draws; SplitBatch() gives the n_k of
// one batch (a multinomial split), and draws a node staged but the split
// did not take stay for the next batch.
//
// The importance-sampling weights of a batch drawn so are those of one
// node (replay/replay_memory.h, ComputeWeights) with global probabilities:
// w_i = (N P(i))^-beta / max_j (N P(j))^-beta over the batch's draws j,
// which is (min_j p_j^alpha / p_i^alpha)^beta: the global N and the sum
// cancel, so each draw needs only its p^alpha (BatchWeights()). With one
// node they are that node's weights.
//
// Exactness needs the S_k of the moment each node sampled; a learner reads
// them from the nodes' stats lines, some time later. What that staleness
// costs is the node's change of mass meanwhile, relative to the others'.
//
//   std::vector<double> sums = {s0, s1};  // the nodes' S_k
//   std::vector<int> counts;
//   RETURN_IF_ERROR(sampler.SplitBatch(sums, 256, &counts));
//   // take counts[k] draws from node k's staged batches, then:
//   RETURN_IF_ERROR(BatchWeights(draws_priority_alpha, beta, absl::MakeSpan(weights)));
//
// Thread safety: a GlobalSampler is used by one thread; GlobalWeight is
// thread-safe.

#ifndef DREPLAY_LEARNER_CLIENT_GLOBAL_SAMPLING_H_
#define DREPLAY_LEARNER_CLIENT_GLOBAL_SAMPLING_H_

#include <cstdint>
#include <random>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace dreplay::learner {

class GlobalSampler {
 public:
  explicit GlobalSampler(uint64_t seed) : rng_(seed) {}

  // Splits a batch of `batch` draws over the nodes with `priority_sums`
  // (S_k; 0: nothing to sample there): counts[k] draws from node k, each
  // draw from node k with probability S_k / sum S, independently.
  // InvalidArgument for a batch < 1, no node, a sum that is negative or not
  // finite, or no mass at all.
  absl::Status SplitBatch(absl::Span<const double> priority_sums, int batch,
                          std::vector<int>* counts);

 private:
  std::mt19937_64 rng_;
};

// The importance-sampling weights, in (0, 1], of a batch whose draws have
// `priority_alpha` (p^alpha, from any nodes), with exponent `beta` >= 0,
// into `weights` (the same size). InvalidArgument for an empty batch, sizes
// that differ, a p^alpha that is not positive and finite, or a beta that is
// negative or not finite.
absl::Status BatchWeights(absl::Span<const double> priority_alpha, double beta,
                          absl::Span<float> weights);

}  // namespace dreplay::learner

#endif  // DREPLAY_LEARNER_CLIENT_GLOBAL_SAMPLING_H_
