// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file run/settings.hpp
/// RunSettings: every setting of a run of the bundled evaluator (the model
/// and where it runs, the task suite, the attention windows), and
/// for_each_setting(), the one table of them. Built like bosch::Options'
/// for_each_option (options.hpp): each setting's default (the member
/// initializer below, taken from the lower-level structs where one exists),
/// domain check, JSON key, command-line flag, help text and Python keyword
/// are written once, here, and the `bosch` program (apps/bosch/run_settings_cli),
/// the Python package (bosch.TransformerEvaluator) and the mask metadata are
/// generated from it. docs/cli.md and docs/python.md list the table.

#include <bosch/cpu/backend.hpp>
#include <bosch/cpu/precision.hpp>
#include <bosch/error.hpp>
#include <bosch/field.hpp>
#include <bosch/options.hpp>
#include <bosch/eval/suite.hpp>
#include <bosch/eval/transformer_evaluator.hpp>
#include <bosch/model/config.hpp>
#include <bosch/tasks/task.hpp>

#include <nlohmann/json.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace bosch {

/// Where forward passes run.
enum class Device {
  cpu,   ///< the CPU backend (bosch::cpu::Backend)
  cuda,  ///< the CUDA backend (bosch::cuda::Backend; builds with nvcc only)
};
inline const char* to_string(Device d) noexcept { return d == Device::cpu ? "cpu" : "cuda"; }
template <>
struct enum_values<Device> {
  static constexpr std::array values{Device::cpu, Device::cuda};
  /// "cpu" or "cuda"; bosch::invalid_argument naming `where` otherwise
  /// ("unknown device 'tpu' (expected cpu or cuda)").
  static Device parse(std::string_view text, const std::string& where) {
    for (Device d : values)
      if (text == to_string(d)) return d;
    throw invalid_argument("unknown device '" + std::string(text) + "' (expected cpu or cuda)", where);
  }
};

template <>
struct enum_values<cpu::Precision> {
  static constexpr std::array values{cpu::Precision::fp32, cpu::Precision::bf16, cpu::Precision::automatic};
  /// cpu::parse_precision: also "auto".
  static cpu::Precision parse(std::string_view text, const std::string& where) {
    return cpu::parse_precision(text, where);
  }
};

template <>
struct enum_values<tasks::Truncation> {
  static constexpr std::array values{tasks::Truncation::middle, tasks::Truncation::refuse};
};

/// The longest sample (tokens) any run generates, even with
/// allow_long_context: a typo such as a context of 99999999 fails at once
/// instead of generating text for minutes.
inline constexpr int max_context = 1 << 20;
/// The most samples per task (calibration or held-out).
inline constexpr int max_samples = 10000;

/// Every setting of a run of the bundled evaluator. Each member's default is
/// the library's default (the lower-level structs' where they have the
/// setting), which the command line and Python show, never restate.
struct RunSettings {
  // --- the model and where it runs ------------------------------------------------
  /// GGUF file or Hugging Face model directory.
  std::string model;
  Device device = Device::cpu;
  int gpu = 0;      ///< CUDA device index
  int threads = 0;  ///< CPU threads; 0 = all hardware threads (more are capped)
  /// Arithmetic of the calibration forwards (docs/precision.md): fp32, bf16
  /// (fp32 accumulation) or automatic (bf16 where the CPU runs it natively,
  /// else fp32). Held-out reports always run in fp32. The CUDA backend
  /// computes in bf16 (fp32 is refused there).
  cpu::Precision precision = cpu::Options{}.precision;

