// Hugging Face tokenizer.json parsing: a small hand-written file, error
// reporting, and files written from the GGUF vocabularies (in the layout the
// real Llama 3 / Qwen2 / SmolLM2 / GPT-2 / Llama 2 files use) that must
// tokenize exactly like the GGUF tokenizers and pass the llama.cpp vectors.

#include <bosch/error.hpp>
#include <bosch/model/gguf.hpp>
#include <bosch/model/tokenizer.hpp>
#include <bosch/model/tokenizer_json.hpp>

#include "model/writers.hpp"
#include "test_support.hpp"

#include <nlohmann/json.hpp>

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

using bosch::model::Tokenizer;
using bosch::model::TokenizerSpec;
using bosch::model::tokenizer_spec_from_json;
using bosch::model::tokenizer_spec_from_json_text;
using nlohmann::json;

/// A scratch directory removed at scope exit.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    path = std::filesystem::temp_directory_path() /
           ("bosch-tokjson-" + std::to_string(::getpid()) + "-" +
            std::to_string(bosch::test::seed()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
};

void write(const std::filesystem::path& p, const std::string& text) {
  std::ofstream out(p, std::ios::binary);
  out << text;
  REQUIRE(out.good());
}

/// The where() of the format_error thrown by `f`, or "" when none is thrown.
template <class F>
std::string error_where(F&& f) {
  try {
    f();
  } catch (const bosch::format_error& e) {
    return e.where();
  }
  return {};
}

// A byte-level tokenizer over the 256 byte characters (ids 0..255 in byte
// order) plus a few merged tokens, GPT-2's ByteLevel pre-tokenizer, two added
// tokens and a BOS template.
json small_tokenizer() {
  json vocab = json::object();
  // The byte-level characters, written out: printable bytes are themselves,
  // the others U+0100.. in order (GPT-2's table).
  for (int b = 0; b < 256; ++b) vocab[bosch::test::writers::byte_level_char(static_cast<std::uint8_t>(b))] = b;
  // "Ġ" is the byte-level form of ' '.
  const std::vector<std::string> merged = {"he", "ll", "hell", "hello", "\xC4\xA0w", "or",
                                           "\xC4\xA0wor", "ld", "\xC4\xA0world"};
  for (std::size_t i = 0; i < merged.size(); ++i) vocab[merged[i]] = 256 + static_cast<int>(i);
  return json{
      {"version", "1.0"},
      {"added_tokens",
       json::array({{{"id", 265}, {"content", "<|bos|>"}, {"special", true}},
                    {{"id", 266}, {"content", "<tag>"}, {"special", false}}})},
      {"normalizer", nullptr},
      {"pre_tokenizer",
       {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
        {"use_regex", true}}},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", json::array({{{"SpecialToken", {{"id", "<|bos|>"}, {"type_id", 0}}}},
                                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
        {"special_tokens", {{"<|bos|>", {{"id", "<|bos|>"}, {"ids", {265}}, {"tokens", {"<|bos|>"}}}}}}}},
      {"decoder", {{"type", "ByteLevel"}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", nullptr},
        {"vocab", vocab},
        // Both merge notations.
        {"merges", json::array({"h e", "l l", json::array({"he", "ll"}), "hell o", "\xC4\xA0 w",
                                "o r", json::array({"\xC4\xA0w", "or"}), "l d",
                                "\xC4\xA0wor ld"})}}}};
}

}  // namespace

