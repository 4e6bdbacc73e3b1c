// Task generators: token-exact structure (byte codec), real tokenizers
// (SmolLM2 byte-level BPE, stories260K SentencePiece), determinism, lengths,
// depths, calibration / held-out disjointness, chat format, errors.
#include <bosch/error.hpp>
#include <bosch/tasks/tasks.hpp>

#include "tasks_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <set>
#include <string>
#include <vector>

using namespace bosch::tasks;

namespace {

std::vector<TaskKind> all_kinds() {
  auto k = ruler_niah_kinds();
  k.push_back(TaskKind::passkey);
  k.push_back(TaskKind::copy);
  return k;
}

bool single_needle(TaskKind k) {
  return k == TaskKind::niah_single_1 || k == TaskKind::niah_single_2 ||
         k == TaskKind::niah_single_3 || k == TaskKind::niah_multikey_2 ||
         k == TaskKind::niah_multikey_3 || k == TaskKind::passkey || k == TaskKind::copy;
}

std::size_t count_of(const std::string& hay, const std::string& needle) {
  std::size_t n = 0;
  for (auto p = hay.find(needle); p != std::string::npos; p = hay.find(needle, p + 1)) ++n;
  return n;
}

std::vector<int> slice(const std::vector<int>& v, int b, int e) {
  return {v.begin() + b, v.begin() + e};
}

// Checks shared by every tokenizer: bounds, needles inside the context, answer
// references inside the answer and the queried needles.
void check_common(const Sample& s, const TextCodec& codec, int limit) {
  INFO(s.task << " seed " << s.seed);
  const auto total = static_cast<int>(s.prompt.size() + s.answer.size());
  CHECK(total <= limit);
  REQUIRE_FALSE(s.answer.empty());
  CHECK(s.max_new_tokens >= static_cast<int>(s.answer.size()));
  if (codec.add_bos) CHECK(s.prompt.front() == codec.bos);
  CHECK(s.context_begin < s.context_end);
  CHECK(s.context_end < static_cast<int>(s.prompt.size()));
  REQUIRE_FALSE(s.references.empty());
  const std::string answer = codec.decode(s.answer);
  for (const auto& r : s.references) {
    CHECK(answer.find(r) != std::string::npos);
    CHECK(s.answer_text.find(r) != std::string::npos);
  }
  CHECK(std::any_of(s.needles.begin(), s.needles.end(), [](const Needle& n) { return n.queried; }));
  for (const auto& n : s.needles) {
    CHECK(n.begin >= s.context_begin);
    CHECK(n.end <= s.context_end);
    CHECK(n.begin < n.end);
    CHECK(codec.decode(slice(s.prompt, n.begin, n.end)).find(n.text) != std::string::npos);
    CHECK(n.depth >= 0);
    CHECK(n.depth <= 1);
  }
  // Every reference sits in a queried needle (NIAH, passkey) or is the copy span's end.
  for (const auto& r : s.references)
    CHECK(std::any_of(s.needles.begin(), s.needles.end(), [&](const Needle& n) {
      return n.queried && n.text.find(r) != std::string::npos;
    }));
  if (single_needle(s.kind)) {
    const auto q = std::find_if(s.needles.begin(), s.needles.end(),
                                [](const Needle& n) { return n.queried; });
    CHECK(count_of(s.prompt_text, q->text) == 1);
  }
}

// The largest haystack unit of a sample in tokens (natural text: its longest
// sentence; noise line; a needle line of the needle haystack: ~the needle's size).
int largest_unit(const Sample& s, const Corpus* corpus, const bosch::model::Tokenizer& tok) {
  int most = static_cast<int>(tok.encode("\nThe grass is green. The sky is blue. The sun is "
                                         "yellow. Here we go. There and back again.").size());
  for (const auto& n : s.needles) most = std::max(most, n.end - n.begin + 8);
  if (corpus)
    for (const TextSpan& sp : s.text_spans)
      for (std::size_t i = sp.begin; i < sp.end; ++i)
        most = std::max(most, static_cast<int>(
                                  tok.encode(" " + corpus->sentences[static_cast<std::size_t>(
                                                       sp.file)][i]).size()));
  return most;
}

TaskSpec spec_of(TaskKind kind, int length, int samples, std::vector<double> depths,
                 std::vector<std::filesystem::path> texts) {
  TaskSpec s;
  s.kind = kind;
  s.context_length = length;
  s.num_samples = samples;
  s.depths = std::move(depths);
  s.text_files = std::move(texts);
  s.seed = bosch::test::seed(10);
  return s;
}

}  // namespace

