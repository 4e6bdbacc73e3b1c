// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file select.hpp
/// bosch::select: the BOSCH search and its ablation variants.
///
/// Pipeline of Variant::full (docs/algorithm.md §Stage 1 to §Variants):
///   anchors  evaluate the all-full and all-SWA masks (S_full, S_swa);
///   Stage 1  top-down cascaded layer probes (search/probes.hpp);
///   Stage 2  adaptive per-layer counts summing to round(rho*L*Hkv) (search/ratios.hpp);
///   Stage 3  grouped head selection, buckets easiest first (search/grouped.hpp);
///   final    the Stage 3 incumbent, or the best evaluated exact-count mask when
///            it scores higher (Options::return_best_seen); evaluated if needed.
/// Variant::single: anchors, Stage 1, then the per-layer counts are made
/// uniform and exact (floor(T/L) per layer, one more for the T mod L layers
/// with the smallest drops) by resizing the Stage 1 masks (no further search).
/// Variant::multi: anchors, Stage 1, the same uniform counts, Stage 3 over one
/// bucket holding every layer.
/// Variant::layer: anchors, a search over whole layers (floor(T/Hkv) SWA
/// layers, budget Options::layer_budget), then the remaining T mod Hkv heads
/// chosen among the full layers' heads by one more sub-problem (budget
/// Options::probe_budget).
///
/// A callback returning true, or Options::max_evaluations, ends the search
/// early; the result is then the best exact-count mask evaluated, or the
/// current plan completed to the exact count (evaluated with the reserved
/// evaluation when the budget ran out, unevaluated after a stop).

#include <bosch/callbacks.hpp>
#include <bosch/error.hpp>
#include <bosch/evaluator.hpp>
#include <bosch/mask.hpp>
#include <bosch/objective.hpp>
#include <bosch/options.hpp>
#include <bosch/search/grouped.hpp>
#include <bosch/search/plans.hpp>
#include <bosch/search/probes.hpp>
#include <bosch/search/ratios.hpp>
#include <bosch/search/rng.hpp>
#include <bosch/search/solvers.hpp>
#include <bosch/search/subproblem.hpp>
#include <bosch/search/surrogate.hpp>
#include <bosch/search/surrogate_optimum.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstddef>
#include <functional>
#include <limits>
#include <numeric>
#include <optional>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

namespace bosch {

namespace detail {

template <class E, class... Cbs>
class search_run {
 public:
  search_run(E& evaluator, const Options& options, Cbs&... cbs)
      : options_(options),
        layout_(checked_layout(evaluator)),
        target_(checked_target_count(layout_, options.target_ratio)),
        obj_(evaluator, target_, options.max_evaluations),
        cbs_(cbs...),
        t0_(std::chrono::steady_clock::now()) {
    for (std::size_t i = 0; i < options_.initial_masks.size(); ++i)
      if (!(options_.initial_masks[i].layout() == layout_))
        throw invalid_argument("layout " + to_string(options_.initial_masks[i].layout()) +
                                   " does not match the evaluator's " + to_string(layout_),
                               "initial_masks[" + std::to_string(i) + "]");
  }

  Result run() {
    const Options& o = options_;
    obj_.set_batch_size(o.batch_size);
    obj_.enable_racing(o);
    {
      const SearchView v = view();
      std::apply(
          [&](auto&... c) {
            (
                [&] {
                  for (const auto& r : call_replay_log(c, v)) obj_.add_replay(r);
                }(),
                ...);
          },
          cbs_);
    }
    obj_.set_observer([this](const EvaluationRecord& r, bool improved) {
      const SearchView v = view();
      bool stop = false;
      std::apply([&](auto&... c) { ((stop |= call_on_evaluation(c, v, r)), ...); }, cbs_);
      if (improved)
        std::apply([&](auto&... c) { ((stop |= call_on_improvement(c, v, r)), ...); }, cbs_);
      return stop;
    });
    planned_ = plan();
    {
      const SearchView v = view();
      bool stop = false;
      std::apply([&](auto&... c) { ((stop |= call_begin_search(c, v)), ...); }, cbs_);
      if (stop) obj_.request_stop();
    }

    HeadMask candidate = HeadMask(layout_);
    bool have_candidate = false;
    if (begin(Stage::anchors)) {
      const HeadMask full(layout_), swa = HeadMask::filled(layout_, true);
      auto sf = obj_.evaluate(full, nullptr, true);
      auto ss = obj_.evaluate(swa, &full, true);
      if (sf && ss) obj_.set_anchors(*sf, *ss);
      end(Stage::anchors);
    }
    const bool anchored = std::isfinite(obj_.anchors().full) && std::isfinite(obj_.anchors().swa);
    if (anchored) score_seeds(nullptr);
    if (anchored) {
      if (o.variant == Variant::layer)
        have_candidate = run_layer_variant(candidate);
      else
        have_candidate = run_head_variants(candidate);
    }
    if (!have_candidate) candidate = complete_plan();
    return finish(candidate);
  }

