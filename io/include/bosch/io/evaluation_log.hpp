// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file io/evaluation_log.hpp
/// The evaluation log of a search as JSON lines (`bosch select --log`,
/// `bosch.select(..., log=PATH)`): one object per evaluation,
///
///     {"index", "stage", "score", "swa", "seconds", "mask"}
///
/// ("mask" = layer-major bits, '1' = SWA; a NaN score is null), plus
/// "eliminated": true and "samples" for a candidate the race stopped
/// (Options::race; its score is then an estimate, docs/algorithm.md §Racing).

#include <bosch/callbacks.hpp>
#include <bosch/io/atomic_file.hpp>
#include <bosch/options.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstddef>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace bosch {

/// One evaluation as a log line's object.
inline nlohmann::json evaluation_json(const EvaluationRecord& r) {
  std::string bits(r.mask.size(), '0');
  for (std::size_t i = 0; i < r.mask.size(); ++i)
    if (r.mask[i]) bits[i] = '1';
  nlohmann::json j{{"index", r.index},
                    {"stage", to_string(r.stage)},
                    {"score", std::isfinite(r.score) ? nlohmann::json(r.score) : nlohmann::json()},
                    {"swa", r.mask.count()},
                    {"seconds", r.seconds},
                    {"mask", bits}};
  // A candidate the race stopped (Options::race): its score is an estimate
  // from these samples.
  if (r.eliminated) j.update({{"eliminated", true}, {"samples", r.samples}});
  return j;
}

/// A select() callback that writes the evaluation log to `path`, atomically,
/// every `every` evaluations and at the end of the search (the whole log each
/// time, so an interrupted run leaves a complete file up to its last write; a
/// resumed run rewrites it with the replayed records first). An empty path
/// writes nothing.
class EvaluationLogWriter {
 public:
  explicit EvaluationLogWriter(std::filesystem::path path, std::size_t every = 10)
      : path_(std::move(path)), every_(every) {}
  void on_evaluation(const SearchView& v, const EvaluationRecord& r) {
    if (every_ > 0 && (r.index + 1) % every_ == 0 && v.log) write(*v.log);
  }
  void end_search(const SearchView&, const Result& r) { write(r.log); }
  /// Writes the log of `records` now.
  void write(const std::vector<EvaluationRecord>& records) const {
    if (path_.empty()) return;
    std::string text;
    for (const auto& r : records) {
      text += evaluation_json(r).dump();
      text += '\n';
    }
    io::write_file_atomic(path_, text);
  }

 private:
  std::filesystem::path path_;
  std::size_t every_;
};

}  // namespace bosch
