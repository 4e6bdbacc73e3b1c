// SPDX-License-Identifier: Apache-2.0
// The standard method set of the comparison on the CPU transformer: BOSCH and
// its variants (bosch::select), the static head rankings (eval/head_scores.hpp)
// and the layer heuristics (baselines/layer.hpp).

#include "ratio_text.hpp"

#include <bosch/bosch.hpp>
#include <bosch/callback_list.hpp>
#include <bosch/error.hpp>
#include <bosch/eval/compare.hpp>
#include <bosch/io/json_number.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace bosch::eval {
namespace {

/// Forwards a line every `every` evaluations of a search.
struct LineProgress {
  std::string prefix;
  std::function<void(const std::string&)> sink;
  std::size_t every = 0;
  void on_evaluation(const SearchView& v, const EvaluationRecord& r) {
    if (!sink || every == 0 || (r.index + 1) % every != 0) return;
    // Before the first exact-count mask is scored the best is "-", not nan.
    char best[32] = "-";
    if (v.best_mask && std::isfinite(v.best_score)) std::snprintf(best, sizeof best, "%.4f", v.best_score);
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s: %zu/%zu evaluations, stage %s, best %s, %.0f s", prefix.c_str(),
                  v.evaluations, v.planned_evaluations, to_string(v.stage), best, v.elapsed_seconds);
    sink(buf);
  }
};

using io::json_number;

/// An evaluator scoring through SharedScoring::score_batch (hinted and batched,
/// like the TransformerEvaluator it stands for).
struct SharedEvaluator {
  HeadLayout layout_;
  const SharedScoring* scoring;
  HeadLayout layout() const { return layout_; }
  double evaluate(const HeadMask& m) { return evaluate(m, EvaluationHint{}); }
  double evaluate(const HeadMask& m, const EvaluationHint& h) {
    return evaluate_batch(std::span<const HeadMask>(&m, 1), h).front();
  }
  std::vector<double> evaluate_batch(std::span<const HeadMask> ms) { return evaluate_batch(ms, EvaluationHint{}); }
  std::vector<double> evaluate_batch(std::span<const HeadMask> ms, const EvaluationHint& h) {
    return scoring->score_batch(ms, h);
  }
};


/// Ranking scores shared by the ranking methods and the BOSCH variants'
/// candidates: whichever needs a ranking first computes it.
struct RankingCache {
  std::map<Method, HeadScores> scores;
  const HeadScores& get(Method m, const std::function<HeadScores()>& compute) {
    auto it = scores.find(m);
    if (it == scores.end()) it = scores.emplace(m, compute()).first;
    return it->second;
  }
};

MethodSetup setup_of(const HeadScores& s) {
  MethodSetup setup;
  setup.evaluations = s.evaluations;
  setup.forwards = s.forwards;
  setup.note = s.note;
  setup.seconds = s.seconds;
  setup.state = to_json(s);
  return setup;
}

}  // namespace

HeadScores compute_ranking(Method method, const cpu::Backend& backend, TransformerEvaluator<cpu::Backend>& evaluator,
                           const HeadScoreOptions& options) {
  if (method == Method::proxy)
    return proxy_scores(evaluator, static_cast<double>(evaluator.tasks().samples.size()));
  return compute_head_scores(method, backend, evaluator.tasks(), options);
}

std::vector<Method> cheap_candidates() { return {Method::dcam, Method::apl, Method::qada, Method::razor}; }

std::vector<Method> parse_candidates(std::string_view list, const std::string& option) {
  std::vector<Method> out;
  auto add = [&out](Method m) {
    if (std::find(out.begin(), out.end(), m) == out.end()) out.push_back(m);
  };
  std::size_t pos = 0;
  while (pos <= list.size()) {
    std::size_t comma = list.find(',', pos);
    if (comma == std::string_view::npos) comma = list.size();
    std::string name(list.substr(pos, comma - pos));
    pos = comma + 1;
    while (!name.empty() && name.front() == ' ') name.erase(name.begin());
    while (!name.empty() && name.back() == ' ') name.pop_back();
    std::string lower = name;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    if (lower.empty() || lower == "none") continue;
    if (lower == "cheap") {
      for (Method m : cheap_candidates()) add(m);
      continue;
    }
    try {
      add(parse_method(name));
    } catch (const invalid_argument&) {
      throw invalid_argument("unknown candidate '" + name + "' (expected none, cheap or rankings: DCAM, APL, QADA, "
                             "RAZOR, PROXY, FISHER, RETRIEVAL)",
                             option);
    }
  }
  return out;
}

