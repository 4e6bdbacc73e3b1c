// SPDX-License-Identifier: Apache-2.0
// Held-out report printing (see held_out_report.hpp).

#include "held_out_report.hpp"

#include <cmath>
#include <cstdio>

namespace bosch::cli {

std::string value_ci(const char* f, double v, const eval::Interval& ci) {
  if (!std::isfinite(v)) return "-";
  char buf[96];
  std::string s;
  std::snprintf(buf, sizeof buf, f, v);
  s = buf;
  if (ci.valid()) {
    s += " [";
    std::snprintf(buf, sizeof buf, f, ci.low);
    s += buf;
    s += ", ";
    std::snprintf(buf, sizeof buf, f, ci.high);
    s += buf;
    s += "]";
  }
  return s;
}

void print_report(std::ostream& out, const std::vector<ReportRow>& rows, bool per_task,
                  const eval::BootstrapOptions& bootstrap) {
  char buf[400];
  // File tasks add a column: the normalized exact match of the answer.
  bool match = false;
  for (const auto& r : rows) match = match || std::isfinite(r.report.all.match);
  auto line = [&](const std::string& name, std::size_t heads, const TaskScore& t) {
    std::snprintf(buf, sizeof buf, "  %-18s %5zu %7d  %-27s %7.4f  %-21s %-21s", name.c_str(), heads, t.samples,
                  value_ci("%.4f", t.mean_logprob, t.logprob_ci).c_str(), t.probability,
                  value_ci("%.3f", t.accuracy, t.accuracy_ci).c_str(), value_ci("%.3f", t.exact, t.exact_ci).c_str());
    out << buf;
    if (match) out << " " << value_ci("%.3f", t.match, t.match_ci);
    out << "\n";
  };
  std::snprintf(buf, sizeof buf, "  %-18s %5s %7s  %-27s %7s  %-21s %-21s", "mask", "SWA", "samples",
                "log-prob [95% CI]", "prob", "accuracy [95% CI]", "exact [95% CI]");
  out << buf << (match ? " match [95% CI]" : "") << "\n";
  for (const auto& r : rows) line(r.name, r.swa_heads, r.report.all);
  if (per_task && !rows.empty())
    for (std::size_t k = 0; k < rows.front().report.per_task.size(); ++k) {
      out << "\n  task " << rows.front().report.per_task[k].task << ":\n";
      for (const auto& r : rows)
        if (k < r.report.per_task.size()) line(r.name, r.swa_heads, r.report.per_task[k]);
    }
  std::snprintf(buf, sizeof buf,
                "  [low, high]: %g%% percentile bootstrap interval over the samples (%zu resamples, fixed seed; "
                "overall figures resampled within each task)\n",
                100.0 * bootstrap.level, bootstrap.resamples);
  out << buf;
  if (match)
    out << "  file tasks: accuracy = token F1 of the greedy answer's first line (LongBench's QA metric), exact = the "
           "greedy answer begins with the gold tokens, match = its first line equals the gold answer after "
           "normalization (case, punctuation, articles, spaces)\n";
}

}  // namespace bosch::cli