TEST_CASE("tasks generate: token-exact layout with a byte codec") {
  const auto texts = bosch::test::fixture_texts();
  if (texts.empty()) return;
  const TextCodec codec = bosch::test::byte_codec();
  const int limit = 3000;  // bytes = tokens
  for (TaskKind kind : all_kinds()) {
    const TaskSet set = generate(spec_of(kind, limit, 3, {0.0, 0.5, 1.0}, texts), codec);
    REQUIRE(set.samples.size() == 3);
    for (const Sample& s : set.samples) {
      check_common(s, codec, limit);
      // One token per byte: the prompt is exactly BOS + prompt_text, the answer answer_text.
      CHECK(codec.decode(s.prompt) == s.prompt_text);
      CHECK(s.prompt.size() == s.prompt_text.size() + 1);
      CHECK(codec.decode(s.answer) == s.answer_text);
      // Granularity: a noise line (90 bytes), a needle line (<= 110 bytes) or a cut
      // sentence (< one word) is the most the haystack can fall short by.
      CHECK(static_cast<int>(s.prompt.size() + s.answer.size()) > limit - 120);
      for (const auto& n : s.needles) {
        const std::string bytes = codec.decode(slice(s.prompt, n.begin, n.end));
        CHECK(bytes.size() - n.text.size() <= 1);  // the needle and at most one separator
        CHECK(bytes.substr(bytes.size() - n.text.size()) == n.text);
      }
      // Depth 0 puts the needle first, depth 1 last.
      const auto q = std::find_if(s.needles.begin(), s.needles.end(),
                                  [](const Needle& n) { return n.queried; });
      if (single_needle(kind) && s.depth == 0.0) CHECK(q->begin == s.context_begin);
      if (single_needle(kind) && s.depth == 1.0) CHECK(q->end == s.context_end);
    }
  }
}

TEST_CASE("tasks generate: SmolLM2 byte-level BPE, all tasks") {
  const auto tok = bosch::test::bpe_tokenizer();
  const auto texts = bosch::test::fixture_texts();
  if (!tok || texts.empty()) return;
  const TextCodec codec = codec_of(*tok);
  CHECK_FALSE(codec.add_bos);
  const Corpus corpus = load_corpus(texts);
  const int limit = 1024;
  for (TaskKind kind : all_kinds()) {
    const TaskSet set = generate(spec_of(kind, limit, 2, {0.25, 0.75}, texts), *tok);
    REQUIRE(set.samples.size() == 2);
    for (const Sample& s : set.samples) {
      check_common(s, codec, limit);
      INFO(s.task << " seed " << s.seed);
      // Close to the limit: short by less than one whole haystack unit (natural text is
      // cut at a word, so it comes closer still).
      const int unit = largest_unit(s, &corpus, *tok);
      CHECK(static_cast<int>(s.prompt.size() + s.answer.size()) > limit - unit);
      // Segment-wise tokenization equals tokenizing the whole text, and the answer
      // ids are exactly what follows the prompt.
      CHECK(tok->encode(s.prompt_text) == s.prompt);
      std::vector<int> full = s.prompt;
      full.insert(full.end(), s.answer.begin(), s.answer.end());
      CHECK(tok->encode(s.prompt_text + s.answer_text) == full);
      CHECK(tok->decode(s.answer) == s.answer_text);
      CHECK(tok->decode(s.prompt) == s.prompt_text);
      // Depth within about half a haystack unit (a UUID needle line is ~80 tokens, a long
      // Austen sentence 200): the nearest unit boundary, plus one unit for the end of the
      // haystack that assembly may drop.
      const double haystack = s.context_end - s.context_begin;
      for (const auto& n : s.needles)
        if (n.queried && single_needle(kind))
          CHECK(std::abs(n.depth - s.depth) <= 1.5 * unit / (haystack - unit));
    }
  }
}