 private:
  static HeadLayout checked_layout(E& e) {
    const HeadLayout lay = static_cast<HeadLayout>(e.layout());
    check_layout(lay, "evaluator layout");
    return lay;
  }

  SearchView view() const {
    SearchView v;
    v.layout = layout_;
    v.options = &options_;
    v.target_count = target_;
    v.stage = obj_.stage();
    v.evaluations = obj_.evaluations();
    v.replayed = obj_.replayed();
    v.cache_hits = obj_.cache_hits();
    v.planned_evaluations = std::max(planned_, obj_.evaluations());
    v.best_score = obj_.best_score();
    v.best_mask = obj_.best_mask();
    v.anchors = obj_.anchors();
    v.elapsed_seconds = elapsed();
    v.log = &obj_.log();
    return v;
  }
  double elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0_).count();
  }

  /// Starts a stage; false when the search is already stopping. Candidates
  /// race (Options::race) in Stage 3 and in the refinement only: the Stage 1
  /// probes' scores all feed the per-head values.
  bool begin(Stage s) {
    if (obj_.stopped()) return false;
    obj_.set_stage(s);
    obj_.set_racing(s == Stage::groups || s == Stage::refine);
    obj_.set_screening(s == Stage::probes ? options_.probe_samples : 0);
    const SearchView v = view();
    bool stop = false;
    std::apply([&](auto&... c) { ((stop |= call_begin_stage(c, v, s)), ...); }, cbs_);
    if (stop) obj_.request_stop();
    return !obj_.stopped();
  }
  void end(Stage s) {
    const SearchView v = view();
    bool stop = false;
    std::apply([&](auto&... c) { ((stop |= call_end_stage(c, v, s)), ...); }, cbs_);
    if (stop) obj_.request_stop();
  }

  /// Stage 3's planned evaluations with uniform counts and one bucket of
  /// every layer (the estimate used before Stage 2 has run).
  std::size_t planned_uniform_groups() const {
    const std::size_t L = static_cast<std::size_t>(layout_.num_layers);
    const std::vector<int> counts = search::uniform_counts(layout_, target_, std::vector<double>(L, 0.0));
    std::vector<int> all(L);
    std::iota(all.begin(), all.end(), 0);
    return search::planned_group_evaluations(layout_, counts, {all}, options_);
  }

  /// Evaluations the optional steps of the full variant plan: the jackknife
  /// plans (Stage 2's start and the candidates), the layer restoration (one
  /// per layer and its tries), the flip sweep (one per head) and the second
  /// climb of Options::refine_both.
  std::size_t extras_plan() const {
    return (options_.plan_candidates > 0 ? options_.plan_candidates + 1 : 0) +
           (options_.restore_layers > 0 ? static_cast<std::size_t>(layout_.num_layers) + options_.restore_layers : 0) +
           (options_.refine_budget == 0 ? 0
            : options_.refine_both    ? options_.refine_budget + layout_.size()
            : options_.refine_flips   ? layout_.size()
                                      : 0);
  }

  std::size_t layer_budget() const {
    if (options_.layer_budget > 0) return options_.layer_budget;
    return std::max<std::size_t>(1, search::planned_probe_evaluations(layout_, options_) + planned_uniform_groups());
  }

  /// The search's estimate of its total evaluations (for progress and ETA).
  std::size_t plan() const {
    const Options& o = options_;
    std::size_t n = 2 + 1 + o.initial_masks.size();  // anchors + final + seeds
    if (o.variant == Variant::layer) {
      n += layer_budget();
      if (target_ % static_cast<std::size_t>(layout_.num_kv_heads) != 0) n += o.probe_budget;
    } else {
      n += search::planned_probe_evaluations(layout_, o);
      if (o.variant != Variant::single) n += planned_uniform_groups();
      if (o.variant == Variant::full) n += o.refine_budget + extras_plan();
    }
    if (o.max_evaluations > 0) n = std::min(n, o.max_evaluations);
    return n;
  }

