// SPDX-License-Identifier: Apache-2.0
// Task generators: RULER NIAH sub-tasks, passkey retrieval, copy.
#include <bosch/error.hpp>
#include <bosch/tasks/generate.hpp>
#include <bosch/tasks/text.hpp>
#include <bosch/tasks/words.hpp>

#include "haystack.hpp"
#include "prompt_builder.hpp"
#include "records_detail.hpp"
#include "seeds.hpp"
#include "segment_encoder.hpp"

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <numeric>
#include <set>
#include <sstream>

namespace bosch::tasks {
namespace {

using detail::Assembled;
using detail::Layout;
using detail::PromptBuilder;
using detail::SegmentEncoder;
using detail::Unit;
using detail::UnitSource;
using detail::mix;
using detail::Rng;
using detail::uniform_index;

// ---- seeds ---------------------------------------------------------------------

// A sample's seed: the spec seed mixed with kind, split, length and index, so
// that every (kind, split, length) is its own stream.
std::uint64_t sample_seed(const TaskSpec& s, int index) {
  std::uint64_t h = mix(0x626F736368ULL, s.seed);
  h = mix(h, static_cast<std::uint64_t>(s.kind) + 1);
  h = mix(h, static_cast<std::uint64_t>(s.split) + 101);
  h = mix(h, static_cast<std::uint64_t>(s.context_length));
  return mix(h, static_cast<std::uint64_t>(index));
}

// RULER's needle depths: np.round(np.linspace(0, 100, num=40)).astype(int) percent.
double ruler_depth(Rng& rng) {
  const auto k = static_cast<double>(uniform_index(rng, 40));
  return std::round(k * 100.0 / 39.0) / 100.0;
}

// ---- text helpers --------------------------------------------------------------

void replace_all(std::string& s, std::string_view from, std::string_view to) {
  for (std::size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
}

// RULER's query join: "a", or "a, b, c, and d".
std::string ruler_join(const std::vector<std::string>& v) {
  if (v.size() == 1) return v[0];
  std::string s;
  for (std::size_t i = 0; i + 1 < v.size(); ++i) s += (i ? ", " : "") + v[i];
  return s + ", and " + v.back();
}

// The expected answer list: "a", "a and b", "a, b, c, and d".
std::string answer_join(const std::vector<std::string>& v) {
  if (v.size() == 2) return v[0] + " and " + v[1];
  return ruler_join(v);
}

std::vector<std::string> split_words(const std::string& s) {
  std::vector<std::string> w;
  std::istringstream in(s);
  for (std::string x; in >> x;) w.push_back(x);
  return w;
}

std::string join_words(const std::vector<std::string>& w, std::size_t b, std::size_t e) {
  std::string s;
  for (std::size_t i = b; i < e; ++i) s += (i > b ? " " : "") + w[i];
  return s;
}

// ---- one sample's plan -----------------------------------------------------------

struct Draft {
  Layout layout;
  std::vector<std::string> needles;
  std::vector<double> depths;
  std::vector<bool> queried;
  std::vector<std::string> references;
  std::unique_ptr<UnitSource> source;
  std::vector<Unit> span_units;  // natural text used by a copy span
};

void set_haystack(Draft& d, Haystack h, const Corpus* corpus, Split split, Rng& rng,
                  std::vector<std::string> noise_units, const std::string& noise_sep,
                  std::function<std::string()> needle_line) {
  switch (h) {
    case Haystack::natural:
      d.source = std::make_unique<detail::TextSource>(*corpus, split, rng);
      d.layout.unit_sep = " ";
      d.layout.truncatable = true;
      break;
    case Haystack::needles:
      d.source = std::make_unique<detail::GeneratedSource>(std::move(needle_line));
      d.layout.unit_sep = "\n";
      break;
    default:
      d.source = std::make_unique<detail::RepeatSource>(std::move(noise_units));
      d.layout.unit_sep = noise_sep;
      break;
  }
  d.layout.needle_sep = d.layout.unit_sep;
}

// RULER niah.py: keys, values, needles, template (singular when one needle is asked).
Draft niah(const TaskSpec& spec, Haystack h, const Corpus* corpus, Rng& rng, double depth) {
  const TaskKind k = spec.kind;
  const bool uuid_keys = k == TaskKind::niah_multikey_3;
  const bool uuid_values = k == TaskKind::niah_single_3 || k == TaskKind::niah_multikey_3;
  const int num_k = (k == TaskKind::niah_multikey_1 || k == TaskKind::niah_multiquery) ? 4 : 1;
  const int num_v = k == TaskKind::niah_multivalue ? 4 : 1;
  const int num_q = k == TaskKind::niah_multiquery ? 4 : 1;
  // By value but the engine: the needle-haystack line generator below outlives this frame.
  auto make_key = [&rng, uuid_keys] { return uuid_keys ? random_uuid(rng) : random_word_key(rng); };
  auto make_value = [&rng, uuid_values] {
    return uuid_values ? random_uuid(rng) : random_number(rng, 7);
  };
  const std::string type_v = uuid_values ? "uuids" : "numbers";

  std::vector<std::string> keys;
  std::set<std::string> seen;
  while (static_cast<int>(keys.size()) < num_k) {
    std::string key = make_key();
    if (seen.insert(key).second) keys.push_back(std::move(key));
  }
  std::vector<std::vector<std::string>> values(keys.size());
  std::set<std::string> seen_values;
  for (auto& vs : values)
    while (static_cast<int>(vs.size()) < num_v) {
      std::string v = make_value();
      if (seen_values.insert(v).second) vs.push_back(std::move(v));
    }
  // Queried keys in a random order (RULER: random.sample(range(num_k), num_q)).
  std::vector<std::size_t> idx(keys.size());
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  for (std::size_t i = 0; i < static_cast<std::size_t>(num_q); ++i)
    std::swap(idx[i], idx[i + uniform_index(rng, idx.size() - i)]);
  idx.resize(static_cast<std::size_t>(num_q));

  Draft d;
  const auto needle_text = [&](const std::string& key, const std::string& value) {
    return "One of the special magic " + type_v + " for " + key + " is: " + value + ".";
  };
  std::vector<std::pair<std::size_t, std::size_t>> needle_kv;  // (key, value) per needle
  for (std::size_t a = 0; a < keys.size(); ++a)
    for (std::size_t b = 0; b < values[a].size(); ++b) {
      d.needles.push_back(needle_text(keys[a], values[a][b]));
      needle_kv.emplace_back(a, b);
      const bool is_queried = std::find(idx.begin(), idx.end(), a) != idx.end();
      d.queried.push_back(is_queried);
      // The first value of the first queried key sits at the requested depth.
      d.depths.push_back(a == idx[0] && b == 0 ? depth : ruler_depth(rng));
    }

  // Answer: multivalue lists the values in context order (depth, then needle
  // order, as the builder places them); multiquery follows the query order.
  std::vector<std::string> answer_values;
  if (num_v > 1) {
    std::vector<std::size_t> order(d.needles.size());
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](std::size_t x, std::size_t y) { return d.depths[x] < d.depths[y]; });
    for (std::size_t n : order)
      if (needle_kv[n].first == idx[0]) answer_values.push_back(values[idx[0]][needle_kv[n].second]);
  } else {
    for (std::size_t a : idx) answer_values.push_back(values[a][0]);
  }
  d.references = answer_values;

