// SPDX-License-Identifier: Apache-2.0
// Task suites and mask metadata (see bosch/eval/suite.hpp).

#include <bosch/error.hpp>
#include <bosch/eval/suite.hpp>
#include <bosch/io/atomic_file.hpp>
#include <bosch/io/options_json.hpp>
#include <bosch/io/search_metadata.hpp>
#include <bosch/mask.hpp>
#include <bosch/tasks/generate.hpp>
#include <bosch/tasks/records.hpp>
#include <bosch/version.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_real_distribution.hpp>

#include <algorithm>
#include <cmath>

namespace bosch {

std::vector<tasks::TaskSource> parse_task_list(std::string_view list) {
  std::vector<tasks::TaskSource> kinds;
  std::size_t pos = 0;
  while (pos <= list.size()) {
    std::size_t comma = list.find(',', pos);
    if (comma == std::string_view::npos) comma = list.size();
    std::string_view name = list.substr(pos, comma - pos);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    if (!name.empty()) {
      try {
        kinds.push_back(tasks::parse_task_source(name));
      } catch (const error& e) {
        throw invalid_argument(e.message(), "tasks");
      }
    }
    pos = comma + 1;
  }
  if (kinds.empty()) throw invalid_argument("no task given", "tasks");
  return kinds;
}

std::string task_list_string(const std::vector<tasks::TaskSource>& kinds) {
  std::string s;
  for (auto k : kinds) {
    if (!s.empty()) s += ',';
    s += tasks::to_string(k);  // "passkey", "file:PATH"
  }
  return s;
}

void validate(const TaskSuiteOptions& o) {
  if (o.kinds.empty()) throw invalid_argument("no task given", "tasks");
  if (o.context_length < 32)
    throw invalid_argument("must be at least 32 tokens, got " + std::to_string(o.context_length),
                           "context");
  for (int c : o.more_contexts)
    if (c < 32) throw invalid_argument("must be at least 32 tokens, got " + std::to_string(c), "context");
  if (o.calibration_samples < 1)
    throw invalid_argument("must be at least 1, got " + std::to_string(o.calibration_samples),
                           "samples");
  if (o.held_out_samples < 0)
    throw invalid_argument("must be at least 0, got " + std::to_string(o.held_out_samples),
                           "held-out-samples");
  // A named file must exist and be text whether or not the tasks read text:
  // a typo is never silently ignored.
  for (const auto& f : o.text_files) io::check_input_file(f);
  if (!(o.held_out_fraction >= 0 && o.held_out_fraction <= 1))
    throw invalid_argument("must be in [0, 1], got " + std::to_string(o.held_out_fraction), "held_out_fraction");
  // Task files are read and checked here, before any model work: a bad
  // record fails with its file and line at once.
  for (const auto& t : o.kinds)
    if (t.kind == tasks::TaskKind::file) tasks::read_records(t.file);
}

std::vector<std::vector<double>> stratified_depths(int kinds, int n, std::uint64_t seed) {
  boost::random::mt19937_64 rng(seed ^ 0x5D2A7E1F0C3B9A64ULL);  // not the generator's own stream
  boost::random::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<std::vector<double>> d(static_cast<std::size_t>(kinds), std::vector<double>(static_cast<std::size_t>(n)));
  std::vector<int> order(static_cast<std::size_t>(kinds));
  for (int i = 0; i < n; ++i) {
    // Stratum i's K sub-strata dealt to the kinds in a random order (Fisher-Yates).
    for (int k = 0; k < kinds; ++k) order[static_cast<std::size_t>(k)] = k;
    for (int k = kinds - 1; k > 0; --k) {
      const int j = static_cast<int>(u(rng) * (k + 1));
      std::swap(order[static_cast<std::size_t>(k)], order[static_cast<std::size_t>(std::min(j, k))]);
    }
    for (int k = 0; k < kinds; ++k)
      d[static_cast<std::size_t>(k)][static_cast<std::size_t>(i)] =
          (i + (order[static_cast<std::size_t>(k)] + u(rng)) / kinds) / n;
  }
  return d;
}

std::vector<tasks::TaskSpec> suite_specs(const TaskSuiteOptions& o, tasks::Split split) {
  validate(o);
  std::vector<int> lengths{o.context_length};
  lengths.insert(lengths.end(), o.more_contexts.begin(), o.more_contexts.end());
  std::vector<tasks::TaskSpec> specs;
  const int built_in_kinds = static_cast<int>(
      std::count_if(o.kinds.begin(), o.kinds.end(), [](const tasks::TaskSource& t) { return t.file.empty(); }));
  for (std::size_t i = 0; i < lengths.size(); ++i) {
    // The first length keeps the task seed (its samples are those of a
    // single-length suite); each further one gets a stream of its own.
    const std::uint64_t seed = i == 0 ? o.seed : o.seed ^ (0x9E3779B97F4A7C15ULL * static_cast<std::uint64_t>(i));
    // Stratified calibration depths: one table per length over its built-in kinds.
    const auto strata = o.stratified_depths && split == tasks::Split::calibration
                            ? stratified_depths(built_in_kinds, o.calibration_samples, seed)
                            : std::vector<std::vector<double>>{};
    std::size_t built_in = 0;
    for (const auto& task : o.kinds) {
      tasks::TaskSpec spec;
      spec.kind = task.kind;
      spec.records = task.file;
      spec.truncation = o.truncation;
      spec.held_out_fraction = o.held_out_fraction;
      spec.split_seed = o.split_seed;
      spec.context_length = lengths[i];
      spec.seed = seed;
      spec.text_files = o.text_files;
      if (o.chat) spec.format = tasks::chatml();
      auto pair = tasks::calibration_and_held_out(spec);
      tasks::TaskSpec s = split == tasks::Split::calibration ? pair.calibration : pair.held_out;
      s.num_samples = split == tasks::Split::calibration ? o.calibration_samples : o.held_out_samples;
      if (split == tasks::Split::calibration && o.stratified_depths && s.records.empty())
        s.depths = strata.at(built_in++);
      specs.push_back(std::move(s));
    }
  }
  return specs;
}

TaskSuite make_task_suite(const TaskSuiteOptions& o, const model::Tokenizer& tokenizer,
                          bool with_held_out) {
  TaskSuite suite;
  const auto cal = suite_specs(o, tasks::Split::calibration);
  suite.calibration = tasks::generate(cal, tokenizer);
  if (with_held_out && o.held_out_samples > 0) {
    const auto held = suite_specs(o, tasks::Split::held_out);
    suite.held_out = tasks::generate(held, tokenizer);
  }
  return suite;
}

nlohmann::json to_json(const TaskSuiteOptions& o) {
  nlohmann::json contexts = nlohmann::json::array({o.context_length});
  for (int c : o.more_contexts) contexts.push_back(c);
  nlohmann::json j{{"tasks", task_list_string(o.kinds)},
                   {"context", o.more_contexts.empty() ? nlohmann::json(o.context_length) : contexts},
                   {"samples", o.calibration_samples},
                   {"held_out_samples", o.held_out_samples},
                   {"chat", o.chat},
                   {"task_seed", o.seed}};
  if (o.stratified_depths) j["stratified_depths"] = true;  // absent: RULER's depths, as before
  nlohmann::json files = task_files_json(o);
  if (!files.empty()) {
    j["task_files"] = std::move(files);
    j["truncation"] = std::string(tasks::to_string(o.truncation));
    j["held_out_fraction"] = o.held_out_fraction;
    j["split_seed"] = o.split_seed;
  }
  return j;
}

void check_task_files(const nlohmann::json& metadata, const TaskSuiteOptions& suite, const std::string& where) {
  if (!metadata.is_object() || !metadata.contains("task_files") || !metadata["task_files"].is_array()) return;
  for (const auto& t : suite.kinds) {
    if (t.kind != tasks::TaskKind::file) continue;
    const std::string name = tasks::record_task_name(t.file);
    for (const auto& r : metadata["task_files"]) {
      if (!r.is_object() || r.value("task", "") != name || !r.contains("sha256")) continue;
      const std::string then = r["sha256"].is_string() ? r["sha256"].get<std::string>() : "";
      const std::string now = tasks::read_records(t.file).sha256;
      if (then != now)
        throw invalid_argument(t.file.string() + " changed since the mask was chosen on it (sha256 " + then.substr(0, 12) +
                                   "..., now " + now.substr(0, 12) +
                                   "...): its held-out split may hold records the mask calibrated on; score the file the "
                                   "mask names, or other data under another file name",
                               where);
    }
  }
}

std::string file_task_summary(const tasks::TaskSet& set) {
  std::string out;
  std::size_t pos = 0;
  while (pos < set.description.size()) {
    std::size_t end = set.description.find('\n', pos);
    if (end == std::string::npos) end = set.description.size();
    const std::string_view l(set.description.data() + pos, end - pos);
    if (l.substr(0, 5) == "file:") out += "  " + std::string(l) + "\n";
    pos = end + 1;
  }
  return out;
}

nlohmann::json task_files_json(const TaskSuiteOptions& o) {
  nlohmann::json files = nlohmann::json::array();
  for (const auto& t : o.kinds) {
    if (t.kind != tasks::TaskKind::file) continue;
    const tasks::RecordFile f = tasks::read_records(t.file);
    const auto held = tasks::split_records(f.records.size(), o.held_out_fraction, o.split_seed, tasks::Split::held_out);
    files.push_back({{"task", tasks::record_task_name(t.file)},
                     {"file", t.file.filename().string()},
                     {"sha256", f.sha256},
                     {"records", f.records.size()},
                     {"calibration_records", f.records.size() - held.size()},
                     {"held_out_records", held.size()}});
  }
  return files;
}

void update_from_json(TaskSuiteOptions& o, const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) throw format_error("not a JSON object", where);
  auto field = [&](const char* key, auto& out) {
    if (!j.contains(key) || j[key].is_null()) return;
    try {
      out = j[key].get<std::remove_reference_t<decltype(out)>>();
    } catch (const nlohmann::json::exception&) {
      throw format_error("wrongly typed value " + j[key].dump(), where + ": " + key);
    }
  };
  std::string list;
  field("tasks", list);
  if (!list.empty()) o.kinds = parse_task_list(list);
  if (j.contains("context") && j["context"].is_array()) {
    std::vector<int> lengths;
    field("context", lengths);
    if (lengths.empty()) throw format_error("empty list", where + ": context");
    o.context_length = lengths.front();
    o.more_contexts.assign(lengths.begin() + 1, lengths.end());
  } else {
    field("context", o.context_length);
    if (j.contains("context")) o.more_contexts.clear();
  }
  field("samples", o.calibration_samples);
  field("held_out_samples", o.held_out_samples);
  field("chat", o.chat);
  field("task_seed", o.seed);
  field("stratified_depths", o.stratified_depths);
  if (j.contains("truncation") && j["truncation"].is_string()) {
    try {
      o.truncation = tasks::parse_truncation(j["truncation"].get<std::string>());
    } catch (const error& e) {
      throw format_error(e.message(), where + ": truncation");
    }
  }
  field("held_out_fraction", o.held_out_fraction);
  field("split_seed", o.split_seed);
}

nlohmann::json mask_metadata(const model::Model& model, const Options& options,
                             const Result& result, const TransformerEvaluatorOptions& evaluator,
                             const TaskSuiteOptions& suite) {
  nlohmann::json m = search_metadata(options, result);
  m["layout"] = to_string(model.config.layout());
  m["model"] = model.config.name;
  m["model_file"] = model.source.filename().string();
  m["model_fingerprint"] = model.fingerprint;
  m["architecture"] = model::to_string(model.config.arch);
  m["window"] = evaluator.window;
  m["sinks"] = evaluator.sinks;
  m.update(to_json(suite));
  return m;
}

}  // namespace bosch
