// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file eval/suite.hpp
/// The task suite of a BOSCH run on a real model, and the metadata a mask file
/// carries. Shared by the `bosch` program, the select_heads example and the
/// comparison report, so that all of them build the same calibration and
/// held-out sets from the same settings and describe a mask the same way.
///
/// A suite is a list of task kinds, each generated at one context length with
/// two disjoint splits (tasks::calibration_and_held_out): `calibration_samples`
/// samples per kind for the search and `held_out_samples` per kind for the report.

#include <bosch/eval/transformer_evaluator.hpp>
#include <bosch/model/model.hpp>
#include <bosch/options.hpp>
#include <bosch/tasks/task.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace bosch {

/// What a task suite holds. Every field has a default: the library's
/// defaults of a run (bosch/run/settings.hpp takes them from here), sized for
/// a CPU search of a small model.
struct TaskSuiteOptions {
  /// Tasks, in order: built-in kinds and JSONL files of records
  /// (tasks/records.hpp). Default: niah_single_1, niah_single_2,
  /// niah_multikey_1, passkey.
  std::vector<tasks::TaskSource> kinds{tasks::TaskKind::niah_single_1, tasks::TaskKind::niah_single_2,
                                       tasks::TaskKind::niah_multikey_1, tasks::TaskKind::passkey};
  /// File tasks: what a record longer than the context becomes.
  tasks::Truncation truncation = tasks::TaskSpec{}.truncation;
  /// File tasks: the fraction of every file's records held out, and the
  /// seed of that split (the same whatever the task seed).
  double held_out_fraction = tasks::TaskSpec{}.held_out_fraction;
  std::uint64_t split_seed = tasks::TaskSpec{}.split_seed;
  int context_length = 512;     ///< tokens per sample (prompt + answer), >= 32
  /// Further context lengths: each adds `calibration_samples` calibration and
  /// `held_out_samples` held-out samples per kind at that length (mixed-length
  /// calibration, one score over all samples). Default none.
  std::vector<int> more_contexts;
  int calibration_samples = 2;  ///< calibration samples per kind (and length), >= 1
  int held_out_samples = 16;    ///< held-out samples per kind (and length), >= 0; published
                                ///< tables use at least 16
  bool chat = false;            ///< wrap prompts in the ChatML template (instruct models)
  std::uint64_t seed = 0;       ///< task seed (the same for both splits; they stay disjoint)
  /// Calibration needle depths: false draws each from RULER's 40 depths (as
  /// the held-out split always does); true stratifies them (stratified_depths():
  /// sample i of n of every task in [i/n, (i+1)/n), the tasks spread within
  /// it), so that a few samples still cover near and far needles
  /// (docs/tasks.md). Not used by file tasks.
  bool stratified_depths = false;
  /// Natural-text files for the haystacks; empty = tasks::default_text_files()
  /// ($BOSCH_CACHE/text/*.txt).
  std::vector<std::filesystem::path> text_files;
};

/// Parses a comma-separated list of task names ("passkey,niah_single_1",
/// "file:qa.jsonl"); empty items are skipped. Throws bosch::invalid_argument
/// (where "tasks") for an unknown name or an empty list.
std::vector<tasks::TaskSource> parse_task_list(std::string_view list);

/// The names joined by commas (the inverse of parse_task_list).
std::string task_list_string(const std::vector<tasks::TaskSource>& kinds);

/// Throws bosch::invalid_argument naming the field unless every field of `o`
/// is in its domain (documented on the fields); reads every task file
/// (bosch::format_error naming the file and line of a bad record).
void validate(const TaskSuiteOptions& o);

/// The specs of one split, one per (context length, kind): the kinds in
/// order at context_length, then again at each of more_contexts (validated
/// first). The task seed of the i-th further length is derived from `seed`
/// and i, so that its samples are not the first length's needles again.
std::vector<tasks::TaskSpec> suite_specs(const TaskSuiteOptions& o, tasks::Split split);

/// The stratified depths of n calibration samples of each of `kinds` tasks
/// (TaskSuiteOptions::stratified_depths), [kind][sample]: sample i of every
/// kind lies in [i/n, (i+1)/n), and within it the kinds take the K sub-strata
/// of width 1/(n K) in a random order, so the suite's n K needles cover every
/// sub-stratum once. Drawn from `seed`.
std::vector<std::vector<double>> stratified_depths(int kinds, int n, std::uint64_t seed);

/// Generates the calibration and held-out sets of `o` with `tokenizer`.
struct TaskSuite {
  tasks::TaskSet calibration;
  tasks::TaskSet held_out;  ///< empty when held_out_samples == 0 or not asked for
};
TaskSuite make_task_suite(const TaskSuiteOptions& o, const model::Tokenizer& tokenizer,
                          bool with_held_out = true);

/// The suite as JSON: {"tasks": "a,b", "context": n (a list [n, m, ...] with
/// more_contexts), "samples": n, "held_out_samples": n, "chat": b,
/// "task_seed": n}; with file tasks also "task_files" (task_files_json),
/// "truncation", "held_out_fraction" and "split_seed". Text files are not
/// recorded (paths are machine-specific).
nlohmann::json to_json(const TaskSuiteOptions& o);

/// What identifies the data of the suite's file tasks: for each, {"task":
/// "file:NAME", "file": NAME, "sha256", "records", "calibration_records",
/// "held_out_records"} (an empty array without file tasks). Reads the files.
nlohmann::json task_files_json(const TaskSuiteOptions& o);

/// Refuses to score a mask held-out on a task file that changed since the
/// mask was chosen on it: for every file task of `suite` whose name
/// (file:NAME) the mask's metadata lists in "task_files" with another
/// sha256, bosch::invalid_argument (where = `where`), since the held-out
/// split of a changed file may hold records that calibrated the mask.
/// Metadata without "task_files" passes.
void check_task_files(const nlohmann::json& metadata, const TaskSuiteOptions& suite, const std::string& where);

/// The description lines of the file tasks of `set` (records drawn, how
/// many were cut to fit, the file's sha256), each "  LINE\n"; empty when it
/// has none. What a run prints under its "tasks:" line.
std::string file_task_summary(const tasks::TaskSet& set);

/// Reads back the fields of to_json() present in `j` into `o` (absent fields
/// keep their values). Throws bosch::format_error (where = `where`: field) on
/// a wrongly typed value and bosch::invalid_argument on an unknown task.
void update_from_json(TaskSuiteOptions& o, const nlohmann::json& j, const std::string& where);

/// The metadata object of a mask file selected by BOSCH on a real model: what
/// a user needs to apply it and to trace it back:
///
///     model, model_file, model_fingerprint, architecture, layout (string),
///     target_ratio, ratio, swa_heads, kv_heads, window, sinks, score,
///     normalized_score, anchor_full, anchor_swa, evaluations, seed, variant,
///     search_options (every Options field, io/options_json.hpp), search_seconds, stopped,
///     tasks, context, samples, held_out_samples, chat, task_seed,
///     bosch_version
///
/// (NaN scores are written as null.) The search fields are
/// search_metadata(options, result) (io/search_metadata.hpp); this adds the
/// model, the windows and the task suite.
nlohmann::json mask_metadata(const model::Model& model, const Options& options,
                             const Result& result, const TransformerEvaluatorOptions& evaluator,
                             const TaskSuiteOptions& suite);

}  // namespace bosch
