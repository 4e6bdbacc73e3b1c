// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/command_line.hpp
/// The command line of a subcommand: options, positional arguments, --help,
/// --config FILE, boolean flags, and the small parsers option values share.
///
/// A subcommand is `int run_NAME(int argc, char** argv)` where argv[0] is the
/// subcommand's name (main strips "bosch"). The usual shape:
///
/// @code
/// int run_thing(int argc, char** argv) {
///   return cli::run_command("thing", [&] {
///     cli::ModelOptions model;
///     cli::OutputOptions out;
///     cli::CommandLine cl("thing", "bosch thing [options] MODEL", "What it does.");
///     cl.options.add(model.describe()).add(out.describe());
///     cl.positional.add("model", 1);
///     po::variables_map vm;
///     if (!cl.parse(argc, argv, vm)) return cli::exit_success;  // --help printed
///     model.validate();
///     ...
///     return cli::exit_success;
///   });
/// }
/// @endcode

#include "errors.hpp"

#include <bosch/error.hpp>
#include <bosch/io/shortest_text.hpp>

#include <boost/program_options.hpp>

#include <charconv>
#include <cmath>
#include <string>
#include <string_view>
#include <system_error>
#include <type_traits>
#include <vector>

namespace bosch::cli {

namespace po = boost::program_options;

/// The value of a boolean option ("flag"): `--name` sets it to true,
/// `--name=true|false` (also yes/no, on/off, 1/0) either way, and so does a
/// line `name = false` in a config file; the command line wins over the file,
/// so a flag set in a config file can be switched off with `--name=false`.
/// The target keeps its initial value when the flag is not given; --help
/// shows "[=true|false]", and "(=true)" when that value is true.
///   d.add_options()("report", cli::flag(&report), "...");
po::typed_value<bool>* flag(bool* target);
/// A flag stored only in the variables_map (read it with vm[name].as<bool>());
/// `default_value` is what --help shows when it is not given.
po::typed_value<bool>* flag_in_map(bool default_value);

/// A numeric option whose --help shows its default in the shortest text that
/// reads back to it ("(=0.05)", not "(=0.050000000000000003)", which
/// Boost's lexical_cast prints for a double):
///   d.add_options()("level", cli::number(&level), "...");
using io::shortest_text;  // what number() shows
template <class T>
  requires std::is_arithmetic_v<T>
po::typed_value<T>* number(T* target) {
  return po::value(target)->default_value(*target, shortest_text(*target));
}

/// The command line of one subcommand.
class CommandLine {
 public:
  /// @param name        subcommand name ("select")
  /// @param usage       synopsis line ("bosch select [options] --model MODEL")
  /// @param description a paragraph printed by --help under the synopsis
  CommandLine(std::string name, std::string usage, std::string description);

  /// Visible options, shown by --help (add groups with options.add(...)).
  po::options_description options;
  /// Hidden options (positional targets, test hooks); not in --help.
  po::options_description hidden;
  /// Positional arguments, mapped to options (e.g. positional.add("model", 1)).
  po::positional_options_description positional;
  /// When set, a word that is a negative number ("-1") is an argument of this
  /// positional option rather than an unknown short option, so that the
  /// option's own check can say what is wrong with it.
  std::string negative_numbers_to;
  /// Extra text printed after the options by --help (examples), may be empty.
  std::string epilog;

  /// Parses argv (argv[0] = the subcommand name) and then, when given,
  /// `--config FILE` (INI-style "name = value" lines, '#' comments, long
  /// option names without dashes; the command line wins over the file).
  /// Option names are exact (no abbreviations: the search options grow with
  /// the library, and a prefix unique today may not be tomorrow). Prints help
  /// to stdout and returns false on --help/-h. Throws boost::program_options
  /// errors (exit 2) and usage_error (exit 2).
  bool parse(int argc, char** argv, po::variables_map& vm);

  /// The --help text.
  std::string help() const;

  const std::string& name() const noexcept { return name_; }
  /// The --config FILE given (empty: none), an input of the command.
  const std::string& config_file() const noexcept { return config_file_; }

 private:
  std::string name_, usage_, description_;
  po::options_description general_;  // --help, --config
  std::string config_file_;
};

/// True when option `name` was given on the command line or in the config
/// file (not merely defaulted).
bool given(const po::variables_map& vm, const char* name);

/// The items of a comma-separated list, trimmed of blanks; empty items skipped.
std::vector<std::string> split_list(std::string_view list);

/// A number of type T read from all of `text` (no sign for unsigned types,
/// finite for floating-point ones); bosch::invalid_argument naming `option`
/// otherwise ("expected an integer, got '1.5'", "out of range: ...").
template <class T>
T parse_number(std::string_view text, const std::string& option) {
  static_assert(std::is_arithmetic_v<T> && !std::is_same_v<T, bool>);
  T v{};
  const char* end = text.data() + text.size();
  const auto r = std::from_chars(text.data(), end, v);
  if (r.ec == std::errc() && r.ptr == end) {
    if constexpr (std::is_floating_point_v<T>) {
      if (!std::isfinite(v)) throw invalid_argument("expected a finite number, got '" + std::string(text) + "'", option);
    }
    return v;
  }
  if (r.ec == std::errc::result_out_of_range)
    throw invalid_argument("out of range: '" + std::string(text) + "'", option);
  const char* what = std::is_floating_point_v<T> ? "a number"
                     : std::is_unsigned_v<T>     ? "a non-negative integer"
                                                 : "an integer";
  throw invalid_argument(std::string("expected ") + what + ", got '" + std::string(text) + "'", option);
}

/// A command line as a shell would read it back (single-quoting where needed).
std::string shell_join(const std::vector<std::string>& args);

}  // namespace bosch::cli
