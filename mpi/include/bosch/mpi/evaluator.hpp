// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file mpi/evaluator.hpp
/// bosch::mpi::ParallelEvaluator: one evaluator spread over the processes of
/// an MPI communicator, for an SPMD search (every process runs the same
/// bosch::select with the same options on its own ParallelEvaluator).
///
/// Two kinds of parallelism (docs/mpi.md):
///
/// - Mode::samples: every process scores every mask on its contiguous share
///   of the calibration samples (the first N mod P processes one sample more).
///   The per-sample scores are gathered in sample order and combined with the
///   evaluator's own reduce(), the arithmetic of its evaluate(), so each score
///   is bit-identical to one process scoring every sample. Each process's
///   residual cache holds the streams of its own samples, and the search's
///   hints pass through, so even the sequential parts of the search (one mask
///   at a time: anchors, Stage-1 probe starts, merges, restarts) run P times
///   faster, less the imbalance of the shares.
/// - Mode::masks: the masks of one evaluate_batch call are split into G
///   contiguous blocks, one per group of `group_size` processes
///   (G = P / group_size; group g is ranks g*group_size ..); a group scores its
///   masks sample-parallel as above, and the scores are all-gathered in mask
///   order. Only batches are sped up: a call with one mask keeps G-1 groups
///   idle.
///
/// Either way every process returns the same scores as a single process would,
/// so the search, its evaluation log and its result do not depend on the
/// number of processes or the mode; the batch width is the search's
/// (Options::lambda, Options::batch_size), never the machine's.
///
/// Cost (bosch::CostedEvaluator, when the wrapped evaluator counts its cost):
/// every scoring call gathers, with the scores, each process's work in layer
/// applications (its cost times the layer count, rounded: exact for an
/// evaluator that counts whole layer applications, as TransformerEvaluator
/// does), so cost() is the whole communicator's work on every process,
/// summed as integers. In Mode::samples each sample is always scored by the
/// same process, whose residual cache sees the same requests for it as one
/// process's cache would, so the cost equals one process's for any process
/// count (as long as no cache evicts: the bound is per process). In
/// Mode::masks a group's cache holds only its own masks' streams, so the cost
/// depends on the grouping; the scores never do.
///
/// Racing (bosch::PerSampleEvaluator, when the wrapped evaluator has it, for
/// Options::race): score_samples() spreads the samples asked for over every
/// process of the communicator, in either mode; a sample is scored by the
/// process whose share of all samples (share(N, P, rank)) holds it, the
/// per-sample scores are all-gathered and returned in the order asked. The
/// search's decisions depend only on those scores, so a raced search gives
/// the same mask and log for any process count. race_block() is the process
/// count: once a race is under way each call gives every process about one
/// sample; a block may score a few samples past the point where the race
/// stops (counted in the cost, never in the decisions). With racing on, the
/// search scores every mask this way (it keeps every mask's per-sample
/// scores), one mask at a time: Mode::masks then spreads samples, not masks.
///
/// Every member that scores is collective over the communicator.

#include <bosch/error.hpp>
#include <bosch/evaluator.hpp>
#include <bosch/mask.hpp>
#include <bosch/mpi/communicator.hpp>

#include <algorithm>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bosch::mpi {

/// What a process of a ParallelEvaluator needs from the evaluator it wraps
/// (TransformerEvaluator has it): the sample count, scoring a contiguous range
/// of samples, per-sample scores (elements with a `mean_logprob`) and the
/// combination of per-sample scores in sample order into the score.
template <class E>
concept SampleEvaluator =
    Evaluator<E> && requires(E& e, const E& ce, const HeadMask& m, const EvaluationHint& h,
                             std::span<const double> v, std::size_t i) {
      { ce.sample_count() } -> std::convertible_to<std::size_t>;
      e.set_sample_range(i, i);
      { static_cast<double>(e.sample_scores(m, h).front().mean_logprob) };
      { E::reduce(v) } -> std::convertible_to<double>;
    };