  bool run_head_variants(HeadMask& candidate) {
    const Options& o = options_;
    if (!begin(Stage::probes)) return false;
    probes_ = search::run_probes(obj_, o, obj_.anchors().full);
    end(Stage::probes);
    if (!probes_->complete) return false;
    if (!score_seeds(&probes_->head_values)) return false;

    if (!begin(Stage::ratios)) return false;
    if (o.variant == Variant::full) {
      search::RatioPlan rp =
          probes_->completion_drops.empty()
              ? search::assign_ratios(layout_, probes_->drops, target_, o)
              : search::assign_completion(layout_, probes_->completion_drops,
                                          probes_->heads_per_layer, target_);
      weights_ = rp.weights;
      counts_ = rp.counts;
    } else {
      weights_ = search::layer_weights(probes_->drops);
      counts_ = search::uniform_counts(layout_, target_, weights_);
    }
    std::vector<std::vector<int>> buckets;
    if (o.variant == Variant::multi) {
      std::vector<int> all;
      for (int l = 0; l < layout_.num_layers; ++l)
        if (counts_[static_cast<std::size_t>(l)] > 0 &&
            counts_[static_cast<std::size_t>(l)] < layout_.num_kv_heads)
          all.push_back(l);
      if (!all.empty()) buckets.push_back(std::move(all));
    } else if (o.variant == Variant::full) {
      buckets = search::ratio_buckets(counts_);
    }
    // Re-plan now that the counts are known.
    std::size_t n = obj_.evaluations() + 1;
    if (o.variant != Variant::single)
      n += search::planned_group_evaluations(layout_, counts_, buckets, o);
    if (o.variant == Variant::full) n += o.refine_budget + extras_plan();
    planned_ = o.max_evaluations > 0 ? std::min(n, o.max_evaluations) : n;
    end(Stage::ratios);

    HeadMask incumbent = probes_->cascade;
    auto prepare = [this](HeadMask& m, int l) {
      search::resize_layer(m, l, counts_[static_cast<std::size_t>(l)],
                           probes_->head_values[static_cast<std::size_t>(l)]);
    };
    if (o.variant == Variant::single) {
      for (int l = 0; l < layout_.num_layers; ++l) prepare(incumbent, l);
      candidate = incumbent;
      return true;
    }
    std::function<void(HeadMask&, int)> prep;
    if (o.group_init == GroupInit::stage1) {
      for (int l = 0; l < layout_.num_layers; ++l) prepare(incumbent, l);
    } else if (o.group_init == GroupInit::random) {
      search::engine g = search::make_engine(o.seed, {search::stream_group_init});
      for (int l = 0; l < layout_.num_layers; ++l) {
        std::vector<int> k(static_cast<std::size_t>(layout_.num_kv_heads));
        for (int i = 0; i < layout_.num_kv_heads; ++i) k[static_cast<std::size_t>(i)] = i;
        search::shuffle(k, g);
        for (int i = 0; i < layout_.num_kv_heads; ++i)
          incumbent.set(l, k[static_cast<std::size_t>(i)],
                        i < counts_[static_cast<std::size_t>(l)]);
      }
    } else {  // GroupInit::full: layers stay full until their bucket's turn
      for (int l = 0; l < layout_.num_layers; ++l)
        for (int k = 0; k < layout_.num_kv_heads; ++k) incumbent.set(l, k, false);
      prep = [&, prepare](HeadMask& m, int l) {
        for (int k = 0; k < layout_.num_kv_heads; ++k) m.set(l, k, probes_->cascade.swa(l, k));
        prepare(m, l);
      };
    }
    if (!begin(Stage::groups)) return false;
    if (o.variant == Variant::full && o.plan_candidates > 0 && o.group_init != GroupInit::random &&
        !choose_plan(incumbent, buckets, prep))
      return false;
    if (o.variant == Variant::full && best_seed_) {
      // Warm start: the best candidate replaces Stage 2's plan when it scores
      // higher than the plan's start (its per-layer counts become the plan).
      const HeadMask start = prep ? complete_plan() : incumbent;
      const auto s = obj_.evaluate(start, &probes_->cascade);
      if (!s) return false;
      if (best_seed_->second > *s) {
        incumbent = best_seed_->first;
        counts_ = layer_counts(incumbent);
        buckets = search::ratio_buckets(counts_);
        prep = {};
      }
    }
    const bool done =
        search::run_groups(obj_, o, incumbent, &probes_->cascade, counts_, buckets, prep);
    end(Stage::groups);
    if (!done) return false;
    candidate = incumbent;
    if (o.variant == Variant::full && (o.refine_budget > 0 || o.restore_layers > 0)) {
      if (!begin(Stage::refine)) return false;
      const bool refined = restore(candidate) && (o.refine_budget == 0 || refine(candidate));
      end(Stage::refine);
      if (!refined) return false;
    }
    return true;
  }

