// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/progress.hpp
/// select() callbacks of the command line: progress on stderr by verbosity,
/// and the --log file of evaluations.

#include "output_options.hpp"

#include <bosch/callbacks.hpp>
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

/// One JSON object per evaluation, as written to --log files:
/// {"index", "stage", "score", "swa", "seconds", "mask"} ("mask" = layer-major
/// bits, '1' = SWA), plus "eliminated": true and "samples" for a candidate the
/// race stopped (Options::race; its score is then an estimate).
nlohmann::json evaluation_json(const EvaluationRecord& r);

/// Writes the evaluation log as JSON lines (one evaluation_json() per line)
/// to `path`, atomically, every `every` evaluations and at the end of the
/// search (the whole log each time, so an interrupted run leaves a complete
/// file up to its last write; a resumed run rewrites it with the replayed
/// records first). An empty path writes nothing (no --log).
class EvaluationLogWriter {
 public:
  explicit EvaluationLogWriter(std::filesystem::path path, std::size_t every = 10);
  void on_evaluation(const SearchView& v, const EvaluationRecord& r);
  void end_search(const SearchView& v, const Result& r);
  /// Writes the log of `records` now.
  void write(const std::vector<EvaluationRecord>& records) const;

 private:
  std::filesystem::path path_;
  std::size_t every_;
};

}  // namespace bosch::cli
