// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/progress.hpp
/// select() callbacks of the command line: progress on stderr by verbosity
/// (the --log file of evaluations is io/evaluation_log.hpp's).

#include "output_options.hpp"

#include <bosch/callbacks.hpp>
#include <bosch/io/evaluation_log.hpp>
#include <bosch/options.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <filesystem>
#include <vector>

namespace bosch::cli {

/// Progress on stderr by verbosity: nothing when quiet; ProgressReporter lines
/// (stage, evaluations, best score, ETA) at normal level, every `every`
/// evaluations; at verbose level also a summary at the end of each stage and
/// one line per evaluation (index, stage, score, SWA count, seconds).
class CliProgress {
 public:
  CliProgress(Verbosity verbosity, std::size_t every = 1);
  void begin_stage(const SearchView& v, Stage s);
  void end_stage(const SearchView& v, Stage s);
  void on_evaluation(const SearchView& v, const EvaluationRecord& r);
  void end_search(const SearchView& v, const Result& r);

 private:
  Verbosity verbosity_;
  ProgressReporter reporter_;
  std::size_t stage_start_ = 0;
};

using bosch::EvaluationLogWriter;  // io/evaluation_log.hpp

}  // namespace bosch::cli