  std::vector<std::string> queries;
  for (std::size_t a : idx) queries.push_back(keys[a]);
  const std::string query = ruler_join(queries);

  std::string tmpl =
      "Some special magic {type_needle_v} are hidden within the following text. Make sure to "
      "memorize it. I will quiz you about the {type_needle_v} afterwards.\n{context}\nWhat are "
      "all the special magic {type_needle_v} for {query} mentioned in the provided text?";
  std::string prefix =
      " The special magic {type_needle_v} for {query} mentioned in the provided text are";
  std::string type = type_v;
  if (num_q * num_v == 1) {
    for (std::string* s : {&tmpl, &prefix}) {
      replace_all(*s, "Some", "A");
      replace_all(*s, "are all", "is");
      replace_all(*s, "are", "is");
      replace_all(*s, "answers", "answer");
    }
    type.pop_back();
  }
  for (std::string* s : {&tmpl, &prefix}) {
    replace_all(*s, "{type_needle_v}", type);
    replace_all(*s, "{query}", query);
  }
  const std::size_t c = tmpl.find("{context}");
  d.layout.header = tmpl.substr(0, c);
  d.layout.question = tmpl.substr(c + 9);
  d.layout.answer_prefix = prefix;
  d.layout.answer = " " + answer_join(answer_values);

