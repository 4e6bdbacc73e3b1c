// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/attention_options.hpp
/// Which heads attend through a sliding window, for the commands that run a
/// model directly (`bosch generate`, `bosch logits`): --window, --sinks,
/// --mask, --mask-format.

#include "command_line.hpp"

#include <bosch/model/windows.hpp>

#include <string>

namespace bosch::cli {

/// Without --window and --mask every head is full (causal). --window W alone
/// makes every head a sliding window of W keys; with --mask FILE only the
/// mask's SWA heads are, with W (or the mask file's metadata "window") keys
/// and S (or metadata "sinks", else 0) sinks.
struct AttentionOptions {
  int window = 0;
  int sinks = 0;
  std::string mask;
  std::string mask_format;

  po::options_description describe();
  /// Checks the values given in `vm` (bosch::invalid_argument naming the option).
  void validate(const po::variables_map& vm) const;
  /// The windows for a model of `layout` (reads --mask; a mask of another
  /// layout, or with SWA heads but no window anywhere, fails). `description`
  /// receives one line saying what attends how.
  AttentionWindows resolve(const po::variables_map& vm, const HeadLayout& layout,
                           std::string& description) const;
};

}  // namespace bosch::cli
