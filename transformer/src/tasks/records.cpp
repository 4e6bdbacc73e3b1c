// SPDX-License-Identifier: Apache-2.0
// Tasks from JSONL records: reading and checking a file, its split, and the
// samples of a spec (see bosch/tasks/records.hpp).
#include <bosch/error.hpp>
#include <bosch/io/atomic_file.hpp>
#include <bosch/io/sha256.hpp>
#include <bosch/tasks/records.hpp>
#include <bosch/tasks/text.hpp>

#include "records_detail.hpp"
#include "seeds.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <map>
#include <mutex>
#include <numeric>
#include <sstream>
#include <tuple>

namespace bosch::tasks {
namespace {

bool blank(std::string_view s) {
  return s.find_first_not_of(" \t\r\n\f\v") == std::string_view::npos;
}
bool space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
std::string trimmed(std::string_view s) {
  while (!s.empty() && space(s.front())) s.remove_prefix(1);
  while (!s.empty() && space(s.back())) s.remove_suffix(1);
  return std::string(s);
}

/// A string field of a record: "" when absent; format_error when present but
/// not a non-blank string.
std::string field(const nlohmann::json& j, const char* key, const std::string& where) {
  auto it = j.find(key);
  if (it == j.end()) return {};
  if (!it->is_string())
    throw format_error(std::string("field '") + key + "' is " + it->type_name() + ", not a string", where);
  std::string v = it->get<std::string>();
  if (blank(v)) throw format_error(std::string("field '") + key + "' is empty", where);
  return v;
}

}  // namespace

Record parse_record(std::string_view line, const std::string& where) {
  check_text(line, where);  // UTF-8 first: nlohmann would name a byte, not the cause
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(line);
  } catch (const nlohmann::json::parse_error& e) {
    throw format_error(std::string("not JSON: ") + e.what(), where);
  }
  if (!j.is_object()) throw format_error(std::string("a ") + j.type_name() + ", not a JSON object", where);
  Record r;
  r.prompt = field(j, "prompt", where);
  r.context = field(j, "context", where);
  r.question = field(j, "question", where);
  r.answer = field(j, "answer", where);
  if (!j.contains("answer")) throw format_error("no field 'answer'", where);
  if (!r.prompt.empty() && (j.contains("context") || j.contains("question")))
    throw format_error("both forms: 'prompt' (plain) and 'context'/'question' (chat); give one", where);
  if (r.prompt.empty()) {
    if (!j.contains("context") && !j.contains("question"))
      throw format_error("no field 'prompt' (plain form) or 'context' and 'question' (chat form)", where);
    if (!j.contains("context")) throw format_error("no field 'context' (a chat record has context, question and answer)", where);
    if (!j.contains("question")) throw format_error("no field 'question' (a chat record has context, question and answer)", where);
  }
  return r;
}

namespace {

RecordFile read_uncached(const std::filesystem::path& path) {
  const std::string text = io::read_file(path, io::max_file_bytes, "a task file");
  RecordFile f;
  f.path = path;
  f.sha256 = io::sha256_hex(text);
  std::size_t pos = 0;
  int line = 0;
  while (pos < text.size()) {
    std::size_t end = text.find('\n', pos);
    if (end == std::string::npos) end = text.size();
    ++line;
    std::string_view l(text.data() + pos, end - pos);
    pos = end + 1;
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    if (blank(l)) continue;
    Record r = parse_record(l, path.string() + ":" + std::to_string(line));
    r.line = line;
    f.records.push_back(std::move(r));
  }
  if (f.records.empty())
    throw format_error("no record (one JSON object per line: {\"prompt\", \"answer\"} or "
                       "{\"context\", \"question\", \"answer\"})",
                       path.string());
  return f;
}

}  // namespace

RecordFile read_records(const std::filesystem::path& path) {
  io::check_input_file(path);
  std::error_code ec;
  const auto size = std::filesystem::file_size(path, ec);
  const auto time = std::filesystem::last_write_time(path, ec);
  using Key = std::tuple<std::string, std::uintmax_t, std::filesystem::file_time_type>;
  static std::mutex mutex;
  static std::map<Key, RecordFile> cache;
  const Key key{std::filesystem::absolute(path, ec).string(), size, time};
  {
    std::lock_guard lock(mutex);
    if (auto it = cache.find(key); it != cache.end()) {
      RecordFile f = it->second;
      f.path = path;
      return f;
    }
  }
  RecordFile f = read_uncached(path);
  std::lock_guard lock(mutex);
  if (cache.size() > 64) cache.clear();
  cache.emplace(key, f);
  return f;
}

