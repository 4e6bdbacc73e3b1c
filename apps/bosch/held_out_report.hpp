// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/held_out_report.hpp
/// Held-out scores of several masks as a table (JSON: bosch::to_json of
/// eval/report.hpp).

#include <bosch/eval/report.hpp>

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

/// "v [low, high]" with each number printed by the printf `format` (one
/// double), "v" alone when the interval is unknown, "-" when v is not finite.
std::string value_ci(const char* format, double v, const eval::Interval& ci);

/// A fixed-width table: one line per row (overall scores: sample count, each
/// mean with its bootstrap interval), then, with `per_task`, one block per
/// task; a closing line says what the intervals are.
void print_report(std::ostream& out, const std::vector<ReportRow>& rows, bool per_task,
                  const eval::BootstrapOptions& bootstrap = {});

}  // namespace bosch::cli
