// SPDX-License-Identifier: Apache-2.0
// bosch baseline MODEL --method NAME --ratio R: a mask from a static head
// ranking (DCAM, APL, RAZOR, QADA, PROXY, FISHER, RETRIEVAL) or a layer
// heuristic (RAND, BME, INTR), without any search; with --ratios one mask per
// ratio from one ranking.

#include "baseline_options.hpp"
#include "commands.hpp"
#include "files.hpp"
#include "held_out_report.hpp"
#include "mask_files.hpp"
#include "model_options.hpp"
#include "ratio_runs.hpp"
#include "search_options.hpp"
#include "run_options.hpp"

#include <bosch/baselines/layer.hpp>
#include <bosch/eval/report.hpp>
#include <bosch/eval/suite.hpp>
#include <bosch/eval/head_scores.hpp>
#include <bosch/io/atomic_file.hpp>
#include <bosch/io/svg.hpp>
#include <bosch/model/loader.hpp>
#include <bosch/tasks/generate.hpp>
#include <bosch/version.hpp>

#include <cctype>
#include <iostream>
#include <optional>

namespace bosch::cli {

namespace {

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

int run_baseline(int argc, char** argv) {
  return run_command("baseline", [&]() -> int {
    RunOptions run_options({SettingGroup::model, SettingGroup::tasks, SettingGroup::evaluator});
    OutputOptions oo;
    HeadScoreCli hs;
    std::string method, out = "mask.json", format, scores_path, svg, ratios_text;
    double ratio = 0.5;
    std::uint64_t seed = 0;
    bool report = false;
    std::string layer_count = "exact";

    CommandLine cl("baseline", "bosch baseline [options] MODEL --method NAME [--ratio R | --ratios LIST] [-o OUT]",
                   "Make a head mask with a baseline instead of the BOSCH search: a static head\n"
                   "ranking computed once on the original model (DCAM, APL, RAZOR, QADA, PROXY,\n"
                   "FISHER, RETRIEVAL; the lowest-scored KV heads become SWA) or a layer-level\n"
                   "heuristic (RAND, BME, INTR; whole layers become SWA). See docs/comparison.md,\n"
                   "for each method's definition. --ratios computes the ranking once and writes\n"
                   "one mask per ratio.");
    po::options_description what("Baseline");
    what.add_options()("method", po::value(&method)->value_name("NAME"),
                       "DCAM | APL | RAZOR | QADA | PROXY | FISHER | RETRIEVAL | RAND | BME | INTR")(
        "ratio,r", po::value(&ratio)->default_value(ratio)->value_name("R"), "fraction of KV heads made SWA, in (0, 1)")(
        "ratios", po::value(&ratios_text)->value_name("LIST"),
        "several ratios (instead of --ratio) from one ranking: one mask file per ratio, named with -RATIO "
        "before the extension (mask-0.5.json), as select --ratios")(
        "seed", po::value(&seed)->default_value(seed)->value_name("N"), "seed of RAND and of RAZOR's random tokens")(
        "layer-count", po::value(&layer_count)->default_value(layer_count)->value_name("exact|whole"),
        "layer heuristics: exact head count (one partial layer) or round(rho L) whole layers");
    po::options_description files("Files");
    files.add_options()("out,o", po::value(&out)->default_value(out)->value_name("FILE"),
                        "mask file to write ('-' = stdout)")(
        "format", po::value(&format)->value_name("json|tsv|grid"), "mask format (default: by extension)")(
        "scores", po::value(&scores_path)->value_name("FILE"), "also write the ranking's per-head scores (JSON)")(
        "svg", po::value(&svg)->value_name("FILE"), "SVG head map of the mask")(
        "report", flag(&report), "afterwards, print held-out scores of all-full, all-SWA and the mask");
    cl.options.add(run_options.describe()).add(what).add(hs.describe()).add(files).add(oo.describe());
    cl.positional.add("model", 1);
    cl.epilog =
        "Example:\n"
        "  bosch baseline SmolLM2-135M-Instruct.Q4_1.gguf --method FISHER --ratio 0.5 \\\n"
        "      --window 64 --context 512 -o fisher.json --scores fisher-scores.json\n"
        "  bosch baseline SmolLM2-135M-Instruct.Q4_1.gguf --method PROXY --ratios 0.5,0.75 -o proxy.json\n"
        "      (proxy-0.5.json and proxy-0.75.json from one ranking)\n";
    po::variables_map vm;
    if (!cl.parse(argc, argv, vm)) return exit_success;

    const RunSettings settings = run_options.resolve(vm);
    if (method.empty()) throw usage_error("no method given (--method NAME)");
    method = upper(method);
    const bool layer = method == "RAND" || method == "BME" || method == "INTR";
    eval::Method ranking = eval::Method::dcam;
    if (!layer) {
      try {
        ranking = eval::parse_method(method);
      } catch (const bosch::invalid_argument&) {
        throw bosch::invalid_argument("unknown method '" + method +
                                          "' (expected DCAM, APL, RAZOR, QADA, PROXY, FISHER, RETRIEVAL, RAND, "
                                          "BME or INTR)",
                                      "--method");
      }
    }
    const bool multi = given(vm, "ratios");
    const std::vector<double> ratios = requested_ratios(vm, ratio, ratios_text, out);
    if (!multi) SearchOptions::check_ratio(ratio, "--ratio");
    // The files of each ratio: OUT and SVG as given, or with -RATIO (with_ratio).
    std::vector<std::string> outs, svgs;
    for (double rho : ratios) {
      outs.push_back(multi ? with_ratio(out, rho) : out);
      svgs.push_back(multi ? with_ratio(svg, rho) : svg);
    }
    if (layer_count != "exact" && layer_count != "whole")
      throw bosch::invalid_argument("expected exact or whole, got '" + layer_count + "'", "--layer-count");
    if (layer && !scores_path.empty()) throw usage_error("--scores applies to the head rankings only");
    const MaskFormat fmt = out == "-" && format.empty() ? MaskFormat::json : mask_format(out, format, "--format");
    const TaskSuiteOptions suite = settings.suite();
    const TransformerEvaluatorOptions eo = settings.evaluator();
    const eval::HeadScoreOptions so = hs.resolved(eo, seed);
    const baselines::Quota quota = hs.resolved_quota();
    if (!layer && settings.device == Device::cuda)
      throw usage_error("the head rankings read attention on the CPU backend (use --device cpu)");
    if (report) check_held_out(settings, RunOptions::namer());
    std::vector<OutputPath> outputs;
    for (const auto& o : outs) outputs.push_back({"--out", o});
    outputs.push_back({"--scores", scores_path});
    for (const auto& v : svgs) outputs.push_back({"--svg", v});
    check_outputs(outputs, run_inputs(cl.config_file(), settings));
    const model::Config config = read_model_config(settings.model);
    for (double rho : ratios) (void)checked_target_count(config.layout(), rho, multi ? "--ratios" : "--ratio");
    if (!layer || report) RunOptions::check_model(settings, config);

    const model::Model model = load_model(settings, oo);
    const HeadLayout layout = model.config.layout();
    // The held-out samples of --report, built before the scores are computed.
    std::optional<tasks::TaskSet> held_out;
    if (report) {
      held_out = tasks::generate(suite_specs(suite, tasks::Split::held_out), model.tokenizer);
      oo.detail() << "held-out: " << held_out->samples.size() << " samples\n";
    }
    nlohmann::json meta{{"method", method},
                        {"model", model.config.name},
                        {"model_file", model.source.filename().string()},
                        {"model_fingerprint", model.fingerprint},
                        {"architecture", model::to_string(model.config.arch)},
                        {"layout", to_string(layout)},
                        {"window", eo.window},
                        {"sinks", eo.sinks},
                        {"seed", seed},
                        {"bosch_version", version_string}};
    const nlohmann::json suite_json = to_json(suite);
    for (auto it = suite_json.begin(); it != suite_json.end(); ++it) meta[it.key()] = it.value();
    if (settings.deploy_context > 0) meta["deploy_context"] = settings.deploy_context;  // evaluate reports there
    // The mask at each ratio: a layer heuristic per ratio, a ranking computed once.
    std::vector<HeadMask> masks;
    if (layer) {
      const auto count = layer_count == "exact" ? baselines::LayerCount::exact : baselines::LayerCount::whole_layers;
      for (double rho : ratios)
        masks.push_back(method == "RAND"  ? baselines::layer_rand(layout, rho, seed, count)
                        : method == "BME" ? baselines::layer_bme(layout, rho, count)
                                          : baselines::layer_intr(layout, rho, count));
      meta["layer_count"] = layer_count;
    } else {
      const auto calibration = make_task_suite(suite, model.tokenizer, false).calibration;
      oo.info() << "tasks: " << calibration.samples.size() << " calibration samples of <= " << settings.longest_context()
                << " tokens; window " << eo.window << ", sinks " << eo.sinks << "\n";
      const auto backend = make_backend<cpu::Backend>(model, cpu_options(settings));
      oo.info() << "computing " << method << " scores\n";
      eval::HeadScores scores;
      if (ranking == eval::Method::proxy) {
        TransformerEvaluator<cpu::Backend> evaluator(backend, calibration, eo);
        scores = eval::proxy_scores(evaluator, static_cast<double>(calibration.samples.size()));
      } else {
        scores = eval::compute_head_scores(ranking, backend, calibration, so);
      }
      oo.info() << method << ": " << scores.seconds << " s, " << scores.evaluations << " evaluations, "
                << scores.forwards << " forward equivalents" << (scores.note.empty() ? "" : "; " + scores.note)
                << "\n";
      for (double rho : ratios) masks.push_back(eval::ranking_mask(scores, rho, quota));
      // The ranking's cost, once for all the ratios it made.
      meta["scores_seconds"] = scores.seconds;
      meta["evaluations"] = scores.evaluations;
      meta["forwards"] = scores.forwards;
      meta["note"] = scores.note;
      meta["ranking_options"] = hs.to_json();
      if (multi) meta["ranking_ratios"] = ratios;
      if (!scores_path.empty()) {
        auto j = eval::to_json(scores);
        j["model_fingerprint"] = model.fingerprint;
        j["window"] = eo.window;
        j["sinks"] = eo.sinks;
        io::write_file_atomic(scores_path, j.dump(1) + "\n");
      }
    }
    for (std::size_t i = 0; i < ratios.size(); ++i) {
      const HeadMask& mask = masks[i];
      nlohmann::json m = meta;
      m["target_ratio"] = ratios[i];
      m["ratio"] = mask.ratio();
      m["swa_heads"] = mask.count();
      m["kv_heads"] = mask.size();
      write_mask_file(outs[i], fmt, mask, m);
      if (!svgs[i].empty()) io::write_svg(svgs[i], io::head_map_svg(mask, model.config.name + " " + method));
      oo.info() << method << " at ratio " << ratios[i] << ": " << mask.count() << " of " << mask.size()
                << " KV heads SWA" << (outs[i] == "-" ? "" : ", wrote " + outs[i]) << "\n";
      if (outs[i] != "-" && oo.verbosity() != Verbosity::quiet) std::cerr << to_grid(mask);
    }

    if (report) {
      return with_backend(model, settings, [&](const auto& backend) -> int {
        ReportOptions ro;
        std::vector<ReportRow> rows;
        for (const auto& [name, m] : {std::pair<std::string, HeadMask>{"all-full", HeadMask(layout)},
                                      std::pair<std::string, HeadMask>{"all-SWA", HeadMask::filled(layout, true)}})
          rows.push_back({name, m.count(),
                          evaluate_held_out(backend, model.tokenizer, *held_out,
                                            AttentionWindows::from_mask(m, eo.window, eo.sinks), ro)});
        for (std::size_t i = 0; i < ratios.size(); ++i)
          rows.push_back({multi ? method + " " + ratio_text(ratios[i]) : method, masks[i].count(),
                          evaluate_held_out(backend, model.tokenizer, *held_out,
                                            AttentionWindows::from_mask(masks[i], eo.window, eo.sinks), ro)});
        std::ostream& os = out == "-" ? std::cerr : std::cout;
        print_report(os, rows, true);
        return exit_success;
      });
    }
    return exit_success;
  });
}

}  // namespace bosch::cli
