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

#include <string>
#include <string_view>
#include <type_traits>
#include <typeinfo>
#include <vector>

namespace bosch::cli {

/// "context,c" -> "context" (bosch::cli_long_name).
template <class Owner, class T>
std::string long_name(const Field<Owner, T>& f) {
  return cli_long_name(f);
}

/// "--long-name" of the field named `field` in the table `walk` visits
/// (for_each_setting or for_each_option), else option_name(field).
template <class Walk>
std::string option_in(Walk walk, std::string_view field) {
  std::string out = option_name(field);
  walk([&](const auto& f) {
    if (f.name == field) out = "--" + long_name(f);
  });
  return out;
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
  if constexpr (std::is_same_v<T, std::vector<tasks::TaskSource>>) return task_list_string(v);
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
  else if constexpr (std::is_same_v<T, std::vector<tasks::TaskSource>>)
    return for_option(option, [&] { return parse_task_list(text); });
  else if constexpr (std::is_same_v<T, std::vector<int>>) return parse_context_list(text, option);
  else if constexpr (std::is_enum_v<T>) return parse_enum<T>(text, option.c_str());
  else if constexpr (std::is_same_v<T, std::vector<double>>) {
    T out;
    for (const auto& item : split_list(text)) out.push_back(parse_number<double>(item, option));
    return out;
  } else {
    return parse_number<T>(text, option);
  }
}

/// How a table's numbers reach the program: typed by Boost (run settings: a
/// negative value of an unsigned setting is refused by CommandLine wherever
/// it comes from, command line or --config FILE) or as text read by
/// parse_value (search options, with its messages).
enum class Numbers { typed, text };

/// Adds field `f` to `d` with default `def`: a flag for a bool, several
/// tokens for a file list, a typed number (Numbers::typed), else text.
template <class Owner, class T>
void add_field_option(po::options_description& d, const Field<Owner, T>& f, const T& def, Numbers numbers) {
  const std::string spec = option_spec(f), help(f.help);
  if constexpr (std::is_same_v<T, bool>) {
    d.add_options()(spec.c_str(), flag_in_map(def), help.c_str());
    return;
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    d.add_options()(spec.c_str(), po::value<T>()->multitoken()->value_name(value_name(f)), help.c_str());
    return;
  } else if constexpr (std::is_arithmetic_v<T>) {
    if (numbers == Numbers::typed) {
      auto* v = po::value<T>()->value_name(value_name(f));
      if constexpr (std::is_floating_point_v<T>) {
        v->default_value(def, shortest_text(def));  // as cli::number shows it
      } else {
        v->default_value(def);
      }
      d.add_options()(spec.c_str(), v, help.c_str());
      return;
    }
  }
  auto* v = po::value<std::string>()->value_name(value_name(f));
  const std::string text = value_text(def);
  if (!text.empty()) v->default_value(text);
  d.add_options()(spec.c_str(), v, help.c_str());
}

/// Field `f`'s value from `vm`, which holds it (typed or as text, as
/// add_field_option put it there), checked by the field's own check:
/// bosch::invalid_argument naming "--long-name".
template <class Owner, class T>
T read_field_option(const po::variables_map& vm, const Field<Owner, T>& f) {
  const std::string name = long_name(f), option = "--" + name;
  const po::variable_value& value = vm[name];
  T v;
  if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, std::vector<std::string>>) {
    v = value.as<T>();
  } else if constexpr (std::is_arithmetic_v<T>) {
    v = value.value().type() == typeid(T) ? value.as<T>() : parse_value<T>(value.as<std::string>(), option);
  } else {
    v = parse_value<T>(value.as<std::string>(), option);
  }
  if (f.check != nullptr) {
    const std::string msg = f.check(v);
    if (!msg.empty()) throw bosch::invalid_argument(msg, option);
  }
  return v;
}

}  // namespace bosch::cli