TEST_CASE("tasks generate: stories260K SentencePiece (BOS, space prefix)") {
  const auto tok = bosch::test::spm_tokenizer();
  const auto texts = bosch::test::fixture_texts();
  if (!tok || texts.empty()) return;
  const TextCodec codec = codec_of(*tok);
  CHECK(codec.add_bos);
  const int limit = 512;  // the model's context
  for (TaskKind kind : {TaskKind::niah_single_1, TaskKind::niah_single_2, TaskKind::niah_multivalue,
                        TaskKind::passkey, TaskKind::copy}) {
    const TaskSet set = generate(spec_of(kind, limit, 2, {0.3, 0.6}, texts), *tok);
    for (const Sample& s : set.samples) {
      check_common(s, codec, limit);
      INFO(s.task << " seed " << s.seed);
      CHECK(static_cast<int>(s.prompt.size() + s.answer.size()) >= limit - 30);
      const std::vector<int> body(s.prompt.begin() + 1, s.prompt.end());
      CHECK(tok->encode(s.prompt_text) == body);
      std::vector<int> full = body;
      full.insert(full.end(), s.answer.begin(), s.answer.end());
      CHECK(tok->encode(s.prompt_text + s.answer_text) == full);
    }
  }
}

TEST_CASE("tasks generate: deterministic from the seed") {
  const auto texts = bosch::test::fixture_texts();
  const auto tok = bosch::test::bpe_tokenizer();
  if (texts.empty() || !tok) return;
  for (TaskKind kind : {TaskKind::niah_single_2, TaskKind::niah_multikey_2, TaskKind::passkey}) {
    const TaskSpec spec = spec_of(kind, 768, 3, {}, texts);
    const TaskSet a = generate(spec, *tok), b = generate(spec, *tok);
    TaskSpec other = spec;
    other.seed += 1;
    const TaskSet c = generate(other, *tok);
    REQUIRE(a.samples.size() == 3);
    for (std::size_t i = 0; i < a.samples.size(); ++i) {
      CHECK(a.samples[i].prompt == b.samples[i].prompt);
      CHECK(a.samples[i].answer == b.samples[i].answer);
      CHECK(a.samples[i].seed == b.samples[i].seed);
      CHECK(a.samples[i].depth == b.samples[i].depth);
      CHECK(a.samples[i].prompt != c.samples[i].prompt);
      CHECK(a.samples[i].references != c.samples[i].references);
    }
    // Samples of one set differ from each other.
    CHECK(a.samples[0].prompt != a.samples[1].prompt);
  }
}

TEST_CASE("tasks generate: calibration and held-out sets are disjoint") {
  const auto texts = bosch::test::fixture_texts();
  const auto tok = bosch::test::bpe_tokenizer();
  if (texts.empty() || !tok) return;
  const Corpus corpus = load_corpus(texts);
  for (TaskKind kind : {TaskKind::niah_single_2, TaskKind::copy}) {
    const SplitSpecs specs = calibration_and_held_out(spec_of(kind, 1024, 6, {}, texts));
    CHECK(specs.calibration.split == Split::calibration);
    CHECK(specs.held_out.split == Split::held_out);
    const TaskSet cal = generate(specs.calibration, *tok), held = generate(specs.held_out, *tok);
    std::set<std::pair<int, std::size_t>> cal_sentences, held_sentences;
    std::set<std::string> cal_refs, held_refs;
    auto collect = [&](const TaskSet& set, Split split, auto& sentences, auto& refs) {
      for (const Sample& s : set.samples) {
        REQUIRE_FALSE(s.text_spans.empty());
        for (const TextSpan& sp : s.text_spans) {
          const auto region = split_region(corpus.sentences[static_cast<std::size_t>(sp.file)].size(),
                                           split);
          CHECK(sp.begin >= region.begin);
          CHECK(sp.end <= region.end);
          for (std::size_t i = sp.begin; i < sp.end; ++i) sentences.insert({sp.file, i});
        }
        refs.insert(s.references.begin(), s.references.end());
      }
    };
    collect(cal, Split::calibration, cal_sentences, cal_refs);
    collect(held, Split::held_out, held_sentences, held_refs);
    std::vector<std::pair<int, std::size_t>> common;
    std::set_intersection(cal_sentences.begin(), cal_sentences.end(), held_sentences.begin(),
                          held_sentences.end(), std::back_inserter(common));
    CHECK(common.empty());
    std::vector<std::string> common_refs;
    std::set_intersection(cal_refs.begin(), cal_refs.end(), held_refs.begin(), held_refs.end(),
                          std::back_inserter(common_refs));
    CHECK(common_refs.empty());
  }
  // Chunk starts are uniform over the split's stream of both files: 40 samples
  // all from one file would have probability 2^-39.
  TaskSpec many = spec_of(TaskKind::niah_single_2, 600, 40, {}, texts);
  const TaskSet set = generate(many, bosch::test::byte_codec());
  std::set<int> files;
  for (const Sample& s : set.samples)
    for (const TextSpan& sp : s.text_spans) files.insert(sp.file);
  CHECK(files.size() == 2);
}

