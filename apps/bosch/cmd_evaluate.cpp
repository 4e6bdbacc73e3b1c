// SPDX-License-Identifier: Apache-2.0
// bosch evaluate MODEL --mask FILE: held-out scores of a mask.

#include "commands.hpp"
#include "files.hpp"
#include "held_out_report.hpp"
#include "mask_files.hpp"
#include "model_options.hpp"
#include "task_options.hpp"

#include <bosch/eval/report.hpp>
#include <bosch/eval/suite.hpp>
#include <bosch/tasks/generate.hpp>

#include <iostream>

namespace bosch::cli {

int run_evaluate(int argc, char** argv) {
  return run_command("evaluate", [&]() -> int {
    ModelOptions mo;
    TaskOptions to;
    OutputOptions oo;
    std::string mask_path, mask_fmt;
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
        "json", flag(&json), "print one JSON object on stdout instead of a table");
    cl.options.add(mo.describe()).add(to.describe()).add(what).add(oo.describe());
    cl.positional.add("model", 1);
    cl.epilog = "Example:\n  bosch evaluate SmolLM2-135M-Instruct.Q4_1.gguf --mask mask.json --references\n";
    po::variables_map vm;
    if (!cl.parse(argc, argv, vm)) return exit_success;

    mo.validate();
    if (mask_path.empty()) throw usage_error("no mask given (--mask FILE)");
    if (extra_tokens < 0)
      throw bosch::invalid_argument("must be >= 0, got " + std::to_string(extra_tokens), "--extra-tokens");
    const MaskFormat format = mask_path == "-" && mask_fmt.empty()
                                  ? MaskFormat::json
                                  : mask_format(mask_path, mask_fmt, "--mask-format");
    // Check the option values now (usage errors before any file is read);
    // window and sinks against the context once the mask's settings are in.
    (void)to.suite();

    // The mask first (cheap), its layout checked against the model's config
    // before the weights are loaded.
    const model::Config config = read_model_config(mo);
    io::MaskFile mask_file = read_mask_file(mask_path, format, config.layout());
    const std::string mask_name = input_name(mask_path);
    const nlohmann::json& meta = mask_file.metadata;

    // Settings recorded by `bosch select`, unless given here.
    auto from_meta = [&](const char* option, const char* key, auto& field) {
      if (given(vm, option) || !meta.contains(key) || meta[key].is_null()) return;
      try {
        field = meta[key].get<std::remove_reference_t<decltype(field)>>();
      } catch (const nlohmann::json::exception&) {
        throw format_error("wrongly typed value " + meta[key].dump(), mask_name + ": metadata." + key);
      }
    };
    from_meta("window", "window", to.window);
    from_meta("sinks", "sinks", to.sinks);
    from_meta("tasks", "tasks", to.tasks);
    from_meta("context", "context", to.context);
    from_meta("task-seed", "task_seed", to.task_seed);
    if (!given(vm, "chat") && meta.contains("chat") && meta["chat"].is_boolean()) to.chat = meta["chat"].get<bool>();
    TaskSuiteOptions suite;
    TransformerEvaluatorOptions eval_options;
    try {
      suite = to.suite();
      eval_options = to.evaluator();
    } catch (const bosch::invalid_argument& e) {
      throw bosch::invalid_argument(e.message() + " (from the mask's metadata or the options)", e.where());
    }
    // A context recorded in the mask passed the trained-context check when it was selected.
    try {
      to.check_model(config, given(vm, "context"));
    } catch (const bosch::invalid_argument& e) {
      if (given(vm, "context")) throw;
      throw bosch::invalid_argument(e.message() + " (from the mask's metadata)", e.where());
    }
    if (suite.held_out_samples < 1) throw bosch::invalid_argument("must be at least 1 to evaluate", "--held-out-samples");

    const model::Model model = load_model(mo, oo);
    if (meta.contains("model_fingerprint") && meta["model_fingerprint"].is_string() &&
        meta["model_fingerprint"] != model.fingerprint)
      oo.info() << "bosch evaluate: warning: " << mask_name << " was selected on another model file "
                << "(fingerprint " << meta["model_fingerprint"].get<std::string>() << ", this one "
                << model.fingerprint << ")\n";
    const auto held_out = tasks::generate(suite_specs(suite, tasks::Split::held_out), model.tokenizer);
    oo.info() << "tasks: " << held_out.samples.size() << " held-out samples (" << task_list_string(suite.kinds)
              << ") of <= " << suite.context_length << " tokens; window " << eval_options.window << ", sinks "
              << eval_options.sinks << "\n";

    return with_backend(model, mo, [&](const auto& backend) -> int {
      ReportOptions ro;
      ro.accuracy = !no_accuracy;
      ro.extra_new_tokens = extra_tokens;
      const HeadLayout layout = model.config.layout();
      std::vector<ReportRow> rows;
      auto score = [&](const std::string& name, const HeadMask& m) {
        oo.info() << "scoring " << name << "\n";
        rows.push_back({name, m.count(),
                        evaluate_held_out(backend, model.tokenizer, held_out,
                                          AttentionWindows::from_mask(m, eval_options.window, eval_options.sinks),
                                          ro)});
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