/// How the work is spread (see the file comment).
enum class Mode {
  samples,  ///< every process scores every mask on its share of the samples
  masks,    ///< the masks of a batch are spread over groups of processes
};

inline const char* to_string(Mode m) noexcept { return m == Mode::samples ? "samples" : "masks"; }

/// Parses "samples" or "masks"; bosch::invalid_argument naming `option` otherwise.
inline Mode parse_mode(std::string_view s, const char* option = "mode") {
  if (s == "samples") return Mode::samples;
  if (s == "masks") return Mode::masks;
  throw invalid_argument("unknown mode '" + std::string(s) + "' (expected samples or masks)", option);
}

/// The contiguous share [first, second) of part `i` when `n` items are split
/// into `parts` parts: the first n mod parts parts get one item more.
inline std::pair<std::size_t, std::size_t> share(std::size_t n, std::size_t parts, std::size_t i) {
  const std::size_t q = n / parts, r = n % parts;
  const std::size_t begin = i * q + std::min(i, r);
  return {begin, begin + q + (i < r ? 1 : 0)};
}

/// Settings of ParallelEvaluator.
struct ParallelOptions {
  Mode mode = Mode::samples;
  /// Mode::masks: processes per group (>= 1, divides the communicator's size);
  /// each group scores its masks sample-parallel. Ignored in Mode::samples
  /// (one group of every process).
  int group_size = 1;
};

/// The group size `automatic` parallelism picks for `processes` processes and
/// `samples` calibration samples: every process in one sample-parallel group
/// when there are at least as many samples as processes (this speeds up every
/// evaluation, sequential ones included, and keeps one residual cache share
/// per process); otherwise the largest divisor of `processes` not above
/// `samples`, the remaining factor spreading the masks of a batch.
inline int automatic_group_size(int processes, std::size_t samples) {
  if (processes < 1) return 1;
  if (samples >= static_cast<std::size_t>(processes)) return processes;
  int best = 1;
  for (int g = 1; g <= processes; ++g)
    if (processes % g == 0 && static_cast<std::size_t>(g) <= samples) best = g;
  return best;
}

/// An evaluator spread over the processes of a communicator (see the file
/// comment). Holds references to the wrapped evaluator and the communicator,
/// which must outlive it. It sets the wrapped evaluator's sample range to this
/// process's share.
template <SampleEvaluator E>
class ParallelEvaluator {
 public:
  /// Collective. Throws bosch::invalid_argument when group_size is < 1 or does
  /// not divide the communicator's size, bosch::mpi::error when MPI fails.
  ParallelEvaluator(E& inner, const Communicator& comm, ParallelOptions options = {})
      : inner_(&inner), comm_(&comm), options_(options) {
    const int p = comm.size();
    if (options_.mode == Mode::samples) options_.group_size = p;
    const int g = options_.group_size;
    if (g < 1 || p % g != 0)
      throw invalid_argument("group size " + std::to_string(g) + " does not divide the " + std::to_string(p) +
                                 " processes",
                             "ParallelEvaluator");
    groups_ = p / g;
    group_index_ = comm.rank() / g;
    group_.emplace_back(comm.split(group_index_, comm.rank()));
    samples_ = inner.sample_count();
    const auto [b, e] = share(samples_, static_cast<std::size_t>(g), static_cast<std::size_t>(group().rank()));
    inner.set_sample_range(b, e);
  }

  HeadLayout layout() const { return static_cast<HeadLayout>(inner_->layout()); }

  double evaluate(const HeadMask& mask) { return evaluate(mask, EvaluationHint{}); }
  double evaluate(const HeadMask& mask, const EvaluationHint& hint) {
    return evaluate_batch(std::span<const HeadMask>(&mask, 1), hint).front();
  }
  std::vector<double> evaluate_batch(std::span<const HeadMask> masks) {
    return evaluate_batch(masks, EvaluationHint{});
  }