TEST_CASE("tasks generate: depth and length at 4k tokens") {
  const auto texts = bosch::test::fixture_texts();
  const auto tok = bosch::test::bpe_tokenizer();
  if (texts.empty() || !tok) return;
  const std::vector<double> depths = {0.0, 0.1, 0.5, 0.9, 1.0};
  const int limit = 4096;
  for (TaskKind kind : {TaskKind::niah_single_2, TaskKind::niah_single_1}) {
    const TaskSet set = generate(spec_of(kind, limit, 5, depths, texts), *tok);
    for (std::size_t i = 0; i < set.samples.size(); ++i) {
      const Sample& s = set.samples[i];
      CHECK(s.depth == depths[i]);
      const int total = static_cast<int>(s.prompt.size() + s.answer.size());
      CHECK(total <= limit);
      CHECK(total >= limit * 0.98);
      // Half a unit: a noise line is 22 tokens, an Austen sentence mostly < 100
      // (rarely ~200) of ~4000 haystack tokens.
      CHECK(std::abs(s.needles.at(0).depth - s.depth) < 0.025);
    }
  }
}

TEST_CASE("tasks generate: length grid, chat format, random depths") {
  const auto tok = bosch::test::bpe_tokenizer();
  if (!tok) return;
  TaskSpec base;
  base.kind = TaskKind::passkey;
  base.num_samples = 3;
  base.depths = {0.0, 0.5, 1.0};
  base.seed = bosch::test::seed(20);
  const std::vector<int> lengths = {300, 600};
  const TaskSet grid = generate_grid(base, lengths, *tok);
  REQUIRE(grid.samples.size() == 6);
  REQUIRE(grid.specs.size() == 2);
  for (std::size_t i = 0; i < grid.samples.size(); ++i) {
    const Sample& s = grid.samples[i];
    CHECK(s.context_length == lengths[i / 3]);
    CHECK(static_cast<int>(s.prompt.size() + s.answer.size()) <= s.context_length);
    CHECK(s.prompt_text.find("What is the pass key? The pass key is") != std::string::npos);
    CHECK(s.answer_text == " " + s.references.at(0));
    CHECK(s.references.at(0).size() == 5);
  }
  CHECK(grid.samples[0].needles[0].begin == grid.samples[0].context_begin);
  CHECK(grid.samples[2].needles[0].end == grid.samples[2].context_end);
  CHECK(grid.description.find("passkey") != std::string::npos);

  // ChatML: control tokens parsed in the prompt, answer prefix without its space.
  TaskSpec chat;
  chat.kind = TaskKind::niah_single_1;
  chat.context_length = 512;
  chat.num_samples = 2;
  chat.format = chatml();
  const TaskSet cs = generate(chat, *tok);
  const std::vector<int> im_start = tok->encode("<|im_start|>", false, true);
  REQUIRE(im_start.size() == 1);
  for (const Sample& s : cs.samples) {
    CHECK(std::count(s.prompt.begin(), s.prompt.end(), im_start[0]) == 2);
    CHECK(tok->encode(s.prompt_text, false, true) == s.prompt);
    CHECK(s.prompt_text.find("<|im_start|>assistant\nThe special magic number for ") !=
          std::string::npos);
    CHECK(s.prompt_text.find("A special magic number is hidden within the following text.") !=
          std::string::npos);
    // Random depths are RULER's 40 depths.
    const double pct = s.depth * 100;
    CHECK(std::abs(pct - std::round(pct)) < 1e-9);
  }
}