  const std::set<std::string> real(keys.begin(), keys.end());
  auto line = [real, make_key, make_value, type_v] {
    std::string key = make_key();
    while (real.count(key)) key = make_key();
    return "One of the special magic " + type_v + " for " + key + " is: " + make_value() + ".";
  };
  set_haystack(d, h, corpus, spec.split, rng, {std::string(detail::kNoise)}, "\n", line);
  return d;
}

// Passkey retrieval (Landmark attention; docs/tasks.md §Tasks).
Draft passkey(const TaskSpec& spec, Haystack h, const Corpus* corpus, Rng& rng, double depth) {
  Draft d;
  const std::string key = random_number(rng, 5);
  d.layout.header =
      "There is an important info hidden inside a lot of irrelevant text. Find it and memorize "
      "them. I will quiz you about the important information there.\n";
  d.layout.question = "\nWhat is the pass key?";
  d.layout.answer_prefix = " The pass key is";
  d.layout.answer = " " + key;
  d.needles = {"The pass key is " + key + ". Remember it. " + key + " is the pass key."};
  d.depths = {depth};
  d.queried = {true};
  d.references = {key};
  set_haystack(d, h, corpus, spec.split, rng,
               {"The grass is green.", "The sky is blue.", "The sun is yellow.", "Here we go.",
                "There and back again."},
               " ", {});
  d.layout.needle_sep = "\n";
  return d;
}

// Copy: a span placed at `depth` is cued at the end; the answer is its rest.
Draft copy(const TaskSpec& spec, Haystack h, const Corpus* corpus, Rng& rng, double depth) {
  Draft d;
  std::string span;
  if (h == Haystack::natural) {
    auto src = std::make_unique<detail::TextSource>(*corpus, spec.split, rng);
    span = src->words_before_start(spec.copy_words, d.span_units);
    d.source = std::move(src);
    d.layout.unit_sep = d.layout.needle_sep = " ";
    d.layout.truncatable = true;
  } else {
    span = random_words(rng, spec.copy_words);
    set_haystack(d, h, corpus, spec.split, rng, {std::string(detail::kNoise)}, "\n", {});
  }
  const auto w = split_words(span);
  const auto cue = static_cast<std::size_t>(spec.copy_cue);
  d.layout.answer_prefix = (spec.format.empty() ? "\n" : "") + join_words(w, 0, cue);
  const std::string rest = join_words(w, cue, w.size());
  d.layout.answer = " " + rest;
  d.needles = {span};
  d.depths = {depth};
  d.queried = {true};
  d.references = {rest};
  return d;
}

// ---- validation and description ------------------------------------------------

void validate(const TaskSpec& s) {
  if (s.context_length <= 0)
    throw invalid_argument("context_length must be positive, got " +
                               std::to_string(s.context_length),
                           "context_length");
  if (s.num_samples < 0)
    throw invalid_argument("num_samples must be >= 0, got " + std::to_string(s.num_samples),
                           "num_samples");
  for (double dep : s.depths)
    if (!(dep >= 0 && dep <= 1))
      throw invalid_argument("depths are fractions in [0, 1], got " + std::to_string(dep),
                             "depths");
  if (s.max_new_tokens < 0)
    throw invalid_argument("max_new_tokens must be >= 0", "max_new_tokens");
  if (s.kind == TaskKind::copy && (s.copy_cue < 1 || s.copy_cue >= s.copy_words))
    throw invalid_argument("copy_cue must be in [1, copy_words), got cue " +
                               std::to_string(s.copy_cue) + " of " + std::to_string(s.copy_words),
                           "copy_cue");
  if (s.kind == TaskKind::file) {
    if (s.records.empty()) throw invalid_argument("a file task needs its records file", "records");
    if (!(s.held_out_fraction >= 0 && s.held_out_fraction <= 1))
      throw invalid_argument("must be in [0, 1], got " + std::to_string(s.held_out_fraction), "held_out_fraction");
    return;
  }
  resolved_haystack(s);  // throws for an impossible haystack
}

std::string describe(const TaskSpec& s, Haystack h, std::size_t files) {
  std::ostringstream o;
  o << to_string(s.kind) << ": " << s.num_samples << " samples, " << s.context_length
    << " tokens, " << to_string(h) << " haystack";
  if (h == Haystack::natural) o << " (" << files << " files)";
  o << ", depths ";
  if (s.depths.empty()) {
    o << "random (RULER's 40)";
  } else {
    for (std::size_t i = 0; i < s.depths.size(); ++i) o << (i ? "/" : "") << s.depths[i];
  }
  o << ", " << to_string(s.split) << " split, seed " << s.seed;
  if (!s.format.empty()) o << ", chat format";
  return o.str();
}

std::vector<TextSpan> spans_of(const std::vector<Unit>& units) {
  std::vector<TextSpan> out;
  for (const Unit& u : units) {
    if (u.file < 0) continue;
    if (!out.empty() && out.back().file == u.file && out.back().end == u.sentence) {
      ++out.back().end;
    } else {
      out.push_back({u.file, u.sentence, u.sentence + 1});
    }
  }
  return out;
}

Sample make_sample(const TaskSpec& spec, Haystack h, const Corpus* corpus,
                   const SegmentEncoder& enc, int index) {
  const std::uint64_t seed = sample_seed(spec, index);
  Rng rng(seed);
  const double depth = spec.depths.empty()
                           ? ruler_depth(rng)
                           : spec.depths[static_cast<std::size_t>(index) % spec.depths.size()];
  Draft d = spec.kind == TaskKind::passkey ? passkey(spec, h, corpus, rng, depth)
            : spec.kind == TaskKind::copy  ? copy(spec, h, corpus, rng, depth)
                                           : niah(spec, h, corpus, rng, depth);
  d.layout.prefix = spec.format.prefix;
  d.layout.suffix = spec.format.suffix;
  if (!spec.format.suffix.empty() && spec.format.suffix.back() == '\n' &&
      !d.layout.answer_prefix.empty() && d.layout.answer_prefix.front() == ' ')
    d.layout.answer_prefix.erase(0, 1);

  PromptBuilder builder(enc, d.layout, d.needles);
  Assembled a = builder.build(*d.source, d.depths, spec.context_length);

  Sample s;
  s.kind = spec.kind;
  s.task = std::string(to_string(spec.kind));
  s.prompt = std::move(a.prompt);
  s.answer = std::move(a.answer);
  s.answer_text = d.layout.answer;
  s.references = std::move(d.references);
  s.prompt_text = std::move(a.text);
  s.context_length = spec.context_length;
  s.depth = depth;
  s.seed = seed;
  s.max_new_tokens =
      spec.max_new_tokens > 0 ? spec.max_new_tokens : static_cast<int>(s.answer.size()) + 16;
  s.context_begin = a.context_begin;
  s.context_end = a.context_end;
  for (std::size_t j = 0; j < d.needles.size(); ++j) {
    const auto [b, e] = a.needle_tokens[j];
    const double depth_of = a.haystack_tokens > 0 ? static_cast<double>(a.needle_haystack_before[j]) /
                                                        a.haystack_tokens
                                                  : 0.0;
    s.needles.push_back({d.needles[j], b, e, depth_of, d.queried[j]});
  }
  std::stable_sort(s.needles.begin(), s.needles.end(),
                   [](const Needle& x, const Needle& y) { return x.begin < y.begin; });
  std::vector<Unit> used;
  for (const auto& it : builder.items())
    if (it.needle < 0) used.push_back(it.unit);
  s.text_spans = spans_of(d.span_units);
  for (const auto& sp : spans_of(used)) s.text_spans.push_back(sp);
  return s;
}

}  // namespace

