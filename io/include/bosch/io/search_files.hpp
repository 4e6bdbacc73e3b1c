// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file io/search_files.hpp
/// The files a search keeps on its way, set up in one place for the `bosch`
/// program (run/selection.hpp) and the Python package (bosch.select): a
/// checkpoint (bosch::Checkpoint) and a JSON-lines evaluation log
/// (bosch::EvaluationLogWriter), each optional, and a copy of the log while
/// a checkpoint is kept, so that a search that throws can still save every
/// evaluation it finished.
///
/// @code
/// bosch::io::SearchFilePaths paths;
/// paths.checkpoint = "run.ckpt";
/// paths.log = "run.jsonl";
/// bosch::io::SearchFiles files(paths);
/// try {
///   result = bosch::select(evaluator, options, files);
/// } catch (...) {
///   files.save_after_error(layout, options);  // then report the search's error
///   throw;
/// }
/// @endcode

#include <bosch/io/checkpoint.hpp>
#include <bosch/io/evaluation_log.hpp>

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace bosch::io {

/// Where a search's files go; an empty path keeps no such file.
struct SearchFilePaths {
  std::string checkpoint;            ///< checkpoint file
  std::size_t checkpoint_every = 1;  ///< write it after every n-th evaluation (0 = only at the end)
  bool resume = false;               ///< replay `checkpoint` (which must exist) before searching
  std::string log;                   ///< JSON-lines evaluation log
  std::size_t log_every = 1;         ///< write it after every n-th evaluation (0 = only at the end)
};

/// A select() callback that keeps the files of SearchFilePaths.
class SearchFiles {
 public:
  explicit SearchFiles(const SearchFilePaths& paths) {
    if (!paths.checkpoint.empty())
      checkpoint_.emplace(paths.checkpoint, paths.checkpoint_every,
                          paths.resume ? Checkpoint::resume : Checkpoint::start);
    if (!paths.log.empty()) log_.emplace(paths.log, paths.log_every);
  }

  std::vector<EvaluationRecord> replay_log(const SearchView& v) {
    if (!checkpoint_) return {};
    std::vector<EvaluationRecord> log = checkpoint_->replay_log(v);
    resumed_from_ = log.size();
    return log;
  }
  void on_evaluation(const SearchView& v, const EvaluationRecord& r) {
    if (checkpoint_) {
      checkpoint_->on_evaluation(v, r);
      copy_.push_back(r);
    }
    if (log_) log_->on_evaluation(v, r);
  }
  void end_search(const SearchView& v, const Result& r) {
    if (checkpoint_) checkpoint_->end_search(v, r);
    if (log_) log_->end_search(v, r);
  }

  /// After the search threw: writes the checkpoint with every evaluation it
  /// finished (none when no checkpoint is kept, none was finished, or the
  /// search failed while replaying a file that holds more). Never throws: the
  /// search's own error is the one to report. Returns whether it wrote.
  bool save_after_error(const HeadLayout& layout, const Options& options) noexcept {
    if (!checkpoint_ || copy_.empty() || copy_.size() < resumed_from_) return false;
    try {
      write_checkpoint(checkpoint_->path(), layout, options, copy_, false);
      return true;
    } catch (...) {
      return false;
    }
  }

 private:
  std::optional<Checkpoint> checkpoint_;
  std::optional<EvaluationLogWriter> log_;
  std::vector<EvaluationRecord> copy_;  // the log so far, while a checkpoint is kept
  std::size_t resumed_from_ = 0;        // evaluations in the checkpoint resumed from
};

}  // namespace bosch::io
