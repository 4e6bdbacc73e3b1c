// SPDX-License-Identifier: Apache-2.0
// Command-line and config-file parsing (see command_line.hpp).

#include "command_line.hpp"

#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>
#include <utility>

namespace bosch::cli {

namespace {

/// A boolean option's value semantic; its own type marks the option as a flag
/// for CommandLine::parse.
class FlagValue : public po::typed_value<bool> {
 public:
  FlagValue(bool* target, bool default_true) : po::typed_value<bool>(target), default_true_(default_true) {
    implicit_value(true, "true");
  }
  std::string name() const override { return default_true_ ? "[=true|false] (=true)" : "[=true|false]"; }

 private:
  bool default_true_;
};

/// argv with every flag in the form "--name=VALUE": "--name" and "-n" (alone
/// or grouped, "-qv") become "--name=true". Boost's parser would otherwise let
/// a flag, which takes an optional value, swallow the next word ("--report
/// MODEL"). Words after "--" are left alone.
std::vector<std::string> normalize_flags(int argc, char** argv, const po::options_description& all) {
  std::set<std::string> flags;
  std::map<char, std::string> short_flags;
  for (const auto& d : all.options()) {
    if (dynamic_cast<const FlagValue*>(d->semantic().get()) == nullptr) continue;
    flags.insert(d->long_name());
    const std::string shown = d->canonical_display_name(po::command_line_style::allow_dash_for_short);
    if (shown.size() == 2 && shown[0] == '-') short_flags[shown[1]] = d->long_name();
  }
  std::vector<std::string> out;
  bool options_end = false;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (i == 0 || options_end || a.size() < 2 || a[0] != '-') {
      out.push_back(a);
      continue;
    }
    if (a == "--") {
      options_end = true;
      out.push_back(a);
      continue;
    }
    if (a[1] == '-') {
      out.push_back(flags.count(a.substr(2)) ? a + "=true" : a);
      continue;
    }
    std::vector<std::string> expanded;
    for (std::size_t k = 1; k < a.size(); ++k) {
      const auto it = short_flags.find(a[k]);
      if (it == short_flags.end()) break;
      expanded.push_back("--" + it->second + "=true");
    }
    if (expanded.size() == a.size() - 1)
      out.insert(out.end(), expanded.begin(), expanded.end());
    else
      out.push_back(a);  // not (only) flags: Boost parses it
  }
  return out;
}

}  // namespace

po::typed_value<bool>* flag(bool* target) { return new FlagValue(target, *target); }
po::typed_value<bool>* flag_in_map(bool default_value) { return new FlagValue(nullptr, default_value); }

CommandLine::CommandLine(std::string name, std::string usage, std::string description)
    : options("Options"),
      hidden("Hidden"),
      name_(std::move(name)),
      usage_(std::move(usage)),
      description_(std::move(description)),
      general_("General") {
  general_.add_options()("help,h", "show this help and exit")(
      "config", po::value(&config_file_)->value_name("FILE"),
      "read further options from FILE (lines 'name = value', long names without dashes; "
      "the command line takes precedence)");
}

std::string CommandLine::help() const {
  std::ostringstream s;
  s << "Usage: " << usage_ << "\n\n" << description_ << "\n\n" << options << "\n" << general_;
  if (!epilog.empty()) s << "\n" << epilog;
  return s.str();
}

bool CommandLine::parse(int argc, char** argv, po::variables_map& vm) {
  po::options_description all;
  all.add(options).add(hidden).add(general_);
  const std::vector<std::string> args = normalize_flags(argc, argv, all);
  const int style = po::command_line_style::default_style & ~po::command_line_style::allow_guessing;
  po::store(po::command_line_parser(std::vector<std::string>(args.begin() + 1, args.end()))
                .options(all)
                .positional(positional)
                .style(style)
                .run(),
            vm);
  if (vm.count("help")) {
    std::cout << help();
    std::cout.flush();
    return false;
  }
  if (vm.count("config")) {
    const std::string file = vm["config"].as<std::string>();
    std::ifstream in(file);
    if (!in) throw usage_error("--config: cannot read '" + file + "'");
    po::options_description from_file;
    from_file.add(options).add(hidden);
    try {
      po::store(po::parse_config_file(in, from_file, false), vm);
    } catch (const po::error& e) {
      throw usage_error("--config " + file + ": " + e.what());
    }
  }
  po::notify(vm);
  return true;
}

bool given(const po::variables_map& vm, const char* name) {
  return vm.count(name) > 0 && !vm[name].defaulted();
}

std::vector<std::string> split_list(std::string_view list) {
  std::vector<std::string> out;
  std::istringstream in{std::string(list)};
  for (std::string item; std::getline(in, item, ',');) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

std::string shell_join(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) {
    if (!out.empty()) out += ' ';
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789-_./=:,+@%") == std::string::npos;
    if (plain) {
      out += a;
      continue;
    }
    out += '\'';
    for (char c : a) {
      if (c == '\'') out += "'\\''";
      else out += c;
    }
    out += '\'';
  }
  return out;
}

}  // namespace bosch::cli