TEST_CASE("tokenizer_json: a small hand-written byte-level tokenizer.json") {
  const TokenizerSpec spec = tokenizer_spec_from_json_text(small_tokenizer().dump(), "small.json");
  CHECK(spec.kind == TokenizerSpec::Kind::byte_bpe);
  CHECK(spec.pre == "gpt2");
  CHECK(spec.pre_regexes.empty());
  REQUIRE(spec.tokens.size() == 267);
  REQUIRE(spec.merges.size() == 9);
  CHECK(spec.merges[2] == "he ll");  // the [left, right] form, normalized
  CHECK(spec.bos == 265);
  CHECK(spec.add_bos);
  REQUIRE(spec.token_types.size() == 267);
  CHECK(spec.token_types[265] == 3);  // special -> control
  CHECK(spec.token_types[266] == 4);  // not special -> user-defined
  CHECK(spec.token_types[104] == 1);

  const Tokenizer tok(spec);
  CHECK(tok.encode("hello world") == std::vector<int>{259, 264});
  CHECK(tok.encode("hello world", true) == std::vector<int>{265, 259, 264});
  CHECK(tok.encode("hell") == std::vector<int>{258});
  CHECK(tok.encode("helo") == std::vector<int>{256, 'l', 'o'});  // bytes are ids 0..255 here
  // Control text is plain text unless parse_special; user-defined always matches.
  CHECK(tok.encode("<|bos|>hello") != std::vector<int>{265, 259});
  CHECK(tok.encode("<|bos|>hello", false, true) == std::vector<int>{265, 259});
  CHECK(tok.encode("a<tag>b") == std::vector<int>{'a', 266, 'b'});
  CHECK(tok.decode(tok.encode("hello world", true)) == "hello world");
  CHECK(tok.decode(std::vector<int>{265, 259}, true) == "<|bos|>hello");
}

