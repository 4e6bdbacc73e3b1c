// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file objective.hpp
/// The objective layer between the search and the evaluator:
///
/// - memoization by mask: a mask is never sent to the evaluator twice;
/// - counts of evaluations and cache hits, evaluations per stage;
/// - the evaluation budget (Options::max_evaluations, one evaluation reserved
///   for the final mask);
/// - the anchors (scores of the all-full and all-SWA masks) and the normalized
///   score S^ = (S - S_swa) / (S_full - S_swa);
/// - the paper's loss L = -S^ + alpha * (rho(z) - rho)^2 and a per-layer form;
/// - the evaluation log (typed records) and the best mask with the target
///   count seen so far;
/// - hints and batches passed to evaluators that support them;
/// - replay of a checkpoint's evaluations (resume) without calling the evaluator.

#include <bosch/error.hpp>
#include <bosch/evaluator.hpp>
#include <bosch/mask.hpp>
#include <bosch/options.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace bosch {

/// The paper's loss L = -S^ + alpha * (rho(z) - rho)^2 (docs/algorithm.md §Objective),
/// with S^ the normalized score, rho(z) the SWA fraction of the mask and rho
/// the target ratio.
inline double paper_loss(double normalized_score, double alpha, double ratio, double target_ratio) {
  const double d = ratio - target_ratio;
  return -normalized_score + alpha * d * d;
}

/// Per-layer (per-group) ratio penalty alpha * sum_g ((c_g - k_g) / n_g)^2:
/// counts[g] SWA units of sizes[g] where targets[g] are required.
inline double per_layer_penalty(double alpha, std::span<const int> counts,
                                std::span<const int> targets, std::span<const int> sizes) {
  double p = 0.0;
  for (std::size_t g = 0; g < counts.size(); ++g) {
    const double d = static_cast<double>(counts[g] - targets[g]) / std::max(1, sizes[g]);
    p += d * d;
  }
  return alpha * p;
}

/// Memoizing, logging, budgeted front end of an Evaluator. Not thread-safe.
template <Evaluator E>
class Objective {
 public:
  /// Called for every new evaluation record; `improved` is true when the
  /// record is the best-scoring mask with exactly the target count so far.
  /// Returning true asks the search to stop.
  using observer_type = std::function<bool(const EvaluationRecord&, bool improved)>;

  /// @param evaluator       the black box (kept by reference).
  /// @param target_count    the SWA head count of a feasible final mask.
  /// @param max_evaluations total budget (0 = unlimited); when set, the last
  ///                        evaluation is only available with use_reserve.
  Objective(E& evaluator, std::size_t target_count, std::size_t max_evaluations = 0)
      : evaluator_(evaluator),
        layout_(static_cast<HeadLayout>(evaluator.layout())),
        target_count_(target_count),
        max_evaluations_(max_evaluations) {
    check_layout(layout_, "evaluator layout");
  }

  const HeadLayout& layout() const noexcept { return layout_; }
  std::size_t target_count() const noexcept { return target_count_; }

  /// The stage recorded with subsequent evaluations.
  void set_stage(Stage s) noexcept { stage_ = s; }
  Stage stage() const noexcept { return stage_; }
  void set_observer(observer_type f) { observer_ = std::move(f); }
  /// Batch size for evaluate_many on batch evaluators (>= 1).
  void set_batch_size(std::size_t n) noexcept { batch_size_ = std::max<std::size_t>(1, n); }

  /// Registers a previously logged evaluation (resume). When the search later
  /// asks for `r.mask`, its score comes from here instead of the evaluator and
  /// a record is logged as usual, with `r`'s seconds and forwards. Throws
  /// bosch::invalid_argument on a layout mismatch or a non-finite score.
  void add_replay(const EvaluationRecord& r) {
    if (!(r.mask.layout() == layout_))
      throw invalid_argument("replayed mask layout differs from the evaluator's", "resume");
    if (!std::isfinite(r.score)) throw invalid_argument("replayed score is not finite", "resume");
    replay_.emplace(r.mask, r);
  }
  /// As add_replay(record) for a record of `mask`, `score` and `seconds` (no cost).
  void add_replay(const HeadMask& mask, double score, double seconds) {
    EvaluationRecord r;
    r.mask = mask;
    r.score = score;
    r.seconds = seconds;
    add_replay(r);
  }

