// llama.cpp's tokenizer test vectors (test-tokenizer-0) on the vocabulary-only
// GGUF files in the fetched test data (vocab/, tests/data/README.md): every case must give exactly the
// expected ids, and decoding them must give the input back.

#include <bosch/model/gguf.hpp>
#include <bosch/model/tokenizer.hpp>

#include "test_support.hpp"

#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  REQUIRE_MESSAGE(in.good(), "cannot read " << p.string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

struct Case {
  std::string text;
  std::vector<int> ids;
};

/// The .inp file holds the inputs, each followed by a line
/// "__ggml_vocab_test__"; the .out file one line of space-separated ids per input.
std::vector<Case> read_cases(const std::filesystem::path& gguf_path) {
  const std::string inp = slurp(gguf_path.string() + ".inp");
  const std::string out = slurp(gguf_path.string() + ".out");
  const std::string sep = "\n__ggml_vocab_test__\n";
  std::vector<Case> cases;
  std::size_t pos = 0;
  while (pos < inp.size()) {
    const std::size_t next = inp.find(sep, pos);
    REQUIRE_MESSAGE(next != std::string::npos, "unterminated case in .inp");
    cases.push_back({inp.substr(pos, next - pos), {}});
    pos = next + sep.size();
  }
  std::istringstream lines(out);
  std::string line;
  std::size_t k = 0;
  while (std::getline(lines, line)) {
    REQUIRE(k < cases.size());
    std::istringstream ids(line);
    for (int id; ids >> id;) cases[k].ids.push_back(id);
    ++k;
  }
  REQUIRE(k == cases.size());
  return cases;
}

/// The vectors of vocab/ggml-vocab-<name>.gguf, encoded with the tokenizer of
/// `model` (default: that vocabulary file itself).
void check_vocab(const std::string& name, int expected_cases, std::filesystem::path model = {}) {
  const auto path = bosch::test::fixture("vocab/ggml-vocab-" + name + ".gguf");
  if (path.empty()) return;
  if (model.empty()) model = path;
  const bosch::model::gguf::File file(model);
  const bosch::model::Tokenizer tok(bosch::model::tokenizer_spec_from_gguf(file));
  const auto cases = read_cases(path);
  CHECK(static_cast<int>(cases.size()) == expected_cases);
  int passed = 0;
  for (const Case& c : cases) {
    const std::vector<int> got = tok.encode(c.text, /*add_special=*/false, /*parse_special=*/false);
    CHECK_MESSAGE(got == c.ids, name << ": wrong ids for \"" << c.text << "\"");
    // Byte-level BPE is lossless: the ids decode to the input.
    CHECK(tok.decode(got) == c.text);
    passed += got == c.ids;
  }
  MESSAGE(name << ": " << passed << "/" << cases.size() << " llama.cpp vectors exact");
}

}  // namespace

TEST_CASE("tokenizer: llama.cpp vectors, GPT-2 vocabulary") { check_vocab("gpt-2", 46); }

TEST_CASE("tokenizer: llama.cpp vectors, Llama-3 (llama-bpe) vocabulary") {
  check_vocab("llama-bpe", 46);
}

TEST_CASE("tokenizer: llama.cpp vectors, Qwen2 vocabulary") { check_vocab("qwen2", 46); }

// Qwen2.5-Coder-0.5B-Instruct's own vocabulary (scripts/fetch-model --model
// qwen2.5-coder-0.5b) has the same 151643 ordinary tokens, the same merges and
// the same "qwen2" pre-tokenizer as this file (only some special tokens
// differ, none of which the vectors contain), so llama.cpp's vectors hold for it.
TEST_CASE("tokenizer: llama.cpp Qwen2 vectors on Qwen2.5-Coder's own vocabulary") {
  const auto model = bosch::test::qwen_model();
  if (model.empty()) return;
  check_vocab("qwen2", 46, model);
}
