// SPDX-License-Identifier: Apache-2.0
// bosch compare MODEL -o DIR: BOSCH and its variants, the static head rankings
// and the layer heuristics at several SWA ratios, scored on held-out tasks;
// resumable cell by cell.

#include "baseline_options.hpp"
#include "command_line.hpp"
#include "commands.hpp"
#include "files.hpp"
#include "model_options.hpp"
#include "search_options.hpp"
#include "run_options.hpp"
#include "mpi_session.hpp"
#include "warm_start_options.hpp"

#include <bosch/eval/compare.hpp>
#include <bosch/io/options_json.hpp>
#include <bosch/run/selection.hpp>
#include <bosch/tasks/generate.hpp>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <deque>
#include <filesystem>
#include <iostream>
#include <set>

namespace bosch::cli {
namespace {

/// Every search option but the ratio (the comparison runs several).
nlohmann::json compare_search_identity(const Options& o) {
  nlohmann::json j = options_to_json(o);
  j.erase("target_ratio");
  return j;
}

/// The method names of --methods (in the standard order), case-insensitive; "all" = every one.
std::set<std::string> parse_methods(const std::string& list) {
  const std::vector<std::string> known{"BOSCH", "B-single", "B-multi", "B-layer", "DCAM", "APL", "RAZOR",
                                       "QADA",  "PROXY",    "FISHER",  "RETRIEVAL", "RAND", "BME", "INTR"};
  std::set<std::string> wanted;
  for (const auto& name : split_list(list)) {
    if (name == "all") {
      wanted.insert(known.begin(), known.end());
      continue;
    }
    // BOSCH-layer: the layer-granular deployment choice's name in docs/deployment.md.
    if (name.size() == 11 && std::equal(name.begin(), name.end(), "BOSCH-layer", [](char a, char b) {
          return std::toupper(static_cast<unsigned char>(a)) == std::toupper(static_cast<unsigned char>(b));
        })) {
      wanted.insert("B-layer");
      continue;
    }
    auto it = std::find_if(known.begin(), known.end(), [&](const std::string& k) {
      return std::equal(k.begin(), k.end(), name.begin(), name.end(), [](char a, char b) {
        return std::toupper(static_cast<unsigned char>(a)) == std::toupper(static_cast<unsigned char>(b));
      });
    });
    if (it == known.end()) throw bosch::invalid_argument("unknown method '" + name + "'", "--methods");
    wanted.insert(*it);
  }
  if (wanted.empty()) throw bosch::invalid_argument("no method given", "--methods");
  return wanted;
}

}  // namespace

int run_compare(int argc, char** argv) {
  return run_command("compare", [&]() -> int {
    // Compare runs on the CPU backend (the head rankings read attention there).
    RunOptions ro({SettingGroup::model, SettingGroup::tasks, SettingGroup::evaluator}, {"device", "gpu"});
    OutputOptions oo;
    HeadScoreCli hs;
    // The ratio and the variant are set per cell: --ratios and --methods.
    SearchOptions so({"target_ratio", "variant"});
    std::string out = "comparison", ratios_text = "0.25,0.5,0.75,0.875", methods_text = "all";
    std::string layer_count = "exact";
    std::string held_out_contexts_text;
    WarmStartOptions wo;
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
                   "accuracy_vs_ratio.svg, logprob_vs_ratio.svg, paired.csv. Every held-out figure\n"
                   "carries its sample count and a 95% bootstrap interval over the samples;\n"
                   "table.md also gives BOSCH minus the best other method per ratio with a paired\n"
                   "bootstrap interval, and B-layer (whole layers, the mask for engines that window\n"
                   "only layers) minus BOSCH and minus the best layer heuristic. Each method's\n"
                   "ratios run in --ratio-order; each BOSCH search starts also from its mask at the\n"
                   "previous ratio (--warm-start) and from the --candidates rankings. Runs on the\n"
                   "CPU backend. The BOSCH search options are those of `bosch select` (--seed also\n"
                   "seeds RAND and RAZOR). For published tables use at least 16 held-out samples\n"
                   "per task (the default).");
    po::options_description what("Comparison");
    what.add_options()("out,o", po::value(&out)->default_value(out)->value_name("DIR"), "output directory")(
        "ratios", po::value(&ratios_text)->default_value(ratios_text)->value_name("LIST"),
        "comma-separated SWA ratios in (0, 1)")(
        "methods", po::value(&methods_text)->default_value(methods_text)->value_name("LIST"),
        "comma-separated methods, or all: BOSCH, B-single, B-multi, B-layer (or BOSCH-layer), DCAM, APL, RAZOR, "
        "QADA, PROXY, FISHER, RETRIEVAL, RAND, BME, INTR")(
        "layer-count", po::value(&layer_count)->default_value(layer_count)->value_name("exact|whole"),
        "layer heuristics: exact head count (one partial layer) or round(rho L) whole layers")(
        "held-out-context", po::value(&held_out_contexts_text)->value_name("N[,N...]"),
        "also score every mask on the held-out tasks at these context lengths (other than --context; "
        "same task kinds, seeds and split): one more set of tables and plots each; may be added to a "
        "finished comparison (stored masks are scored, not selected again)")(
        "extra-tokens", po::value(&extra_tokens)->default_value(extra_tokens)->value_name("N"),
        "held-out greedy budget: answer tokens + N")(
        "no-accuracy", flag(&no_accuracy),
        "skip greedy decoding: tables show the greedy exact match (free) instead of accuracy")(
        "report-only", flag(&report_only),
        "compute nothing: write the tables and figures of this grid from DIR/results.json")(
        "progress-every", po::value(&progress_every)->default_value(progress_every)->value_name("N"),
        "a search progress line every N evaluations (0 = per cell only)");
    cl.options.add(ro.describe()).add(what).add(so.describe("BOSCH search (per cell)"))
        .add(wo.describe(false, " (every method; the warm starts and candidates are BOSCH's; the candidates' "
                                "rankings are shared with the ranking methods of the same name)"))
        .add(hs.describe())
        .add(oo.describe());
    cl.options.add(mpi_session().describe());
    cl.positional.add("model", 1);
    cl.epilog =
        "Example (about 40 minutes on 2 cores):\n"
        "  bosch compare SmolLM2-135M-Instruct.Q4_1.gguf --context 512 --window 64 -o compare-smollm2\n";
    po::variables_map vm;
    if (!cl.parse(argc, argv, vm)) return exit_success;

    // ---- check everything before loading the model ------------------------------
    const RunSettings settings = ro.resolve(vm);
    const auto ratios = SearchOptions::parse_ratios(ratios_text, "--ratios");
    const TaskSuiteOptions suite = settings.suite();
    check_held_out(settings, RunOptions::namer());
    const TransformerEvaluatorOptions eo = settings.evaluator();
    const Options search = so.resolve(vm);
    if (extra_tokens < 0) throw bosch::invalid_argument("must be >= 0", "--extra-tokens");
    if (layer_count != "exact" && layer_count != "whole")
      throw bosch::invalid_argument("expected exact or whole, got '" + layer_count + "'", "--layer-count");
    eval::StandardMethodsOptions smo;
    smo.search = search;
    smo.scores = hs.resolved(eo, search.seed);
    smo.quota = hs.resolved_quota();
    smo.layer_count = layer_count == "exact" ? baselines::LayerCount::exact : baselines::LayerCount::whole_layers;
    smo.progress_every = progress_every;
    smo.search_progress = [&oo](const std::string& s) { oo.info() << "  " << s << "\n"; };
    const std::set<std::string> wanted = parse_methods(methods_text);
    const eval::RatioOrder ratio_order = wo.resolved_order();
    smo.warm_start = wo.warm_start;
    smo.candidates = wo.resolved_candidates();
    check_output_dir(out, "--out");
    if (report_only && !std::filesystem::is_regular_file(std::filesystem::path(out) / "results.json"))
      throw file_error("--report-only: no results.json in '" + out +
                           "' (it reports on the results of an earlier compare run into this folder)",
                       "--out");
    {
      // The files compare writes (and the directory itself) never replace an input.
      std::vector<OutputPath> outputs{{"--out", out}};
      for (const char* f : {"table.md", "results.json", "results.csv", "paired.csv", "turnover.csv", "jaccard.csv"})
        outputs.push_back({"--out", std::filesystem::path(out) / f});
      check_not_inputs(outputs, run_inputs(cl.config_file(), settings));
    }
    const model::Config config = read_model_config(settings.model);
    RunOptions::check_model(settings, config);
    // The other held-out contexts: checked like --context.
    std::vector<int> held_out_contexts;
    for (const auto& item : split_list(held_out_contexts_text)) {
      const int n = parse_number<int>(item, "--held-out-context");
      if (n < 32) throw bosch::invalid_argument("must be at least 32 tokens, got " + item, "--held-out-context");
      if (std::find(settings.context.begin(), settings.context.end(), n) != settings.context.end())
        throw bosch::invalid_argument(item +
                                          (settings.context.size() == 1 ? " is the calibration context"
                                                                        : " is one of the calibration contexts") +
                                          " (--context), whose held-out set is always scored",
                                      "--held-out-context");
      if (static_cast<long long>(eo.window) + eo.sinks >= n)
        throw bosch::invalid_argument("window " + std::to_string(eo.window) + " plus " + std::to_string(eo.sinks) +
                                          " sinks must be less than every held-out context, got " + item,
                                      "--held-out-context");
      check_context_for_model(n, config, settings.allow_long_context, "--held-out-context");
      if (std::find(held_out_contexts.begin(), held_out_contexts.end(), n) == held_out_contexts.end())
        held_out_contexts.push_back(n);
    }
    // A comparison for a deployment context is also held out there (checked with the settings).
    if (settings.deploy_context > 0 &&
        std::find(settings.context.begin(), settings.context.end(), settings.deploy_context) == settings.context.end() &&
        std::find(held_out_contexts.begin(), held_out_contexts.end(), settings.deploy_context) == held_out_contexts.end())
      held_out_contexts.push_back(settings.deploy_context);

    // ---- the run ---------------------------------------------------------------------
    const auto t0 = std::chrono::steady_clock::now();
    ModelRun run = make_model_run(settings, oo);
    const model::Model& model = run.model();
    const tasks::TaskSet& held_out = run.held_out();
    oo.info() << "tasks: " << run.calibration().samples.size() << " calibration and " << held_out.samples.size()
              << " held-out samples of <= " << settings.longest_context() << " tokens; window " << eo.window
              << ", sinks " << eo.sinks << "\n"
              << file_task_summary(held_out);
    // Rankings and held-out figures in fp32; the searches in --precision.
    const cpu::Backend& backend = *run.cpu_report_backend();
    TransformerEvaluator<cpu::Backend>& evaluator = *run.cpu_evaluator();
    std::shared_ptr<void> mpi_scoring;  // MPI: PROXY spread over the ranks (mpi_session.hpp)
    smo.scoring = shared_scoring(evaluator, oo.info(), mpi_scoring);
    // The BOSCH cells search through the run function, on one process or all.
    MpiExecutor executor(oo.info());
    smo.scoring.search = [&run, &executor](const Options& o, CallbackList& callbacks) {
      return run_search(run, o, callbacks, &executor);
    };
    auto methods = eval::standard_methods(backend, evaluator, smo);
    methods.erase(std::remove_if(methods.begin(), methods.end(),
                                 [&](const eval::ComparisonMethod& m) { return !wanted.count(m.name); }),
                  methods.end());
    ReportOptions rep;
    rep.accuracy = !no_accuracy;
    rep.extra_new_tokens = extra_tokens;
    // The held-out sets: the calibration context's, then the other contexts'.
    std::vector<eval::HeldOutSet> sets;
    const std::string calibration_contexts = context_list_string(settings.context);
    sets.push_back({"context=" + calibration_contexts,
                    "held-out, context " + calibration_contexts + " (the calibration context)",
                    eval::held_out_scorer(backend, model.tokenizer, held_out, eo.window, eo.sinks, rep)});
    std::deque<tasks::TaskSet> other_sets;  // stable addresses for the scorers
    for (int n : held_out_contexts) {
      other_sets.push_back(tasks::generate(suite_specs(settings.suite_at(n), tasks::Split::held_out), model.tokenizer));
      oo.info() << "held-out at context " << n << ": " << other_sets.back().samples.size() << " samples\n";
      sets.push_back({"context=" + std::to_string(n), "held-out, context " + std::to_string(n),
                      eval::held_out_scorer(backend, model.tokenizer, other_sets.back(), eo.window, eo.sinks, rep)});
    }

    eval::ComparisonOptions co;
    co.ratios = ratios;
    co.output_dir = out;
    co.title = model.config.name;
    co.compute_missing = !report_only;
    co.write_results = mpi_session().root();
    co.after_load = [] { mpi_session().barrier(); };
    co.ratio_order = ratio_order;
    rep.bootstrap = co.bootstrap;
    nlohmann::json candidate_names = nlohmann::json::array();
    for (auto m : smo.candidates) candidate_names.push_back(std::string(eval::to_string(m)));
    co.run = {{"model", model.config.name},
              {"model_fingerprint", model.fingerprint},
              {"window", eo.window},
              {"sinks", eo.sinks},
              {"suite", to_json(suite)},
              {"search", compare_search_identity(search)},
              {"rankings", hs.to_json()},
              {"layer_count", layer_count},
              {"held_out", {{"accuracy", !no_accuracy}, {"extra_tokens", extra_tokens}}},
              {"ratio_order", eval::to_string(ratio_order)},
              {"warm_start", wo.warm_start},
              {"candidates", candidate_names}};
    if (settings.precision != cpu::Precision::fp32) co.run["precision"] = run.precision();
    const auto result = eval::run_comparison(methods, sets, evaluator.layout(), co,
                                             [&oo](const std::string& s) { oo.info() << s << "\n"; });
    if (!mpi_session().root()) return exit_success;
    eval::write_comparison_outputs(result, co);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    std::cout << eval::comparison_markdown(result, co);
    oo.info() << "wrote " << out << "/ (table.md, results.json, results.csv, paired.csv, turnover.csv, jaccard.csv, "
              << "heads/, plots): " << result.computed << " cells computed, " << result.resumed << " resumed ("
              << result.rescored << " scored on a new held-out set), " << seconds << " s\n";
    return exit_success;
  });
}

}  // namespace bosch::cli
