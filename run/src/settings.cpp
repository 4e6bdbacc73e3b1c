// SPDX-License-Identifier: Apache-2.0
// The settings table of a run (see bosch/run/settings.hpp).

#include <bosch/io/atomic_file.hpp>
#include <bosch/io/options_json.hpp>
#include <bosch/io/shortest_text.hpp>
#include <bosch/run/deploy_recipe.hpp>
#include <bosch/run/settings.hpp>
#include <bosch/tasks/records.hpp>
#include <bosch/tasks/text.hpp>

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <type_traits>

namespace bosch {

namespace detail {

std::string check_model_path(const std::string& v) {
  return v.empty() ? "no model given" : std::string();
}
std::string check_non_negative(const int& v) {
  return v >= 0 ? std::string() : "must be >= 0, got " + std::to_string(v);
}
std::string check_tasks(const std::vector<tasks::TaskSource>& v) {
  if (v.empty()) return "no task given";
  for (std::size_t i = 0; i < v.size(); ++i)
    if (std::find(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v[i]) != v.begin() + static_cast<std::ptrdiff_t>(i))
      return "task " + std::string(tasks::to_string(v[i])) + " given twice (--samples sets the samples per task)";
  return {};
}
std::string check_fraction(const double& v) {
  return v >= 0 && v <= 1 ? std::string() : "must be in [0, 1], got " + io::shortest_text(v);
}
std::string check_contexts(const std::vector<int>& v) {
  if (v.empty()) return "no context length given";
  for (std::size_t i = 0; i < v.size(); ++i) {
    // The upper limits (the model's trained context, max_context) are
    // validate_for_model's: the first one a user meets is the model's.
    if (v[i] < 32) return "must be at least 32 tokens, got " + std::to_string(v[i]);
    if (std::find(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(i), v[i]) != v.begin() + static_cast<std::ptrdiff_t>(i))
      return "context length " + std::to_string(v[i]) + " given twice";
  }
  return {};
}
std::string check_deploy_context(const int& v) {
  return v == 0 || v >= 32 ? std::string() : "must be 0 (not said) or at least 32 tokens, got " + std::to_string(v);
}
std::string check_samples(const int& v) {
  if (v < 1) return "must be at least 1, got " + std::to_string(v);
  if (v > max_samples) return "at most " + std::to_string(max_samples) + " per task, got " + std::to_string(v);
  return {};
}
std::string check_held_out_samples(const int& v) {
  if (v < 0) return "must be at least 0, got " + std::to_string(v);
  if (v > max_samples) return "at most " + std::to_string(max_samples) + " per task, got " + std::to_string(v);
  return {};
}
std::string check_window(const int& v) {
  return v >= 1 ? std::string() : "window must be at least 1 token, got " + std::to_string(v);
}
std::string check_sinks(const int& v) {
  return v >= 0 ? std::string() : "sinks must be at least 0, got " + std::to_string(v);
}

}  // namespace detail

TaskSuiteOptions RunSettings::suite() const {
  TaskSuiteOptions s;
  s.kinds = tasks;
  s.context_length = context.empty() ? s.context_length : context.front();
  if (context.size() > 1) s.more_contexts.assign(context.begin() + 1, context.end());
  s.calibration_samples = samples;
  s.held_out_samples = held_out_samples;
  s.chat = chat;
  s.seed = task_seed;
  s.stratified_depths = stratified_depths;
  for (const auto& f : text_files) s.text_files.emplace_back(f);
  s.truncation = truncation;
  s.held_out_fraction = held_out_fraction;
  s.split_seed = split_seed;
  return s;
}

TaskSuiteOptions RunSettings::suite_at(int tokens) const {
  TaskSuiteOptions s = suite();
  s.context_length = tokens;
  s.more_contexts.clear();
  return s;
}

TransformerEvaluatorOptions RunSettings::evaluator() const {
  TransformerEvaluatorOptions e;
  e.window = window;
  e.sinks = sinks;
  e.cache_bytes = cache_bytes;
  e.shared_prefix = shared_prefix;
  return e;
}

int RunSettings::longest_context() const {
  return context.empty() ? 0 : *std::max_element(context.begin(), context.end());
}
int RunSettings::shortest_context() const {
  return context.empty() ? 0 : *std::min_element(context.begin(), context.end());
}

std::string setting_name(std::string_view field) { return std::string(field); }

void validate(const RunSettings& s, const SettingNamer& names) {
  for_each_setting([&](const auto& f) {
    if (f.check == nullptr) return;
    const std::string msg = f.check(s.*f.member);
    if (!msg.empty()) throw invalid_argument(msg, names(f.name));
  });
  if (static_cast<long long>(s.window) + s.sinks >= s.shortest_context())
    throw invalid_argument("window " + std::to_string(s.window) + " plus " + std::to_string(s.sinks) +
                               " sinks must be less than " + names("context") + " " +
                               std::to_string(s.shortest_context()) +
                               " (else an SWA head sees the whole sample, like a full head)",
                           names("window"));
  if (s.deploy_context > 0 && static_cast<long long>(s.window) + s.sinks >= s.deploy_context)
    throw invalid_argument("a mask for " + std::to_string(s.deploy_context) + " tokens with window " +
                               std::to_string(s.window) + " plus " + std::to_string(s.sinks) +
                               " sinks has nothing to window (every SWA head sees the whole sample)",
                           names("deploy_context"));
  // A named text file must exist and be text whether or not the tasks read
  // text: a typo is never silently ignored. Read and check it now (UTF-8, at
  // least one sentence), before any model loads: a binary file is refused
  // with its byte offset, not used as a haystack.
  if (!s.text_files.empty()) {
    std::vector<std::filesystem::path> files;
    try {
      for (const auto& f : s.text_files) {
        io::check_input_file(f);
        files.emplace_back(f);
      }
    } catch (const file_error& e) {
      throw file_error(e.what(), names("text_files"));
    }
    try {
      (void)tasks::load_corpus(files);
    } catch (const error& e) {
      throw format_error(e.what(), names("text_files"));
    }
  }
  // Task files likewise: every record is read and checked (JSON, fields,
  // UTF-8) before any model loads, and a bad one named by file and line.
  for (const auto& t : s.tasks) {
    if (t.kind != tasks::TaskKind::file) continue;
    try {
      (void)tasks::read_records(t.file);
    } catch (const file_error& e) {
      throw file_error(e.what(), names("tasks"));
    } catch (const error& e) {
      throw format_error(e.what(), names("tasks"));
    }
  }
}

void apply_deploy_context(RunSettings& s, bool context_given, const SettingNamer& names) {
  if (s.deploy_context <= 0) return;
  if (context_given)
    throw invalid_argument("chooses the calibration contexts for " + std::to_string(s.deploy_context) +
                               " tokens itself: give " + names("context") + " or " + names("deploy_context") +
                               ", not both",
                           names("deploy_context"));
  if (!detail::check_deploy_context(s.deploy_context).empty() || s.window < 1 || s.sinks < 0 ||
      static_cast<long long>(s.window) + s.sinks >= s.deploy_context)
    return;  // validate() names what is wrong
  s.context = deploy_contexts(s.deploy_context, s.window, s.sinks);
}

void check_held_out(const RunSettings& s, const SettingNamer& names) {
  if (s.held_out_samples < 1)
    throw invalid_argument("must be at least 1 for a held-out report, got " + std::to_string(s.held_out_samples),
                           names("held_out_samples"));
}

void check_context_for_model(long long tokens, const model::Config& config, bool allow_long_context,
                             const std::string& option) {
  if (!allow_long_context && config.max_position > 0 && tokens > config.max_position)
    throw invalid_argument(std::to_string(tokens) + " tokens exceed the model's trained context of " +
                               std::to_string(config.max_position) +
                               " tokens (--allow-long-context extrapolates beyond it, up to " +
                               std::to_string(max_context) + ")",
                           option);
  if (tokens > max_context)
    throw invalid_argument("at most " + std::to_string(max_context) + " tokens, got " + std::to_string(tokens),
                           option);
}

void validate_for_model(const RunSettings& s, const model::Config& config, const SettingNamer& names) {
  // The deployment context first: the calibration contexts may be its recipe's.
  if (s.deploy_context > 0)
    check_context_for_model(s.deploy_context, config, s.allow_long_context, names("deploy_context"));
  for (int c : s.context) check_context_for_model(c, config, s.allow_long_context, names("context"));
}

std::vector<int> parse_context_list(std::string_view list, const std::string& where) {
  std::vector<int> out;
  std::size_t pos = 0;
  while (pos <= list.size()) {
    std::size_t comma = list.find(',', pos);
    if (comma == std::string_view::npos) comma = list.size();
    std::string_view item = list.substr(pos, comma - pos);
    pos = comma + 1;
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    if (item.empty()) continue;
    int v = 0;
    const auto r = std::from_chars(item.data(), item.data() + item.size(), v);
    if (r.ec != std::errc() || r.ptr != item.data() + item.size())
      throw invalid_argument("expected a token count, got '" + std::string(item) + "'", where);
    out.push_back(v);
  }
  if (out.empty()) throw invalid_argument("no context length given", where);
  return out;
}

std::string context_list_string(const std::vector<int>& contexts) {
  std::string s;
  for (int c : contexts) {
    if (!s.empty()) s += ',';
    s += std::to_string(c);
  }
  return s;
}

/// The JSON forms of the run settings' own types (bosch::json_codec):
/// tasks as "a,b", a single context as a number (several as a list), text
/// files by file name (paths are machine-specific; never read back).
template <>
struct json_codec<std::vector<tasks::TaskSource>> {
  static nlohmann::json to(const std::vector<tasks::TaskSource>& v) { return task_list_string(v); }
  static std::vector<tasks::TaskSource> from(const nlohmann::json& v, const std::string& at) {
    if (!v.is_string()) throw format_error(std::string("expected a string, found ") + v.type_name(), at);
    return parse_task_list(v.get<std::string>());
  }
};
template <>
struct json_codec<std::vector<int>> {
  static nlohmann::json to(const std::vector<int>& v) {
    return v.size() == 1 ? nlohmann::json(v.front()) : nlohmann::json(v);
  }
  static std::vector<int> from(const nlohmann::json& v, const std::string& at) {
    if (!v.is_array()) return {detail::json_integer<int>(v, at)};
    std::vector<int> out;
    for (const auto& x : v) out.push_back(detail::json_integer<int>(x, at));
    return out;
  }
};
template <>
struct json_codec<std::vector<std::string>> {
  static nlohmann::json to(const std::vector<std::string>& v) {
    nlohmann::json names = nlohmann::json::array();
    for (const auto& f : v) names.push_back(std::filesystem::path(f).filename().string());
    return names;
  }
};

namespace {

bool has_role(FieldRole r, std::initializer_list<FieldRole> roles) {
  return std::find(roles.begin(), roles.end(), r) != roles.end();
}

}  // namespace

nlohmann::json to_json(const RunSettings& s, std::initializer_list<FieldRole> roles) {
  nlohmann::json j = nlohmann::json::object();
  for_each_setting([&](const auto& f) {
    if (f.name == "model" || !has_role(f.role, roles)) return;
    j[std::string(f.name)] = json_codec<typename std::decay_t<decltype(f)>::value_type>::to(s.*f.member);
  });
  return j;
}

void update_from_json(RunSettings& s, const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw format_error("not a JSON object", where);
  for_each_setting([&](const auto& f) {
    using T = typename std::decay_t<decltype(f)>::value_type;
    const std::string key(f.name);
    if constexpr (!std::is_same_v<T, std::string> && !std::is_same_v<T, std::vector<std::string>>) {
      if (!j.contains(key) || j[key].is_null()) return;
      const std::string at = where + ": " + key;
      T v = json_codec<T>::from(j[key], at);
      if (f.check != nullptr) {
        const std::string msg = f.check(v);
        if (!msg.empty()) throw invalid_argument(msg, at);
      }
      s.*f.member = std::move(v);
    }
  });
}

}  // namespace bosch
