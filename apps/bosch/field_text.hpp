// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/field_text.hpp
/// The command-line form of a table field (bosch::Field: the search options
/// and the run settings alike): its option name, its value's placeholder, a
/// value as --help shows it, and a value read from an option's text. The one
/// text codec of both tables (search_options.cpp, run_options.cpp).

#include "command_line.hpp"

#include <bosch/field.hpp>
#include <bosch/run/settings.hpp>

#include <algorithm>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace bosch::cli {

/// "context,c" -> "context"; "held_out_samples" -> "held-out-samples".
template <class Owner, class T>
std::string long_name(const Field<Owner, T>& f) {
  if (!f.cli.empty()) return std::string(f.cli.substr(0, f.cli.find(',')));
  std::string s(f.name);
  std::replace(s.begin(), s.end(), '_', '-');
  return s;
}

/// The Boost.Program_options spelling, "context,c" (long[,short]).
template <class Owner, class T>
std::string option_spec(const Field<Owner, T>& f) {
  return f.cli.empty() ? long_name(f) : std::string(f.cli);
}

/// An enum's values as --help lists them: "full|single|multi|layer".
template <class T>
std::string enum_choices() {
  std::string s;
  for (T v : enum_values<T>::values) s += (s.empty() ? "" : "|") + std::string(to_string(v));
  return s;
}

/// The placeholder of a field's value in --help: the table's, else by type.
template <class Owner, class T>
std::string value_name(const Field<Owner, T>& f) {
  if (!f.value_name.empty()) return std::string(f.value_name);
  if constexpr (std::is_enum_v<T>) return enum_choices<T>();
  else if constexpr (std::is_same_v<T, std::vector<double>>) return "LIST";
  else if constexpr (std::is_floating_point_v<T>) return "X";
  else return "N";
}

/// A value as --help shows it (and as parse_value reads it back); empty: no default shown.
template <class T>
std::string value_text(const T& v) {
  if constexpr (std::is_same_v<T, std::vector<tasks::TaskKind>>) return task_list_string(v);
  else if constexpr (std::is_same_v<T, std::vector<int>>) return context_list_string(v);
  else if constexpr (std::is_same_v<T, std::string>) return v;
  else if constexpr (std::is_same_v<T, std::vector<std::string>>) return {};
  else if constexpr (std::is_enum_v<T>) return std::string(to_string(v));
  else if constexpr (std::is_same_v<T, std::vector<double>>) {
    std::string s;
    for (double x : v) s += (s.empty() ? "" : ",") + shortest_text(x);
    return s;
  } else if constexpr (std::is_floating_point_v<T>) return shortest_text(v);
  else return std::to_string(v);
}

/// A value of type T from an option's text; bosch::invalid_argument naming
/// `option` when it is not one.
template <class T>
T parse_value(const std::string& text, const std::string& option) {
  if constexpr (std::is_same_v<T, std::string>) return text;
  else if constexpr (std::is_same_v<T, std::vector<tasks::TaskKind>>)
    return for_option(option, [&] { return parse_task_list(text); });
  else if constexpr (std::is_same_v<T, std::vector<int>>) return parse_context_list(text, option);
  else if constexpr (std::is_same_v<T, Device>) return parse_device(text, option);
  else if constexpr (std::is_same_v<T, cpu::Precision>) return cpu::parse_precision(text, option);  // also "auto"
  else if constexpr (std::is_enum_v<T>) return parse_enum<T>(text, option.c_str());
  else if constexpr (std::is_same_v<T, std::vector<double>>) {
    T out;
    for (const auto& item : split_list(text)) out.push_back(parse_number<double>(item, option));
    return out;
  } else {
    return parse_number<T>(text, option);
  }
}

}  // namespace bosch::cli
