// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/warm_start_options.hpp
/// Where BOSCH searches start besides their own plan (Options::initial_masks),
/// shared by `bosch select` and `bosch compare`: --init FILE... (select),
/// --candidates LIST (cheap built-in rankings computed before the search:
/// SelectionRequest::candidates),
/// and for multi-ratio runs --ratio-order up|down and --warm-start (each
/// ratio also starts from its neighbour's mask).

#include "command_line.hpp"

#include <bosch/eval/compare.hpp>
#include <bosch/mask.hpp>
#include <bosch/run/selection.hpp>

#include <string>
#include <vector>

namespace bosch::cli {

/// The warm-start options.
struct WarmStartOptions {
  std::vector<std::string> init_files;
  std::string candidates = "none";
  std::string ratio_order = "up";
  bool warm_start = true;

  /// The options: with `with_init` also --init (select), with `ratio_help`
  /// the help of --ratio-order and --warm-start (they apply to select's
  /// --ratios and to compare's grid).
  po::options_description describe(bool with_init, const std::string& ratio_help);

  /// --candidates as rankings (usage error naming it for an unknown name).
  std::vector<eval::Method> resolved_candidates() const;
  /// --ratio-order (usage error naming it otherwise).
  eval::RatioOrder resolved_order() const;

  /// Reads every --init file (JSON, TSV or grid by extension) and checks its
  /// layout against `layout`: a missing or malformed file or another layout is
  /// a runtime failure naming the file (exit 1).
  std::vector<WarmStart> read_init(const HeadLayout& layout) const;
};

/// The help text of --candidates (shared by select and compare).
extern const char* const candidates_help;

}  // namespace bosch::cli
