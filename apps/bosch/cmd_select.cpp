// SPDX-License-Identifier: Apache-2.0
// bosch select: run BOSCH on a model and write the chosen mask.

#include "commands.hpp"
#include "command_line.hpp"
#include "files.hpp"
#include "held_out_report.hpp"
#include "mask_files.hpp"
#include "model_options.hpp"
#include "mpi_session.hpp"
#include "progress.hpp"
#include "ratio_runs.hpp"
#include "run_options.hpp"
#include "search_options.hpp"
#include "signals.hpp"
#include "test_hooks.hpp"
#include "warm_start_options.hpp"

#include <bosch/bosch.hpp>
#include <bosch/margin.hpp>
#include <bosch/eval/report.hpp>
#include <bosch/io/checkpoint.hpp>
#include <bosch/io/file_lock.hpp>
#include <bosch/io/mask_io.hpp>
#include <bosch/io/svg.hpp>
#include <bosch/run/selection.hpp>

#include <algorithm>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <sstream>

namespace bosch::cli {

namespace {

/// The command that resumes this run: the same arguments, with --resume.
std::string resume_command(int argc, char** argv) {
  std::vector<std::string> args{"bosch"};
  for (const auto& a : test_hooks::strip({argv, argv + argc}))
    if (a != "--resume" && a.rfind("--resume=", 0) != 0) args.push_back(a);
  args.emplace_back("--resume");
  return shell_join(args);
}

/// 1234567 -> "1.23M": a token count at a glance.
std::string compact_count(double n) {
  char s[32];
  if (n >= 1e9) std::snprintf(s, sizeof s, "%.3gG", n / 1e9);
  else if (n >= 1e6) std::snprintf(s, sizeof s, "%.3gM", n / 1e6);
  else if (n >= 1e3) std::snprintf(s, sizeof s, "%.3gk", n / 1e3);
  else std::snprintf(s, sizeof s, "%.0f", n);
  return s;
}

}  // namespace

int run_select(int argc, char** argv) {
  return run_command("select", [&]() -> int {
    RunOptions ro({SettingGroup::model, SettingGroup::tasks, SettingGroup::evaluator});
    OutputOptions oo;
    SearchOptions so;
    WarmStartOptions wo;
    std::string out = "mask.json", format, checkpoint, log, svg, ratios_text;
    bool resume = false, fresh = false, report = false;
    std::size_t checkpoint_every = 1, progress_every = 1;

    CommandLine cl("select", "bosch select [options] --model MODEL [--ratio R | --ratios LIST] [-o OUT]",
                   "Choose which KV heads of MODEL become sliding-window (SWA) heads with BOSCH\n"
                   "(layer probes, adaptive per-layer ratios, grouped head selection), scoring\n"
                   "each candidate mask on long-context calibration tasks, and write the mask.\n"
                   "The search may also start from given masks (--init) and cheap built-in\n"
                   "rankings (--candidates). --ratios runs several ratios in order, each also\n"
                   "starting from its neighbour's mask, and writes one mask per ratio.\n"
                   "Progress goes to stderr. Ctrl-C (or SIGTERM) stops after the current\n"
                   "evaluation, writes the checkpoint and exits 130 (143); run the same command\n"
                   "with --resume to continue to the same mask as an uninterrupted run.");
    po::options_description files("Files");
    files.add_options()("out,o", po::value(&out)->default_value(out)->value_name("FILE"),
                        "mask file to write ('-' = stdout); with --ratios one file per ratio, named with "
                        "-RATIO before the extension (mask.json -> mask-0.25.json)")(
        "format", po::value(&format)->value_name("json|tsv|grid"),
        "mask format (default: by the extension of --out; json otherwise for '-')")(
        "checkpoint", po::value(&checkpoint)->value_name("FILE"),
        "checkpoint file (default OUT.checkpoint, removed after a successful run; with --ratios one per "
        "ratio, named like the masks)")(
        "checkpoint-every", po::value(&checkpoint_every)->default_value(checkpoint_every)->value_name("N"),
        "write the checkpoint every N evaluations (and always when stopping); 1 = a crash, even SIGKILL, "
        "loses no finished evaluation")(
        "resume", flag(&resume), "continue from the checkpoint(s) of an interrupted run")(
        "fresh", flag(&fresh),
        "discard the checkpoint(s) of an earlier run and start over (without --resume or --fresh, an existing "
        "checkpoint is an error)")(
        "log", po::value(&log)->value_name("FILE"),
        "JSON-lines log, one record per evaluation (index, stage, score, swa, seconds, mask)")(
        "svg", po::value(&svg)->value_name("FILE"), "SVG head map of the chosen mask (layers x KV heads)")(
        "report", flag(&report),
        "afterwards, print held-out scores (with 95% bootstrap intervals) of all-full, all-SWA and the "
        "chosen mask on stdout");
    po::options_description several("Several ratios");
    several.add_options()("ratios", po::value(&ratios_text)->value_name("LIST"),
                          "select at each of these SWA ratios (instead of --ratio), in --ratio-order, one mask "
                          "file per ratio; prints the head-set turnover between consecutive ratios");
    po::options_description progress("Progress");
    progress.add_options()("progress-every",
                           po::value(&progress_every)->default_value(progress_every)->value_name("N"),
                           "a progress line every N evaluations");
    cl.options.add(ro.describe()).add(so.describe()).add(several)
        .add(wo.describe(true, " (with --ratios)")).add(files).add(oo.describe()).add(progress);
    test_hooks::add_options(cl.hidden);
    cl.options.add(mpi_session().describe());
    if (test_hooks::enabled()) cl.hidden.add(mpi_session().describe_hidden());
    cl.positional.add("model", 1);
    cl.epilog =
        "Examples:\n"
        "  bosch select -m SmolLM2-135M-Instruct.Q4_1.gguf --ratio 0.5 --window 128 \\\n"
        "      --context 1024 -o mask.json --svg mask.svg --log evals.jsonl\n"
        "  bosch select -m SmolLM2-135M-Instruct.Q4_1.gguf --ratios 0.25,0.5,0.75 --candidates cheap \\\n"
        "      --init my-mask.json -o mask.json     # mask-0.25.json, mask-0.5.json, mask-0.75.json\n";
    po::variables_map vm;
    if (!cl.parse(argc, argv, vm)) return exit_success;

    // ---- check everything before the long work ----------------------------------------
    RunSettings settings = ro.resolve(vm);
    if (report) check_held_out(settings, RunOptions::namer());
    if (RunOptions::given(vm, "deploy_context"))
      oo.info() << "calibration contexts " << context_list_string(settings.context) << ": the recipe for a mask "
                << "deployed at " << settings.deploy_context << " tokens with window " << settings.window
                << " (docs/results/long-smollm2)\n";
    const Options options = so.resolve(vm);
    const MaskFormat out_format =
        out == "-" && format.empty() ? MaskFormat::json : mask_format(out, format, "--format");
    test_hooks::check();
    if (resume && fresh) throw usage_error("--resume and --fresh exclude each other");
    const bool multi = given(vm, "ratios");
    std::vector<double> ratios = requested_ratios(vm, options.target_ratio, ratios_text, out);
    const eval::RatioOrder order = wo.resolved_order();
    if (order == eval::RatioOrder::descending) std::reverse(ratios.begin(), ratios.end());
    const std::vector<eval::Method> candidates = wo.resolved_candidates();

    std::vector<InputPath> inputs = run_inputs(cl.config_file(), settings);
    for (const auto& f : wo.init_files) inputs.push_back({"--init", f});
    std::vector<RatioFiles> runs = ratio_files(ratios, multi, out, checkpoint, log, svg, inputs);
    const model::Config config = read_model_config(settings.model);
    for (double rho : ratios) (void)checked_target_count(config.layout(), rho, multi ? "--ratios" : "--ratio");
    RunOptions::check_model(settings, config);
    // The user's masks, checked against the model's layout before it is loaded.
    const std::vector<WarmStart> init = wo.read_init(config.layout());
    // One run per checkpoint: a second one would overwrite the first's checkpoint.
    // Only rank 0 of an MPI run locks, reads and writes files (mpi_session.hpp).
    if (mpi_session().root()) {
      for (auto& f : runs)
        f.lock = std::make_unique<io::FileLock>(f.checkpoint + ".lock", "checkpoint '" + f.checkpoint + "'");
      if (!resume) {
        // A checkpoint left by an earlier run is never overwritten silently.
        for (auto& f : runs)
          refuse_or_discard_checkpoint(f.checkpoint, fresh,
                                        "pass --resume to continue it (a finished run replays to its mask at no "
                                        "evaluation) or --fresh to discard it and start over",
                                        {}, {f.identity});
      }
      if (resume) {
        bool any = false;
        for (auto& f : runs) any = any || (f.resume = std::filesystem::exists(f.checkpoint));
        if (!any || (!multi && !runs.front().resume))
          throw runtime_failure("--resume: no checkpoint at '" + runs.front().checkpoint +
                                "' (give the --checkpoint or --out of the interrupted run)");
      }
    }

    // ---- model and tasks ------------------------------------------------------------
    settings.gpu = mpi_session().gpu(settings.gpu, RunOptions::given(vm, "gpu"));
    ModelRun run = make_model_run(settings, oo);
    oo.detail() << run.calibration().description
                << (run.calibration().description.empty() || run.calibration().description.back() == '\n' ? ""
                                                                                                          : "\n");
    // The held-out samples of --report are built now: one that cannot be
    // built fails before the search, not after it.
    if (report) {
      oo.detail() << "held-out: " << run.held_out().samples.size() << " samples\n";
      oo.info() << file_task_summary(run.held_out());  // file tasks: how many records were cut
    }
    const HeadLayout layout = run.layout();
    MpiExecutor executor(oo.info());
    const InfoSink info = [&oo](const std::string& line) { oo.info() << line; };
    nlohmann::json ratio_run;
    if (multi) {
      nlohmann::json list = nlohmann::json::array();
      for (const auto& f : runs) list.push_back(f.rho);
      ratio_run = {{"ratios", list}, {"order", wo.ratio_order}, {"warm_start", wo.warm_start}};
    }

    // ---- the searches ------------------------------------------------------------------
    std::vector<ReportRow> references;
    std::vector<std::pair<double, Result>> done;  // in run order
    done.reserve(runs.size());                     // `previous` points into it
    const HeadMask* previous = nullptr;
    double previous_ratio = 0;
    for (auto& f : runs) {
      SelectionRequest request;
      request.options = options;
      request.options.target_ratio = f.rho;
      request.init = init;
      request.candidates = candidates;
      const bool from_previous = multi && wo.warm_start && previous != nullptr;
      if (from_previous) {
        request.previous = previous;
        request.previous_ratio = previous_ratio;
      }
      request.checkpoint = f.checkpoint;
      request.checkpoint_every = checkpoint_every;
      request.resume = f.resume;
      if (multi) request.identity_extra["ratio_run"] = ratio_run;
      request.log = f.log;
      request.log_every = checkpoint_every;

      Selection selection;
      int stop_sig = 0, stop_exit = 0;
      {
        // Signals stop the search cleanly only while it runs; afterwards (held-out
        // report, writing files) they have their usual effect.
        SignalGuard guard;
        CliProgress progress_cb(oo.verbosity(), progress_every);
        test_hooks::Callback hooks;
        StopOnSignal stop;
        CallbackList callbacks;
        callbacks.add(progress_cb).add(hooks).add(stop);
        try {
          selection = select_heads(run, request, callbacks, &executor, info);
        } catch (const bosch::invalid_argument& e) {
          if (e.where() == "resume") throw usage_error("--resume: " + e.message());
          throw;
        }
        stop_sig = SignalGuard::received();
        stop_exit = SignalGuard::exit_code();
      }
      Result& result = selection.result;
      if (!mpi_session().root()) {
        // Other ranks: the same result as rank 0, which writes the outputs.
        if (stop_sig != 0 && result.stopped) return stop_exit;
        done.emplace_back(f.rho, std::move(result));
        previous = &done.back().second.mask;
        previous_ratio = f.rho;
        continue;
      }
      if (stop_sig != 0 && result.stopped) {
        std::cerr << "bosch select: interrupted by " << SignalGuard::name() << " after "
                  << result.evaluations << " evaluations" << (multi ? " at ratio " + ratio_text(f.rho) : "")
                  << "; checkpoint written to " << f.checkpoint
                  << "\nbosch select: resume with: " << resume_command(argc, argv) << "\n";
        return stop_exit;
      }

      // ---- outputs of this ratio --------------------------------------------------------
      nlohmann::json& meta = selection.metadata;
      if (multi) {
        meta["ratio_run"] = ratio_run;
        meta["ratio_run"]["order"] = order == eval::RatioOrder::ascending ? "up" : "down";
        if (previous != nullptr) {
          const bool up = previous_ratio < f.rho;
          const HeadMask& lo = up ? *previous : result.mask;
          const HeadMask& hi = up ? result.mask : *previous;
          meta["ratio_run"]["previous_ratio"] = previous_ratio;
          meta["ratio_run"]["turnover_from_previous"] = turnover(lo, hi);
          meta["ratio_run"]["jaccard_from_previous"] = jaccard_distance(lo, hi);
        }
      }
      std::vector<ReportRow> rows;
      if (report) {
        ReportOptions rep;
        rep.extra_new_tokens = 4;
        auto score = [&](const char* name, const HeadMask& mask) {
          oo.info() << "held-out: scoring " << name << "\n";
          return ReportRow{name, mask.count(), run.held_out_report(mask, rep)};
        };
        if (references.empty()) {
          references.push_back(score("all-full", HeadMask(layout)));
          references.push_back(score("all-SWA", HeadMask::filled(layout, true)));
        }
        rows = references;
        rows.push_back(score("BOSCH", result.mask));
        meta["held_out"] = to_json(rows.back().report, false);
      }
      try {
        write_mask_file(f.out, out_format, result.mask, meta);
      } catch (const error&) {
        // The search is not lost: its checkpoint stays (finish_files is not reached).
        std::cerr << "bosch select: the search is kept in '" << f.checkpoint
                  << "': to write its mask elsewhere, run the same command with --resume --checkpoint "
                  << f.checkpoint << " and another --out\n";
        throw;
      }
      if (!f.svg.empty()) {
        std::ostringstream title;
        const model::Model& model = run.model();
        title << (model.config.name.empty() ? model.source.filename().string() : model.config.name) << ": "
              << result.mask.count() << " of " << result.mask.size() << " KV heads SWA (w " << settings.window
              << ")";
        io::write_svg(f.svg, io::head_map_svg(result.mask, title.str()));
      }

      oo.info() << "SWA heads (S) per layer, layer 0 first:\n" << to_grid(result.mask);
      oo.info() << "wrote " << (f.out == "-" ? std::string("the mask to stdout") : f.out) << " ("
                << to_string(out_format) << "): " << result.mask.count() << " of " << result.mask.size()
                << " KV heads SWA, score " << result.score << " (normalized " << result.normalized_score << "), "
                << result.evaluations << " evaluations"
                << (result.eliminated ? " (+ " + std::to_string(result.eliminated) + " on part of the samples)" : std::string())
                << (result.replayed ? " (" + std::to_string(result.replayed) + " replayed)" : std::string())
                << ", " << selection.forwards << " sample forwards"
                << (std::isfinite(selection.forward_tokens)
                        ? " (" + compact_count(selection.forward_tokens) + " tokens)"
                        : std::string())
                << ", " << result.seconds << " s\n";
      oo.info() << to_string(choice_margin(result));
      if (!rows.empty()) {
        std::ostream& rep = f.out == "-" ? std::cerr : std::cout;  // stdout may hold the mask
        rep << "held-out (" << run.held_out().samples.size() << " samples"
            << (multi ? ", ratio " + ratio_text(f.rho) : std::string())
            << "): mean answer log-prob, its exponent, greedy accuracy, exact match\n";
        print_report(rep, rows, oo.verbosity() == Verbosity::verbose);
      }
      if (settings.deploy_context > 0 && f.out != "-")
        oo.info() << "the mask is for " << settings.deploy_context << " tokens; hold it there (held-out, "
                  << settings.held_out_samples << " samples per task, per-sample checkpoint and ETA):\n  bosch evaluate "
                  << shell_join({settings.model, "--mask", f.out, "--references", "--checkpoint",
                                 f.out + ".evaluate-checkpoint"})
                  << "\n";
      done.emplace_back(f.rho, std::move(result));
      previous = &done.back().second.mask;
      previous_ratio = f.rho;
      // A single run's files go now; several ratios keep theirs until the
      // last one is done (a resume replays the finished ones to get the
      // neighbours' masks back, at no evaluation).
      if (!multi) finish_files(f);
    }

    if (!mpi_session().root()) return exit_success;
    if (multi) {
      std::vector<std::pair<double, const Result*>> results;
      for (const auto& [rho, r] : done) results.emplace_back(rho, &r);
      print_ratio_summary(std::cout, results, order == eval::RatioOrder::ascending ? "up" : "down", wo.warm_start);
      for (auto& f : runs) finish_files(f);
    }
    return exit_success;
  });
}

}  // namespace bosch::cli
