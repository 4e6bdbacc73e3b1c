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

}  // namespace bosch::cli
