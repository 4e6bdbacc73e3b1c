// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/run_options.hpp
/// The run settings on the command line, generated from the RunSettings table
/// (bosch::for_each_setting, run/include/bosch/run/settings.hpp): each setting
/// becomes `--name-with-dashes` (or its `cli` spelling, e.g. --context/-c)
/// with the library's default and help. A command takes the settings of the
/// groups it needs (the model and where it runs, the tasks, the evaluator),
/// minus the ones it sets itself. A new setting in the table appears on every
/// command that takes its group without any change here.

#include "command_line.hpp"

#include <bosch/run/settings.hpp>

#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

namespace bosch::cli {

class RunOptions {
 public:
  /// @param groups the setting groups of the command
  /// @param skip   settings it does not take (compare runs on the CPU: device, gpu)
  RunOptions(std::initializer_list<SettingGroup> groups, std::vector<std::string_view> skip = {});

  /// One group of options per setting group ("Model", "Tasks", "Evaluator").
  po::options_description describe();

  /// The settings of the command line and config file: settings not given
  /// keep their values in `base` (the library's defaults, or a mask's
  /// recorded settings). Each given value is checked with its setting's
  /// check, errors naming the option ("--samples: must be at least 1, got
  /// 0"); then validate() across settings, naming options (exit 2). Text
  /// files are read and checked here, before any model loads.
  RunSettings resolve(const po::variables_map& vm, RunSettings base = {}) const;

  /// The settings as resolved by the last resolve() (for commands that
  /// resolve once and use them in several places).
  const RunSettings& settings() const noexcept { return settings_; }

  /// The option of a setting: "--context" for "context"; other words stay.
  static std::string option_of(std::string_view field);
  /// option_of as a SettingNamer (messages of validate()).
  static SettingNamer namer();
  /// Whether the setting was given on the command line or in a config file.
  static bool given(const po::variables_map& vm, std::string_view field);

  /// The model's configuration checks of the settings (trained context),
  /// naming options: bosch::invalid_argument (exit 2).
  static void check_model(const RunSettings& s, const model::Config& config);

 private:
  /// Whether the command takes field `field` of the settings section `group` (a title).
  bool takes(std::string_view group, std::string_view field) const;
  std::vector<SettingGroup> groups_;
  std::vector<std::string_view> skip_;
  mutable RunSettings settings_;
};

}  // namespace bosch::cli
