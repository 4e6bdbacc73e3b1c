// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/held_out_report.hpp
/// Held-out scores of several masks as a table and as JSON.

#include <bosch/eval/report.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <ostream>
#include <string>
#include <vector>

namespace bosch::cli {

/// One named row of a held-out comparison (e.g. "all-full", "BOSCH").
struct ReportRow {
  std::string name;
  std::size_t swa_heads = 0;
  HeldOutReport report;
};

/// {"task", "samples", "mean_logprob", "probability", "accuracy", "exact"} (NaN -> null).
nlohmann::json to_json(const TaskScore& t);
/// {"all": to_json(all), "per_task": [...]}.
nlohmann::json to_json(const HeldOutReport& r);

/// A fixed-width table: one line per row (overall scores), then, with
/// `per_task`, one block per task.
void print_report(std::ostream& out, const std::vector<ReportRow>& rows, bool per_task);

}  // namespace bosch::cli