nlohmann::json warm_start_summary(const Result& r) {
  nlohmann::json evaluated = nlohmann::json::array();
  double best = std::numeric_limits<double>::quiet_NaN();
  bool result_is_seed = false;
  for (const auto& e : r.log) {
    if (e.stage != Stage::seeds) continue;
    evaluated.push_back({{"swa", e.mask.count()}, {"score", json_number(e.score)}});
    if (std::isnan(best) || e.score > best) best = e.score;
    result_is_seed = result_is_seed || e.mask == r.mask;
  }
  return {{"seeds", r.stage_evaluations[static_cast<std::size_t>(Stage::seeds)]},
          {"evaluated", evaluated},
          {"best_seed_score", json_number(best)},
          {"result_is_seed", result_is_seed}};
}

std::string variant_method_name(Variant variant) {
  switch (variant) {
    case Variant::full: return "BOSCH";
    case Variant::single: return "B-single";
    case Variant::multi: return "B-multi";
    case Variant::layer: return "B-layer";
  }
  return "BOSCH-?";
}

std::vector<ComparisonMethod> standard_methods(const cpu::Backend& backend,
                                               TransformerEvaluator<cpu::Backend>& evaluator,
                                               const StandardMethodsOptions& options) {
  validate(options.search);
  HeadScoreOptions so = options.scores;
  so.window = evaluator.options().window;
  so.sinks = evaluator.options().sinks;
  validate(so);
  const HeadLayout layout = evaluator.layout();
  std::vector<ComparisonMethod> out;
  // BOSCH and PROXY score through options.scoring when it is set.
  const auto shared = std::make_shared<SharedScoring>(options.scoring);
  const auto layers_run = [&evaluator, shared] {
    return shared->layers_run ? shared->layers_run() : evaluator.stats().layer_applications();
  };
  const auto search = [&evaluator, shared](const Options& o, LineProgress& progress) {
    if (shared->search) {
      CallbackList callbacks;
      callbacks.add(progress);
      return shared->search(o, callbacks);
    }
    if (!shared->score_batch) return bosch::select(evaluator, o, progress);
    SharedEvaluator e{evaluator.layout(), shared.get()};
    return bosch::select(e, o, progress);
  };
  // A ranking's scores; PROXY's evaluations also go through options.scoring.
  const auto rank = [&backend, &evaluator, shared, so](Method method) {
    if (method == Method::proxy && shared->score_batch) {
      SharedEvaluator e{evaluator.layout(), shared.get()};
      return proxy_scores(e, static_cast<double>(evaluator.tasks().samples.size()));
    }
    return compute_ranking(method, backend, evaluator, so);
  };

  auto cache = std::make_shared<RankingCache>();
  // The candidates' scores for the BOSCH variants' set-up: shared with the
  // ranking methods of the same name through the cache.
  const std::vector<Method> candidates = options.candidates;
  auto candidate_setup = [rank, cache, candidates] {
    MethodSetup setup;
    setup.state = {{"candidates", nlohmann::json::object()}};
    setup.seconds = 0;
    std::string note;
    for (Method c : candidates) {
      const HeadScores& s =
          cache->get(c, [&] { return rank(c); });
      setup.state["candidates"][std::string(to_string(c))] = to_json(s);
      setup.evaluations += s.evaluations;
      setup.forwards += s.forwards;
      setup.seconds += s.seconds;
      note += (note.empty() ? "warm-start candidates: " : ", ") + std::string(to_string(c));
    }
    setup.note = note;
    return setup;
  };
  auto remember_candidates = [cache](const nlohmann::json& state) {
    if (!state.contains("candidates")) return;
    for (auto it = state.at("candidates").begin(); it != state.at("candidates").end(); ++it) {
      HeadScores s = head_scores_from_json(it.value(), "candidate " + it.key());
      cache->scores.emplace(s.method, std::move(s));
    }
  };

  for (Variant v : options.variants) {
    ComparisonMethod m;
    m.name = variant_method_name(v);
    m.family = "BOSCH";
    if (!candidates.empty()) {
      m.setup = candidate_setup;
      m.on_setup = remember_candidates;
    }
    m.select = [search, layers_run, base = options.search, sink = options.search_progress,
                every = options.progress_every, v, layout, name = m.name, warm = options.warm_start,
                quota = options.quota](double rho, const nlohmann::json& state, const CellResult* previous) {
      Options o = base;
      o.target_ratio = rho;
      o.variant = v;
      nlohmann::json starts = nlohmann::json::array();
      if (state.is_object() && state.contains("candidates"))
        for (auto it = state.at("candidates").begin(); it != state.at("candidates").end(); ++it) {
          o.initial_masks.push_back(ranking_mask(head_scores_from_json(it.value(), "candidate " + it.key()), rho, quota));
          starts.push_back(it.key());
        }
      if (warm && previous != nullptr) {
        o.initial_masks.push_back(previous->mask);
        starts.push_back(name + (" at ratio " + detail::ratio_text(previous->ratio)));
      }
      const std::size_t before = layers_run();
      LineProgress progress{name + (" at ratio " + detail::ratio_text(rho)), sink, every};
      const Result r = search(o, progress);
      MethodCell c;
      c.mask = r.mask;
      c.evaluations = r.evaluator_calls;
      c.forwards = static_cast<double>(layers_run() - before) / layout.num_layers;
      c.details = {{"search_score", json_number(r.score)},
                   {"normalized_score", json_number(r.normalized_score)},
                   {"anchor_full", json_number(r.anchors.full)},
                   {"anchor_swa", json_number(r.anchors.swa)},
                   {"distinct_masks", r.evaluations},
                   {"cache_hits", r.cache_hits},
                   {"layer_counts", r.layer_counts},
                   {"stopped", r.stopped},
                   {"budget_exhausted", r.budget_exhausted}};
      if (!starts.empty()) {
        c.details["warm_starts"] = starts;
        c.details["warm_start"] = warm_start_summary(r);
      }
      return c;
    };
    out.push_back(std::move(m));
  }

  for (Method method : options.rankings) {
    ComparisonMethod m;
    m.name = std::string(to_string(method));
    m.family = "ranking";
    m.setup = [rank, method, cache] { return setup_of(cache->get(method, [&] { return rank(method); })); };
    m.on_setup = [cache, method, name = m.name](const nlohmann::json& state) {
      cache->scores.emplace(method, head_scores_from_json(state, name + " scores"));
    };
    m.select = [quota = options.quota, name = m.name](double rho, const nlohmann::json& state, const CellResult*) {
      const HeadScores s = head_scores_from_json(state, name + " scores");
      MethodCell c;
      c.mask = ranking_mask(s, rho, quota);
      return c;
    };
    out.push_back(std::move(m));
  }

  if (options.layer_heuristics) {
    const auto seed = options.search.seed;
    const auto count = options.layer_count;
    auto add = [&](const char* name, std::function<HeadMask(double)> f) {
      ComparisonMethod m;
      m.name = name;
      m.family = "layer";
      m.select = [f = std::move(f)](double rho, const nlohmann::json&, const CellResult*) {
        MethodCell c;
        c.mask = f(rho);
        return c;
      };
      out.push_back(std::move(m));
    };
    add("RAND", [layout, seed, count](double rho) { return baselines::layer_rand(layout, rho, seed, count); });
    add("BME", [layout, count](double rho) { return baselines::layer_bme(layout, rho, count); });
    add("INTR", [layout, count](double rho) { return baselines::layer_intr(layout, rho, count); });
  }
  return out;
}

MaskScorer held_out_scorer(const cpu::Backend& backend, const model::Tokenizer& tokenizer,
                           const tasks::TaskSet& held_out, int window, int sinks, ReportOptions report) {
  if (held_out.samples.empty()) throw invalid_argument("the held-out task set is empty", "held_out_scorer");
  if (window < 1) throw invalid_argument("window must be >= 1", "window");
  return [&backend, &tokenizer, &held_out, window, sinks, report](const HeadMask& mask) {
    return evaluate_held_out(backend, tokenizer, held_out, AttentionWindows::from_mask(mask, window, sinks), report);
  };
}

}  // namespace bosch::eval
