// SPDX-License-Identifier: Apache-2.0
// The run settings generated from the RunSettings table (see run_options.hpp).

#include "run_options.hpp"

#include <bosch/run/open_model.hpp>

#include <algorithm>
#include <type_traits>

namespace bosch::cli {

namespace {

/// "context,c" -> "context"; "held_out_samples" -> "held-out-samples".
template <class Field>
std::string long_name(const Field& f) {
  if (!f.cli.empty()) {
    const std::string_view spec = f.cli;
    return std::string(spec.substr(0, spec.find(',')));
  }
  std::string s(f.name);
  std::replace(s.begin(), s.end(), '_', '-');
  return s;
}

/// A value as --help shows it (and as parse() reads it back).
template <class T>
std::string value_text(const T& v) {
  if constexpr (std::is_same_v<T, std::vector<tasks::TaskKind>>) return task_list_string(v);
  else if constexpr (std::is_same_v<T, std::vector<int>>) return context_list_string(v);
  else if constexpr (std::is_same_v<T, std::string>) return v;
  else if constexpr (std::is_same_v<T, cpu::Precision>) return std::string(cpu::to_string(v));
  else if constexpr (std::is_enum_v<T>) return to_string(v);
  else if constexpr (std::is_same_v<T, std::vector<std::string>>) return {};
  else return std::to_string(v);
}

template <class T>
T parse(const po::variable_value& value, const std::string& option) {
  if constexpr (std::is_same_v<T, bool>) {
    return value.as<bool>();
  } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
    return value.as<std::vector<std::string>>();
  } else if constexpr (std::is_arithmetic_v<T>) {
    (void)option;
    return value.as<T>();
  } else {
    const std::string text = value.as<std::string>();
    if constexpr (std::is_same_v<T, std::string>) {
      return text;
    } else if constexpr (std::is_same_v<T, std::vector<tasks::TaskKind>>) {
      try {
        return parse_task_list(text);
      } catch (const bosch::invalid_argument& e) {
        throw bosch::invalid_argument(e.message(), option);
      }
    } else if constexpr (std::is_same_v<T, std::vector<int>>) {
      return parse_context_list(text, option);
    } else if constexpr (std::is_same_v<T, cpu::Precision>) {
      return cpu::parse_precision(text, option);
    } else {
      static_assert(std::is_same_v<T, Device>, "a setting type without a command-line form");
      return parse_device(text, option);
    }
  }
}

const char* group_title(SettingGroup g) {
  switch (g) {
    case SettingGroup::model: return "Model";
    case SettingGroup::tasks: return "Tasks";
    case SettingGroup::evaluator: return "Evaluator";
  }
  return "?";
}

}  // namespace

RunOptions::RunOptions(std::initializer_list<SettingGroup> groups, std::vector<std::string_view> skip)
    : groups_(groups), skip_(std::move(skip)) {}

bool RunOptions::takes(SettingGroup g, std::string_view field) const {
  return std::find(groups_.begin(), groups_.end(), g) != groups_.end() &&
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
    po::options_description d(group_title(g));
    for_each_setting([&](const auto& f) {
      using T = typename std::decay_t<decltype(f)>::value_type;
      if (f.group != g || !takes(g, f.name)) return;
      std::string spec(f.cli.empty() ? long_name(f) : std::string(f.cli));
      const std::string help(f.help);
      const T& def = defaults.*f.member;
      if constexpr (std::is_same_v<T, bool>) {
        d.add_options()(spec.c_str(), flag_in_map(def), help.c_str());
      } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
        d.add_options()(spec.c_str(),
                        po::value<std::vector<std::string>>()->multitoken()->value_name(std::string(f.value_name)),
                        help.c_str());
      } else if constexpr (std::is_arithmetic_v<T>) {
        // Typed, so that CommandLine refuses a negative value of an unsigned
        // setting wherever it comes from (command line or --config FILE).
        auto* v = po::value<T>()->value_name(std::string(f.value_name));
        if constexpr (std::is_floating_point_v<T>) {
          v->default_value(def, shortest_text(def));  // as cli::number shows it
        } else {
          v->default_value(def);
        }
        d.add_options()(spec.c_str(), v, help.c_str());
      } else {
        auto* v = po::value<std::string>()->value_name(std::string(f.value_name));
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
  if (takes(SettingGroup::model, "model") && base.model.empty())
    throw usage_error("no model given (--model PATH or a positional MODEL)");
  for_option("--device", [&] { check_device(base); });
  // The checks across settings; a command without the model group (no
  // model path to check) or without tasks checks only what it takes.
  RunSettings checked = base;
  if (!takes(SettingGroup::model, "model")) checked.model = "-";
  validate(checked, namer());
  settings_ = base;
  return base;
}

void RunOptions::check_model(const RunSettings& s, const model::Config& config) {
  validate_for_model(s, config, namer());
}

}  // namespace bosch::cli
