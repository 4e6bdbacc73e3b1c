// SPDX-License-Identifier: Apache-2.0
// The standard method set of the comparison on the CPU transformer: BOSCH and
// its variants (bosch::select), the static head rankings (eval/head_scores.hpp)
// and the layer heuristics (baselines/layer.hpp).

#include <bosch/bosch.hpp>
#include <bosch/error.hpp>
#include <bosch/eval/compare.hpp>

#include <cmath>
#include <cstdio>
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
    char buf[200];
    std::snprintf(buf, sizeof buf, "%s: %zu/%zu evaluations, stage %s, best %.4f, %.0f s", prefix.c_str(),
                  v.evaluations, v.planned_evaluations, to_string(v.stage), v.best_score, v.elapsed_seconds);
    sink(buf);
  }
};

nlohmann::json nan_null(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

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

}  // namespace

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
  const double samples = static_cast<double>(evaluator.tasks().samples.size());
  std::vector<ComparisonMethod> out;
  // BOSCH and PROXY score through options.scoring when it is set.
  const auto shared = std::make_shared<SharedScoring>(options.scoring);
  const auto layers_run = [&evaluator, shared] {
    return shared->layers_run ? shared->layers_run() : evaluator.stats().layers_run;
  };
  const auto search = [&evaluator, shared](const Options& o, LineProgress& progress) {
    if (!shared->score_batch) return bosch::select(evaluator, o, progress);
    SharedEvaluator e{evaluator.layout(), shared.get()};
    return bosch::select(e, o, progress);
  };

  for (Variant v : options.variants) {
    ComparisonMethod m;
    m.name = variant_method_name(v);
    m.family = "BOSCH";
    m.select = [search, layers_run, base = options.search, sink = options.search_progress,
                every = options.progress_every, v, layout, name = m.name](double rho, const nlohmann::json&) {
      Options o = base;
      o.target_ratio = rho;
      o.variant = v;
      const std::size_t before = layers_run();
      LineProgress progress{name + " at rho " + std::to_string(rho), sink, every};
      const Result r = search(o, progress);
      MethodCell c;
      c.mask = r.mask;
      c.evaluations = r.evaluator_calls;
      c.forwards = static_cast<double>(layers_run() - before) / layout.num_layers;
      c.details = {{"search_score", nan_null(r.score)},
                   {"normalized_score", nan_null(r.normalized_score)},
                   {"anchor_full", nan_null(r.anchors.full)},
                   {"anchor_swa", nan_null(r.anchors.swa)},
                   {"distinct_masks", r.evaluations},
                   {"cache_hits", r.cache_hits},
                   {"layer_counts", r.layer_counts},
                   {"stopped", r.stopped},
                   {"budget_exhausted", r.budget_exhausted}};
      return c;
    };
    out.push_back(std::move(m));
  }

  for (Method method : options.rankings) {
    ComparisonMethod m;
    m.name = std::string(to_string(method));
    m.family = "ranking";
    m.setup = [&backend, &evaluator, shared, so, method, samples] {
      HeadScores s;
      if (method != Method::proxy) {
        s = compute_head_scores(method, backend, evaluator.tasks(), so);
      } else if (shared->score_batch) {
        SharedEvaluator e{evaluator.layout(), shared.get()};
        s = proxy_scores(e, samples);
      } else {
        s = proxy_scores(evaluator, samples);
      }
      MethodSetup setup;
      setup.evaluations = s.evaluations;
      setup.forwards = s.forwards;
      setup.note = s.note;
      setup.state = to_json(s);
      return setup;
    };
    m.select = [quota = options.quota, name = m.name](double rho, const nlohmann::json& state) {
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
      m.select = [f = std::move(f)](double rho, const nlohmann::json&) {
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
