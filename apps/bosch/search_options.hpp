// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/search_options.hpp
/// The search options of `bosch select` and `bosch compare`, generated from
/// the Options field table (bosch::for_each_option, include/bosch/options.hpp):
/// every field becomes `--name-with-dashes` (or its `cli` name, e.g. --ratio
/// for target_ratio) with its default and help. Values: numbers for
/// arithmetic fields, the enum's names for enum fields, a comma list for
/// std::vector<double> (empty = the field's automatic default), true/false for
/// bool fields (cli::flag). Fields of other types (which need an option of
/// their own) are left out by type at compile time. A new field in the table
/// appears on both commands without any change here.

#include "command_line.hpp"

#include <bosch/options.hpp>

#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace bosch::cli {

/// Whether a field of type T has a generic command-line form.
template <class T>
inline constexpr bool cli_expressible =
    std::is_arithmetic_v<T> || std::is_same_v<T, std::vector<double>> ||
    (std::is_enum_v<T> && requires { enum_values<T>::values; });

/// The search options group.
class SearchOptions {
 public:
  /// @param skip fields the command sets itself (compare: target_ratio and
  ///             variant, which it runs per cell); they get no option.
  explicit SearchOptions(std::vector<std::string_view> skip = {});

  /// The options (target_ratio also as -r).
  po::options_description describe(const std::string& title = "Search");

  /// The Options of the command line and config file: fields not given keep
  /// their defaults. Every value is checked with the field's check; errors
  /// name the option ("--probe-budget: must be at least 1, got 0"), exit 2.
  Options resolve(const po::variables_map& vm) const;

  /// The command-line option of a field: "--probe-budget", "--ratio".
  static std::string option_of(std::string_view field);

  /// Checks an SWA ratio with the check of Options::target_ratio
  /// (bosch::invalid_argument naming `option`).
  static void check_ratio(double ratio, const std::string& option);

  /// A comma list of SWA ratios (compare's --ratios), each checked like
  /// --ratio; errors name `option`.
  static std::vector<double> parse_ratios(std::string_view list, const std::string& option);

 private:
  bool skipped(std::string_view field) const;
  std::vector<std::string_view> skip_;
};

}  // namespace bosch::cli