TaskSet generate(std::span<const TaskSpec> specs, const TextCodec& codec) {
  for (const auto& s : specs) validate(s);
  if (!codec.encode) throw invalid_argument("codec without an encode function", "codec");
  SegmentEncoder enc(codec);
  std::map<std::vector<std::filesystem::path>, Corpus> corpora;
  TaskSet set;
  std::map<std::filesystem::path, RecordFile> record_files;
  for (const auto& spec : specs) {
    if (spec.kind == TaskKind::file) {
      auto it = record_files.find(spec.records);
      if (it == record_files.end()) it = record_files.emplace(spec.records, read_records(spec.records)).first;
      auto samples = detail::record_samples(spec, it->second, enc, sample_seed(spec, 0));
      set.description += (set.description.empty() ? "" : "\n") + detail::describe_records(spec, it->second, samples);
      for (auto& s : samples) set.samples.push_back(std::move(s));
      set.specs.push_back(spec);
      continue;
    }
    const Haystack h = resolved_haystack(spec);
    const Corpus* corpus = nullptr;
    std::size_t files = 0;
    if (h == Haystack::natural) {
      auto paths = spec.text_files.empty() ? default_text_files() : spec.text_files;
      auto it = corpora.find(paths);
      if (it == corpora.end()) it = corpora.emplace(paths, load_corpus(paths)).first;
      corpus = &it->second;
      files = paths.size();
    }
    for (int i = 0; i < spec.num_samples; ++i)
      set.samples.push_back(make_sample(spec, h, corpus, enc, i));
    set.specs.push_back(spec);
    set.description += (set.description.empty() ? "" : "\n") + describe(spec, h, files);
  }
  return set;
}

TaskSet generate(std::span<const TaskSpec> specs, const model::Tokenizer& tokenizer) {
  return generate(specs, codec_of(tokenizer));
}

TaskSet generate(const TaskSpec& spec, const TextCodec& codec) {
  return generate(std::span<const TaskSpec>(&spec, 1), codec);
}

TaskSet generate(const TaskSpec& spec, const model::Tokenizer& tokenizer) {
  return generate(spec, codec_of(tokenizer));
}

TaskSet generate_grid(const TaskSpec& base, std::span<const int> context_lengths,
                      const TextCodec& codec) {
  std::vector<TaskSpec> specs;
  for (int len : context_lengths) {
    specs.push_back(base);
    specs.back().context_length = len;
  }
  return generate(std::span<const TaskSpec>(specs), codec);
}

TaskSet generate_grid(const TaskSpec& base, std::span<const int> context_lengths,
                      const model::Tokenizer& tokenizer) {
  return generate_grid(base, context_lengths, codec_of(tokenizer));
}

}  // namespace bosch::tasks