  // --- the task suite (TaskSuiteOptions) --------------------------------------------
  std::vector<tasks::TaskSource> tasks = TaskSuiteOptions{}.kinds;
  /// Tokens per sample (prompt + answer). Several lengths calibrate on
  /// samples of each (`samples` per task and length), one score over all.
  std::vector<int> context{TaskSuiteOptions{}.context_length};
  /// Allow a context beyond the model's trained context (length
  /// extrapolation), up to max_context.
  bool allow_long_context = false;
  /// The context (tokens) the mask is for; 0 = not said. Given without
  /// `context`, the calibration contexts are deploy_contexts() of it
  /// (run/deploy_recipe.hpp; apply_deploy_context); the mask records it and
  /// `bosch evaluate --mask` reports at it.
  int deploy_context = 0;
  int samples = TaskSuiteOptions{}.calibration_samples;     ///< calibration samples per task
  int held_out_samples = TaskSuiteOptions{}.held_out_samples;  ///< held-out samples per task
  bool chat = TaskSuiteOptions{}.chat;                      ///< ChatML prompts (instruct models)
  std::uint64_t task_seed = TaskSuiteOptions{}.seed;        ///< the task generator's seed
  /// Calibration needles at stratified depths (TaskSuiteOptions::stratified_depths).
  bool stratified_depths = TaskSuiteOptions{}.stratified_depths;
  /// Natural-text files for the haystacks; empty = $BOSCH_CACHE/text/*.txt.
  std::vector<std::string> text_files;
  /// File tasks (tasks/records.hpp): a record longer than the context is
  /// cut in the middle or refused.
  tasks::Truncation truncation = TaskSuiteOptions{}.truncation;
  /// File tasks: the fraction of each file's records held out, and the seed
  /// of that split (independent of task_seed: no task seed ever calibrates
  /// on a record another one held out).
  double held_out_fraction = TaskSuiteOptions{}.held_out_fraction;
  std::uint64_t split_seed = TaskSuiteOptions{}.split_seed;

  // --- the evaluator (TransformerEvaluatorOptions) ------------------------------------
  int window = TransformerEvaluatorOptions{}.window;  ///< w of an SWA head
  int sinks = TransformerEvaluatorOptions{}.sinks;    ///< s sink tokens an SWA head also sees
  /// Bound of the residual-stream cache in bytes (0 = off).
  std::size_t cache_bytes = TransformerEvaluatorOptions{}.cache_bytes;
  /// Compute each sample's mask-invariant first rows once (TransformerEvaluatorOptions::shared_prefix).
  bool shared_prefix = TransformerEvaluatorOptions{}.shared_prefix;

  /// The task suite these settings describe (the first, and for the held-out
  /// split the only, context: see suite_at()).
  TaskSuiteOptions suite() const;
  /// The suite at context length `tokens` (held-out sets at other lengths).
  TaskSuiteOptions suite_at(int tokens) const;
  /// Window, sinks and cache bound of the evaluator.
  TransformerEvaluatorOptions evaluator() const;
  /// The longest and shortest calibration context.
  int longest_context() const;
  int shortest_context() const;
};

/// The --help section of a setting (Field::group): commands take the
/// settings of the sections they need (apps/bosch/run_options.hpp).
enum class SettingGroup {
  model,      ///< the model and where it runs
  tasks,      ///< the task suite
  evaluator,  ///< the windows and the evaluator's cache
};
constexpr std::string_view group_title(SettingGroup g) noexcept {
  return g == SettingGroup::model ? "Model" : g == SettingGroup::tasks ? "Tasks" : "Evaluator";
}

/// One RunSettings member (bosch/field.hpp); its group is a SettingGroup's title.
template <class T>
using SettingField = Field<RunSettings, T>;

namespace detail {
std::string check_model_path(const std::string& v);
std::string check_non_negative(const int& v);
std::string check_tasks(const std::vector<tasks::TaskSource>& v);
std::string check_contexts(const std::vector<int>& v);
std::string check_deploy_context(const int& v);
std::string check_samples(const int& v);
std::string check_held_out_samples(const int& v);
std::string check_window(const int& v);
std::string check_fraction(const double& v);
std::string check_sinks(const int& v);
}  // namespace detail

