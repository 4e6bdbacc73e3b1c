// SPDX-License-Identifier: Apache-2.0
// bosch compare MODEL -o DIR: BOSCH and its variants, the static head rankings
// and the layer heuristics at several SWA ratios, scored on held-out tasks;
// resumable cell by cell.

#include "baseline_options.hpp"
#include "commands.hpp"
#include "common.hpp"
#include "mpi_session.hpp"

#include <bosch/eval/compare.hpp>
#include <bosch/version.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <iostream>
#include <set>
#include <sstream>

namespace bosch::cli {
namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::vector<double> parse_ratios(const std::string& s) {
  std::vector<double> out;
  for (const auto& item : split_list(s)) {
    std::size_t used = 0;
    double v = 0;
    try {
      v = std::stod(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != item.size()) throw bosch::invalid_argument("not a number: '" + item + "'", "--ratios");
    if (!(v > 0 && v < 1)) throw bosch::invalid_argument("every ratio must lie in (0, 1), got " + item, "--ratios");
    out.push_back(v);
  }
  if (out.empty()) throw bosch::invalid_argument("no ratio given", "--ratios");
  return out;
}

}  // namespace

namespace {
/// Every search option but the ratio (the comparison runs several).
nlohmann::json compare_search_identity(const Options& o) {
  nlohmann::json j = options_to_json(o);
  j.erase("target_ratio");
  return j;
}
}  // namespace

int run_compare(int argc, char** argv) {
  return run_command("compare", [&]() -> int {
    ModelOptions mo;
    TaskOptions to;
    OutputOptions oo;
    HeadScoreCli hs;
    Options search;
    std::string out = "comparison", ratios_text = "0.25,0.5,0.75,0.875", methods_text = "all", inner = "swap";
    std::string layer_count = "exact";
    int extra_tokens = 4;
    bool no_accuracy = false, report_only = false;
    std::size_t progress_every = 0;

    CommandLine cl("compare", "bosch compare [options] MODEL [-o DIR]",
                   "Compare head-selection methods on MODEL at several SWA ratios: BOSCH and its\n"
                   "ablations (B-single, B-multi, B-layer), the static head rankings (DCAM, APL,\n"
                   "RAZOR, QADA, PROXY, FISHER, RETRIEVAL) and the layer heuristics (RAND, BME,\n"
                   "INTR). Every mask is scored on the held-out split (greedy accuracy, answer\n"
                   "log-probability); evaluations and wall time per method are reported beside\n"
                   "quality. Writes DIR/results.json after every finished (method, ratio) cell: run\n"
                   "the same command again to resume (finished cells are not recomputed). Outputs:\n"
                   "table.md, results.csv, turnover.csv, jaccard.csv, heads/<method>.svg,\n"
                   "accuracy_vs_ratio.svg, logprob_vs_ratio.svg. Runs on the CPU backend.");
    po::options_description what("Comparison");
    what.add_options()("out,o", po::value(&out)->default_value(out)->value_name("DIR"), "output directory")(
        "ratios", po::value(&ratios_text)->default_value(ratios_text)->value_name("LIST"),
        "comma-separated SWA ratios in (0, 1)")(
        "methods", po::value(&methods_text)->default_value(methods_text)->value_name("LIST"),
        "comma-separated methods, or all: BOSCH, B-single, B-multi, B-layer, DCAM, APL, RAZOR, QADA, PROXY, "
        "FISHER, RETRIEVAL, RAND, BME, INTR")(
        "layer-count", po::value(&layer_count)->default_value(layer_count)->value_name("exact|whole"),
        "layer heuristics: exact head count (one partial layer) or round(rho L) whole layers")(
        "extra-tokens", po::value(&extra_tokens)->default_value(extra_tokens)->value_name("N"),
        "held-out greedy budget: answer tokens + N")(
        "no-accuracy", po::bool_switch(&no_accuracy),
        "skip greedy decoding: tables show the greedy exact match (free) instead of accuracy")(
        "report-only", po::bool_switch(&report_only),
        "compute nothing: write the tables and figures of this grid from DIR/results.json");
    po::options_description srch("BOSCH search");
    srch.add_options()("seed", po::value(&search.seed)->default_value(0)->value_name("N"),
                       "search seed (also RAND's and RAZOR's)")(
        "probe-budget", po::value(&search.probe_budget)->default_value(search.probe_budget)->value_name("N"),
        "Stage 1 evaluations per layer probe")(
        "chunk-budget", po::value(&search.chunk_budget)->default_value(search.chunk_budget)->value_name("N"),
        "Stage 3 evaluations per chunk")(
        "max-evaluations", po::value(&search.max_evaluations)->default_value(0)->value_name("N"),
        "total evaluation budget per search (0 = none; else >= 3)")(
        "max-vars", po::value(&search.max_vars)->default_value(search.max_vars)->value_name("N"),
        "most KV heads per Stage 3 chunk")(
        "inner-solver", po::value(&inner)->default_value(inner)->value_name("NAME"), "swap | penalized")(
        "progress-every", po::value(&progress_every)->default_value(progress_every)->value_name("N"),
        "a search progress line every N evaluations (0 = per cell only)");
    cl.options.add(mo.describe()).add(to.describe()).add(what).add(srch).add(hs.describe()).add(oo.describe());
    cl.options.add(mpi_session().describe());
    cl.positional.add("model", 1);
    cl.epilog =
        "Example (about 40 minutes on 2 cores):\n"
        "  bosch compare SmolLM2-135M-Instruct.Q4_1.gguf --context 512 --window 64 -o compare-smollm2\n";
    po::variables_map vm;
    if (!cl.parse(argc, argv, vm)) return exit_success;

    // ---- check everything before loading the model ------------------------------
    mo.validate();
    if (mo.cuda()) throw usage_error("compare runs on the CPU backend (the head rankings read attention there)");
    const auto ratios = parse_ratios(ratios_text);
    TaskSuiteOptions suite;
    try {
      suite = to.suite();
    } catch (const bosch::invalid_argument& e) {
      throw bosch::invalid_argument(e.message(), "--" + e.where());
    }
    if (suite.held_out_samples < 1) throw bosch::invalid_argument("must be at least 1", "--held-out-samples");
    const TransformerEvaluatorOptions eo = to.evaluator();
    try {
      search.inner_solver = parse_inner_solver(inner);
    } catch (const bosch::invalid_argument& e) {
      throw bosch::invalid_argument(e.message(), "--inner-solver");
    }
    try {
      validate(search);
    } catch (const bosch::invalid_argument& e) {
      std::string opt = e.where();
      for (auto& c : opt) c = c == '_' ? '-' : c;
      throw bosch::invalid_argument(e.message(), "--" + opt);
    }
    if (extra_tokens < 0) throw bosch::invalid_argument("must be >= 0", "--extra-tokens");
    if (layer_count != "exact" && layer_count != "whole")
      throw bosch::invalid_argument("expected exact or whole, got '" + layer_count + "'", "--layer-count");
    eval::StandardMethodsOptions so;
    so.search = search;
    so.scores = hs.resolved(eo, search.seed);
    so.quota = hs.resolved_quota();
    so.layer_count = layer_count == "exact" ? baselines::LayerCount::exact : baselines::LayerCount::whole_layers;
    so.progress_every = progress_every;
    so.search_progress = [&oo](const std::string& s) { oo.info() << "  " << s << "\n"; };
    // Which methods: all, or the listed names (in the standard order).
    std::set<std::string> wanted;
    const std::vector<std::string> known{"BOSCH", "B-single", "B-multi", "B-layer", "DCAM", "APL", "RAZOR",
                                         "QADA",  "PROXY",    "FISHER",  "RETRIEVAL", "RAND", "BME", "INTR"};
    for (const auto& name : split_list(methods_text)) {
      if (name == "all") {
        wanted.insert(known.begin(), known.end());
        continue;
      }
      auto it = std::find_if(known.begin(), known.end(), [&](const std::string& k) {
        if (k.size() != name.size()) return false;
        for (std::size_t i = 0; i < k.size(); ++i)
          if (std::toupper(static_cast<unsigned char>(k[i])) != std::toupper(static_cast<unsigned char>(name[i])))
            return false;
        return true;
      });
      if (it == known.end()) throw bosch::invalid_argument("unknown method '" + name + "'", "--methods");
      wanted.insert(*it);
    }
    if (wanted.empty()) throw bosch::invalid_argument("no method given", "--methods");

    // ---- the run ---------------------------------------------------------------------
    const auto t0 = std::chrono::steady_clock::now();
    const model::Model model = load_model(mo, oo);
    const auto task_suite = make_task_suite(suite, model.tokenizer, true);
    oo.info() << "tasks: " << task_suite.calibration.samples.size() << " calibration and "
              << task_suite.held_out.samples.size() << " held-out samples of <= " << suite.context_length
              << " tokens; window " << eo.window << ", sinks " << eo.sinks << "\n";
    cpu::Options co;
    co.threads = mo.threads;
    const auto backend = detail::make_backend<cpu::Backend>(model, co);
    TransformerEvaluator<cpu::Backend> evaluator(backend, task_suite.calibration, eo);
    std::shared_ptr<void> mpi_scoring;  // MPI: BOSCH and PROXY spread over the ranks (mpi_session.hpp)
    so.scoring = shared_scoring(evaluator, oo.info(), mpi_scoring);
    auto methods = eval::standard_methods(backend, evaluator, so);
    methods.erase(std::remove_if(methods.begin(), methods.end(),
                                 [&](const eval::ComparisonMethod& m) { return !wanted.count(m.name); }),
                  methods.end());
    ReportOptions ro;
    ro.accuracy = !no_accuracy;
    ro.extra_new_tokens = extra_tokens;
    const auto scorer = eval::held_out_scorer(backend, model.tokenizer, task_suite.held_out, eo.window, eo.sinks, ro);

    eval::ComparisonOptions co2;
    co2.ratios = ratios;
    co2.output_dir = out;
    co2.title = model.config.name;
    co2.compute_missing = !report_only;
    co2.write_results = mpi_session().root();
    co2.after_load = [] { mpi_session().barrier(); };
    co2.run = {{"model", model.config.name},
               {"model_fingerprint", model.fingerprint},
               {"window", eo.window},
               {"sinks", eo.sinks},
               {"suite", to_json(suite)},
               {"search", compare_search_identity(search)},
               {"rankings", hs.to_json()},
               {"layer_count", layer_count},
               {"held_out", {{"accuracy", !no_accuracy}, {"extra_tokens", extra_tokens}}}};
    const auto result = eval::run_comparison(methods, scorer, evaluator.layout(), co2,
                                             [&oo](const std::string& s) { oo.info() << s << "\n"; });
    if (!mpi_session().root()) return exit_success;
    eval::write_comparison_outputs(result, co2);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << eval::comparison_markdown(result, co2);
    oo.info() << "wrote " << out << "/ (table.md, results.json, results.csv, turnover.csv, jaccard.csv, heads/, "
              << "plots): " << result.computed << " cells computed, " << result.resumed << " resumed, " << seconds
              << " s\n";
    return exit_success;
  });
}

}  // namespace bosch::cli
