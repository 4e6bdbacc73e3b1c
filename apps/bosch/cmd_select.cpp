// SPDX-License-Identifier: Apache-2.0
// bosch select: run BOSCH on a model and write the chosen mask.

#include "commands.hpp"
#include "command_line.hpp"
#include "files.hpp"
#include "held_out_report.hpp"
#include "mask_files.hpp"
#include "model_options.hpp"
#include "progress.hpp"
#include "search_options.hpp"
#include "signals.hpp"
#include "task_options.hpp"
#include "test_hooks.hpp"
#include "mpi_session.hpp"

#include <bosch/bosch.hpp>
#include <bosch/eval/report.hpp>
#include <bosch/eval/suite.hpp>
#include <bosch/io/checkpoint.hpp>
#include <bosch/io/file_lock.hpp>
#include <bosch/io/svg.hpp>

#include <csignal>
#include <filesystem>
#include <iostream>
#include <sstream>

namespace bosch::cli {

namespace {

/// What must be equal for a checkpoint to be resumed: everything the
/// evaluator's scores depend on (the checkpoint itself checks the search options).
nlohmann::json run_identity(const model::Model& m, const TransformerEvaluatorOptions& e,
                            const TaskSuiteOptions& s) {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& f : s.text_files) files.push_back(f.filename().string());
  nlohmann::json j{{"format", "bosch.select_run"},
                   {"model_fingerprint", m.fingerprint},
                   {"window", e.window},
                   {"sinks", e.sinks},
                   {"text_files", files}};
  j.update(to_json(s));
  j.erase("held_out_samples");  // not used by the search
  return j;
}

/// Refuses a resume whose run identity differs from the saved one (usage
/// error listing the differences); warns when none was saved.
void check_resume_identity(const std::string& identity_path, const nlohmann::json& identity,
                           const OutputOptions& oo) {
  if (!std::filesystem::exists(identity_path)) {
    oo.info() << "bosch select: warning: " << identity_path
              << " is missing; cannot check that the model and tasks match the checkpoint\n";
    return;
  }
  nlohmann::json saved;
  try {
    saved = nlohmann::json::parse(io::read_file(identity_path));
  } catch (const nlohmann::json::parse_error& e) {
    throw format_error(std::string("not valid JSON: ") + e.what(), identity_path);
  }
  if (saved == identity) return;
  std::string diff;
  for (auto it = identity.begin(); it != identity.end(); ++it)
    if (!saved.contains(it.key()) || saved[it.key()] != it.value())
      diff += (diff.empty() ? "" : ", ") + it.key() + " " +
              (saved.contains(it.key()) ? saved[it.key()].dump() : "-") + " -> " + it.value().dump();
  throw usage_error("--resume: the checkpoint belongs to a run with other settings (" + diff + ")");
}

/// The command that resumes this run: the same arguments, with --resume.
std::string resume_command(int argc, char** argv) {
  std::vector<std::string> args{"bosch"};
  for (const auto& a : test_hooks::strip({argv, argv + argc}))
    if (a != "--resume" && a.rfind("--resume=", 0) != 0) args.push_back(a);
  args.emplace_back("--resume");
  return shell_join(args);
}

}  // namespace