  /// Stage 1's per-sample drops (search::SampleDrops; empty rows without
  /// per-sample scores): with completion probes, each layer's completion
  /// drop (the final cascade minus the cascade with that layer entirely
  /// SWA), else each layer's drop as Options::drop_mode defines it, from the
  /// cascade as it stood after that layer's probe (the final cascade with
  /// the layers below it full).
  search::SampleDrops stage1_sample_drops() const {
    const int L = layout_.num_layers, H = layout_.num_kv_heads;
    const HeadMask& cascade = probes_->cascade;
    search::SampleDrops d(static_cast<std::size_t>(L));
    if (!probes_->completion_drops.empty()) {
      for (int l = 0; l < L; ++l) {
        HeadMask m = cascade;
        for (int k = 0; k < H; ++k) m.set(l, k, true);
        d[static_cast<std::size_t>(l)] = search::sample_drops(obj_.sample_scores(cascade), obj_.sample_scores(m));
      }
      return d;
    }
    const HeadMask full(layout_);
    HeadMask above = full;  // the cascade before layer l's probe
    for (int l = L - 1; l >= 0; --l) {
      HeadMask after = cascade;  // ... and after it
      for (int j = 0; j < l; ++j)
        for (int k = 0; k < H; ++k) after.set(j, k, false);
      const HeadMask& before = options_.drop_mode == DropMode::marginal ? above : full;
      d[static_cast<std::size_t>(l)] = search::sample_drops(obj_.sample_scores(before), obj_.sample_scores(after));
      above = std::move(after);
    }
    return d;
  }

  /// The Stage 3 start of per-layer `counts`: the final cascade, each layer
  /// resized by Stage 1's head values.
  HeadMask plan_start(const std::vector<int>& counts) const {
    HeadMask m = probes_->cascade;
    for (int l = 0; l < layout_.num_layers; ++l)
      search::resize_layer(m, l, counts[static_cast<std::size_t>(l)],
                           probes_->head_values[static_cast<std::size_t>(l)]);
    return m;
  }

  /// The jackknife plans (Options::plan_candidates, docs/algorithm.md
  /// §Jackknife plans), logged in Stage 3: Stage 2's plan is recomputed from
  /// Stage 1's per-sample drops with each sample left out in turn; the
  /// start masks of up to plan_candidates distinct other plans are raced
  /// against the plan's start (scored on every sample); when one scores
  /// higher, its counts become the plan and its start Stage 3's incumbent.
  /// False when the search stopped or ran out of budget.
  bool choose_plan(HeadMask& incumbent, std::vector<std::vector<int>>& buckets,
                   std::function<void(HeadMask&, int)>& prep) {
    std::function<std::vector<int>(const std::vector<double>&)> plan;
    if (!probes_->completion_drops.empty())
      plan = [this](const std::vector<double>& d) {
        return search::assign_completion(layout_, d, probes_->heads_per_layer, target_).counts;
      };
    else
      plan = [this](const std::vector<double>& d) { return search::assign_ratios(layout_, d, target_, options_).counts; };
    const auto alternatives = search::jackknife_plans(stage1_sample_drops(), plan, counts_, options_.plan_candidates);
    if (alternatives.empty()) return !obj_.stopped();
    const HeadMask start = prep ? complete_plan() : incumbent;
    const auto s = obj_.evaluate(start, &probes_->cascade);
    if (!s) return false;
    std::vector<HeadMask> starts;
    for (const auto& c : alternatives) starts.push_back(plan_start(c));
    if (obj_.allow(starts.size()) < starts.size()) return false;
    const auto out = obj_.compete(starts, start, *s);
    std::optional<std::size_t> won;
    double best = *s;
    for (std::size_t i = 0; i < out.size(); ++i) {
      if (out[i].eliminated) continue;
      if (!out[i].score) return false;
      if (*out[i].score > best) {
        best = *out[i].score;
        won = i;
      }
    }
    if (won) {
      counts_ = alternatives[*won];
      buckets = search::ratio_buckets(counts_);
      incumbent = starts[*won];
      prep = {};
    }
    return !obj_.stopped();
  }

  /// Solves the one-group sub-problem search::single_group(start, units,
  /// count, budget, stream `id` of the seed, random_start, reference) with
  /// Options::inner_solver; its best mask, or nullopt when nothing was
  /// evaluated (budget spent or a stop requested).
  std::optional<HeadMask> solve_one_group(HeadMask start, std::vector<std::vector<std::size_t>> units, int count,
                                          std::size_t budget, search::stream_id id, bool random_start,
                                          const HeadMask* reference) {
    const search::SubProblem p =
        search::single_group(std::move(start), std::move(units), count, budget,
                             search::derive_seed(options_.seed, {id}), random_start, reference);
    search::SubResult r = search::solve(obj_, p, options_);
    if (!r.evaluated) return std::nullopt;
    return std::move(r.best);
  }

