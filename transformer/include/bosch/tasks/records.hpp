// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file tasks/records.hpp
/// A task from the user's own data: the records of a JSONL file
/// (docs/tasks.md §Your data). One JSON object per line, in either form:
///
///     {"prompt": "...", "answer": "..."}                       plain
///     {"context": "...", "question": "...", "answer": "..."}   chat
///
/// Other keys are ignored, so LongBench, kvpress and lm-evaluation-harness
/// records load as they are. A plain prompt is the whole text before the
/// answer (control tokens written in it, such as "<|im_start|>", are parsed);
/// a chat record becomes `format.prefix + context + "\n\n" + question +
/// format.suffix`, the built-in tasks' wrapper. The answer follows the prompt
/// after one space unless the prompt ends with whitespace (a chat suffix ends
/// with a newline) or the answer starts with one.
///
/// A record longer than the context is cut in the middle of its context
/// (chat form) or of its prompt (plain form), keeping the first and the last
/// tokens as LongBench does, or refused (Truncation::refuse). A shorter one
/// runs at its own length.
///
/// Splits: a file's records are split once, by a permutation seeded with
/// TaskSpec::split_seed (not the task seed), into held-out
/// (round(held_out_fraction x n) records) and calibration (the rest), so no
/// task seed ever calibrates on a record another one held out. A spec then
/// draws its num_samples records from its split, in an order seeded by its
/// own seed (kind, length and task seed), like the built-in tasks' samples.

#include <bosch/tasks/codec.hpp>
#include <bosch/tasks/task.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace bosch::tasks {

/// One record of a task file.
struct Record {
  std::string prompt;    ///< plain form: the text before the answer (empty in the chat form)
  std::string context;   ///< chat form: the long document
  std::string question;  ///< chat form: the question after it
  std::string answer;    ///< the gold answer (both forms)
  int line = 0;          ///< its line in the file (1-based)
  bool chat() const noexcept { return prompt.empty(); }
};

/// A task file as read: its records in file order and the SHA-256 of its
/// bytes (lowercase hex, as `sha256sum` prints it).
struct RecordFile {
  std::filesystem::path path;
  std::string sha256;
  std::vector<Record> records;
};

/// Reads and checks a task file before any model work. Throws
/// bosch::file_error (where = the path) when it cannot be read, and
/// bosch::format_error (where = "PATH:LINE") for a line that is not UTF-8,
/// not JSON, not an object, has no "answer", has neither "prompt" nor both
/// "context" and "question", has both forms, or has an empty or non-string
/// field; (where = the path) for a file with no record. Blank lines are
/// skipped. Reads a file once per (path, size, modification time).
RecordFile read_records(const std::filesystem::path& path);

/// One record from one line of JSON, checked as read_records checks each
/// line (bosch::format_error naming `where`); its `line` is left 0.
Record parse_record(std::string_view json_line, const std::string& where);

/// Records given in memory (one JSON object per element, as a file's lines)
/// written once to `$BOSCH_CACHE/records/records-<sha256 prefix>.jsonl`
/// (default cache ~/.cache/bosch), named by their content so the same
/// records are the same file and task name in every run; returns the path.
/// The lines are checked first (parse_record, where = `where` and the index).
std::filesystem::path write_records(const std::vector<std::string>& json_lines, const std::string& where);

/// The indices of the records of `split` among n records (ascending): held
/// out are those whose position in a permutation seeded by `seed` is below
/// round(held_out_fraction x n), the rest calibrate. The two are disjoint
/// and cover 0..n-1; the same (n, fraction, seed) gives the same split on
/// every platform. Throws bosch::invalid_argument for a fraction outside [0, 1].
std::vector<std::size_t> split_records(std::size_t n, double held_out_fraction, std::uint64_t seed,
                                       Split split);

/// The task name of a file's samples in reports: "file:NAME" (the file name).
std::string record_task_name(const std::filesystem::path& path);

}  // namespace bosch::tasks
