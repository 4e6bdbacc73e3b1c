// SPDX-License-Identifier: Apache-2.0
// The run settings generated from the RunSettings table (see run_options.hpp).

#include "run_options.hpp"

#include "field_text.hpp"

#include <bosch/run/open_model.hpp>

#include <algorithm>
#include <type_traits>

namespace bosch::cli {

namespace {

/// A setting's value from the variables map: typed for flags, numbers and
/// file lists, from the option's text otherwise.
template <class T>
T parse(const po::variable_value& value, const std::string& option) {
  if constexpr (std::is_arithmetic_v<T> || std::is_same_v<T, std::vector<std::string>>) return value.as<T>();
  else return parse_value<T>(value.as<std::string>(), option);
}

}  // namespace

RunOptions::RunOptions(std::initializer_list<SettingGroup> groups, std::vector<std::string_view> skip)
    : groups_(groups), skip_(std::move(skip)) {}

bool RunOptions::takes(std::string_view group, std::string_view field) const {
  return std::any_of(groups_.begin(), groups_.end(), [&](SettingGroup g) { return group_title(g) == group; }) &&
         std::find(skip_.begin(), skip_.end(), field) == skip_.end();
}

std::string RunOptions::option_of(std::string_view field) {
  std::string out(field);
  for_each_setting([&](const auto& f) {
    if (f.name == field) out = "--" + long_name(f);
  });
  return out;
}

SettingNamer RunOptions::namer() {
  return [](std::string_view field) { return option_of(field); };
}

bool RunOptions::given(const po::variables_map& vm, std::string_view field) {
  const std::string name = option_of(field).substr(2);
  return cli::given(vm, name.c_str());
}

po::options_description RunOptions::describe() {
  po::options_description all;
  const RunSettings defaults;
  for (SettingGroup g : groups_) {
    po::options_description d{std::string(group_title(g))};
    for_each_setting([&](const auto& f) {
      using T = typename std::decay_t<decltype(f)>::value_type;
      if (f.group != group_title(g) || !takes(f.group, f.name)) return;
      const std::string spec = option_spec(f);
      const std::string help(f.help);
      const T& def = defaults.*f.member;
      if constexpr (std::is_same_v<T, bool>) {
        d.add_options()(spec.c_str(), flag_in_map(def), help.c_str());
      } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
        d.add_options()(spec.c_str(),
                        po::value<std::vector<std::string>>()->multitoken()->value_name(value_name(f)),
                        help.c_str());
      } else if constexpr (std::is_arithmetic_v<T>) {
        // Typed, so that CommandLine refuses a negative value of an unsigned
        // setting wherever it comes from (command line or --config FILE).
        auto* v = po::value<T>()->value_name(value_name(f));
        if constexpr (std::is_floating_point_v<T>) {
          v->default_value(def, shortest_text(def));  // as cli::number shows it
        } else {
          v->default_value(def);
        }
        d.add_options()(spec.c_str(), v, help.c_str());
      } else {
        auto* v = po::value<std::string>()->value_name(value_name(f));
        const std::string text = value_text(def);
        if (!text.empty()) v->default_value(text);
        d.add_options()(spec.c_str(), v, help.c_str());
      }
    });
    all.add(d);
  }
  return all;
}

RunSettings RunOptions::resolve(const po::variables_map& vm, RunSettings base) const {
  for_each_setting([&](const auto& f) {
    using T = typename std::decay_t<decltype(f)>::value_type;
    if (!takes(f.group, f.name)) return;
    const std::string name = long_name(f);
    // Given, or (flags and defaulted options) present in the map: a default
    // the map holds is the library's, so a base from a mask's metadata wins.
    if (!vm.count(name) || !cli::given(vm, name.c_str())) return;
    const std::string option = "--" + name;
    T v = parse<T>(vm[name], option);
    if (f.check != nullptr) {
      const std::string msg = f.check(v);
      if (!msg.empty()) {
        if (f.name == "model") throw usage_error("no model given (--model PATH or a positional MODEL)");
        throw bosch::invalid_argument(msg, option);
      }
    }
    base.*f.member = std::move(v);
  });
  if (takes(group_title(SettingGroup::model), "model") && base.model.empty())
    throw usage_error("no model given (--model PATH or a positional MODEL)");
  for_option("--device", [&] { check_device(base); });
  // The checks across settings; a command without the model group (no
  // model path to check) or without tasks checks only what it takes.
  RunSettings checked = base;
  if (!takes(group_title(SettingGroup::model), "model")) checked.model = "-";
  validate(checked, namer());
  settings_ = base;
  return base;
}

void RunOptions::check_model(const RunSettings& s, const model::Config& config) {
  validate_for_model(s, config, namer());
}

}  // namespace bosch::cli