int run_select(int argc, char** argv) {
  return run_command("select", [&]() -> int {
    ModelOptions mo;
    TaskOptions to;
    OutputOptions oo;
    SearchOptions so;
    std::string out = "mask.json", format, checkpoint, log, svg;
    bool resume = false, report = false;
    std::size_t checkpoint_every = 1, progress_every = 1;

    CommandLine cl("select", "bosch select [options] --model MODEL [--ratio R] [-o OUT]",
                   "Choose which KV heads of MODEL become sliding-window (SWA) heads with BOSCH\n"
                   "(layer probes, adaptive per-layer ratios, grouped head selection), scoring\n"
                   "each candidate mask on long-context calibration tasks, and write the mask.\n"
                   "Progress goes to stderr. Ctrl-C (or SIGTERM) stops after the current\n"
                   "evaluation, writes the checkpoint and exits 130 (143); run the same command\n"
                   "with --resume to continue to the same mask as an uninterrupted run.");
    po::options_description files("Files");
    files.add_options()("out,o", po::value(&out)->default_value(out)->value_name("FILE"),
                        "mask file to write ('-' = stdout)")(
        "format", po::value(&format)->value_name("json|tsv|grid"),
        "mask format (default: by the extension of --out; json otherwise for '-')")(
        "checkpoint", po::value(&checkpoint)->value_name("FILE"),
        "checkpoint file (default OUT.checkpoint, removed after a successful run)")(
        "checkpoint-every", po::value(&checkpoint_every)->default_value(checkpoint_every)->value_name("N"),
        "write the checkpoint every N evaluations (and always when stopping); 1 = a crash, even SIGKILL, "
        "loses no finished evaluation")(
        "resume", flag(&resume), "continue from the checkpoint of an interrupted run")(
        "log", po::value(&log)->value_name("FILE"),
        "JSON-lines log, one record per evaluation (index, stage, score, swa, seconds, mask)")(
        "svg", po::value(&svg)->value_name("FILE"), "SVG head map of the chosen mask (layers x KV heads)")(
        "report", flag(&report),
        "afterwards, print held-out scores of all-full, all-SWA and the chosen mask on stdout");
    po::options_description progress("Progress");
    progress.add_options()("progress-every",
                           po::value(&progress_every)->default_value(progress_every)->value_name("N"),
                           "a progress line every N evaluations");
    cl.options.add(mo.describe()).add(to.describe()).add(so.describe()).add(files).add(oo.describe()).add(progress);
    test_hooks::add_options(cl.hidden);
    cl.options.add(mpi_session().describe());
    if (test_hooks::enabled()) cl.hidden.add(mpi_session().describe_hidden());
    cl.positional.add("model", 1);
    cl.epilog =
        "Example:\n"
        "  bosch select -m SmolLM2-135M-Instruct.Q4_1.gguf --ratio 0.5 --window 128 \\\n"
        "      --context 1024 -o mask.json --svg mask.svg --log evals.jsonl\n";
    po::variables_map vm;
    if (!cl.parse(argc, argv, vm)) return exit_success;

    // ---- check everything before the long work ----------------------------------------
    mo.validate();
    const Options options = so.resolve(vm);
    const TaskSuiteOptions suite = to.suite();
    const TransformerEvaluatorOptions eval_options = to.evaluator();
    const MaskFormat out_format =
        out == "-" && format.empty() ? MaskFormat::json : mask_format(out, format, "--format");
    test_hooks::check();
    const bool default_checkpoint = checkpoint.empty();
    if (default_checkpoint) checkpoint = (out == "-" ? std::string("bosch-select") : out) + ".checkpoint";
    check_output_path(out, "--out");
    check_output_path(checkpoint, default_checkpoint ? "--out" : "--checkpoint");
    check_output_path(log, "--log");
    check_output_path(svg, "--svg");
    to.check_model(read_model_config(mo));
    const std::string identity_path = checkpoint + ".run.json";
    // One run per checkpoint: a second one would overwrite the first's checkpoint.
    // Only rank 0 of an MPI run locks, reads and writes files (mpi_session.hpp).
    std::optional<io::FileLock> checkpoint_lock;
    if (mpi_session().root()) checkpoint_lock.emplace(checkpoint + ".lock", "checkpoint '" + checkpoint + "'");
    if (resume && mpi_session().root() && !std::filesystem::exists(checkpoint))
      throw runtime_failure("--resume: no checkpoint at '" + checkpoint +
                            "' (give the --checkpoint or --out of the interrupted run)");

    // ---- model and tasks ------------------------------------------------------------
    const model::Model model = load_model(mo, oo);
    const TaskSuite tasks = make_task_suite(suite, model.tokenizer, report);
    oo.info() << "tasks: " << tasks.calibration.samples.size() << " calibration samples ("
              << task_list_string(suite.kinds) << ") of <= " << suite.context_length << " tokens\n";
    oo.detail() << tasks.calibration.description << (tasks.calibration.description.empty() ||
                                                             tasks.calibration.description.back() == '\n'
                                                         ? ""
                                                         : "\n");

    // The run's identity beside the checkpoint: a resumed run must score masks
    // the same way (same model, windows and tasks), which the checkpoint alone
    // (search options only) cannot tell.
    const nlohmann::json identity = run_identity(model, eval_options, suite);
    if (!mpi_session().root()) {
      // Other ranks of an MPI run: rank 0 checks and writes the identity.
    } else if (resume) {
      check_resume_identity(identity_path, identity, oo);
    } else {
      io::write_file_atomic(identity_path, identity.dump(2) + "\n");
    }

    // ---- the search --------------------------------------------------------------------------
    mo.gpu = mpi_session().gpu(mo.gpu, given(vm, "gpu"));
    return with_backend(model, mo, [&](const auto& backend) -> int {
      TransformerEvaluator evaluator(backend, tasks.calibration, eval_options);
      const HeadLayout layout = evaluator.layout();
      oo.info() << "search: " << to_string(options.variant) << " variant, ratio " << options.target_ratio
                << " -> " << target_count(layout, options.target_ratio) << " of " << layout.size()
                << " KV heads, window " << eval_options.window << ", sinks " << eval_options.sinks
                << (resume ? ", resuming from " + checkpoint : std::string()) << "\n";

      EvaluationLogWriter log_cb(log, checkpoint_every);
      Result result;
      int stop_sig = 0, stop_exit = 0;
      {
        // Signals stop the search cleanly only while it runs; afterwards (held-out
        // report, writing files) they have their usual effect.
        SignalGuard guard;
        CliProgress progress_cb(oo.verbosity(), progress_every);
        Checkpoint checkpoint_cb(checkpoint, checkpoint_every,
                                 resume ? Checkpoint::resume : Checkpoint::start);
        test_hooks::Callback hooks;
        StopOnSignal stop;
        result = run_select(oo.info(), evaluator, options, progress_cb, checkpoint_cb, log_cb, hooks, stop);
        stop_sig = SignalGuard::received();
        stop_exit = SignalGuard::exit_code();
      }

      if (!mpi_session().root()) return stop_sig != 0 && result.stopped ? stop_exit : exit_success;
      if (stop_sig != 0 && result.stopped) {
        std::cerr << "bosch select: interrupted by " << (stop_sig == SIGTERM ? "SIGTERM" : "SIGINT") << " after "
                  << result.evaluations << " evaluations; checkpoint written to " << checkpoint
                  << "\nbosch select: resume with: " << resume_command(argc, argv) << "\n";
        return stop_exit;
      }

      // ---- outputs --------------------------------------------------------------------
      nlohmann::json meta = mask_metadata(model, options, result, eval_options, suite);
      std::vector<ReportRow> rows;
      if (report && !tasks.held_out.samples.empty()) {
        ReportOptions ro;
        ro.extra_new_tokens = 4;
        const HeadMask full(layout), swa = HeadMask::filled(layout, true);
        for (const auto& [name, mask] :
             {std::pair<const char*, const HeadMask*>{"all-full", &full}, {"all-SWA", &swa},
              {"BOSCH", &result.mask}}) {
          oo.info() << "held-out: scoring " << name << "\n";
          rows.push_back({name, mask->count(),
                          evaluate_held_out(backend, model.tokenizer, tasks.held_out,
                                            evaluator.windows(*mask), ro)});
        }
        meta["held_out"] = to_json(rows.back().report);
      }
      write_mask_file(out, out_format, result.mask, meta);
      if (!svg.empty()) {
        std::ostringstream title;
        title << (model.config.name.empty() ? model.source.filename().string() : model.config.name)
              << ": " << result.mask.count() << " of " << result.mask.size() << " KV heads SWA (w "
              << eval_options.window << ")";
        io::write_svg(svg, io::head_map_svg(result.mask, title.str()));
      }
      log_cb.write(result.log);
      if (default_checkpoint) {
        std::error_code ec;
        std::filesystem::remove(checkpoint, ec);
        std::filesystem::remove(identity_path, ec);
        checkpoint_lock->release(/*remove_file=*/true);
      }

      oo.info() << "SWA heads (S) per layer, layer 0 first:\n" << to_grid(result.mask);
      oo.info() << "wrote " << (out == "-" ? std::string("the mask to stdout") : out) << " ("
                << to_string(out_format) << "): " << result.mask.count() << " of "
                << result.mask.size() << " KV heads SWA, score " << result.score << " (normalized "
                << result.normalized_score << "), " << result.evaluations << " evaluations"
                << (result.replayed ? " (" + std::to_string(result.replayed) + " replayed)" : std::string())
                << "\n";
      if (!rows.empty()) {
        std::ostream& rep = out == "-" ? std::cerr : std::cout;  // stdout may hold the mask
        rep << "held-out (" << tasks.held_out.samples.size()
            << " samples): mean answer log-prob, its exponent, greedy accuracy, exact match\n";
        print_report(rep, rows, oo.verbosity() == Verbosity::verbose);
      }
      return exit_success;
    });
  });
}

}  // namespace bosch::cli