  /// The memoized score of `mask` if it has been evaluated in this search.
  std::optional<double> cached(const HeadMask& mask) const {
    auto it = cache_.find(mask);
    if (it == cache_.end()) return std::nullopt;
    return it->second.score;
  }
  bool known(const HeadMask& mask) const { return cache_.count(mask) != 0; }

  /// New evaluations still allowed; SIZE_MAX when unlimited. Without
  /// `use_reserve` the last evaluation of the total budget is held back.
  std::size_t remaining(bool use_reserve = false) const noexcept {
    if (max_evaluations_ == 0) return std::numeric_limits<std::size_t>::max();
    const std::size_t limit = use_reserve ? max_evaluations_ : max_evaluations_ - 1;
    return log_.size() >= limit ? 0 : limit - log_.size();
  }

  /// min(wanted, remaining()); marks the budget as exhausted when the total
  /// budget is what limits the caller (the search was cut short).
  std::size_t allow(std::size_t wanted) noexcept {
    const std::size_t r = remaining();
    if (r < wanted) budget_exhausted_ = true;
    return std::min(r, wanted);
  }

  /// Score of `mask`: from the memo, the replay store or the evaluator.
  /// `reference` (optional) is a mask `mask` was derived from; when the
  /// evaluator has scored it in this process and is a HintedEvaluator, the
  /// hint {reference, first changed layer} is passed along. Returns nullopt
  /// when the mask is new and the budget is spent or a stop was requested.
  std::optional<double> evaluate(const HeadMask& mask, const HeadMask* reference = nullptr,
                                 bool use_reserve = false) {
    check_mask(mask);
    if (auto it = cache_.find(mask); it != cache_.end()) {
      ++cache_hits_;
      return it->second.score;
    }
    if (stopped_) return std::nullopt;
    if (remaining(use_reserve) == 0) {
      budget_exhausted_ = true;
      return std::nullopt;
    }
    if (auto r = replay_.find(mask); r != replay_.end()) {
      ++replayed_;  // before record(): observers see the replay counted (as evaluate_many does)
      replay(r->second);
      return r->second.score;
    }
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cost();
    double s;
    const EvaluationHint hint = make_hint(std::span<const HeadMask>(&mask, 1), reference);
    if constexpr (HintedEvaluator<E>) {
      s = hint.reference ? static_cast<double>(evaluator_.evaluate(mask, hint))
                         : static_cast<double>(evaluator_.evaluate(mask));
    } else {
      s = static_cast<double>(evaluator_.evaluate(mask));
    }
    const double secs = seconds_since(t0);
    check_score(s);
    ++evaluator_calls_;
    const double spent = cost() - c0;
    forwards_ += spent;
    record(mask, s, secs, spent, true);
    return s;
  }

