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
/// - the cost of every evaluation (CostedEvaluator);
/// - racing evaluations (Options::race, PerSampleEvaluator): candidates scored
///   sample by sample against their parent and stopped by search::RaceRule;
/// - replay of a checkpoint's evaluations (resume) without calling the evaluator.

#include <bosch/error.hpp>
#include <bosch/evaluator.hpp>
#include <bosch/mask.hpp>
#include <bosch/options.hpp>
#include <bosch/search/race.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <cstdint>
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

  /// What compete() says about one candidate: its full score, or that the
  /// race eliminated it, or neither (budget spent or stop requested).
  struct Outcome {
    std::optional<double> score;  ///< the full score, when scored in full
    bool eliminated = false;      ///< the race stopped it (no full score)
  };

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

  /// Turns racing on (Options::race) when the evaluator is a
  /// PerSampleEvaluator: from now on every mask is scored through its
  /// per-sample scores (kept for the races), and compete() races while
  /// set_racing(true). Call before the first evaluation. Does nothing
  /// without Options::race or the capability. Throws bosch::error when the
  /// evaluator's race order is not a permutation of its samples.
  void enable_racing(const Options& o) {
    if constexpr (PerSampleEvaluator<E>) {
      if (!o.race && o.probe_samples == 0) return;
      race_enabled_ = o.race;
      const std::size_t n = static_cast<std::size_t>(evaluator_.sample_count());
      order_ = static_cast<std::vector<std::size_t>>(evaluator_.race_order());
      std::vector<std::uint8_t> seen(n, 0);
      bool ok = n >= 1 && order_.size() == n;
      for (std::size_t i : order_) {
        if (!ok || i >= n || seen[i]) {
          ok = false;
          break;
        }
        seen[i] = 1;
      }
      if (!ok) throw error("race_order() is not a permutation of the " + std::to_string(n) + " samples", "evaluator");
      rule_ = search::RaceRule(n, o.race_min_samples, o.race_confidence);
      if constexpr (requires { evaluator_.race_block(); })
        block_ = std::max<std::size_t>(1, static_cast<std::size_t>(evaluator_.race_block()));
      per_sample_ = true;
    } else {
      (void)o;
    }
  }
  /// True once enable_racing() took effect.
  bool per_sample() const noexcept { return per_sample_; }
  /// Whether compete() races (only after enable_racing() with Options::race);
  /// select() allows races in Stage 3 and in the refinement.
  void set_racing(bool on) noexcept { racing_ = on && race_enabled_; }
  /// Screening (Options::probe_samples; select() sets it for Stage 1 only):
  /// while `n` > 0 and below the sample count, a new mask asked for through
  /// evaluate() or evaluate_many() is scored on the first `n` samples of the
  /// race order only, as a paired estimate against the all-full mask (which
  /// must have been scored, per sample, before): S(full) + the mean of the
  /// per-sample differences. The record is logged as not scored in full
  /// (EvaluationRecord::eliminated, with `samples` = n and `score_sd`), is
  /// never chosen, and is completed from the samples it has when asked for
  /// in full later. Masks already known answer from the memo (their estimate
  /// or their full score). Does nothing before enable_racing() took effect,
  /// or without the all-full mask's per-sample scores. With
  /// `against_reference`, a mask is paired against the `reference` it was
  /// asked with instead, when that mask was scored on every sample (the
  /// refinement's flip sweep: S(reference) + the mean of the differences,
  /// so the flips' estimates sit on the scale of their reference's exact
  /// score).
  void set_screening(std::size_t n, bool against_reference = false) noexcept {
    screen_ = n;
    screen_reference_ = against_reference;
  }

  /// Registers a previously logged evaluation (resume). When the search later
  /// asks for `r.mask` (a race for an eliminated record, any request for a
  /// full one), the answer comes from here instead of the evaluator and a
  /// record is logged as usual, with `r`'s seconds, cost and race fields.
  /// Records of one mask are answered in log order. Throws
  /// bosch::invalid_argument on a layout mismatch or a non-finite score.
  void add_replay(const EvaluationRecord& r) {
    if (!(r.mask.layout() == layout_))
      throw invalid_argument("replayed mask layout differs from the evaluator's", "resume");
    if (!std::isfinite(r.score)) throw invalid_argument("replayed score is not finite", "resume");
    replay_[r.mask].push_back(r);
  }
  /// As add_replay(record) for a record of `mask`, `score` and `seconds` (no cost).
  void add_replay(const HeadMask& mask, double score, double seconds) {
    EvaluationRecord r;
    r.mask = mask;
    r.score = score;
    r.seconds = seconds;
    add_replay(r);
  }

  /// The memoized full score of `mask` if it has been scored in full in this
  /// search (an eliminated candidate has none).
  std::optional<double> cached(const HeadMask& mask) const {
    auto it = cache_.find(mask);
    if (it == cache_.end() || it->second.eliminated) return std::nullopt;
    return it->second.score;
  }
  /// The per-sample scores this search has of `mask`, in race order (all of
  /// them when scored in full with racing on, the first ones when screened
  /// or eliminated by a race); empty without racing or when unknown.
  std::span<const double> sample_scores(const HeadMask& mask) const {
    auto it = samples_memo_.find(mask);
    if (it == samples_memo_.end()) return {};
    return it->second;
  }
  /// Whether `mask` was scored in this search (in full or eliminated by a race).
  bool known(const HeadMask& mask) const { return cache_.count(mask) != 0; }

  /// New evaluations still allowed; SIZE_MAX when unlimited. Without
  /// `use_reserve` the last evaluation of the total budget is held back.
  /// Budgets count the records of the log: a candidate a race eliminated
  /// counts as one request, so that racing makes the decisions the search
  /// would make without it, on fewer samples.
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
  /// hint {reference, first changed layer} is passed along. A candidate a
  /// race eliminated is scored in full now (its remaining samples). Returns
  /// nullopt when the mask is new and the budget is spent or a stop was
  /// requested.
  std::optional<double> evaluate(const HeadMask& mask, const HeadMask* reference = nullptr,
                                 bool use_reserve = false) {
    check_mask(mask);
    const bool screening = screening_now();
    if (auto it = cache_.find(mask); it != cache_.end() && (screening || !it->second.eliminated)) {
      ++cache_hits_;
      return it->second.score;
    }
    if (stopped_) return std::nullopt;
    if (remaining(use_reserve) == 0) {
      budget_exhausted_ = true;
      return std::nullopt;
    }
    if (const EvaluationRecord* r = replayed_record(mask, !screening)) {
      const double s = r->score;
      replay(*r);
      return s;
    }
    if (screening) return screen(mask, reference);
    if (per_sample_) return score_in_full(mask, reference);
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
    return log_samples(mask, s, {}, t0, c0);
  }

  /// Scores of several masks, in order, as if evaluate() were called on each
  /// in turn (same log, same memo, same budget), but a BatchEvaluator gets
  /// the new masks batch_size at a time in evaluate_batch calls (not when
  /// racing is on: masks are then scored one at a time through their
  /// per-sample scores). Entries are nullopt for new masks beyond the budget
  /// or after a stop request (with a batch evaluator, a stop takes effect
  /// after the current batch).
  std::vector<std::optional<double>> evaluate_many(std::span<const HeadMask> masks,
                                                   const HeadMask* reference = nullptr) {
    std::vector<std::optional<double>> out(masks.size());
    if (!BatchEvaluator<E> || per_sample_) {
      for (std::size_t i = 0; i < masks.size(); ++i) out[i] = evaluate(masks[i], reference);
      return out;
    }
    if constexpr (BatchEvaluator<E>) {
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
            EvaluationRecord rec;
            rec.mask = m;
            rec.score = s;
            rec.seconds = per;
            rec.forwards = per_cost;
            record(std::move(rec), true);
          } else {
            const EvaluationRecord* r = replayed_record(m, true);
            s = r->score;
            replay(*r);
          }
          out[fresh[j]] = s;
        }
        pos += n;
      }
      for (std::size_t i = 0; i < masks.size(); ++i)
        if (dup_of[i] != static_cast<std::size_t>(-1)) out[i] = out[dup_of[i]];
    }
    return out;
  }

  /// The candidates of a local search, each of which matters only if its
  /// score reaches `threshold` (the score of `parent`, a mask scored in full,
  /// which they derive from). While racing (enable_racing, set_racing), a new
  /// candidate is scored sample by sample in the race order and stopped as
  /// soon as search::RaceRule says it cannot reach `threshold`: it is logged
  /// as eliminated and its Outcome says so. Otherwise, and for candidates that
  /// survive the race, the full score (as evaluate_many). A candidate already
  /// known is a memo hit (eliminated or scored).
  std::vector<Outcome> compete(std::span<const HeadMask> masks, const HeadMask& parent, double threshold) {
    std::vector<Outcome> out(masks.size());
    const auto pit = cache_.find(parent);
    const auto pss = samples_memo_.find(parent);
    if (!per_sample_ || !racing_ || !rule_.active() || pit == cache_.end() || pit->second.eliminated ||
        pss == samples_memo_.end() || pss->second.size() != rule_.samples()) {
      const auto scores = evaluate_many(masks, &parent);
      for (std::size_t i = 0; i < masks.size(); ++i) out[i].score = scores[i];
      return out;
    }
    const double parent_score = pit->second.score;
    const std::vector<double> parent_samples = pss->second;
    for (std::size_t i = 0; i < masks.size(); ++i) {
      check_mask(masks[i]);
      if (auto it = cache_.find(masks[i]); it != cache_.end()) {
        ++cache_hits_;
        if (it->second.eliminated)
          out[i].eliminated = true;
        else
          out[i].score = it->second.score;
        continue;
      }
      if (stopped_) continue;
      if (remaining() == 0) {
        budget_exhausted_ = true;
        continue;
      }
      if (const EvaluationRecord* r = replayed_record(masks[i], false)) {
        if (r->eliminated)
          out[i].eliminated = true;
        else
          out[i].score = r->score;
        replay(*r);
        continue;
      }
      out[i] = race(masks[i], parent, parent_score, parent_samples, threshold - parent_score);
    }
    return out;
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

  /// The best-scoring mask scored in full with exactly target_count SWA
  /// heads (first one on ties), or nullptr.
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

  /// Records in the log (replayed and eliminated ones included).
  std::size_t evaluations() const noexcept { return log_.size(); }
  /// Records of candidates a race eliminated.
  std::size_t eliminated() const noexcept { return eliminated_; }
  std::size_t evaluator_calls() const noexcept { return evaluator_calls_; }
  std::size_t replayed() const noexcept { return replayed_; }
  std::size_t cache_hits() const noexcept { return cache_hits_; }
  /// Full evaluations per stage.
  const std::array<std::size_t, stage_count>& stage_evaluations() const noexcept {
    return per_stage_;
  }
  const std::vector<EvaluationRecord>& log() const noexcept { return log_; }

 private:
  struct entry {
    double score;
    bool seen_by_evaluator;  // scored by the evaluator in this process (usable as a hint)
    bool eliminated;         // a race stopped it: `score` is an estimate
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
  /// The first replayed record of `mask` not yet used (with `full_only`, the
  /// first one scored in full), or nullptr.
  const EvaluationRecord* replayed_record(const HeadMask& mask, bool full_only) const {
    auto it = replay_.find(mask);
    if (it == replay_.end()) return nullptr;
    for (const auto& r : it->second)
      if (!full_only || !r.eliminated) return &r;
    return nullptr;
  }
  /// Logs a replayed record (its score, seconds, cost and race fields) and
  /// removes it from the replay store.
  void replay(const EvaluationRecord& r) {
    ++replayed_;  // before record(): observers see the replay counted
    EvaluationRecord rec = r;
    auto& queue = replay_.at(rec.mask);
    for (auto it = queue.begin(); it != queue.end(); ++it)
      if (&*it == &r) {
        queue.erase(it);
        break;
      }
    if (queue.empty()) replay_.erase(rec.mask);
    forwards_ += rec.forwards;
    record(std::move(rec), false);
  }

  /// Per-sample scores of the samples at race positions [from, to) of `mask`.
  std::vector<double> score_positions(const HeadMask& mask, const EvaluationHint& hint, std::size_t from,
                                      std::size_t to) {
    if constexpr (PerSampleEvaluator<E>) {
      const std::span<const std::size_t> idx(order_.data() + from, to - from);
      auto v = static_cast<std::vector<double>>(evaluator_.score_samples(mask, hint, idx));
      if (v.size() != idx.size())
        throw error("score_samples returned " + std::to_string(v.size()) + " scores for " +
                        std::to_string(idx.size()) + " samples",
                    "evaluator");
      for (double x : v) check_score(x);
      return v;
    } else {
      (void)mask, (void)hint, (void)from, (void)to;
      return {};
    }
  }
  /// The score from all N per-sample scores in race order (the evaluator's reduce).
  double reduce_race_order(const std::vector<double>& in_race_order) const {
    if constexpr (PerSampleEvaluator<E>) {
      std::vector<double> by_sample(in_race_order.size());
      for (std::size_t k = 0; k < in_race_order.size(); ++k) by_sample[order_[k]] = in_race_order[k];
      return static_cast<double>(evaluator_.reduce(std::span<const double>(by_sample)));
    } else {
      (void)in_race_order;
      return 0.0;
    }
  }

  /// A full score through the per-sample scores (racing on), completing a
  /// candidate a race eliminated from the samples it already has.
  double score_in_full(const HeadMask& mask, const HeadMask* reference) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cost();
    const EvaluationHint hint = make_hint(std::span<const HeadMask>(&mask, 1), reference);
    std::vector<double> v;
    if (auto it = samples_memo_.find(mask); it != samples_memo_.end()) v = it->second;
    const std::vector<double> rest = score_positions(mask, hint, v.size(), rule_.samples());
    v.insert(v.end(), rest.begin(), rest.end());
    const double s = reduce_race_order(v);
    return log_samples(mask, s, std::move(v), t0, c0);
  }

  /// Logs the record of a mask this process scored: `score`, the seconds
  /// and cost since `t0` / `c0`, its per-sample scores `v` (race order; none
  /// when scored whole) and, for a record not scored in full (`partial`:
  /// raced out or screened), the eliminated flag and the standard error
  /// `sd`. Returns `score`; throws on a score that is not finite.
  double log_samples(const HeadMask& mask, double score, std::vector<double> v,
                     std::chrono::steady_clock::time_point t0, double c0, bool partial = false,
                     double sd = 0.0) {
    check_score(score);
    ++evaluator_calls_;
    EvaluationRecord rec;
    rec.mask = mask;
    rec.score = score;
    rec.score_sd = sd;
    rec.eliminated = partial;
    rec.seconds = seconds_since(t0);
    rec.forwards = cost() - c0;
    rec.samples = v.size();
    rec.sample_scores = std::move(v);
    forwards_ += rec.forwards;
    record(std::move(rec), true);
    return score;
  }

  /// Whether a new mask is screened now (set_screening): per-sample scores
  /// on, a screen smaller than the sample count, and the all-full mask's
  /// per-sample scores known.
  bool screening_now() const {
    if (!per_sample_ || screen_ == 0 || screen_ >= rule_.samples()) return false;
    const HeadMask full(layout_);
    return samples_memo_.count(full) != 0 && cache_.count(full) != 0;
  }

  /// The screened estimate of `mask` (set_screening): its first screen_
  /// samples in race order against the all-full mask's.
  double screen(const HeadMask& mask, const HeadMask* reference) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cost();
    HeadMask base(layout_);  // all-full, or the reference (set_screening)
    if (screen_reference_ && reference != nullptr) {
      const auto c = cache_.find(*reference);
      const auto v = samples_memo_.find(*reference);
      if (c != cache_.end() && !c->second.eliminated && v != samples_memo_.end() &&
          v->second.size() == rule_.samples())
        base = *reference;
    }
    const double full_score = cache_.at(base).score;
    const std::vector<double>& full_samples = samples_memo_.at(base);
    const EvaluationHint hint = make_hint(std::span<const HeadMask>(&mask, 1), reference);
    std::vector<double> v = score_positions(mask, hint, 0, screen_);
    std::vector<double> d(v.size());
    for (std::size_t k = 0; k < v.size(); ++k) d[k] = v[k] - full_samples[k];
    return log_samples(mask, full_score + search::RaceRule::mean(d), std::move(v), t0, c0, true,
                       rule_.standard_error(d));
  }

  /// Races `mask` against `parent` (see compete()): `delta` is what the mean
  /// per-sample difference must reach.
  Outcome race(const HeadMask& mask, const HeadMask& parent, double parent_score,
               const std::vector<double>& parent_samples, double delta) {
    const auto t0 = std::chrono::steady_clock::now();
    const double c0 = cost();
    const EvaluationHint hint = make_hint(std::span<const HeadMask>(&mask, 1), &parent);
    const std::size_t n_all = rule_.samples();
    std::vector<double> v, d;
    std::size_t stop_at = 0;
    while (v.size() < n_all && stop_at == 0) {
      const std::size_t from = v.size();
      const std::size_t b = from == 0 ? std::min(n_all, rule_.min_samples()) : std::min(n_all - from, block_);
      for (double x : score_positions(mask, hint, from, from + b)) {
        v.push_back(x);
        d.push_back(x - parent_samples[v.size() - 1]);
        if (stop_at == 0 && rule_.stop(d, delta)) stop_at = v.size();
      }
    }
    Outcome out;
    if (stop_at == 0) {
      const double s = reduce_race_order(v);
      out.score = log_samples(mask, s, std::move(v), t0, c0);
    } else {
      // The decision depends on the first stop_at samples only, whatever the
      // block size scored beyond them.
      v.resize(stop_at);
      d.resize(stop_at);
      out.eliminated = true;
      log_samples(mask, parent_score + search::RaceRule::mean(d), std::move(v), t0, c0, true,
                  rule_.standard_error(d));
    }
    return out;
  }

  void record(EvaluationRecord r, bool by_evaluator) {
    r.index = log_.size();
    r.stage = stage_;
    const HeadMask& m = r.mask;
    cache_.insert_or_assign(m, entry{r.score, by_evaluator, r.eliminated});
    if (!r.sample_scores.empty()) samples_memo_.insert_or_assign(m, r.sample_scores);
    if (r.eliminated)
      ++eliminated_;
    else
      ++per_stage_[static_cast<std::size_t>(stage_)];
    log_.push_back(std::move(r));
    const EvaluationRecord& back = log_.back();
    bool improved = false;
    if (!back.eliminated && back.mask.count() == target_count_ &&
        (!best_index_ || back.score > log_[*best_index_].score)) {
      best_index_ = log_.size() - 1;
      improved = true;
    }
    if (observer_ && observer_(back, improved)) stopped_ = true;
  }

  E& evaluator_;
  HeadLayout layout_;
  std::size_t target_count_;
  std::size_t max_evaluations_;
  std::size_t batch_size_ = 16;
  Stage stage_ = Stage::anchors;
  observer_type observer_;
  std::unordered_map<HeadMask, entry> cache_;
  std::unordered_map<HeadMask, std::vector<EvaluationRecord>> replay_;
  std::vector<EvaluationRecord> log_;
  std::optional<std::size_t> best_index_;
  std::array<std::size_t, stage_count> per_stage_{};
  Anchors anchors_;
  std::size_t evaluator_calls_ = 0, replayed_ = 0, cache_hits_ = 0, eliminated_ = 0;
  double forwards_ = CostedEvaluator<E> ? 0.0 : std::numeric_limits<double>::quiet_NaN();
  bool stopped_ = false, budget_exhausted_ = false;
  // Racing (enable_racing): per-sample scores in race order, by mask.
  bool per_sample_ = false, racing_ = false, race_enabled_ = false;
  std::size_t screen_ = 0;  // set_screening
  bool screen_reference_ = false;  // set_screening: pair against the reference
  search::RaceRule rule_;
  std::vector<std::size_t> order_;
  std::size_t block_ = 1;
  std::unordered_map<HeadMask, std::vector<double>> samples_memo_;
};

}  // namespace bosch
