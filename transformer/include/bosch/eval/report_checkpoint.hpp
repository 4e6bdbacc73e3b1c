// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file eval/report_checkpoint.hpp
/// A per-sample checkpoint of a held-out report (`bosch evaluate
/// --checkpoint FILE`): at long contexts one sample takes minutes, so every
/// scored sample is kept and a stopped evaluation (SIGINT, SIGTERM, kill -9)
/// resumes after the last one, to the report an uninterrupted run prints.
///
/// The file is JSON lines: the first is the evaluation's identity (model
/// fingerprint, mask, windows, task suite, a digest of the held-out tokens,
/// the greedy settings), each further one a scored sample {"row": "mask" |
/// "all-full" | "all-SWA", "sample": i, "task", "logprob", "accuracy",
/// "exact", "match"}. Lines are appended and flushed one at a time, so a
/// killed process loses at most the sample under way; a torn last line is
/// dropped when the file is read. Doubles are written as JSON numbers that
/// read back bitwise. One process holds the file at a time (PATH.lock).

#include <bosch/eval/report.hpp>
#include <bosch/io/file_lock.hpp>
#include <bosch/tasks/task.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace bosch {

/// SHA-256 (hex) of the samples' prompt and answer token ids and tasks: what
/// a checkpoint's identity records of the held-out set.
std::string samples_digest(const tasks::TaskSet& set);

class ReportCheckpoint {
 public:
  /// Opens (or creates) `path` for the evaluation `identity` (a JSON
  /// object). An existing file must start with the same identity:
  /// bosch::invalid_argument (where = the path) naming the first key that
  /// differs otherwise. bosch::format_error for a file that is not a
  /// checkpoint, bosch::file_error when another process holds it.
  ReportCheckpoint(std::filesystem::path path, nlohmann::json identity);

  /// The scores of row `row` known so far, by sample index (size `samples`).
  std::vector<std::optional<SampleScore>> done(const std::string& row, std::size_t samples) const;
  /// How many scored samples the file held when it was opened.
  std::size_t resumed() const noexcept { return resumed_; }
  /// Appends one scored sample and flushes it.
  void record(const std::string& row, std::size_t sample, const SampleScore& score);

  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
  io::FileLock lock_;
  std::map<std::pair<std::string, std::size_t>, SampleScore> scores_;
  std::size_t resumed_ = 0;
};

}  // namespace bosch