  /// Scores of several masks, in order, as if evaluate() were called on each
  /// in turn (same log, same memo, same budget), but a BatchEvaluator gets
  /// the new masks batch_size at a time in evaluate_batch calls. Entries are
  /// nullopt for new masks beyond the budget or after a stop request (with a
  /// batch evaluator, a stop takes effect after the current batch).
  std::vector<std::optional<double>> evaluate_many(std::span<const HeadMask> masks,
                                                   const HeadMask* reference = nullptr) {
    std::vector<std::optional<double>> out(masks.size());
    if constexpr (!BatchEvaluator<E>) {
      for (std::size_t i = 0; i < masks.size(); ++i) out[i] = evaluate(masks[i], reference);
      return out;
    } else {
      // Decide, in order, which requests are new; duplicates and cached masks are hits.
      std::vector<std::size_t> fresh;
      std::unordered_map<HeadMask, std::size_t> first;  // mask -> request index
      std::vector<std::size_t> dup_of(masks.size(), static_cast<std::size_t>(-1));
      for (std::size_t i = 0; i < masks.size(); ++i) {
        check_mask(masks[i]);
        if (auto it = cache_.find(masks[i]); it != cache_.end()) {
          ++cache_hits_;
          out[i] = it->second.score;
        } else if (auto f = first.find(masks[i]); f != first.end()) {
          ++cache_hits_;
          dup_of[i] = f->second;
        } else {
          first.emplace(masks[i], i);
          fresh.push_back(i);
        }
      }
      std::size_t pos = 0;
      while (pos < fresh.size()) {
        if (stopped_) break;
        const std::size_t allowed = remaining();
        if (allowed == 0) {
          budget_exhausted_ = true;
          break;
        }
        const std::size_t n = std::min({batch_size_, allowed, fresh.size() - pos});
        std::vector<HeadMask> send;
        std::vector<std::size_t> send_idx;
        for (std::size_t j = pos; j < pos + n; ++j)
          if (!replay_.count(masks[fresh[j]])) {
            send.push_back(masks[fresh[j]]);
            send_idx.push_back(fresh[j]);
          }
        std::vector<double> scores;
        double per = 0.0, per_cost = 0.0;
        if (!send.empty()) {
          const auto t0 = std::chrono::steady_clock::now();
          const double c0 = cost();
          const std::span<const HeadMask> view(send);
          const EvaluationHint hint = make_hint(view, reference);
          if constexpr (HintedBatchEvaluator<E>) {
            scores = hint.reference
                         ? static_cast<std::vector<double>>(evaluator_.evaluate_batch(view, hint))
                         : static_cast<std::vector<double>>(evaluator_.evaluate_batch(view));
          } else {
            scores = static_cast<std::vector<double>>(evaluator_.evaluate_batch(view));
          }
          if (scores.size() != send.size())
            throw error("evaluate_batch returned " + std::to_string(scores.size()) +
                            " scores for " + std::to_string(send.size()) + " masks",
                        "evaluator");
          for (double s : scores) check_score(s);
          per = seconds_since(t0) / static_cast<double>(send.size());
          const double spent = cost() - c0;
          forwards_ += spent;
          per_cost = spent / static_cast<double>(send.size());
          evaluator_calls_ += send.size();
        }
        std::size_t k = 0;
        for (std::size_t j = pos; j < pos + n; ++j) {
          const HeadMask& m = masks[fresh[j]];
          double s;
          if (k < send_idx.size() && send_idx[k] == fresh[j]) {
            s = scores[k++];
            record(m, s, per, per_cost, true);
          } else {
            const auto& r = replay_.at(m);
            s = r.score;
            ++replayed_;
            replay(r);
          }
          out[fresh[j]] = s;
        }
        pos += n;
      }
      for (std::size_t i = 0; i < masks.size(); ++i)
        if (dup_of[i] != static_cast<std::size_t>(-1)) out[i] = out[dup_of[i]];
      return out;
    }
  }

  /// Asks the search to stop: no new evaluations are made afterwards.
  void request_stop() noexcept { stopped_ = true; }
  bool stopped() const noexcept { return stopped_; }
  /// True once a request was refused, or allow() was cut, because the total
  /// budget was spent.
  bool budget_exhausted() const noexcept { return budget_exhausted_; }

  /// Sets the anchors used by normalized().
  void set_anchors(double full, double swa) noexcept { anchors_ = {full, swa}; }
  const Anchors& anchors() const noexcept { return anchors_; }

  /// S^ = (S - S_swa) / |S_full - S_swa|: 0 for the all-SWA model, 1 for the
  /// original one. Guards: when the anchors are unknown S^ = S; when
  /// |S_full - S_swa| <= 1e-12 * max(1, |S_full|, |S_swa|) the denominator is
  /// taken as 1 (S^ = S - S_swa). The absolute value keeps S^ increasing in S
  /// even for an evaluator that scores the all-SWA model higher.
  double normalized(double s) const noexcept {
    if (!std::isfinite(anchors_.full) || !std::isfinite(anchors_.swa)) return s;
    double den = std::abs(anchors_.full - anchors_.swa);
    const double scale = std::max({1.0, std::abs(anchors_.full), std::abs(anchors_.swa)});
    if (!(den > 1e-12 * scale)) den = 1.0;
    return (s - anchors_.swa) / den;
  }

