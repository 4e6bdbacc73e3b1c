// SPDX-License-Identifier: Apache-2.0
// bosch evaluate MODEL --mask FILE: held-out scores of a mask.

#include "commands.hpp"
#include "files.hpp"
#include "held_out_report.hpp"
#include "mask_files.hpp"
#include "model_options.hpp"
#include "run_options.hpp"

#include <bosch/eval/report.hpp>
#include <bosch/eval/report_checkpoint.hpp>
#include <bosch/eval/suite.hpp>
#include <bosch/tasks/generate.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <optional>

namespace bosch::cli {

int run_evaluate(int argc, char** argv) {
  return run_command("evaluate", [&]() -> int {
    RunOptions run_options({SettingGroup::model, SettingGroup::tasks, SettingGroup::evaluator});
    OutputOptions oo;
    std::string mask_path, mask_fmt, checkpoint_path;
    bool json = false, references = false, no_accuracy = false;
    int extra_tokens = 4;

    CommandLine cl("evaluate", "bosch evaluate [options] MODEL --mask FILE",
                   "Score a head mask on the held-out split of the task suite: mean answer-token\n"
                   "log-probability (teacher forced), its exponent, greedy-decoding accuracy\n"
                   "(RULER string match) and exact match, overall and per task.\n"
                   "Window, sinks and the task suite default to those recorded in the mask's\n"
                   "JSON metadata (the run that selected it); options given here override them.\n"
                   "A recorded context was allowed when the mask was selected; a --context\n"
                   "given here must fit the model's trained context (or --allow-long-context).");
    po::options_description what("Evaluation");
    what.add_options()("mask", po::value(&mask_path)->value_name("FILE"),
                       "the mask (JSON, TSV or grid; '-' = stdin)")(
        "mask-format", po::value(&mask_fmt)->value_name("json|tsv|grid"),
        "format of --mask (default: by extension)")(
        "references", flag(&references), "also score the all-full and all-SWA masks")(
        "no-accuracy", flag(&no_accuracy),
        "skip greedy decoding (log-probabilities only; faster)")(
        "extra-tokens", po::value(&extra_tokens)->default_value(extra_tokens)->value_name("N"),
        "greedy budget: answer tokens + N")(
        "json", flag(&json), "print one JSON object on stdout instead of a table")(
        "checkpoint", po::value(&checkpoint_path)->value_name("FILE"),
        "keep every scored sample in FILE (JSON lines, appended as each finishes); run the same command "
        "again after an interruption (Ctrl-C, kill, even kill -9) to go on from the last sample, to the "
        "report an uninterrupted run prints");
    cl.options.add(run_options.describe()).add(what).add(oo.describe());
    cl.positional.add("model", 1);
    cl.epilog = "Example:\n  bosch evaluate SmolLM2-135M-Instruct.Q4_1.gguf --mask mask.json --references\n";
    po::variables_map vm;
    if (!cl.parse(argc, argv, vm)) return exit_success;

    // The model and device now; the tasks and windows once the mask's
    // recorded settings are in.
    const RunSettings model_settings = RunOptions({SettingGroup::model}).resolve(vm);
    if (mask_path.empty()) throw usage_error("no mask given (--mask FILE)");
    if (extra_tokens < 0)
      throw bosch::invalid_argument("must be >= 0, got " + std::to_string(extra_tokens), "--extra-tokens");
    const MaskFormat format = mask_path == "-" && mask_fmt.empty()
                                  ? MaskFormat::json
                                  : mask_format(mask_path, mask_fmt, "--mask-format");
    // The mask first (cheap), its layout checked against the model's config
    // before the weights are loaded.
    const model::Config config = read_model_config(model_settings.model);
    io::MaskFile mask_file = read_mask_file(mask_path, format, config.layout());
    const std::string mask_name = input_name(mask_path);
    const nlohmann::json& meta = mask_file.metadata;

    // Settings recorded by `bosch select` (those the calibration scores
    // depend on), unless given here. Not the search's precision: held-out
    // reports run in fp32 whatever the search ran in.
    RunSettings recorded;
    nlohmann::json keys = to_json(recorded, {FieldRole::identity});
    keys["deploy_context"] = recorded.deploy_context;  // where the mask is for: reported there
    for (auto it = keys.begin(); it != keys.end(); ++it) {
      if (it.key() == "samples" || it.key() == "text_files" || it.key() == "precision" || !meta.contains(it.key()))
        continue;
      try {
        update_from_json(recorded, nlohmann::json{{it.key(), meta[it.key()]}}, mask_name + ": metadata");
      } catch (const bosch::invalid_argument& e) {
        throw bosch::invalid_argument(e.message() + " (from the mask's metadata)", RunOptions::option_of(it.key()));
      }
    }
    RunSettings settings;
    try {
      settings = run_options.resolve(vm, recorded);
    } catch (const bosch::invalid_argument& e) {
      throw bosch::invalid_argument(e.message() + " (from the mask's metadata or the options)", e.where());
    }
    // A mask for a deployment context is reported at it, unless --context says otherwise.
    if (settings.deploy_context > 0 && !RunOptions::given(vm, "context")) settings.context = {settings.deploy_context};
    const TaskSuiteOptions suite = settings.suite();
    const TransformerEvaluatorOptions eval_options = settings.evaluator();
    check_task_files(meta, suite, mask_name);
    // A context recorded in the mask passed the trained-context check when it was selected.
    {
      RunSettings check = settings;
      check.allow_long_context = settings.allow_long_context || !RunOptions::given(vm, "context");
      try {
        RunOptions::check_model(check, config);
      } catch (const bosch::invalid_argument& e) {
        if (RunOptions::given(vm, "context")) throw;
        throw bosch::invalid_argument(e.message() + " (from the mask's metadata)", e.where());
      }
    }
    check_held_out(settings, RunOptions::namer());

    const model::Model model = load_model(settings, oo);
    if (meta.contains("model_fingerprint") && meta["model_fingerprint"].is_string() &&
        meta["model_fingerprint"] != model.fingerprint)
      oo.info() << "bosch evaluate: warning: " << mask_name << " was selected on another model file "
                << "(fingerprint " << meta["model_fingerprint"].get<std::string>() << ", this one "
                << model.fingerprint << ")\n";
    const auto held_out = tasks::generate(suite_specs(suite, tasks::Split::held_out), model.tokenizer);
    oo.info() << "tasks: " << held_out.samples.size() << " held-out samples (" << task_list_string(suite.kinds)
              << ") of <= " << settings.longest_context() << " tokens; window " << eval_options.window << ", sinks "
              << eval_options.sinks << "\n";
    oo.info() << file_task_summary(held_out);

    return with_backend(model, settings, [&](const auto& backend) -> int {
      ReportOptions ro;
      ro.accuracy = !no_accuracy;
      ro.extra_new_tokens = extra_tokens;
      const HeadLayout layout = model.config.layout();
      std::optional<ReportCheckpoint> checkpoint;
      if (!checkpoint_path.empty()) {
        checkpoint.emplace(checkpoint_path, nlohmann::json{{"model_fingerprint", model.fingerprint},
                                                           {"layout", to_string(layout)},
                                                           {"mask", to_grid(mask_file.mask)},
                                                           {"window", eval_options.window},
                                                           {"sinks", eval_options.sinks},
                                                           {"suite", to_json(suite)},
                                                           {"samples", samples_digest(held_out)},
                                                           {"accuracy", !no_accuracy},
                                                           {"extra_tokens", extra_tokens}});
        if (checkpoint->resumed() > 0)
          oo.info() << "resuming from " << checkpoint_path << ": " << checkpoint->resumed() << " samples scored\n";
      }
      std::vector<ReportRow> rows;
      auto score = [&](const std::string& name, const HeadMask& m) {
        oo.info() << "scoring " << name << "\n";
        ReportOptions row_options = ro;
        const std::size_t n = held_out.samples.size();
        std::size_t known = 0;
        if (checkpoint) {
          row_options.done = checkpoint->done(name, n);
          for (const auto& d : row_options.done) known += d.has_value();
        }
        // Progress per sample (long contexts take minutes each), and the checkpoint.
        const auto start = std::chrono::steady_clock::now();
        std::size_t run = 0;
        double printed = 0;
        row_options.on_sample = [&](std::size_t i, const SampleScore& sc) {
          if (checkpoint) checkpoint->record(name, i, sc);
          ++run;
          const double spent = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
          if (spent - printed < 10 && known + run < n) return;  // a line at most every 10 s
          printed = spent;
          const double left = spent / static_cast<double>(run) * static_cast<double>(n - known - run);
          char line[200];
          std::snprintf(line, sizeof line, "  %s: %zu/%zu samples, %.1f s each, ETA %.1f min\n", name.c_str(),
                        known + run, n, spent / static_cast<double>(run), left / 60.0);
          oo.info() << line;
        };
        rows.push_back({name, m.count(),
                        evaluate_held_out(backend, model.tokenizer, held_out,
                                          AttentionWindows::from_mask(m, eval_options.window, eval_options.sinks),
                                          row_options)});
      };
      score("mask", mask_file.mask);
      if (references) {
        score("all-full", HeadMask(layout));
        score("all-SWA", HeadMask::filled(layout, true));
      }
      if (json) {
        nlohmann::json refs = nlohmann::json::object();
        for (std::size_t i = 1; i < rows.size(); ++i) refs[rows[i].name] = to_json(rows[i].report);
        nlohmann::json j{{"mask", mask_name},
                         {"model", model.config.name},
                         {"model_fingerprint", model.fingerprint},
                         {"layout", to_string(layout)},
                         {"swa_heads", mask_file.mask.count()},
                         {"ratio", mask_file.mask.ratio()},
                         {"window", eval_options.window},
                         {"sinks", eval_options.sinks},
                         {"suite", to_json(suite)},
                         {"held_out", to_json(rows.front().report)}};
        // File tasks: how many held-out records were cut to fit the context.
        nlohmann::json cut = nlohmann::json::object();
        for (const auto& sample : held_out.samples)
          if (sample.kind == tasks::TaskKind::file) cut[sample.task] = cut.value(sample.task, 0) + (sample.cut_tokens > 0);
        if (!cut.empty()) j["cut_samples"] = cut;
        if (references) j["references"] = refs;
        std::cout << j.dump(2) << "\n";
        return exit_success;
      }
      std::cout << mask_name << ": " << mask_file.mask.count() << " of " << mask_file.mask.size()
                << " KV heads SWA; held-out (" << held_out.samples.size()
                << " samples): mean answer log-prob, its exponent, greedy accuracy, exact match\n";
      print_report(std::cout, rows, true);
      return exit_success;
    });
  });
}

}  // namespace bosch::cli