std::filesystem::path write_records(const std::vector<std::string>& json_lines, const std::string& where) {
  if (json_lines.empty()) throw invalid_argument("no record", where);
  std::string text;
  for (std::size_t i = 0; i < json_lines.size(); ++i) {
    (void)parse_record(json_lines[i], where + "[" + std::to_string(i) + "]");
    if (json_lines[i].find('\n') != std::string::npos)
      throw format_error("a record must be one line of JSON", where + "[" + std::to_string(i) + "]");
    text += json_lines[i];
    text += '\n';
  }
  const std::filesystem::path dir = cache_dir() / "records";
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw file_error("cannot create the directory: " + ec.message(), dir.string());
  const auto path = dir / ("records-" + io::sha256_hex(text).substr(0, 16) + ".jsonl");
  if (!std::filesystem::exists(path) || io::read_file(path) != text) io::write_file_atomic(path, text);
  return path;
}

std::vector<std::size_t> split_records(std::size_t n, double held_out_fraction, std::uint64_t seed,
                                       Split split) {
  if (!(held_out_fraction >= 0 && held_out_fraction <= 1))
    throw invalid_argument("must be in [0, 1], got " + std::to_string(held_out_fraction),
                           "held_out_fraction");
  std::vector<std::size_t> order(n);
  std::iota(order.begin(), order.end(), std::size_t{0});
  detail::Rng rng(detail::mix(0x73706C6974ULL, seed));  // "split"
  detail::shuffle(order, rng);
  const auto held = static_cast<std::size_t>(std::llround(held_out_fraction * static_cast<double>(n)));
  std::vector<std::size_t> out(split == Split::held_out ? order.begin() : order.begin() + static_cast<std::ptrdiff_t>(held),
                               split == Split::held_out ? order.begin() + static_cast<std::ptrdiff_t>(held) : order.end());
  std::sort(out.begin(), out.end());
  return out;
}

std::string record_task_name(const std::filesystem::path& path) {
  return "file:" + path.filename().string();
}