/// Calls `f(SettingField<T>{...})` for every RunSettings member, in
/// declaration order: the single list of the settings.
template <class F>
void for_each_setting(F&& f) {
  using S = RunSettings;
  using R = FieldRole;
  constexpr std::string_view in_model = group_title(SettingGroup::model),
                             in_tasks = group_title(SettingGroup::tasks),
                             in_evaluator = group_title(SettingGroup::evaluator);
  // clang-format off
  f(SettingField<std::string>{"model", &S::model,
      "GGUF file or Hugging Face model directory", detail::check_model_path,
      R::identity, "model,m", "PATH", in_model});
  f(SettingField<Device>{"device", &S::device, "where forward passes run: cpu | cuda",
      nullptr, R::run, {}, {}, in_model});
  f(SettingField<int>{"gpu", &S::gpu, "CUDA device index", detail::check_non_negative,
      R::run, {}, {}, in_model});
  f(SettingField<int>{"threads", &S::threads, "CPU threads (0 = all cores)",
      detail::check_non_negative, R::run, {}, {}, in_model});
  f(SettingField<cpu::Precision>{"precision", &S::precision,
      "arithmetic of the calibration forwards: fp32 | bf16 | automatic (bf16 where the CPU runs "
      "it natively, else fp32); held-out reports always run in fp32",
      nullptr, R::identity, {}, {}, in_model});
  f(SettingField<std::vector<tasks::TaskSource>>{"tasks", &S::tasks,
      "tasks: niah_single_1..3, niah_multikey_1..3, niah_multivalue, niah_multiquery, "
      "passkey, copy, and file:PATH.jsonl for your own records ({\"prompt\", \"answer\"} or "
      "{\"context\", \"question\", \"answer\"} per line; docs/tasks.md)",
      detail::check_tasks, R::identity, "tasks,t", "LIST", in_tasks});
  f(SettingField<std::vector<int>>{"context", &S::context,
      "tokens per task sample (prompt + answer), at most the model's trained context; several "
      "lengths (512,1024) calibrate on samples of each, which holds a mask to longer contexts "
      "(docs/results/mixed-length)", detail::check_contexts,
      R::identity, "context,c", "TOKENS[,...]", in_tasks});
  f(SettingField<bool>{"allow_long_context", &S::allow_long_context,
      "allow a context beyond the model's trained context (length extrapolation), up to 1048576",
      nullptr, R::run, {}, {}, in_tasks});
  f(SettingField<int>{"deploy_context", &S::deploy_context,
      "the context the mask is for (0 = not said): without --context, calibrate at the lengths "
      "measured to hold there for this window (two lengths up to a quarter of it, "
      "docs/results/long-smollm2); the mask records it and `bosch evaluate --mask` reports at it",
      detail::check_deploy_context, R::report, {}, "TOKENS", in_tasks});
  f(SettingField<int>{"samples", &S::samples,
      "calibration samples per task (and context length): the search's objective",
      detail::check_samples, R::identity, "samples,n", {}, in_tasks});
  f(SettingField<int>{"held_out_samples", &S::held_out_samples,
      "held-out samples per task (reports: each figure with a 95% bootstrap interval over them; "
      "use at least 16 for published tables)", detail::check_held_out_samples,
      R::report, {}, {}, in_tasks});
  f(SettingField<bool>{"chat", &S::chat, "wrap prompts in the ChatML template (instruct models)",
      nullptr, R::identity, {}, {}, in_tasks});
  f(SettingField<std::uint64_t>{"task_seed", &S::task_seed, "seed of the task generator",
      nullptr, R::identity, {}, {}, in_tasks});
  f(SettingField<bool>{"stratified_depths", &S::stratified_depths,
      "calibration needles at stratified depths (sample i of n of a task in [i/n, (i+1)/n)) "
      "instead of RULER's random ones, so few samples cover near and far needles (docs/tasks.md)",
      nullptr, R::identity, {}, {}, in_tasks});
  f(SettingField<std::vector<std::string>>{"text_files", &S::text_files,
      "natural-text files for haystacks (default: $BOSCH_CACHE/text/*.txt)",
      nullptr, R::identity, {}, "FILE...", in_tasks});
  f(SettingField<tasks::Truncation>{"truncation", &S::truncation,
      "file tasks: a record longer than the context is cut in the middle, keeping its first and "
      "last tokens (middle), or refused (refuse)", nullptr, R::identity, {}, {}, in_tasks});
  f(SettingField<double>{"held_out_fraction", &S::held_out_fraction,
      "file tasks: the fraction of each file's records held out for reports (the rest calibrate)",
      detail::check_fraction, R::identity, {}, {}, in_tasks});
  f(SettingField<std::uint64_t>{"split_seed", &S::split_seed,
      "file tasks: the seed of the split into calibration and held-out records (not the task "
      "seed, so no task seed calibrates on another's held-out records)",
      nullptr, R::identity, {}, {}, in_tasks});
  f(SettingField<int>{"window", &S::window,
      "sliding window w of SWA heads (a query sees the last w keys)", detail::check_window,
      R::identity, "window,w", "TOKENS", in_evaluator});
  f(SettingField<int>{"sinks", &S::sinks, "sink tokens at the start that SWA heads also see",
      detail::check_sinks, R::identity, "sinks,s", "TOKENS", in_evaluator});
  f(SettingField<std::size_t>{"cache_bytes", &S::cache_bytes,
      "bound of the residual-stream cache in bytes (0 = off; does not change scores)", nullptr,
      R::run, {}, "BYTES", in_evaluator});
  f(SettingField<bool>{"shared_prefix", &S::shared_prefix,
      "compute each sample's first min(window, first answer position) rows, the same under every "
      "mask, once, and run only the later rows, in the last layer only the answer rows "
      "(CPU; scores change by fp32 rounding only)",
      nullptr, R::identity, {}, {}, in_evaluator});
  // clang-format on
}

