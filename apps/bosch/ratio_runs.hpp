// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/ratio_runs.hpp
/// The files of `bosch select --ratios`: one mask, log, head map and
/// checkpoint per ratio (named with -RATIO before the extension), and the
/// summary printed after the last ratio.

#include "command_line.hpp"
#include "files.hpp"

#include <bosch/io/file_lock.hpp>
#include <bosch/options.hpp>

#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace bosch::cli {

/// The ratios of a command taking --ratio R or --ratios LIST (select,
/// baseline): {ratio} without --ratios; else the list parsed, ascending,
/// without duplicates. usage_error when both are given or when --ratios
/// would write its several masks to stdout (OUT "-").
std::vector<double> requested_ratios(const po::variables_map& vm, double ratio, const std::string& ratios_text,
                                     const std::string& out);

/// "0.25": a ratio as it appears in file names and messages.
std::string ratio_text(double rho);

/// `path` with "-RATIO" before its extension: mask.json -> mask-0.25.json
/// (an empty path stays empty).
std::string with_ratio(const std::string& path, double rho);

/// The files of one ratio's search.
struct RatioFiles {
  double rho = 0;
  std::string out, checkpoint, log, svg;
  std::string identity;             ///< the run identity beside the checkpoint
  bool default_checkpoint = false;  ///< no --checkpoint given: removed after success
  bool resume = false;              ///< resume from an existing checkpoint
  std::unique_ptr<io::FileLock> lock;
};

/// The files of each ratio (in the order given): with `several`, every path
/// gets the ratio (with_ratio); else they are used as they are. An empty
/// `checkpoint` means OUT.checkpoint ("bosch-select.checkpoint" for stdout).
/// Every output is checked (check_outputs: writable, no two on one file, none
/// on one of `inputs`); no lock is taken.
std::vector<RatioFiles> ratio_files(const std::vector<double>& ratios, bool several, const std::string& out,
                                    const std::string& checkpoint, const std::string& log, const std::string& svg,
                                    const std::vector<OutputPath>& inputs);

/// After a finished run: removes the lock, the checkpoint's stray temporary
/// files, and the checkpoint and its identity file unless the user named the
/// checkpoint (--checkpoint: both stay, so that a later --resume is checked
/// to be of the same run), so that only the files asked for remain.
void finish_files(RatioFiles& f);

/// The table printed after a multi-ratio run: per ratio (ascending) the SWA
/// count, score, evaluations and seconds, and the head-set turnover and
/// Jaccard distance to the next lower ratio.
void print_ratio_summary(std::ostream& out, std::vector<std::pair<double, const Result*>> results,
                         const std::string& order, bool warm_start);

}  // namespace bosch::cli