namespace detail {
namespace {

/// A record's prompt as segments: [before] [region] [after], the region
/// being what a cut may shorten (the chat form's context; the plain form's
/// whole prompt).
struct Parts {
  std::vector<int> before, region, after, answer;
  std::string before_text, region_text, after_text, answer_text;
};

Parts parts_of(const Record& r, const PromptFormat& format, const SegmentEncoder& enc, const std::string& where) {
  Parts p;
  const TextCodec& codec = enc.codec();
  if (codec.add_bos) p.before.push_back(codec.bos);
  try {
    if (!r.chat()) {
      p.region_text = r.prompt;
      p.region = enc.first(r.prompt, true);
    } else {
      if (!format.prefix.empty()) {
        p.before_text = format.prefix;
        const auto ids = enc.first(format.prefix, true);
        p.before.insert(p.before.end(), ids.begin(), ids.end());
      }
      p.region_text = r.context;
      p.region = format.prefix.empty() ? enc.first(r.context, false) : enc.after(format.prefix, r.context, false);
      p.after_text = "\n\n" + r.question;
      p.after = enc.after(r.context, p.after_text, false);
      if (!format.suffix.empty()) {
        const auto ids = enc.after(r.question, format.suffix, true);
        p.after.insert(p.after.end(), ids.begin(), ids.end());
        p.after_text += format.suffix;
      }
    }
    const std::string prompt_text = p.before_text + p.region_text + p.after_text;
    const bool join = !space(prompt_text.back()) && !space(r.answer.front());
    p.answer_text = (join ? " " : "") + r.answer;
    if (codec.encode(r.answer, false).empty()) throw format_error("the answer tokenizes to nothing", where);
    p.answer = enc.after(prompt_text, p.answer_text, false);
  } catch (const invalid_argument& e) {
    throw invalid_argument(e.message(), where);
  }
  if (p.answer.empty()) throw format_error("the answer tokenizes to nothing", where);
  return p;
}

Sample sample_of(const TaskSpec& spec, const RecordFile& file, const Record& r, const SegmentEncoder& enc,
                 std::uint64_t seed) {
  const std::string where = file.path.string() + ":" + std::to_string(r.line);
  Parts p = parts_of(r, spec.format, enc, where);
  const auto fixed = static_cast<long long>(p.before.size() + p.after.size() + p.answer.size());
  const long long total = fixed + static_cast<long long>(p.region.size());
  Sample s;
  s.prompt_text = p.before_text + p.region_text + p.after_text;
  if (total > spec.context_length) {
    const std::string what = "the record has " + std::to_string(total) + " tokens (prompt + answer), more than the context of " +
                             std::to_string(spec.context_length);
    if (spec.truncation == Truncation::refuse)
      throw invalid_argument(what + " (truncation 'middle' would cut it in the middle)", where);
    const long long keep = spec.context_length - fixed;
    if (keep < 2)
      throw invalid_argument(what + ", and its " + (r.chat() ? "question and answer" : "answer") + " alone take " +
                                 std::to_string(fixed) + ": nothing of its " + (r.chat() ? "context" : "prompt") + " would remain",
                             where);
    const auto head = static_cast<std::ptrdiff_t>((keep + 1) / 2), tail = static_cast<std::ptrdiff_t>(keep / 2);
    s.cut_tokens = static_cast<int>(total - spec.context_length);
    std::vector<int> kept(p.region.begin(), p.region.begin() + head);
    kept.insert(kept.end(), p.region.end() - tail, p.region.end());
    if (enc.codec().decode) {
      const std::span<const int> all(p.region);
      s.prompt_text = p.before_text + enc.codec().decode(all.first(static_cast<std::size_t>(head))) +
                      enc.codec().decode(all.last(static_cast<std::size_t>(tail))) + p.after_text;
    }
    p.region = std::move(kept);
  }
  s.kind = TaskKind::file;
  s.task = record_task_name(file.path);
  s.prompt = p.before;
  s.context_begin = static_cast<int>(s.prompt.size());
  s.prompt.insert(s.prompt.end(), p.region.begin(), p.region.end());
  s.context_end = static_cast<int>(s.prompt.size());
  s.prompt.insert(s.prompt.end(), p.after.begin(), p.after.end());
  s.answer = std::move(p.answer);
  s.answer_text = std::move(p.answer_text);
  s.references = {trimmed(r.answer)};
  s.context_length = spec.context_length;
  s.seed = seed;
  s.max_new_tokens = spec.max_new_tokens > 0 ? spec.max_new_tokens : static_cast<int>(s.answer.size()) + 16;
  s.record_line = r.line;
  return s;
}

}  // namespace

std::vector<Sample> record_samples(const TaskSpec& spec, const RecordFile& file, const SegmentEncoder& enc,
                                   std::uint64_t seed) {
  std::vector<std::size_t> idx = split_records(file.records.size(), spec.held_out_fraction, spec.split_seed, spec.split);
  if (static_cast<std::size_t>(spec.num_samples) > idx.size()) {
    std::ostringstream m;
    m << "its " << to_string(spec.split) << " split holds " << idx.size() << " of its " << file.records.size()
      << " records (held_out_fraction " << spec.held_out_fraction << "), " << spec.num_samples
      << " samples asked";
    throw invalid_argument(m.str(), file.path.string());
  }
  Rng rng(seed);
  shuffle(idx, rng);
  std::vector<Sample> out;
  for (int i = 0; i < spec.num_samples; ++i)
    out.push_back(sample_of(spec, file, file.records[idx[static_cast<std::size_t>(i)]], enc, mix(seed, static_cast<std::uint64_t>(i))));
  return out;
}

std::string describe_records(const TaskSpec& spec, const RecordFile& file, const std::vector<Sample>& samples) {
  int cut = 0;
  for (const auto& s : samples) cut += s.cut_tokens > 0;
  std::ostringstream o;
  o << record_task_name(file.path) << ": " << samples.size() << " samples of "
    << split_records(file.records.size(), spec.held_out_fraction, spec.split_seed, spec.split).size() << " "
    << to_string(spec.split) << " records (of " << file.records.size() << ", sha256 " << file.sha256.substr(0, 12)
    << "), up to " << spec.context_length << " tokens, " << cut << " cut in the middle, seed " << spec.seed;
  if (!spec.format.empty()) o << ", chat format";
  return o.str();
}

}  // namespace detail
}  // namespace bosch::tasks
