// SPDX-License-Identifier: Apache-2.0
// The run settings generated from the RunSettings table (see run_options.hpp).

#include "run_options.hpp"

#include "field_text.hpp"

#include <bosch/run/open_model.hpp>

#include <algorithm>
#include <type_traits>

namespace bosch::cli {


RunOptions::RunOptions(std::initializer_list<SettingGroup> groups, std::vector<std::string_view> skip)
    : groups_(groups), skip_(std::move(skip)) {}

bool RunOptions::takes(std::string_view group, std::string_view field) const {
  return std::any_of(groups_.begin(), groups_.end(), [&](SettingGroup g) { return group_title(g) == group; }) &&
         std::find(skip_.begin(), skip_.end(), field) == skip_.end();
}

std::string RunOptions::option_of(std::string_view field) {
  return option_in([](auto&& visit) { for_each_setting(visit); }, field);
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
      if (f.group != group_title(g) || !takes(f.group, f.name)) return;
      add_field_option(d, f, defaults.*f.member, Numbers::typed);
    });
    all.add(d);
  }
  return all;
}

RunSettings RunOptions::resolve(const po::variables_map& vm, RunSettings base) const {
  for_each_setting([&](const auto& f) {
    if (!takes(f.group, f.name)) return;
    const std::string name = long_name(f);
    // Given, or (flags and defaulted options) present in the map: a default
    // the map holds is the library's, so a base from a mask's metadata wins.
    if (!vm.count(name) || !cli::given(vm, name.c_str())) return;
    try {
      base.*f.member = read_field_option(vm, f);
    } catch (const bosch::invalid_argument&) {
      if (f.name == "model") throw usage_error("no model given (--model PATH or a positional MODEL)");
      throw;
    }
  });
  if (takes(group_title(SettingGroup::model), "model") && base.model.empty())
    throw usage_error("no model given (--model PATH or a positional MODEL)");
  for_option("--device", [&] { check_device(base); });
  // --deploy-context chooses the calibration contexts (given here: a mask's
  // recorded one only says where evaluate reports).
  if (takes(group_title(SettingGroup::tasks), "deploy_context") && given(vm, "deploy_context"))
    apply_deploy_context(base, given(vm, "context"), namer());
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