  /// Layer restoration (Options::restore_layers, docs/algorithm.md
  /// §Restoration), logged in the refinement's stage: every layer of the
  /// best exact-count mask that has SWA heads is scored restored whole
  /// (hinted: only its layer and those above re-run); then, largest gain
  /// first, up to restore_layers of them (gain > 0) are tried restored with
  /// as many SWA heads added elsewhere, the full heads Stage 1 valued
  /// cheapest (highest head value; ties by index), each raced against the
  /// best mask. `candidate` becomes the best mask found. False when the
  /// search stopped or ran out of budget.
  bool restore(HeadMask& candidate) {
    if (options_.restore_layers == 0) return true;
    const int L = layout_.num_layers, H = layout_.num_kv_heads;
    const std::optional<double> cs = obj_.cached(candidate);
    const HeadMask start = (obj_.best_mask() && (!cs || obj_.best_score() > *cs)) ? *obj_.best_mask() : candidate;
    const std::optional<double> s0 = obj_.cached(start);
    if (!s0) return !obj_.stopped();
    std::vector<HeadMask> whole;
    std::vector<int> layers;
    for (int l = 0; l < L; ++l) {
      HeadMask m = start;
      bool any = false;
      for (int k = 0; k < H; ++k) {
        any |= m.swa(l, k);
        m.set(l, k, false);
      }
      if (any) {
        whole.push_back(std::move(m));
        layers.push_back(l);
      }
    }
    const auto scores = obj_.evaluate_many(whole, &start);
    std::vector<std::pair<double, std::size_t>> gains;
    for (std::size_t i = 0; i < whole.size(); ++i) {
      if (!scores[i]) return false;
      gains.emplace_back(*scores[i] - *s0, i);
    }
    std::stable_sort(gains.begin(), gains.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
    const auto& values = probes_->head_values;
    auto value = [&](int l, int k) {
      const double v = values[static_cast<std::size_t>(l)][static_cast<std::size_t>(k)];
      return std::isnan(v) ? -std::numeric_limits<double>::infinity() : v;
    };
    for (std::size_t t = 0; t < gains.size() && t < options_.restore_layers && !obj_.stopped(); ++t) {
      if (!(gains[t].first > 0)) break;
      const int l = layers[gains[t].second];
      const HeadMask* best = obj_.best_mask();
      if (best == nullptr) break;
      HeadMask m = *best;
      int freed = 0;
      for (int k = 0; k < H; ++k) {
        freed += m.swa(l, k);
        m.set(l, k, false);
      }
      if (freed == 0) continue;  // an earlier restoration already freed it
      std::vector<std::pair<double, std::size_t>> pool;  // (-value, flat index) of full heads elsewhere
      for (int j = 0; j < L; ++j)
        for (int k = 0; k < H; ++k)
          if (j != l && !m.swa(j, k)) pool.emplace_back(-value(j, k), m.index(j, k));
      if (pool.size() < static_cast<std::size_t>(freed)) continue;
      std::partial_sort(pool.begin(), pool.begin() + freed, pool.end());
      for (int i = 0; i < freed; ++i) m.set_flat(pool[static_cast<std::size_t>(i)].second, true);
      if (obj_.known(m)) continue;
      if (obj_.allow(1) == 0) return false;
      const HeadMask focus = *best;
      const auto out = obj_.compete(std::span<const HeadMask>(&m, 1), focus, obj_.best_score());
      if (out[0].eliminated) continue;
      if (!out[0].score) return false;
    }
    if (const HeadMask* best = obj_.best_mask()) {
      const std::optional<double> c = obj_.cached(candidate);
      if (!c || obj_.best_score() > *c) candidate = *best;
    }
    return !obj_.stopped();
  }

  /// The global refinement (Options::refine_budget): every head a unit, one
  /// group with the target count, from the best exact-count mask so far;
  /// with Options::refine_both two climbs from that start, without and with
  /// the flip sweep, and `candidate` becomes the better end.
  bool refine(HeadMask& candidate) {
    const std::optional<double> cs = obj_.cached(candidate);
    const HeadMask start = (obj_.best_mask() && (!cs || obj_.best_score() > *cs)) ? *obj_.best_mask() : candidate;
    if (!options_.refine_both) return climb(start, options_.refine_flips, candidate);
    HeadMask plain = start, flipped = start;
    if (!climb(start, false, plain) || !climb(start, true, flipped)) return false;
    const std::optional<double> a = obj_.cached(plain), b = obj_.cached(flipped);
    candidate = (b && (!a || *b > *a)) ? flipped : plain;
    return !obj_.stopped();
  }

  /// One climb of the refinement from `start`: with `flips` the flip sweep
  /// and its steps first, then the local search from the best mask they
  /// reached, then the surrogate's proposals; `out` becomes its end.
  bool climb(const HeadMask& start, bool flips, HeadMask& out) {
    const std::size_t proposals = std::min(options_.surrogate_proposals, options_.refine_budget);
    std::vector<std::vector<std::size_t>> heads(layout_.size());
    for (std::size_t i = 0; i < heads.size(); ++i) heads[i] = {i};
    HeadMask from = start;
    if (flips) {
      std::vector<double> effects;
      if (!sweep_flips(start, effects) || !flip_steps(start, effects, from)) return false;
    }
    const auto r = solve_one_group(std::move(from), std::move(heads), static_cast<int>(target_),
                                   options_.refine_budget - proposals, search::stream_refine, false, nullptr);
    if (!r) return false;
    out = *r;
    return propose_model_optimum(out, proposals);
  }

  /// The flip sweep (Options::refine_flips, docs/algorithm.md
  /// §Flip sweep): every single-head flip of `start`, lowest layer first,
  /// hinted (only the flipped layer and those above re-run) and screened on
  /// probe_samples paired against `start` (on every sample when
  /// probe_samples is 0 or racing is off), logged in the refinement's stage.
  /// They are the masks nearest the refinement's start, so its surrogate fits
  /// them first. False when the search stopped or ran out of budget.
  bool sweep_flips(const HeadMask& start, std::vector<double>& scores_out) {
    if (options_.refine_budget == 0) return true;
    std::vector<HeadMask> flips;
    flips.reserve(layout_.size());
    for (std::size_t i = 0; i < layout_.size(); ++i) {
      HeadMask m = start;
      m.set_flat(i, !start[i]);
      flips.push_back(std::move(m));
    }
    obj_.set_screening(options_.probe_samples, true);
    const auto scores = obj_.evaluate_many(flips, &start);
    obj_.set_screening(0);
    for (const auto& s : scores) {
      if (!s) return false;
      scores_out.push_back(*s);
    }
    return !obj_.stopped();
  }

  /// The steps the flip sweep predicts (Options::refine_flips). From the
  /// flips' measured effects on `start` (g_i = S(start with head i flipped)
  /// - S(start); `flips` in head order), the pairs (the SWA head whose
  /// restoration gains most, the full head whose windowing costs least),
  /// (second, second), ... whose predicted gain g_restore + g_window is
  /// positive: the first k of them applied at once, for k = m, m/2, ..., 1
  /// (m such pairs), a line search along the first-order step, since the
  /// effects add up only near `start`; then each pair alone on the best
  /// mask so far, in order. Every candidate is raced against the best mask
  /// of this climb (`best`, which starts as `start` and ends as the best
  /// mask the steps reached). False when the search stopped or ran out of
  /// budget.
  bool flip_steps(const HeadMask& start, const std::vector<double>& flips, HeadMask& best) {
    const std::optional<double> s0 = obj_.cached(start);
    best = start;
    if (flips.size() != layout_.size() || !s0) return !obj_.stopped();
    double best_score = *s0;
    std::vector<std::pair<double, std::size_t>> restore, window;  // (-gain, head)
    for (std::size_t i = 0; i < layout_.size(); ++i)
      (start[i] ? restore : window).emplace_back(-(flips[i] - *s0), i);
    std::stable_sort(restore.begin(), restore.end());
    std::stable_sort(window.begin(), window.end());
    std::size_t m = 0;
    while (m < restore.size() && m < window.size() && -(restore[m].first + window[m].first) > 0) ++m;
    for (std::size_t k = m; k >= 1; k /= 2) {
      HeadMask step = start;
      for (std::size_t j = 0; j < k; ++j) {
        step.set_flat(restore[j].second, false);
        step.set_flat(window[j].second, true);
      }
      if (!try_step(step, best, best_score)) return false;
    }
    // Then the pairs one at a time on the best mask, in order, each kept
    // only when it wins: the effects do not add up far from `start`, so
    // every step is checked.
    for (std::size_t j = 0; j < m && !obj_.stopped(); ++j) {
      if (!best[restore[j].second] || best[window[j].second]) continue;
      HeadMask step = best;
      step.set_flat(restore[j].second, false);
      step.set_flat(window[j].second, true);
      if (!try_step(step, best, best_score)) return false;
    }
    return !obj_.stopped();
  }

  /// One step of flip_steps: `step` raced against `best` (scored
  /// `best_score`), which it replaces when it scores higher; a step already
  /// known replaces it when its full score is higher. False when the search
  /// stopped or ran out of budget.
  bool try_step(const HeadMask& step, HeadMask& best, double& best_score) {
    if (obj_.known(step)) {
      const std::optional<double> c = obj_.cached(step);
      if (c && *c > best_score) {
        best = step;
        best_score = *c;
      }
      return true;
    }
    if (obj_.allow(1) == 0) return false;
    const HeadMask focus = best;
    const auto out = obj_.compete(std::span<const HeadMask>(&step, 1), focus, best_score);
    if (out[0].eliminated) return true;
    if (!out[0].score) return false;
    if (*out[0].score > best_score) {
      best = step;
      best_score = *out[0].score;
    }
    return true;
  }

  /// Up to `n` evaluations of the surrogate's own optimum under the exact
  /// count (Options::surrogate_proposals, docs/algorithm.md §Stage 3): the
  /// model fitted to the whole log (the evaluations nearest the best
  /// exact-count mask, at most max(surrogate_points, 1024) of them), its
  /// optimum over every head with only the total count fixed
  /// (search::surrogate_optimum), evaluated unless already known, raced
  /// against the best mask when racing is on (Options::race; an eliminated
  /// proposal is logged as such and the next one, if any, is fitted with it);
  /// `candidate` becomes it when it scores higher. Stops early when the model
  /// proposes a known mask (it has nothing new to say). False when the search
  /// stopped or ran out of budget.
  bool propose_model_optimum(HeadMask& candidate, std::size_t n) {
    std::vector<std::vector<std::size_t>> heads(layout_.size());
    for (std::size_t i = 0; i < heads.size(); ++i) heads[i] = {i};
    search::Surrogate model(std::max<std::size_t>(options_.surrogate_points, 1024));
    for (std::size_t i = 0; i < n && !obj_.stopped(); ++i) {
      const HeadMask* best = obj_.best_mask();
      if (best == nullptr) break;
      const HeadMask focus = *best;
      search::fit_to_log(model, obj_, focus, i == 0);
      if (!model.ready()) break;
      const search::SubProblem p =
          search::single_group(focus, heads, static_cast<int>(target_), 1, 0, false, nullptr);
      const HeadMask m = search::apply_state(p, search::surrogate_optimum(model.mean_form(), p, 4 * heads.size()));
      if (obj_.known(m)) break;
      if (obj_.allow(1) == 0) return false;
      // Raced against the best mask, as the refinement's own candidates are:
      // the proposal matters only if it wins, and on SmolLM2 it lost every
      // logged search, by 0.5-1 nats at rho 0.75.
      const auto out = obj_.compete(std::span<const HeadMask>(&m, 1), focus, obj_.best_score());
      if (out[0].eliminated) continue;
      if (!out[0].score) return false;
      const auto cs = obj_.cached(candidate);
      if (!cs || *out[0].score > *cs) candidate = m;
    }
    return !obj_.stopped();
  }

  /// Scores the warm-start candidates (Options::initial_masks) with the
  /// target count; with `head_values` (after Stage 1) also the others,
  /// resized to the target count by those values. Keeps the best in
  /// best_seed_. False when the search stopped or ran out of budget.
  bool score_seeds(const std::vector<std::vector<double>>* head_values) {
    bool any = false;
    std::vector<HeadMask> todo;
    for (const auto& m : options_.initial_masks) {
      const bool exact = m.count() == target_;
      if (head_values == nullptr ? exact : !exact) {
        todo.push_back(m);
        if (!exact) search::resize_global(todo.back(), target_, *head_values);
      }
    }
    if (todo.empty()) return true;
    const Stage before = obj_.stage();
    if (!begin(Stage::seeds)) return false;
    const HeadMask full(layout_);
    const auto scores = obj_.evaluate_many(todo, &full);
    for (std::size_t i = 0; i < todo.size(); ++i) {
      if (!scores[i]) continue;
      any = true;
      if (!best_seed_ || *scores[i] > best_seed_->second) best_seed_.emplace(todo[i], *scores[i]);
    }
    end(Stage::seeds);
    obj_.set_stage(before);
    return any && !obj_.stopped();
  }

  bool run_layer_variant(HeadMask& candidate) {
    const Options& o = options_;
    const int L = layout_.num_layers, H = layout_.num_kv_heads;
    const int whole = static_cast<int>(target_ / static_cast<std::size_t>(H));
    const int rest = static_cast<int>(target_ % static_cast<std::size_t>(H));
    if (!begin(Stage::layers)) return false;
    const HeadMask full(layout_);
    std::vector<std::vector<std::size_t>> layers(static_cast<std::size_t>(L));
    for (int l = 0; l < L; ++l)
      for (int k = 0; k < H; ++k) layers[static_cast<std::size_t>(l)].push_back(full.index(l, k));
    const auto best = solve_one_group(full, std::move(layers), whole, layer_budget(), search::stream_layers, true, &full);
    end(Stage::layers);
    if (!best) return false;
    HeadMask incumbent = *best;
    counts_ = layer_counts(incumbent);
    if (rest > 0) {
      if (!begin(Stage::repair)) return false;
      std::vector<std::vector<std::size_t>> heads;
      for (int l = 0; l < L; ++l)
        if (incumbent.count_in_layer(l) == 0)
          for (int k = 0; k < H; ++k) heads.push_back({incumbent.index(l, k)});
      const auto r = solve_one_group(incumbent, std::move(heads), rest, o.probe_budget, search::stream_remainder,
                                     true, &*best);
      end(Stage::repair);
      if (!r) return false;
      incumbent = *r;
      counts_ = layer_counts(incumbent);
    }
    candidate = incumbent;
    return true;
  }

  /// An exact-count mask from whatever state the search reached (used when it
  /// stopped early): planned counts when known, else uniform counts by the
  /// drops known so far; layers resized by the Stage 1 head values.
  HeadMask complete_plan() {
    const int L = layout_.num_layers;
    HeadMask m = probes_ ? probes_->cascade : HeadMask(layout_);
    std::vector<int> counts = counts_;
    if (counts.size() != static_cast<std::size_t>(L) ||
        static_cast<std::size_t>(std::accumulate(counts.begin(), counts.end(), 0)) != target_) {
      std::vector<double> w = probes_ ? search::layer_weights(probes_->drops)
                                      : std::vector<double>(static_cast<std::size_t>(L), 0.0);
      counts = search::uniform_counts(layout_, target_, w);
    }
    for (int l = 0; l < L; ++l)
      search::resize_layer(
          m, l, counts[static_cast<std::size_t>(l)],
          probes_ ? probes_->head_values[static_cast<std::size_t>(l)] : std::vector<double>{});
    return m;
  }

  Result finish(const HeadMask& candidate) {
    const Options& o = options_;
    HeadMask chosen = candidate;
    std::optional<double> score = obj_.cached(candidate);
    if (o.return_best_seen && obj_.best_mask() && (!score || obj_.best_score() > *score)) {
      chosen = *obj_.best_mask();
      score = obj_.best_score();
    }
    if (!score && !obj_.stopped()) {
      obj_.set_stage(Stage::repair);
      const HeadMask* ref = probes_ ? &probes_->cascade : nullptr;
      score = obj_.evaluate(chosen, ref, true);
    }
    Result res;
    res.mask = chosen;
    if (score) {
      res.score = *score;
      res.normalized_score = obj_.normalized(*score);
    }
    res.evaluations = obj_.evaluations() - obj_.eliminated();
    res.eliminated = obj_.eliminated();
    res.evaluator_calls = obj_.evaluator_calls();
    res.replayed = obj_.replayed();
    res.cache_hits = obj_.cache_hits();
    res.forwards = obj_.forwards();
    res.stage_evaluations = obj_.stage_evaluations();
    res.anchors = obj_.anchors();
    const std::size_t L = static_cast<std::size_t>(layout_.num_layers);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    res.layer_scores = probes_ ? probes_->scores : std::vector<double>(L, nan);
    res.layer_drops = probes_ ? probes_->drops : std::vector<double>(L, nan);
    res.layer_weights = weights_;
    if (counts_.size() == L &&
        static_cast<std::size_t>(std::accumulate(counts_.begin(), counts_.end(), 0)) == target_)
      res.planned_counts = counts_;
    res.layer_counts = layer_counts(chosen);
    for (int c : res.layer_counts)
      res.layer_ratios.push_back(static_cast<double>(c) / layout_.num_kv_heads);
    res.log = obj_.log();
    res.variant = o.variant;
    res.seed = o.seed;
    res.target_ratio = o.target_ratio;
    res.target_count = target_;
    res.stopped = obj_.stopped();
    res.budget_exhausted = obj_.budget_exhausted();
    res.seconds = elapsed();
    const SearchView v = view();
    std::apply([&](auto&... c) { (call_end_search(c, v, res), ...); }, cbs_);
    return res;
  }

  Options options_;
  HeadLayout layout_;
  std::size_t target_;
  Objective<E> obj_;
  std::tuple<Cbs&...> cbs_;
  std::chrono::steady_clock::time_point t0_;
  std::size_t planned_ = 0;
  std::optional<search::ProbeResult> probes_;
  std::optional<std::pair<HeadMask, double>> best_seed_;  // best warm-start candidate and its score
  std::vector<double> weights_;
  std::vector<int> counts_;
};

}  // namespace detail