TEST_CASE("tasks generate: RULER templates") {
  const TextCodec codec = bosch::test::byte_codec(false);
  TaskSpec s;
  s.context_length = 2000;
  s.num_samples = 1;
  s.kind = TaskKind::niah_multiquery;
  s.haystack = Haystack::noise;
  s.depths = {0.5};  // the first queried needle mid-context (others at random depths > 0 here)
  const Sample mq = generate(s, codec).samples.at(0);
  CHECK(mq.prompt_text.rfind("Some special magic numbers are hidden within the following text. "
                             "Make sure to memorize it. I will quiz you about the numbers "
                             "afterwards.\n",
                             0) == 0);
  CHECK(mq.prompt_text.find(".\nThe grass is green. The sky is blue. The sun is yellow. Here we "
                            "go. There and back again.\n") != std::string::npos);
  CHECK(mq.references.size() == 4);
  CHECK(mq.needles.size() == 4);
  CHECK(mq.answer_text == " " + mq.references[0] + ", " + mq.references[1] + ", " +
                              mq.references[2] + ", and " + mq.references[3]);
  CHECK(mq.prompt_text.find("\nWhat are all the special magic numbers for ") != std::string::npos);
  CHECK(mq.prompt_text.find(", and ") != std::string::npos);
  CHECK(mq.prompt_text.size() - mq.prompt_text.rfind(" mentioned in the provided text are") ==
        std::string(" mentioned in the provided text are").size());
  s.kind = TaskKind::niah_single_3;
  const Sample s3 = generate(s, codec).samples.at(0);
  CHECK(s3.prompt_text.rfind("A special magic uuid is hidden", 0) == 0);
  CHECK(s3.needles.at(0).text.rfind("One of the special magic uuids for ", 0) == 0);
  CHECK(s3.references.at(0).size() == 36);
  // Multivalue: the answer lists the values in the order they appear.
  s.kind = TaskKind::niah_multivalue;
  const Sample mv = generate(s, codec).samples.at(0);
  REQUIRE(mv.needles.size() == 4);
  for (std::size_t i = 0; i < 4; ++i)
    CHECK(mv.needles[i].text.find(mv.references[i]) != std::string::npos);
}

TEST_CASE("tasks generate: copy task") {
  const auto tok = bosch::test::bpe_tokenizer();
  const auto texts = bosch::test::fixture_texts();
  if (!tok || texts.empty()) return;
  for (Haystack h : {Haystack::natural, Haystack::noise}) {
    TaskSpec s = spec_of(TaskKind::copy, 800, 2, {0.2}, texts);
    s.haystack = h;
    s.copy_words = 20;
    s.copy_cue = 3;
    const TaskSet set = generate(s, *tok);
    for (const Sample& x : set.samples) {
      const std::string& span = x.needles.at(0).text;
      // The span (cue + answer) occurs once in the context; the prompt ends with the cue.
      CHECK(std::count(span.begin(), span.end(), ' ') == 19);
      CHECK(count_of(x.prompt_text, span) == 1);
      const std::string cue = span.substr(0, span.size() - x.answer_text.size());
      CHECK(cue + x.answer_text == span);
      CHECK(x.prompt_text.size() >= cue.size());
      CHECK(x.prompt_text.substr(x.prompt_text.size() - cue.size() - 1) == "\n" + cue);
      CHECK(x.references.at(0) == x.answer_text.substr(1));
    }
  }
}