  /// The best-scoring evaluated mask with exactly target_count SWA heads
  /// (first one on ties), or nullptr.
  const HeadMask* best_mask() const noexcept {
    return best_index_ ? &log_[*best_index_].mask : nullptr;
  }
  double best_score() const noexcept {
    return best_index_ ? log_[*best_index_].score : std::numeric_limits<double>::quiet_NaN();
  }

  /// The search's cost so far in full-model sample forwards: the evaluator's
  /// work in this process (CostedEvaluator) plus the recorded cost of the
  /// replayed evaluations; NaN when the evaluator does not count its cost.
  double forwards() const noexcept { return forwards_; }

  /// Distinct masks scored so far (the log size, replays included).
  std::size_t evaluations() const noexcept { return log_.size(); }
  std::size_t evaluator_calls() const noexcept { return evaluator_calls_; }
  std::size_t replayed() const noexcept { return replayed_; }
  std::size_t cache_hits() const noexcept { return cache_hits_; }
  const std::array<std::size_t, stage_count>& stage_evaluations() const noexcept {
    return per_stage_;
  }
  const std::vector<EvaluationRecord>& log() const noexcept { return log_; }

 private:
  struct entry {
    double score;
    bool seen_by_evaluator;  // scored by the evaluator in this process (usable as a hint)
  };

  void check_mask(const HeadMask& m) const {
    if (!(m.layout() == layout_))
      throw invalid_argument("mask layout differs from the evaluator's layout", "objective");
  }
  static void check_score(double s) {
    if (!std::isfinite(s))
      throw error("the evaluator returned a non-finite score (" + std::to_string(s) + ")",
                  "evaluator");
  }
  static double seconds_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  EvaluationHint make_hint(std::span<const HeadMask> ms, const HeadMask* reference) const {
    EvaluationHint h;
    if (!reference) return h;
    auto it = cache_.find(*reference);
    if (it == cache_.end() || !it->second.seen_by_evaluator) return h;
    h.reference = &it->first;  // the memo's copy outlives the call
    h.first_changed_layer = layout_.num_layers;
    for (const auto& m : ms)
      h.first_changed_layer = std::min(h.first_changed_layer, first_changed_layer(m, *reference));
    return h;
  }
  /// The evaluator's cost counter (CostedEvaluator), NaN without one.
  double cost() const {
    if constexpr (CostedEvaluator<E>)
      return static_cast<double>(evaluator_.cost());
    else
      return std::numeric_limits<double>::quiet_NaN();
  }
  /// Logs a replayed record (its score, seconds and cost).
  void replay(const EvaluationRecord& r) {
    forwards_ += r.forwards;
    record(r.mask, r.score, r.seconds, r.forwards, false);
  }
  void record(const HeadMask& m, double s, double secs, double fw, bool by_evaluator) {
    EvaluationRecord r{log_.size(), m, s, stage_, secs, fw};
    cache_.emplace(m, entry{s, by_evaluator});
    ++per_stage_[static_cast<std::size_t>(stage_)];
    log_.push_back(std::move(r));
    bool improved = false;
    if (m.count() == target_count_ && (!best_index_ || s > log_[*best_index_].score)) {
      best_index_ = log_.size() - 1;
      improved = true;
    }
    if (observer_ && observer_(log_.back(), improved)) stopped_ = true;
  }

  E& evaluator_;
  HeadLayout layout_;
  std::size_t target_count_;
  std::size_t max_evaluations_;
  std::size_t batch_size_ = 16;
  Stage stage_ = Stage::anchors;
  observer_type observer_;
  std::unordered_map<HeadMask, entry> cache_;
  std::unordered_map<HeadMask, EvaluationRecord> replay_;
  std::vector<EvaluationRecord> log_;
  std::optional<std::size_t> best_index_;
  std::array<std::size_t, stage_count> per_stage_{};
  Anchors anchors_;
  std::size_t evaluator_calls_ = 0, replayed_ = 0, cache_hits_ = 0;
  double forwards_ = CostedEvaluator<E> ? 0.0 : std::numeric_limits<double>::quiet_NaN();
  bool stopped_ = false, budget_exhausted_ = false;
};

}  // namespace bosch