/// Selects which KV heads become sliding-window heads (BOSCH).
///
/// @param evaluator the black box: any type modelling bosch::Evaluator (optional
///                  capabilities: HintedEvaluator, BatchEvaluator,
///                  HintedBatchEvaluator); kept by reference during the call.
/// @param options   see bosch::Options (validated: bosch::invalid_argument).
/// @param callbacks any number of callback objects (see callbacks.hpp).
/// @return the mask with exactly target_count(layout, rho) SWA heads, its
///         score, per-layer diagnostics and the evaluation log.
/// @throws bosch::invalid_argument for bad options or an invalid layout,
///         bosch::format_error / bosch::file_error for an unreadable or
///         mismatching checkpoint, bosch::error for a non-finite score, and
///         whatever the evaluator throws.
template <class E, class... Callbacks>
Result select(E& evaluator, const Options& options, Callbacks&&... callbacks) {
  static_assert(Evaluator<E>,
                "bosch::select: the evaluator type must provide layout() returning something "
                "convertible to bosch::HeadLayout and evaluate(const HeadMask&) returning "
                "something convertible to double (higher is better); see bosch/evaluator.hpp");
  if constexpr (Evaluator<E>) {
    validate(options);
    detail::search_run<E, std::remove_reference_t<Callbacks>...> run(evaluator, options,
                                                                     callbacks...);
    return run.run();
  } else {
    return Result{};
  }
}

}  // namespace bosch
