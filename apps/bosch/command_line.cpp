// SPDX-License-Identifier: Apache-2.0
// Command-line and config-file parsing (see command_line.hpp).

#include "command_line.hpp"

#include <bosch/error.hpp>
#include <bosch/io/atomic_file.hpp>

#include <cctype>
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

/// True when the option stores an unsigned integer: Boost would read "-1" as
/// its largest value (18446744073709551615) instead of refusing it.
bool unsigned_option(const po::value_semantic* v) {
  return dynamic_cast<const po::typed_value<unsigned short>*>(v) != nullptr ||
         dynamic_cast<const po::typed_value<unsigned int>*>(v) != nullptr ||
         dynamic_cast<const po::typed_value<unsigned long>*>(v) != nullptr ||
         dynamic_cast<const po::typed_value<unsigned long long>*>(v) != nullptr;
}

/// True when the option names a file or directory (its value name says so).
bool path_option(const po::value_semantic* v) {
  const std::string n = v->name();
  for (const char* kind : {"FILE", "PATH", "DIR"})
    if (n.rfind(kind, 0) == 0) return true;
  return false;
}

/// The checks Boost does not make, on every option of every command, so that
/// no command can forget one: a negative number for an unsigned option, an
/// empty path. `source` names the config file for options read from one.
void check_values(const po::parsed_options& parsed, const po::options_description& all, const std::string& source,
                  const std::map<std::string, int>& lines = {}) {
  for (const auto& o : parsed.options) {
    if (o.unregistered || o.string_key.empty()) continue;
    const po::option_description* d = all.find_nothrow(o.string_key, false);
    if (d == nullptr) continue;
    std::string where = "--" + d->long_name();
    if (!source.empty()) {
      const auto line = lines.find(d->long_name());
      where = "--config " + source + (line == lines.end() ? std::string() : ":" + std::to_string(line->second)) +
              ": " + where;
    }
    for (const auto& raw : o.value) {
      const auto first = raw.find_first_not_of(" \t");
      if (unsigned_option(d->semantic().get()) && first != std::string::npos && raw[first] == '-')
        throw bosch::invalid_argument("expected a non-negative integer, got '" + raw + "'", where);
      if (path_option(d->semantic().get()) && raw.empty())
        throw bosch::invalid_argument("empty path", where);
    }
  }
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
  const po::parsed_options parsed = po::command_line_parser(std::vector<std::string>(args.begin() + 1, args.end()))
                                        .options(all)
                                        .positional(positional)
                                        .style(style)
                                        .extra_parser([this](const std::string& w) -> std::pair<std::string, std::string> {
                                          const bool negative = w.size() > 1 && w[0] == '-' &&
                                                                std::isdigit(static_cast<unsigned char>(w[1]));
                                          if (negative && !negative_numbers_to.empty()) return {negative_numbers_to, w};
                                          return {};
                                        })
                                        .run();
  check_values(parsed, all, "");
  po::store(parsed, vm);
  if (vm.count("help")) {
    std::cout << help();
    std::cout.flush();
    return false;
  }
  if (vm.count("config")) {
    const std::string file = vm["config"].as<std::string>();
    std::string text;
    try {
      text = io::read_file(file, io::max_config_bytes, "a config file");
    } catch (const bosch::error& e) {
      throw usage_error("--config: cannot read '" + file + "': " + e.message());
    }
    // A UTF-8 byte-order mark (some editors write one) is no part of the first name.
    if (text.rfind("\xEF\xBB\xBF", 0) == 0) text.erase(0, 3);
    po::options_description from_file;
    from_file.add(options).add(hidden);
    // Each line checked here, so that every message names the file and line
    // ("--config run.cfg:3: unrecognised option 'ratoi'"); Boost's own
    // messages name neither.
    std::map<std::string, int> lines;  // option -> its first line
    {
      std::istringstream scan(text);
      int n = 0;
      std::string prefix;
      for (std::string line; std::getline(scan, line);) {
        ++n;
        const std::string at = "--config " + file + ":" + std::to_string(n) + ": ";
        if (const auto hash = line.find('#'); hash != std::string::npos) line.erase(hash);
        line.erase(0, line.find_first_not_of(" \t\r"));
        line.erase(line.find_last_not_of(" \t\r") + 1);
        if (line.empty()) continue;
        if (line.front() == '[' && line.back() == ']') {
          prefix = line.substr(1, line.size() - 2) + ".";
          continue;
        }
        const auto eq = line.find('=');
        if (eq == std::string::npos) throw usage_error(at + "expected 'name = value', got '" + line + "'");
        std::string name = line.substr(0, eq);
        name.erase(name.find_last_not_of(" \t") + 1);
        name = prefix + name;
        if (from_file.find_nothrow(name, false) == nullptr)
          throw usage_error(at + "unrecognised option '" + name + "'");
        lines.emplace(name, n);
      }
    }
    auto with_line = [&](const po::error& e) {
      std::string where = "--config " + file;
      if (const auto* named = dynamic_cast<const po::error_with_option_name*>(&e)) {
        std::string name = named->get_option_name();
        name.erase(0, name.find_first_not_of('-'));
        if (const auto it = lines.find(name); it != lines.end()) where += ":" + std::to_string(it->second);
      }
      return usage_error(where + ": " + e.what());
    };
    std::istringstream in(text);
    po::parsed_options from_config(&from_file);
    try {
      from_config = po::parse_config_file(in, from_file, false);
    } catch (const po::error& e) {
      throw with_line(e);
    }
    check_values(from_config, from_file, file, lines);
    try {
      po::store(from_config, vm);
    } catch (const po::error& e) {
      throw with_line(e);
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
