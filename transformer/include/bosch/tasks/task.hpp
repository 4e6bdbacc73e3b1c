// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file tasks/task.hpp
/// Long-context task descriptions: what to generate (TaskSpec), what one
/// generated prompt holds (Sample) and a set of them (TaskSet). Generators are
/// in tasks/generate.hpp, scoring in tasks/scoring.hpp.
///
/// Tasks (docs/tasks.md §Tasks):
///  - the RULER needle-in-a-haystack sub-tasks (NVIDIA/RULER
///    scripts/synthetic.yaml): niah_single_1/2/3, niah_multikey_1/2/3,
///    niah_multivalue, niah_multiquery, with RULER's templates;
///  - passkey retrieval (Landmark-attention template, 5-digit key);
///  - copy: a span of text seen earlier in the context is cued at the end and
///    its continuation is the answer (an induction/copy task that even tiny
///    models do).
///
/// Calibration vs held-out: every spec names a Split. The two splits draw from
/// different seed streams (the split is mixed into every sample's seed) and,
/// for natural-text haystacks, from disjoint halves of every text file
/// (calibration: the first half of each file's sentences, held-out: the second
/// half). calibration_and_held_out() makes such a pair from one spec.

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bosch::tasks {

/// The task family of a spec.
enum class TaskKind {
  niah_single_1,    ///< noise haystack, word key, 7-digit number
  niah_single_2,    ///< natural-text haystack (RULER "essay"), word key, number
  niah_single_3,    ///< natural-text haystack, word key, UUID value
  niah_multikey_1,  ///< natural text, 4 word keys (3 distractor needles), query 1
  niah_multikey_2,  ///< every haystack line is a distractor needle (word keys, numbers)
  niah_multikey_3,  ///< every haystack line is a distractor needle (UUID keys, UUID values)
  niah_multivalue,  ///< natural text, 1 word key with 4 values; answer: all 4
  niah_multiquery,  ///< natural text, 4 word keys, all 4 queried; answer: all 4 values
  passkey,          ///< passkey retrieval, 5-digit key, noise ("garbage") haystack
  copy,             ///< repeat a span seen earlier (natural text, or random words)
  file,             ///< the records of a JSONL file (tasks/records.hpp): the user's own data
};

/// What a record longer than the context becomes (TaskKind::file).
enum class Truncation {
  middle,  ///< cut in the middle of its context, keeping the first and last tokens (LongBench)
  refuse,  ///< bosch::invalid_argument naming the file and line
};

/// What fills the context around the needles.
enum class Haystack {
  automatic,  ///< the task's default: RULER's choice for NIAH (noise for single_1, needles for
              ///< multikey_2/3, natural for the rest), noise for passkey, natural for copy
  noise,      ///< "The grass is green. The sky is blue. ..." repeated (RULER noise, passkey garbage)
  natural,    ///< sentences of natural text files (replaces RULER's Paul Graham essays)
  needles,    ///< lines of distractor needles with random keys and values (RULER "needle")
};

/// Which of the two disjoint task streams a spec draws from.
enum class Split {
  calibration,  ///< for the search (the evaluator's objective)
  held_out,     ///< for reporting: other seed stream, other half of every text file
};

/// A chat wrapper put around the task text (the user turn) before the answer
/// prefix. Both strings are tokenized with control tokens parsed (e.g.
/// "<|im_start|>"). Empty (the default) means a plain, base-model prompt as in
/// RULER without a model template. When the suffix ends with a newline the
/// answer prefix loses its leading space ("...assistant\nThe special magic...";
/// RULER keeps it), and the copy task's cue is not put on a new line.
struct PromptFormat {
  std::string prefix;  ///< before the task text, e.g. "<|im_start|>user\n"
  std::string suffix;  ///< after the question, e.g. "<|im_end|>\n<|im_start|>assistant\n"
  bool empty() const noexcept { return prefix.empty() && suffix.empty(); }
};

/// The ChatML wrapper (SmolLM2, Qwen2): an optional system turn, then the user
/// turn and the start of the assistant turn.
PromptFormat chatml(std::string_view system = {});

/// What to generate. Every field has a default.
struct TaskSpec {
  TaskKind kind = TaskKind::niah_single_1;
  /// Length bound in tokens: prompt (BOS included) + answer <= context_length, so the
  /// teacher-forced sequence fits in it. The haystack is filled token-exactly to come
  /// as close as the haystack's granularity allows (natural text is cut at a word).
  /// Greedy generation may run max_new_tokens past it.
  int context_length = 4096;
  int num_samples = 8;  ///< samples to generate (>= 0)
  /// Needle depths as fractions of the context (0 = first item after the task
  /// header, 1 = last before the question); sample i uses depths[i % size]. Empty:
  /// each sample draws one of RULER's 40 depths (round(linspace(0, 100, 40)) %).
  /// For multi-needle tasks the depth is that of the first queried needle; the
  /// other needles go to random RULER depths. For copy it is the span's depth.
  std::vector<double> depths;
  Haystack haystack = Haystack::automatic;
  /// Natural-text files (plain UTF-8) for Haystack::natural; empty means
  /// default_text_files(). Their split halves are joined, in this order, into one
  /// cyclic stream of sentences; a sample's haystack is read from a random start
  /// in it (wrapping around when it needs more text than the stream holds, as
  /// RULER repeats its haystack).
  std::vector<std::filesystem::path> text_files;
  Split split = Split::calibration;
  std::uint64_t seed = 0;  ///< with kind, split, context_length and sample index -> sample seed
  PromptFormat format;     ///< chat wrapper; empty = plain prompt
  /// Greedy generation budget per sample; 0 = the answer's token count + 16
  /// (RULER uses a fixed 128 for NIAH; this is enough for a model that answers
  /// right after the answer prefix, and much cheaper on a CPU).
  int max_new_tokens = 0;
  /// copy: words in the repeated span (cue + answer). With natural text the span
  /// is the words right before the haystack's start in the stream (from a
  /// sentence start), so it is text the haystack does not contain; with the
  /// noise haystack it is random words from words.hpp.
  int copy_words = 32;
  int copy_cue = 4;     ///< copy: leading words of the span given as the cue (1 <= cue < words)
  /// file: the JSONL file of records (tasks/records.hpp).
  std::filesystem::path records;
  /// file: what a record longer than context_length becomes.
  Truncation truncation = Truncation::middle;
  /// file: the fraction of the file's records held out (the rest calibrate).
  double held_out_fraction = 0.5;
  /// file: the seed of the split into calibration and held-out records; not
  /// `seed`, so that every task seed draws from the same calibration records.
  std::uint64_t split_seed = 0;
};

/// A task of a suite: a built-in kind, or a JSONL file of records
/// (kind == TaskKind::file). Written "passkey" or "file:PATH".
struct TaskSource {
  TaskKind kind = TaskKind::niah_single_1;
  std::filesystem::path file;  ///< the records of a TaskKind::file task
  TaskSource() = default;
  TaskSource(TaskKind k) : kind(k) {}  // NOLINT: a built-in kind is a task source
  TaskSource(TaskKind k, std::filesystem::path f) : kind(k), file(std::move(f)) {}
  friend bool operator==(const TaskSource&, const TaskSource&) = default;
};
/// "passkey", or "file:PATH" for a file.
std::string to_string(const TaskSource& source);
/// The inverse of to_string: a task name, or "file:PATH" (a non-empty path).
/// Throws bosch::invalid_argument (where "tasks") for an unknown name.
TaskSource parse_task_source(std::string_view text);

/// A needle (or the copy span) as placed in a prompt.
struct Needle {
  std::string text;   ///< the needle sentence as inserted
  int begin = 0;      ///< first token in the prompt (its leading separator included)
  int end = 0;        ///< one past its last token
  /// Measured depth: the fraction of the haystack's tokens (needles excluded) that
  /// precede the needle, as RULER counts depth in haystack sentences.
  double depth = 0;
  bool queried = false;  ///< carries (part of) the answer
};

/// A run of sentences of a text file used in a prompt.
struct TextSpan {
  int file = 0;           ///< index into the spec's text files
  std::size_t begin = 0;  ///< first sentence (index into the file's sentence list, see text.hpp)
  std::size_t end = 0;    ///< one past the last sentence
};

/// One generated prompt with its expected answer.
struct Sample {
  TaskKind kind = TaskKind::niah_single_1;
  std::string task;  ///< to_string(kind)
  /// Prompt token ids, BOS first when the tokenizer adds one.
  std::vector<int> prompt;
  /// The expected continuation of the prompt (teacher-forced target): the answer
  /// as it follows the answer prefix, with its leading space (several values are
  /// joined "a, b, c, and d"). Its logits sit at prompt positions P-1 .. P+m-2 of
  /// prompt+answer (see teacher_forcing() in scoring.hpp).
  std::vector<int> answer;
  std::string answer_text;  ///< the text `answer` was tokenized from (leading space kept)
  std::vector<std::string> references;  ///< answer strings for string matching (RULER "outputs")
  std::string prompt_text;  ///< the text the prompt was tokenized from (BOS not shown)
  int context_length = 0;   ///< requested bound (spec.context_length)
  double depth = 0;         ///< requested depth of the first queried needle (fraction)
  std::uint64_t seed = 0;   ///< this sample's own seed (derived, see TaskSpec::seed)
  int max_new_tokens = 0;   ///< greedy generation budget
  int context_begin = 0;    ///< first prompt token of the haystack+needles region
  int context_end = 0;      ///< one past its last token
  std::vector<Needle> needles;        ///< inserted needles in prompt order (not haystack lines)
  std::vector<TextSpan> text_spans;   ///< natural-text sentences used (haystack and copy span)
  int record_line = 0;  ///< file: the record's line in its file
  int cut_tokens = 0;   ///< file: tokens cut from the middle of the record to fit the context
};

/// A generated task set.
struct TaskSet {
  std::vector<TaskSpec> specs;  ///< the specs the samples were generated from, in order
  std::vector<Sample> samples;
  std::string description;      ///< one line per spec: kind, length, samples, haystack, split, seed
};

/// The eight RULER NIAH sub-tasks, in RULER's order.
std::vector<TaskKind> ruler_niah_kinds();

std::string_view to_string(TaskKind kind) noexcept;
std::string_view to_string(Haystack haystack) noexcept;
std::string_view to_string(Split split) noexcept;
std::string_view to_string(Truncation truncation) noexcept;
/// Inverse of to_string; throws bosch::invalid_argument naming the accepted values
/// ("file" alone is not a kind: a file task is written file:PATH, see TaskSource).
TaskKind parse_task_kind(std::string_view name);
Haystack parse_haystack(std::string_view name);
Split parse_split(std::string_view name);
Truncation parse_truncation(std::string_view name);

/// The haystack a spec actually uses (Haystack::automatic resolved). Throws
/// bosch::invalid_argument for Haystack::needles with a task other than
/// niah_multikey_2/3, passkey or copy with the needle haystack, or a key/value
/// type the haystack cannot carry.
Haystack resolved_haystack(const TaskSpec& spec);

/// bosch's cache: `$BOSCH_CACHE`, default `~/.cache/bosch` (models, text,
/// records given in memory).
std::filesystem::path cache_dir();

/// The natural-text files the setup script exports: `$BOSCH_CACHE/text/*.txt`
/// (default `~/.cache/bosch/text`), sorted by name. Throws bosch::file_error when
/// there are none (run scripts/setup).
std::vector<std::filesystem::path> default_text_files();

/// Two specs equal to `base` but for the split: {calibration, held_out}. Their
/// samples are disjoint: other seed streams (random keys, values, depths and text
/// positions) and, for natural text, the other half of every file's sentences.
/// Keep the same seed and text files in both; nothing else is needed.
struct SplitSpecs {
  TaskSpec calibration;
  TaskSpec held_out;
};
SplitSpecs calibration_and_held_out(TaskSpec base);

}  // namespace bosch::tasks
