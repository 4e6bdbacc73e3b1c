// SPDX-License-Identifier: Apache-2.0
// Task and window options (see task_options.hpp).

#include "task_options.hpp"

#include <bosch/tasks/text.hpp>

namespace bosch::cli {

po::options_description TaskOptions::describe() {
  po::options_description d("Tasks and windows");
  d.add_options()("tasks,t", po::value(&tasks)->default_value(tasks)->value_name("LIST"),
                  "comma-separated task kinds: niah_single_1..3, niah_multikey_1..3, "
                  "niah_multivalue, niah_multiquery, passkey, copy")(
      "context,c", po::value(&context)->default_value(context)->value_name("TOKENS"),
      "tokens per task sample (prompt + answer); at most the model's trained context")(
      "allow-long-context", flag(&allow_long_context),
      ("allow a --context beyond the model's trained context (length extrapolation), up to " +
       std::to_string(max_context))
          .c_str())(
      "samples,n", po::value(&samples)->default_value(samples)->value_name("N"),
      "calibration samples per task (the search's objective)")(
      "held-out-samples", po::value(&held_out_samples)->default_value(held_out_samples)->value_name("N"),
      "held-out samples per task (reports: each figure with a 95% bootstrap interval over them; "
      "use at least 16 for published tables)")(
      "chat", flag(&chat), "wrap prompts in the ChatML template (instruct models)")(
      "task-seed", po::value(&task_seed)->default_value(task_seed)->value_name("N"),
      "seed of the task generator")(
      "window,w", po::value(&window)->default_value(window)->value_name("TOKENS"),
      "sliding window w of SWA heads (a query sees the last w keys)")(
      "sinks,s", po::value(&sinks)->default_value(sinks)->value_name("TOKENS"),
      "sink tokens at the start that SWA heads also see")(
      "text-files", po::value(&text_files)->multitoken()->value_name("FILE..."),
      "natural-text files for haystacks (default: $BOSCH_CACHE/text/*.txt)");
  return d;
}

TaskSuiteOptions TaskOptions::suite() const {
  TaskSuiteOptions s;
  s.kinds = for_option("--tasks", [&] { return parse_task_list(tasks); });
  s.context_length = context;
  s.calibration_samples = samples;
  s.held_out_samples = held_out_samples;
  s.chat = chat;
  s.seed = task_seed;
  for (const auto& f : text_files) s.text_files.emplace_back(f);
  try {
    validate(s);
  } catch (const bosch::invalid_argument& e) {
    throw bosch::invalid_argument(e.message(), option_name(e.where()));
  } catch (const bosch::file_error& e) {
    throw bosch::file_error(e.what(), "--text-files");
  }
  // Read and check the texts now (UTF-8, at least one sentence), before the
  // model loads: a binary file is refused with its byte offset, not used as
  // a haystack.
  if (!s.text_files.empty()) {
    try {
      (void)tasks::load_corpus(s.text_files);
    } catch (const bosch::error& e) {
      throw bosch::format_error(e.what(), "--text-files");
    }
  }
  if (samples > max_samples)
    throw invalid_argument("at most " + std::to_string(max_samples) + " per task, got " + std::to_string(samples),
                           "--samples");
  if (held_out_samples > max_samples)
    throw invalid_argument(
        "at most " + std::to_string(max_samples) + " per task, got " + std::to_string(held_out_samples),
        "--held-out-samples");
  return s;
}

TransformerEvaluatorOptions TaskOptions::evaluator() const {
  if (window <= 0)
    throw invalid_argument("window must be at least 1 token, got " + std::to_string(window), "--window");
  if (sinks < 0) throw invalid_argument("sinks must be at least 0, got " + std::to_string(sinks), "--sinks");
  if (static_cast<long long>(window) + sinks >= context)
    throw invalid_argument("window " + std::to_string(window) + " plus " + std::to_string(sinks) +
                               " sinks must be less than --context " + std::to_string(context) +
                               " (else an SWA head sees the whole sample, like a full head)",
                           "--window");
  TransformerEvaluatorOptions e;
  e.window = window;
  e.sinks = sinks;
  return e;
}

void TaskOptions::check_model(const model::Config& config, bool trained_limit) const {
  check_trained_context(context, config, allow_long_context || !trained_limit, "--context");
}

void check_trained_context(long long tokens, const model::Config& config, bool allow_long_context,
                           const std::string& option) {
  if (!allow_long_context && config.max_position > 0 && tokens > config.max_position)
    throw invalid_argument(std::to_string(tokens) + " tokens exceed the model's trained context of " +
                               std::to_string(config.max_position) +
                               " tokens (--allow-long-context extrapolates beyond it, up to " +
                               std::to_string(max_context) + ")",
                           option);
  if (tokens > max_context)
    throw invalid_argument("at most " + std::to_string(max_context) + " tokens, got " + std::to_string(tokens),
                           option);
}

}  // namespace bosch::cli
