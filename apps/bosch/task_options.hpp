// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/task_options.hpp
/// The task suite and the attention windows of the evaluator: --tasks,
/// --context, --samples, --held-out-samples, --chat, --task-seed, --window,
/// --sinks, --text-files, --allow-long-context; and the limits on their sizes.

#include "command_line.hpp"

#include <bosch/eval/suite.hpp>
#include <bosch/eval/transformer_evaluator.hpp>
#include <bosch/model/config.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace bosch::cli {

/// The longest sample (tokens) any command generates, even with
/// --allow-long-context: a typo such as --context 99999999 fails at once
/// instead of generating text for minutes.
inline constexpr int max_context = 1 << 20;
/// The most samples per task (calibration or held-out).
inline constexpr int max_samples = 10000;

/// The task suite and the windows of the evaluator.
struct TaskOptions {
  std::string tasks = "niah_single_1,niah_single_2,niah_multikey_1,passkey";
  int context = 512;
  int samples = 2;
  int held_out_samples = 16;  ///< per task; published tables use at least 16
  bool chat = false;
  std::uint64_t task_seed = 0;
  int window = 64;
  int sinks = 0;
  std::vector<std::string> text_files;
  bool allow_long_context = false;

  po::options_description describe();
  /// The suite, validated (bosch::invalid_argument naming the option: below
  /// its minimum, above max_samples, unknown task). The context's upper
  /// limits need the model: check_model.
  TaskSuiteOptions suite() const;
  /// Window and sinks, validated: window >= 1, sinks >= 0, and window + sinks
  /// < context (else an SWA head would see the whole sample, as a full head).
  TransformerEvaluatorOptions evaluator() const;
  /// Throws bosch::invalid_argument naming --context when the context is
  /// longer than the model was trained on ("... exceed the model's trained
  /// context of N tokens ...") unless allow_long_context is set or
  /// `trained_limit` is false, or longer than max_context. Positions past the
  /// trained context are an extrapolation (RoPE angles the model never saw),
  /// which length experiments do on purpose but a typo should not.
  void check_model(const model::Config& config, bool trained_limit = true) const;
};

/// The checks of TaskOptions::check_model for `tokens` positions, naming
/// `option`; also for commands whose length is not a --context.
void check_trained_context(long long tokens, const model::Config& config, bool allow_long_context,
                           const std::string& option);

}  // namespace bosch::cli