  /// One score per mask, in order, equal to the wrapped evaluator's
  /// single-process evaluate(). Collective.
  std::vector<double> evaluate_batch(std::span<const HeadMask> masks, const EvaluationHint& hint) {
    const std::size_t g = static_cast<std::size_t>(group().size());
    // This group's block of masks, scored on this process's samples.
    const auto [mb, me] = share(masks.size(), static_cast<std::size_t>(groups_),
                                static_cast<std::size_t>(group_index_));
    const std::size_t mine = me - mb;
    const double before = inner_cost();
    std::vector<double> local;
    for (std::size_t i = mb; i < me; ++i) {
      // As TransformerEvaluator::evaluate_batch: each mask's own first changed layer.
      EvaluationHint h = hint;
      if (hint.reference != nullptr) h.first_changed_layer = first_changed_layer(masks[i], *hint.reference);
      for (const auto& s : inner_->sample_scores(masks[i], h)) local.push_back(static_cast<double>(s.mean_logprob));
    }
    // Each process's work rides along as one more value (cost_units).
    local.push_back(units_since(before));
    // The group's per-sample scores: rank r contributes mine x |share r| and its work.
    const std::vector<double> gathered = g > 1 ? group().all_gather(local) : local;
    if (gathered.size() != mine * samples_ + g)
      throw error("gathered " + std::to_string(gathered.size()) + " sample scores, expected " +
                      std::to_string(mine * samples_ + g),
                  "ParallelEvaluator");
    std::vector<double> scores(mine), per(samples_);
    double group_units = 0;
    {
      std::size_t offset = 0;
      for (std::size_t r = 0; r < g; ++r) {
        const auto [sb, se] = share(samples_, g, r);
        offset += mine * (se - sb);
        group_units += gathered[offset++];
      }
    }
    for (std::size_t k = 0; k < mine; ++k) {
      std::size_t offset = 0;
      for (std::size_t r = 0; r < g; ++r) {
        const auto [sb, se] = share(samples_, g, r);
        const std::size_t n = se - sb;
        for (std::size_t j = 0; j < n; ++j) per[sb + j] = gathered[offset + k * n + j];
        offset += mine * n + 1;
      }
      scores[k] = static_cast<double>(E::reduce(std::span<const double>(per)));
    }
    if (groups_ == 1) {
      cost_units_ += group_units;
      return scores;
    }
    // Group leaders contribute their block and their group's work; blocks are
    // in group (= rank) order.
    if (group().root()) scores.push_back(group_units);
    const std::vector<double> all =
        comm_->all_gather(group().root() ? std::span<const double>(scores) : std::span<const double>());
    if (all.size() != masks.size() + static_cast<std::size_t>(groups_))
      throw error("gathered " + std::to_string(all.size()) + " values for " + std::to_string(masks.size()) +
                      " masks of " + std::to_string(groups_) + " groups",
                  "ParallelEvaluator");
    std::vector<double> out;
    out.reserve(masks.size());
    std::size_t at = 0;
    for (std::size_t q = 0; q < static_cast<std::size_t>(groups_); ++q) {
      const auto [qb, qe] = share(masks.size(), static_cast<std::size_t>(groups_), q);
      for (std::size_t i = qb; i < qe; ++i) out.push_back(all[at++]);
      cost_units_ += all[at++];
    }
    return out;
  }

  /// The calibration samples (all of them, over every process).
  std::size_t sample_count() const noexcept { return samples_; }
  /// The wrapped evaluator's race order (bosch::PerSampleEvaluator).
  std::vector<std::size_t> race_order() const
    requires PerSampleEvaluator<E>
  {
    return static_cast<std::vector<std::size_t>>(inner_->race_order());
  }
  /// The wrapped evaluator's combination of per-sample scores (in sample order).
  static double reduce(std::span<const double> v)
    requires PerSampleEvaluator<E>
  {
    return static_cast<double>(E::reduce(v));
  }
  /// Samples worth scoring in one call once a race is under way: one per process.
  std::size_t race_block() const noexcept { return static_cast<std::size_t>(comm_->size()); }

