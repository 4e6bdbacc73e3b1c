// SPDX-License-Identifier: Apache-2.0
// Held-out report printing (see held_out_report.hpp).

#include "held_out_report.hpp"

#include <cmath>
#include <cstdio>

namespace bosch::cli {

nlohmann::json to_json(const TaskScore& t) {
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  return nlohmann::json{{"task", t.task},
                        {"samples", t.samples},
                        {"mean_logprob", num(t.mean_logprob)},
                        {"probability", num(t.probability)},
                        {"accuracy", num(t.accuracy)},
                        {"exact", num(t.exact)}};
}

nlohmann::json to_json(const HeldOutReport& r) {
  nlohmann::json per = nlohmann::json::array();
  for (const auto& t : r.per_task) per.push_back(to_json(t));
  return nlohmann::json{{"all", to_json(r.all)}, {"per_task", per}};
}

void print_report(std::ostream& out, const std::vector<ReportRow>& rows, bool per_task) {
  char buf[200];
  auto line = [&](const std::string& name, std::size_t heads, const TaskScore& t) {
    std::snprintf(buf, sizeof buf, "  %-18s %5zu %7d %10.4f %8.4f %8.3f %8.3f\n", name.c_str(), heads,
                  t.samples, t.mean_logprob, t.probability, t.accuracy, t.exact);
    out << buf;
  };
  std::snprintf(buf, sizeof buf, "  %-18s %5s %7s %10s %8s %8s %8s\n", "mask", "SWA", "samples",
                "log-prob", "prob", "accuracy", "exact");
  out << buf;
  for (const auto& r : rows) line(r.name, r.swa_heads, r.report.all);
  if (!per_task || rows.empty()) return;
  for (std::size_t k = 0; k < rows.front().report.per_task.size(); ++k) {
    out << "\n  task " << rows.front().report.per_task[k].task << ":\n";
    for (const auto& r : rows)
      if (k < r.report.per_task.size()) line(r.name, r.swa_heads, r.report.per_task[k]);
  }
}

}  // namespace bosch::cli