TEST_CASE("tasks generate: invalid specs") {
  const TextCodec codec = bosch::test::byte_codec();
  TaskSpec s;
  s.kind = TaskKind::niah_single_1;
  s.context_length = 100;  // the template alone is longer
  CHECK_THROWS_AS(generate(s, codec), bosch::invalid_argument);
  s.context_length = 2000;
  s.depths = {1.5};
  CHECK_THROWS_AS(generate(s, codec), bosch::invalid_argument);
  s.depths = {};
  s.haystack = Haystack::needles;
  CHECK_THROWS_AS(generate(s, codec), bosch::invalid_argument);
  s.haystack = Haystack::noise;
  s.kind = TaskKind::copy;
  s.copy_cue = s.copy_words;
  CHECK_THROWS_AS(generate(s, codec), bosch::invalid_argument);
  s.kind = TaskKind::niah_single_2;
  s.haystack = Haystack::natural;
  s.text_files = {"/nonexistent/novel.txt"};
  CHECK_THROWS_AS(generate(s, codec), bosch::file_error);
  s.num_samples = 0;
  s.text_files = {};
  s.haystack = Haystack::noise;
  CHECK(generate(s, codec).samples.empty());
  CHECK(parse_task_kind("niah_multikey_3") == TaskKind::niah_multikey_3);
  CHECK(to_string(TaskKind::copy) == "copy");
  CHECK_THROWS_AS(parse_task_kind("niah"), bosch::invalid_argument);
  CHECK(parse_haystack("natural") == Haystack::natural);
  CHECK(parse_split("held_out") == Split::held_out);
}

TEST_CASE("tasks generate: sample i does not depend on the sample count") {
  const TextCodec codec = bosch::test::byte_codec();
  TaskSpec s;
  s.kind = TaskKind::niah_multikey_2;
  s.context_length = 1500;
  s.seed = bosch::test::seed(30);
  s.num_samples = 2;
  const TaskSet two = generate(s, codec);
  s.num_samples = 5;
  const TaskSet five = generate(s, codec);
  for (std::size_t i = 0; i < 2; ++i) {
    CHECK(two.samples[i].prompt == five.samples[i].prompt);
    CHECK(two.samples[i].answer == five.samples[i].answer);
  }
  // Kind, split and length are separate streams under one seed.
  TaskSpec other = s;
  other.split = Split::held_out;
  CHECK(generate(other, codec).samples[0].references != five.samples[0].references);
  other = s;
  other.context_length = 1600;
  CHECK(generate(other, codec).samples[0].references != five.samples[0].references);
}

TEST_CASE("tasks generate: default text files from BOSCH_CACHE") {
  const auto texts = bosch::test::fixture_texts();
  if (texts.empty()) return;
  const auto dir = std::filesystem::temp_directory_path() /
                   ("bosch-tasks-test-" + std::to_string(bosch::test::seed()));
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "text");
  const char* old = std::getenv("BOSCH_CACHE");
  const std::string saved = old ? old : "";
  ::setenv("BOSCH_CACHE", dir.c_str(), 1);
  CHECK_THROWS_AS(default_text_files(), bosch::file_error);  // empty folder
  std::filesystem::copy_file(texts[1], dir / "text" / "b.txt");
  std::filesystem::copy_file(texts[0], dir / "text" / "a.txt");
  { std::ofstream(dir / "text" / "notes.md") << "not a text file"; }
  const auto files = default_text_files();
  REQUIRE(files.size() == 2);
  CHECK(files[0].filename() == "a.txt");
  CHECK(files[1].filename() == "b.txt");
  TaskSpec s;
  s.kind = TaskKind::niah_single_2;  // natural text, no text_files: the defaults
  s.context_length = 800;
  s.num_samples = 2;
  const TaskSet set = generate(s, bosch::test::byte_codec());
  CHECK(set.samples.size() == 2);
  CHECK(set.description.find("(2 files)") != std::string::npos);
  if (old) ::setenv("BOSCH_CACHE", saved.c_str(), 1);
  else ::unsetenv("BOSCH_CACHE");
  std::filesystem::remove_all(dir);
}
