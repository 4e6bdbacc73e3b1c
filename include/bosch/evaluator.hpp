// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file evaluator.hpp
/// The Evaluator concept (the black-box oracle BOSCH optimizes) and its
/// optional capabilities, detected with concepts and never required:
///
/// - Evaluator:            `e.layout()` -> HeadLayout, `e.evaluate(mask)` -> double
///                         (higher is better). This is all a user must write.
/// - HintedEvaluator:      `e.evaluate(mask, hint)`: the search says which mask it
///                         derived `mask` from and the lowest layer that differs,
///                         so a transformer evaluator can restart its forward pass
///                         from a cached residual stream.
/// - BatchEvaluator:       `e.evaluate_batch(std::span<const HeadMask>)` -> a
///                         std::vector<double> with one score per mask, in order
///                         (GPU batching, parallel workers).
/// - HintedBatchEvaluator: `e.evaluate_batch(masks, hint)`: one hint shared by the
///                         whole batch (same reference; the minimum first changed
///                         layer over the batch).
/// - CostedEvaluator:      `e.cost()` -> double: the work done so far in full-model
///                         sample forwards, a unit that does not depend on the
///                         machine (Result::forwards, EvaluationRecord::forwards).
/// - PerSampleEvaluator:   the score is the mean of per-sample scores that
///                         `e.score_samples(mask, hint, samples)` computes for
///                         any samples (racing evaluations, Options::race).
///
/// The search produces identical results whichever capabilities the evaluator
/// has, provided its scores do not depend on how they were requested.

#include <bosch/mask.hpp>

#include <concepts>
#include <cstddef>
#include <span>
#include <vector>

namespace bosch {

/// The black-box objective: anything that knows its head layout and scores a
/// head mask. `evaluate` must be deterministic for the search to be
/// reproducible (same seed => same result); it is never called twice for the
/// same mask by bosch::select (results are memoized).
///
/// @code
/// struct my_evaluator {
///   bosch::HeadLayout layout() const { return {28, 16, 8}; }
///   double evaluate(const bosch::HeadMask& m) { return run_my_benchmark(m); }
/// };
/// @endcode
template <class E>
concept Evaluator = requires(E& e, const HeadMask& m) {
  { e.layout() } -> std::convertible_to<HeadLayout>;
  { e.evaluate(m) } -> std::convertible_to<double>;  // higher is better
};

/// What the search knows about a mask it asks to evaluate.
struct EvaluationHint {
  /// A mask the evaluator has evaluated before in this process (the search's
  /// current incumbent or base), or nullptr when none is known.
  const HeadMask* reference = nullptr;
  /// The lowest layer in which the mask(s) differ from `*reference`; layers
  /// 0 .. first_changed_layer-1 are identical, so their activations can be
  /// reused. Equal to num_layers when the masks are identical; 0 when
  /// `reference` is nullptr.
  int first_changed_layer = 0;
};

/// An Evaluator that accepts a hint (see EvaluationHint). The score must not
/// depend on the hint.
template <class E>
concept HintedEvaluator = Evaluator<E> &&
    requires(E& e, const HeadMask& m, const EvaluationHint& h) {
  { e.evaluate(m, h) } -> std::convertible_to<double>;
};

/// An Evaluator that scores several masks in one call; must return exactly one
/// score per mask, in order, equal to what evaluate() would return.
template <class E>
concept BatchEvaluator = Evaluator<E> && requires(E& e, std::span<const HeadMask> ms) {
  { e.evaluate_batch(ms) } -> std::convertible_to<std::vector<double>>;
};

/// A BatchEvaluator that also takes one hint shared by the batch.
template <class E>
concept HintedBatchEvaluator = BatchEvaluator<E> &&
    requires(E& e, std::span<const HeadMask> ms, const EvaluationHint& h) {
  { e.evaluate_batch(ms, h) } -> std::convertible_to<std::vector<double>>;
};

/// An Evaluator that counts its work in full-model sample forwards: `cost()`
/// is the total so far, non-decreasing; one calibration sample run through
/// every layer of the model counts 1, a forward restarted at layer l of L from
/// a cached residual stream counts (L - l) / L. The search reads it before and
/// after each evaluator call and records the difference
/// (EvaluationRecord::forwards, Result::forwards); the score must not depend
/// on it. TransformerEvaluator and mpi::ParallelEvaluator (summed over the
/// processes) have it.
template <class E>
concept CostedEvaluator = Evaluator<E> && requires(const E& e) {
  { e.cost() } -> std::convertible_to<double>;
};

/// An Evaluator whose score is the mean of N per-sample scores (one per
/// calibration sample) that it can compute for any subset of the samples, so
/// that the search can race a candidate sample by sample (Options::race,
/// docs/algorithm.md §Racing):
///
/// - `e.sample_count()`: N (>= 1);
/// - `e.race_order()`: a permutation of 0 .. N-1, the order in which samples
///   are raced; it should cover the tasks early (interleaved by task), since
///   a race may stop after its first samples;
/// - `e.score_samples(mask, hint, samples)`: the per-sample scores of `mask`
///   for the sample indices `samples`, in that order (a hint as for
///   HintedEvaluator; the scores must not depend on it, nor on which other
///   samples are asked for in the same call);
/// - `e.reduce(scores)`: the score from all N per-sample scores in sample
///   order, bit-identical to what evaluate() returns; it must be their mean
///   (up to rounding), which the race's test assumes.
///
/// Optional: `e.race_block()` -> std::size_t, the samples worth scoring in
/// one call once a race is under way (an evaluator spread over P processes
/// answers P); the decisions do not depend on it, only the work does.
template <class E>
concept PerSampleEvaluator =
    Evaluator<E> && requires(E& e, const E& ce, const HeadMask& m, const EvaluationHint& h,
                             std::span<const std::size_t> idx, std::span<const double> v) {
      { ce.sample_count() } -> std::convertible_to<std::size_t>;
      { ce.race_order() } -> std::convertible_to<std::vector<std::size_t>>;
      { e.score_samples(m, h, idx) } -> std::convertible_to<std::vector<double>>;
      { ce.reduce(v) } -> std::convertible_to<double>;
    };

/// The lowest layer in which `a` and `b` differ, or num_layers when they are
/// equal. Throws bosch::invalid_argument when the layouts differ.
inline int first_changed_layer(const HeadMask& a, const HeadMask& b) {
  if (!(a.layout() == b.layout()))
    throw invalid_argument("masks have different layouts", "first_changed_layer");
  const auto& lay = a.layout();
  const std::size_t h = static_cast<std::size_t>(lay.num_kv_heads);
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return static_cast<int>(i / h);
  return lay.num_layers;
}

}  // namespace bosch