  /// The per-sample scores of `mask` for the samples `samples`, in that
  /// order, each scored by the process whose share holds it (see the file
  /// comment). Collective; the same on every process.
  std::vector<double> score_samples(const HeadMask& mask, const EvaluationHint& hint,
                                    std::span<const std::size_t> samples)
    requires PerSampleEvaluator<E>
  {
    const std::size_t p = static_cast<std::size_t>(comm_->size()), me = static_cast<std::size_t>(comm_->rank());
    std::vector<std::size_t> owner(samples.size()), mine;
    for (std::size_t k = 0; k < samples.size(); ++k) {
      if (samples[k] >= samples_)
        throw invalid_argument("sample " + std::to_string(samples[k]) + " is not within the " +
                                   std::to_string(samples_) + " samples",
                               "ParallelEvaluator::score_samples");
      owner[k] = owner_of(samples[k]);
      if (owner[k] == me) mine.push_back(samples[k]);
    }
    EvaluationHint h = hint;
    if (hint.reference != nullptr) h.first_changed_layer = first_changed_layer(mask, *hint.reference);
    const double before = inner_cost();
    std::vector<double> local;
    if (!mine.empty())
      local = static_cast<std::vector<double>>(inner_->score_samples(mask, h, std::span<const std::size_t>(mine)));
    if (local.size() != mine.size())
      throw error("score_samples returned " + std::to_string(local.size()) + " scores for " +
                      std::to_string(mine.size()) + " samples",
                  "ParallelEvaluator");
    local.push_back(units_since(before));
    const std::vector<double> gathered = p > 1 ? comm_->all_gather(local) : local;
    if (gathered.size() != samples.size() + p)
      throw error("gathered " + std::to_string(gathered.size()) + " values, expected " +
                      std::to_string(samples.size() + p),
                  "ParallelEvaluator");
    // Rank r's values are its samples in the order asked, then its work.
    std::vector<double> out(samples.size());
    std::size_t at = 0;
    for (std::size_t r = 0; r < p; ++r) {
      for (std::size_t k = 0; k < samples.size(); ++k)
        if (owner[k] == r) out[k] = gathered[at++];
      cost_units_ += gathered[at++];
    }
    return out;
  }

  /// The whole communicator's work so far in full-model sample forwards
  /// (bosch::CostedEvaluator; see the file comment): the same on every process.
  double cost() const
    requires CostedEvaluator<E>
  {
    return cost_units_ / static_cast<double>(layout().num_layers);
  }

  /// The mode and group size in use (Mode::samples: one group of every process).
  Mode mode() const noexcept { return options_.mode; }
  int group_size() const noexcept { return options_.group_size; }
  int groups() const noexcept { return groups_; }
  /// This process's group and rank in it.
  int group_index() const noexcept { return group_index_; }
  const Communicator& group() const noexcept { return group_.front(); }
  const Communicator& communicator() const noexcept { return *comm_; }
  /// The wrapped evaluator (scoring this process's samples only).
  E& inner() noexcept { return *inner_; }
  const E& inner() const noexcept { return *inner_; }

 private:
  /// The process whose share of all the samples holds sample `s`.
  std::size_t owner_of(std::size_t s) const {
    const std::size_t p = static_cast<std::size_t>(comm_->size());
    for (std::size_t r = 0; r < p; ++r)
      if (s < share(samples_, p, r).second) return r;
    return p - 1;
  }
  /// The wrapped evaluator's cost counter (0 without one).
  double inner_cost() const {
    if constexpr (CostedEvaluator<E>)
      return static_cast<double>(inner_->cost());
    else
      return 0.0;
  }
  /// This process's work since `before` (an inner_cost() value) in layer
  /// applications, a whole number.
  double units_since(double before) const {
    return std::round((inner_cost() - before) * static_cast<double>(layout().num_layers));
  }

  E* inner_;
  const Communicator* comm_;
  double cost_units_ = 0;  // layer applications of every process, a whole number (exact below 2^53)
  ParallelOptions options_;
  int groups_ = 1, group_index_ = 0;
  std::size_t samples_ = 0;
  std::vector<Communicator> group_;  // exactly one; a vector since Communicator has no default state
};

}  // namespace bosch::mpi
