// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file field.hpp
/// One entry of a table of fields: the search options (bosch::Options,
/// for_each_option) and the run settings of the bundled evaluator
/// (bosch::RunSettings, for_each_setting) are both lists of Field. Code that
/// treats every field alike (validation, JSON, the command line, the Python
/// keywords, docs/reference.md) reads the table instead of naming fields.

#include <string>
#include <string_view>

namespace bosch {

/// What a field changes.
enum class FieldRole {
  identity,  ///< the scores or the search: part of a run's identity (a resume must match it)
  report,    ///< only the held-out report
  run,       ///< how the run is carried out (budget cap, batching, device): a resume may change it
};

/// One field of `Owner`, of type T.
template <class Owner, class T>
struct Field {
  using owner_type = Owner;
  using value_type = T;
  std::string_view name;  ///< the C++ member name, also the JSON key and the Python keyword
  T Owner::*member;       ///< the member
  std::string_view help;  ///< one line for --help, docstrings and the reference
  /// Domain check of the value alone: "" when valid, else what is wrong
  /// ("must be at least 1, got 0"); nullptr = every value is valid.
  std::string (*check)(const T&) = nullptr;
  FieldRole role = FieldRole::identity;
  /// Command-line spelling "long[,short]" when not `name` with '-' for '_'
  /// ("ratio,r", "context,c").
  std::string_view cli = {};
  /// The value's placeholder in --help ("TOKENS"); empty: by type.
  std::string_view value_name = {};
  /// The --help section of the field; empty: the command's own.
  std::string_view group = {};
};

/// A field's long command-line option without the dashes: the table's `cli`
/// before its comma, else `name` with '-' for '_' ("context,c" -> "context";
/// "held_out_samples" -> "held-out-samples").
template <class Owner, class T>
std::string cli_long_name(const Field<Owner, T>& f) {
  if (!f.cli.empty()) return std::string(f.cli.substr(0, f.cli.find(',')));
  std::string s(f.name);
  for (char& c : s)
    if (c == '_') c = '-';
  return s;
}

/// The options as a user types them: "--context, -c", "--held-out-samples".
template <class Owner, class T>
std::string cli_flags(const Field<Owner, T>& f) {
  std::string s = "--" + cli_long_name(f);
  if (const auto comma = f.cli.find(','); comma != std::string_view::npos)
    s += ", -" + std::string(f.cli.substr(comma + 1));
  return s;
}

}  // namespace bosch