TEST_CASE("tokenizer_json: custom Split regexes are carried, unknown features rejected") {
  json j = small_tokenizer();
  // Split at digits (isolated) before a regex-free ByteLevel: not a known
  // pre-tokenizer, so the regexes travel in the spec.
  j["pre_tokenizer"] = {
      {"type", "Sequence"},
      {"pretokenizers",
       json::array({{{"type", "Split"},
                     {"pattern", {{"Regex", "[0-9]+"}}},
                     {"behavior", "Isolated"},
                     {"invert", false}},
                    {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", false}}})}};
  const TokenizerSpec spec = tokenizer_spec_from_json_text(j.dump(), "custom.json");
  REQUIRE(spec.pre_regexes == std::vector<std::string>{"[0-9]+"});
  const Tokenizer tok(spec);
  CHECK(tok.pre_tokenize("ab12 cd345e") ==
        std::vector<std::string>{"ab", "12", " cd", "345", "e"});
  // Without the GPT-2 regex the space stays inside the word: " world" has no
  // word boundary before "hello" here, so "hello world" is one word.
  CHECK(tok.encode("hello world") == std::vector<int>{259, 264});

  SUBCASE("errors name the file and the field") {
    json bad = small_tokenizer();
    bad["model"]["merges"][1] = "l zz";
    CHECK(error_where([&] { tokenizer_spec_from_json_text(bad.dump(), "t.json"); }) ==
          "t.json: model.merges[1]");
    bad = small_tokenizer();
    bad["model"]["merges"][4] = json::array({"a", "b", "c"});
    CHECK(error_where([&] { tokenizer_spec_from_json_text(bad.dump(), "t.json"); }) ==
          "t.json: model.merges[4]");
    bad = small_tokenizer();
    bad["model"]["type"] = "WordPiece";
    CHECK(error_where([&] { tokenizer_spec_from_json_text(bad.dump(), "t.json"); }) ==
          "t.json: model.type");
    bad = small_tokenizer();
    bad["pre_tokenizer"] = j["pre_tokenizer"];
    bad["pre_tokenizer"]["pretokenizers"][0]["behavior"] = "Removed";
    CHECK(error_where([&] { tokenizer_spec_from_json_text(bad.dump(), "t.json"); }) ==
          "t.json: pre_tokenizer[0].behavior");
    bad = small_tokenizer();
    bad["pre_tokenizer"] = j["pre_tokenizer"];
    bad["pre_tokenizer"]["pretokenizers"][0]["pattern"]["Regex"] = "([0-9]+";
    CHECK(error_where([&] { tokenizer_spec_from_json_text(bad.dump(), "t.json"); })
              .rfind("t.json: ", 0) == 0);
    bad = small_tokenizer();
    bad["added_tokens"][0]["id"] = 104;  // clashes with 'h'
    CHECK(error_where([&] { tokenizer_spec_from_json_text(bad.dump(), "t.json"); }) ==
          "t.json: added_tokens[0]");
    bad = small_tokenizer();
    bad["model"]["dropout"] = 0.1;
    CHECK(error_where([&] { tokenizer_spec_from_json_text(bad.dump(), "t.json"); }) ==
          "t.json: model.dropout");
    CHECK(error_where([&] { tokenizer_spec_from_json_text("{\"model\": ", "t.json"); }) ==
          "t.json");
    CHECK_THROWS_AS(tokenizer_spec_from_json("/nonexistent/bosch/tokenizer.json"),
                    bosch::file_error);
  }
}

TEST_CASE("tokenizer_json: tokenizer_config.json beside the file supplies BOS/EOS") {
  TempDir dir;
  json j = small_tokenizer();
  j["post_processor"] = nullptr;
  write(dir.path / "tokenizer.json", j.dump());
  TokenizerSpec spec = tokenizer_spec_from_json(dir.path / "tokenizer.json");
  CHECK(spec.bos == -1);
  CHECK(!spec.add_bos);
  write(dir.path / "tokenizer_config.json",
        R"({"bos_token": {"content": "<|bos|>"}, "eos_token": "<tag>", "add_bos_token": true})");
  spec = tokenizer_spec_from_json(dir.path / "tokenizer.json");
  CHECK(spec.bos == 265);
  CHECK(spec.eos == 266);
  CHECK(spec.add_bos);
  write(dir.path / "tokenizer_config.json", R"({"bos_token": "<nope>"})");
  CHECK(error_where([&] { tokenizer_spec_from_json(dir.path / "tokenizer.json"); }) ==
        (dir.path / "tokenizer_config.json").string() + ": bos_token");
}

// ---- files equivalent to the GGUF vocabularies ---------------------------------------

namespace {

constexpr const char* kLlama3Split =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kQwen2Split =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";

json split_then_byte_level(const std::string& regex) {
  return {{"type", "Sequence"},
          {"pretokenizers",
           json::array({{{"type", "Split"},
                         {"pattern", {{"Regex", regex}}},
                         {"behavior", "Isolated"},
                         {"invert", false}},
                        {{"type", "ByteLevel"},
                         {"add_prefix_space", false},
                         {"trim_offsets", true},
                         {"use_regex", false}}})}};
}

/// A tokenizer.json with the vocabulary of `spec` (normal tokens in the model
/// vocab, the others as added tokens), its merges (as pairs when `pairs`),
/// and the given pre-tokenizer and normalizer.
json byte_level_json(const TokenizerSpec& spec, const json& pre_tokenizer, bool pairs,
                     bool ignore_merges, const json& normalizer = nullptr) {
  json vocab = json::object();
  json added = json::array();
  for (std::size_t i = 0; i < spec.tokens.size(); ++i) {
    const int type = spec.token_types.empty() ? 1 : spec.token_types[i];
    if (type == 3 || type == 4)
      added.push_back({{"id", i}, {"content", spec.tokens[i]}, {"special", type == 3}});
    else
      vocab[spec.tokens[i]] = i;
  }
  json merges = json::array();
  for (const std::string& m : spec.merges) {
    const auto sp = m.find(' ');
    if (pairs)
      merges.push_back(json::array({m.substr(0, sp), m.substr(sp + 1)}));
    else
      merges.push_back(m);
  }
  return {{"version", "1.0"},
          {"added_tokens", added},
          {"normalizer", normalizer},
          {"pre_tokenizer", pre_tokenizer},
          {"post_processor", {{"type", "ByteLevel"}}},
          {"decoder", {{"type", "ByteLevel"}}},
          {"model",
           {{"type", "BPE"},
            {"dropout", nullptr},
            {"unk_token", nullptr},
            {"ignore_merges", ignore_merges},
            {"vocab", vocab},
            {"merges", merges}}}};
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

/// llama.cpp's vectors for `name` must pass through the tokenizer.json built
/// from its GGUF with `pre_tokenizer`.
void check_json_vocab(const std::string& name, const json& pre_tokenizer, bool pairs,
                      bool ignore_merges, const std::string& expected_pre,
                      const json& normalizer = nullptr) {
  const auto path = bosch::test::fixture("vocab/ggml-vocab-" + name + ".gguf");
  if (path.empty()) return;
  const TokenizerSpec gguf_spec =
      bosch::model::tokenizer_spec_from_gguf(bosch::model::gguf::File(path));
  TempDir dir;
  write(dir.path / "tokenizer.json",
        byte_level_json(gguf_spec, pre_tokenizer, pairs, ignore_merges, normalizer).dump());
  const TokenizerSpec spec = tokenizer_spec_from_json(dir.path / "tokenizer.json");
  CHECK(spec.pre == expected_pre);
  CHECK(spec.tokens == gguf_spec.tokens);
  CHECK(spec.merges == gguf_spec.merges);
  const Tokenizer tok(spec);

  // The vectors: inputs separated by "\n__ggml_vocab_test__\n", ids one line each.
  const std::string inp = slurp(path.string() + ".inp");
  std::istringstream out(slurp(path.string() + ".out"));
  const std::string sep = "\n__ggml_vocab_test__\n";
  int cases = 0, exact = 0;
  for (std::size_t pos = 0; pos < inp.size();) {
    const std::size_t next = inp.find(sep, pos);
    REQUIRE(next != std::string::npos);
    const std::string text = inp.substr(pos, next - pos);
    pos = next + sep.size();
    std::string line;
    REQUIRE(std::getline(out, line));
    std::istringstream ids_in(line);
    std::vector<int> expected;
    for (int id; ids_in >> id;) expected.push_back(id);
    const auto got = tok.encode(text);
    CHECK_MESSAGE(got == expected, name << " via tokenizer.json: \"" << text << "\"");
    ++cases;
    exact += got == expected;
  }
  CHECK(cases == 46);
  MESSAGE(name << " via tokenizer.json (pre '" << spec.pre << "'): " << exact << "/" << cases
               << " exact");
}

}  // namespace

TEST_CASE("tokenizer_json: GPT-2 vocabulary as tokenizer.json passes the llama.cpp vectors") {
  check_json_vocab("gpt-2",
                   {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"use_regex", true}},
                   /*pairs=*/false, false, "gpt2");
}

TEST_CASE("tokenizer_json: Llama-3 vocabulary as tokenizer.json passes the llama.cpp vectors") {
  check_json_vocab("llama-bpe", split_then_byte_level(kLlama3Split), /*pairs=*/true,
                   /*ignore_merges=*/true, "llama-bpe");
}

TEST_CASE("tokenizer_json: Qwen2 vocabulary as tokenizer.json passes the llama.cpp vectors") {
  check_json_vocab("qwen2", split_then_byte_level(kQwen2Split), /*pairs=*/true, false, "qwen2",
                   {{"type", "NFC"}});
  // The same regex written differently is not recognized: it travels as a
  // custom PCRE2 regex (with PCRE2's own (?i:) handling) and must still agree.
  check_json_vocab("qwen2", split_then_byte_level(std::string("(?:") + kQwen2Split + ")"),
                   /*pairs=*/false, false, "default");
}

TEST_CASE("tokenizer_json: SmolLM2 as tokenizer.json tokenizes like its GGUF") {
  const auto path = bosch::test::default_model();
  if (path.empty()) return;
  const TokenizerSpec gguf_spec =
      bosch::model::tokenizer_spec_from_gguf(bosch::model::gguf::File(path));
  // SmolLM2's own tokenizer.json pre-tokenizer.
  const json pre = {
      {"type", "Sequence"},
      {"pretokenizers",
       json::array({{{"type", "Digits"}, {"individual_digits", true}},
                    {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true},
                     {"use_regex", true}}})}};
  const TokenizerSpec spec = tokenizer_spec_from_json_text(
      byte_level_json(gguf_spec, pre, false, false).dump(), "smollm2.json");
  CHECK(spec.pre == "smollm");
  const Tokenizer from_json(spec), from_gguf(gguf_spec);
  const auto text_path = bosch::test::fixture("text/emma.txt");
  if (text_path.empty()) return;
  const std::string text = slurp(text_path).substr(0, 50000);
  const auto ids = from_json.encode(text);
  CHECK(ids == from_gguf.encode(text));
  CHECK(from_json.encode("<|im_start|>Hi 42", false, true) ==
        from_gguf.encode("<|im_start|>Hi 42", false, true));
  CHECK(from_json.decode(ids) == text);
}

TEST_CASE("tokenizer_json: a Llama-2 style (SentencePiece BPE) tokenizer.json from stories260K") {
  const auto path = bosch::test::fixture("models/stories260K.gguf");
  if (path.empty()) return;
  const TokenizerSpec gguf_spec =
      bosch::model::tokenizer_spec_from_gguf(bosch::model::gguf::File(path));
  // As Hugging Face converts a SentencePiece BPE model: every split of every
  // token into two tokens is a merge, ordered by the merged token's score.
  json vocab = json::object(), added = json::array(), merges = json::array();
  std::vector<std::pair<float, std::size_t>> order;
  for (std::size_t i = 0; i < gguf_spec.tokens.size(); ++i) {
    const int type = gguf_spec.token_types[i];
    if (type == 3) {
      added.push_back({{"id", i}, {"content", gguf_spec.tokens[i]}, {"special", true}});
    } else {
      vocab[gguf_spec.tokens[i]] = i;
      if (type == 1) order.emplace_back(gguf_spec.scores[i], i);
    }
  }
  std::stable_sort(order.begin(), order.end(),
                   [](const auto& a, const auto& b) { return a.first > b.first; });
  for (const auto& [score, id] : order) {
    const std::string& t = gguf_spec.tokens[id];
    for (std::size_t cut = 1; cut < t.size(); ++cut)
      if (vocab.contains(t.substr(0, cut)) && vocab.contains(t.substr(cut)))
        merges.push_back(json::array({t.substr(0, cut), t.substr(cut)}));
  }
  const std::string space = "\xE2\x96\x81";
  const json file = {
      {"version", "1.0"},
      {"added_tokens", added},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers", json::array({{{"type", "Prepend"}, {"prepend", space}},
                                     {{"type", "Replace"},
                                      {"pattern", {{"String", " "}}},
                                      {"content", space}}})}}},
      {"pre_tokenizer", nullptr},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                                {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         json::array({{{"type", "Replace"}, {"pattern", {{"String", space}}}, {"content", " "}},
                      {{"type", "ByteFallback"}},
                      {{"type", "Fuse"}},
                      {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}})}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", "<unk>"},
        {"byte_fallback", true},
        {"fuse_unk", true},
        {"vocab", vocab},
        {"merges", merges}}}};
  const TokenizerSpec spec = tokenizer_spec_from_json_text(file.dump(), "llama2-style.json");
  CHECK(spec.kind == TokenizerSpec::Kind::spm);
  CHECK(spec.add_space_prefix);
  CHECK(spec.add_bos);
  CHECK(spec.bos == 1);
  CHECK(spec.unk == 0);
  CHECK(spec.tokens == gguf_spec.tokens);
  CHECK(spec.token_types == gguf_spec.token_types);
  const Tokenizer from_json(spec), from_gguf(gguf_spec);
  const auto text_path = bosch::test::fixture("text/prideprejudice.txt");
  if (text_path.empty()) return;
  const std::string text = slurp(text_path).substr(0, 20000) + " caf\xC3\xA9 \xF0\x9F\xA6\x99";
  const auto ids = from_json.encode(text, true);
  CHECK(ids == from_gguf.encode(text, true));
  CHECK(from_json.decode(ids) == text);
}
