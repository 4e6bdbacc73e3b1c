// SPDX-License-Identifier: Apache-2.0
// Progress and evaluation-log callbacks (see progress.hpp).

#include "progress.hpp"

#include <bosch/io/atomic_file.hpp>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>

namespace bosch::cli {

CliProgress::CliProgress(Verbosity verbosity, std::size_t every)
    : verbosity_(verbosity), reporter_(std::cerr, every) {}

void CliProgress::begin_stage(const SearchView& v, Stage s) {
  stage_start_ = v.evaluations;
  if (verbosity_ != Verbosity::quiet) reporter_.begin_stage(v, s);
}

void CliProgress::end_stage(const SearchView& v, Stage s) {
  if (verbosity_ != Verbosity::verbose) return;
  char buf[96];
  std::string best = "-";
  if (v.best_mask) {
    std::snprintf(buf, sizeof buf, "%.6g", v.best_score);
    best = buf;
  }
  std::cerr << "bosch: end of stage " << to_string(s) << ": " << (v.evaluations - stage_start_)
            << " evaluations, " << v.evaluations << " in all, best " << best << ", "
            << bosch::detail::format_duration(v.elapsed_seconds) << " elapsed\n";
}

void CliProgress::on_evaluation(const SearchView& v, const EvaluationRecord& r) {
  if (verbosity_ == Verbosity::quiet) return;
  reporter_.on_evaluation(v, r);
  if (verbosity_ == Verbosity::verbose) std::cerr << "bosch: eval " << evaluation_json(r).dump() << "\n";
}

void CliProgress::end_search(const SearchView& v, const Result& r) {
  // A stopped search is reported by the command (how to resume), not as "done".
  if (verbosity_ != Verbosity::quiet && !r.stopped) reporter_.end_search(v, r);
}

nlohmann::json evaluation_json(const EvaluationRecord& r) {
  std::string bits(r.mask.size(), '0');
  for (std::size_t i = 0; i < r.mask.size(); ++i)
    if (r.mask[i]) bits[i] = '1';
  nlohmann::json j{{"index", r.index},
                    {"stage", to_string(r.stage)},
                    {"score", std::isfinite(r.score) ? nlohmann::json(r.score) : nlohmann::json()},
                    {"swa", r.mask.count()},
                    {"seconds", r.seconds},
                    {"mask", bits}};
  // A candidate the race stopped (--race): its score is an estimate from these samples.
  if (r.eliminated) j.update({{"eliminated", true}, {"samples", r.samples}});
  return j;
}

EvaluationLogWriter::EvaluationLogWriter(std::filesystem::path path, std::size_t every)
    : path_(std::move(path)), every_(every) {}

void EvaluationLogWriter::on_evaluation(const SearchView& v, const EvaluationRecord& r) {
  if (every_ > 0 && (r.index + 1) % every_ == 0 && v.log) write(*v.log);
}
void EvaluationLogWriter::end_search(const SearchView&, const Result& r) { write(r.log); }

void EvaluationLogWriter::write(const std::vector<EvaluationRecord>& records) const {
  if (path_.empty()) return;
  std::string text;
  for (const auto& r : records) {
    text += evaluation_json(r).dump();
    text += '\n';
  }
  io::write_file_atomic(path_, text);
}

}  // namespace bosch::cli