/// How a setting is named in a message: "context" (the library, Python) or
/// "--context" (the command line).
using SettingNamer = std::function<std::string(std::string_view field)>;
/// The library's namer: the field's own name.
std::string setting_name(std::string_view field);

/// Throws bosch::invalid_argument (where = names(field)) unless every setting
/// is in its domain and the settings agree with each other: window + sinks
/// shorter than the shortest context (else an SWA head sees the whole
/// sample, like a full head). Text files must exist and be UTF-8 text
/// (bosch::file_error / format_error naming names("text_files")).
void validate(const RunSettings& s, const SettingNamer& names = setting_name);

/// The deployment recipe: with s.deploy_context > 0 and no context given
/// (`context_given` false), s.context becomes deploy_contexts(deploy_context,
/// window, sinks); with both given, bosch::invalid_argument naming
/// names("deploy_context") (each chooses the calibration lengths).
void apply_deploy_context(RunSettings& s, bool context_given, const SettingNamer& names = setting_name);

/// For a held-out report: bosch::invalid_argument naming
/// names("held_out_samples") unless it is at least 1.
void check_held_out(const RunSettings& s, const SettingNamer& names = setting_name);

/// The checks that need the model's configuration: every context at most the
/// model's trained context unless allow_long_context (positions past it are
/// an extrapolation: RoPE angles the model never saw) and at most
/// max_context; `option` names the setting ("context").
void check_context_for_model(long long tokens, const model::Config& config, bool allow_long_context,
                             const std::string& option);
/// check_context_for_model for every calibration context of `s`.
void validate_for_model(const RunSettings& s, const model::Config& config,
                        const SettingNamer& names = setting_name);

/// The settings as JSON, one key per setting of the given roles (all by
/// default): tasks as "a,b", a single context as a number (several as a
/// list), text files by file name (paths are machine-specific), device by
/// name. Mask metadata records the identity and report settings.
nlohmann::json to_json(const RunSettings& s, std::initializer_list<FieldRole> roles = {
                                                 FieldRole::identity, FieldRole::report, FieldRole::run});

/// Reads back the keys of to_json() present in `j` (absent and null ones keep
/// their values; "model" and "text_files" are never read: they name files of
/// the machine that wrote them). Throws bosch::format_error (where = `where`:
/// key) on a wrongly typed value, bosch::invalid_argument on a value outside
/// its domain.
void update_from_json(RunSettings& s, const nlohmann::json& j, const std::string& where);

/// Parses a comma-separated list of context lengths ("512,1024").
std::vector<int> parse_context_list(std::string_view list, const std::string& where);
/// "512" or "512,1024".
std::string context_list_string(const std::vector<int>& contexts);

}  // namespace bosch
