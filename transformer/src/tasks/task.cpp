// SPDX-License-Identifier: Apache-2.0
// Task kinds, names, defaults and the calibration / held-out convention.
#include <bosch/error.hpp>
#include <bosch/tasks/task.hpp>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <utility>

namespace bosch::tasks {
namespace {

constexpr std::array<std::pair<TaskKind, std::string_view>, 10> kKinds = {{
    {TaskKind::niah_single_1, "niah_single_1"},
    {TaskKind::niah_single_2, "niah_single_2"},
    {TaskKind::niah_single_3, "niah_single_3"},
    {TaskKind::niah_multikey_1, "niah_multikey_1"},
    {TaskKind::niah_multikey_2, "niah_multikey_2"},
    {TaskKind::niah_multikey_3, "niah_multikey_3"},
    {TaskKind::niah_multivalue, "niah_multivalue"},
    {TaskKind::niah_multiquery, "niah_multiquery"},
    {TaskKind::passkey, "passkey"},
    {TaskKind::copy, "copy"},
}};
constexpr std::array<std::pair<Haystack, std::string_view>, 4> kHaystacks = {{
    {Haystack::automatic, "automatic"},
    {Haystack::noise, "noise"},
    {Haystack::natural, "natural"},
    {Haystack::needles, "needles"},
}};
constexpr std::array<std::pair<Split, std::string_view>, 2> kSplits = {{
    {Split::calibration, "calibration"},
    {Split::held_out, "held_out"},
}};
constexpr std::array<std::pair<Truncation, std::string_view>, 2> kTruncations = {{
    {Truncation::middle, "middle"},
    {Truncation::refuse, "refuse"},
}};
constexpr std::string_view kFilePrefix = "file:";

template <class E, std::size_t N>
std::string_view name_of(const std::array<std::pair<E, std::string_view>, N>& table, E e) {
  for (const auto& [k, n] : table)
    if (k == e) return n;
  return "unknown";
}

template <class E, std::size_t N>
E parse(const std::array<std::pair<E, std::string_view>, N>& table, std::string_view name,
        const char* what) {
  for (const auto& [k, n] : table)
    if (n == name) return k;
  std::string accepted;
  for (const auto& [k, n] : table) {
    if (!accepted.empty()) accepted += ", ";
    accepted += n;
  }
  throw invalid_argument("unknown " + std::string(what) + " '" + std::string(name) +
                             "' (accepted: " + accepted + ")",
                         what);
}

}  // namespace

PromptFormat chatml(std::string_view system) {
  PromptFormat f;
  if (!system.empty()) f.prefix = "<|im_start|>system\n" + std::string(system) + "<|im_end|>\n";
  f.prefix += "<|im_start|>user\n";
  f.suffix = "<|im_end|>\n<|im_start|>assistant\n";
  return f;
}

std::vector<TaskKind> ruler_niah_kinds() {
  return {TaskKind::niah_single_1,   TaskKind::niah_single_2,   TaskKind::niah_single_3,
          TaskKind::niah_multikey_1, TaskKind::niah_multikey_2, TaskKind::niah_multikey_3,
          TaskKind::niah_multivalue, TaskKind::niah_multiquery};
}

std::string_view to_string(TaskKind kind) noexcept {
  return kind == TaskKind::file ? "file" : name_of(kKinds, kind);
}
std::string_view to_string(Truncation truncation) noexcept { return name_of(kTruncations, truncation); }
Truncation parse_truncation(std::string_view name) { return parse(kTruncations, name, "truncation"); }

std::string to_string(const TaskSource& source) {
  if (source.kind == TaskKind::file) return std::string(kFilePrefix) + source.file.string();
  return std::string(to_string(source.kind));
}

TaskSource parse_task_source(std::string_view text) {
  if (text.substr(0, kFilePrefix.size()) == kFilePrefix) {
    const std::string_view path = text.substr(kFilePrefix.size());
    if (path.empty()) throw invalid_argument("file: needs a path (file:PATH.jsonl)", "tasks");
    return {TaskKind::file, std::filesystem::path(path)};
  }
  if (text == "file") throw invalid_argument("a file task is written file:PATH.jsonl", "tasks");
  try {
    return parse_task_kind(text);
  } catch (const invalid_argument& e) {
    std::string m = e.message();  // "... (accepted: a, b)"
    if (!m.empty() && m.back() == ')') m.insert(m.size() - 1, ", or file:PATH.jsonl for your own records");
    throw invalid_argument(m, e.where());
  }
}
std::string_view to_string(Haystack haystack) noexcept { return name_of(kHaystacks, haystack); }
std::string_view to_string(Split split) noexcept { return name_of(kSplits, split); }
TaskKind parse_task_kind(std::string_view name) { return parse(kKinds, name, "task"); }
Haystack parse_haystack(std::string_view name) { return parse(kHaystacks, name, "haystack"); }
Split parse_split(std::string_view name) { return parse(kSplits, name, "split"); }

Haystack resolved_haystack(const TaskSpec& spec) {
  const bool multikey_lines =
      spec.kind == TaskKind::niah_multikey_2 || spec.kind == TaskKind::niah_multikey_3;
  if (spec.haystack == Haystack::automatic) {
    switch (spec.kind) {
      case TaskKind::niah_single_1:
      case TaskKind::passkey:
        return Haystack::noise;
      case TaskKind::niah_multikey_2:
      case TaskKind::niah_multikey_3:
        return Haystack::needles;
      default:
        return Haystack::natural;
    }
  }
  if (spec.haystack == Haystack::needles && !multikey_lines)
    throw invalid_argument("the needles haystack is only for niah_multikey_2 and niah_multikey_3"
                           " (got " + std::string(to_string(spec.kind)) + ")",
                           "haystack");
  return spec.haystack;
}

std::filesystem::path cache_dir() {
  if (const char* cache = std::getenv("BOSCH_CACHE"); cache && *cache) return std::filesystem::path(cache);
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home && *home ? home : "/tmp") / ".cache" / "bosch";
}

std::vector<std::filesystem::path> default_text_files() {
  const std::filesystem::path dir = cache_dir() / "text";
  std::vector<std::filesystem::path> files;
  std::error_code ec;
  if (std::filesystem::is_directory(dir, ec)) {
    for (const auto& e : std::filesystem::directory_iterator(dir, ec))
      if (e.is_regular_file() && e.path().extension() == ".txt") files.push_back(e.path());
  }
  if (files.empty())
    throw file_error("no natural-text files (*.txt); run scripts/setup to export them",
                     dir.string());
  std::sort(files.begin(), files.end());
  return files;
}

SplitSpecs calibration_and_held_out(TaskSpec base) {
  SplitSpecs s{base, std::move(base)};
  s.calibration.split = Split::calibration;
  s.held_out.split = Split::held_out;
  return s;
}

}  // namespace bosch::tasks
