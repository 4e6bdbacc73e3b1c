// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: Hugging Face tokenizer.json (+ tokenizer_config.json)
// through bosch::model::tokenizer_spec_from_json_text, then the Tokenizer it
// describes encodes and decodes a fixed text.
//
// Input: the tokenizer.json text, optionally followed by a NUL byte and the
// tokenizer_config.json text (NUL cannot occur in valid JSON).

#include "fuzz_support.hpp"

#include <bosch/model/tokenizer.hpp>
#include <bosch/model/tokenizer_json.hpp>

#include <string_view>
#include <utility>

namespace {
constexpr std::string_view sample =
    "Hello world 123\n  x<|endoftext|>y \xc3\xa9\xe4\xb8\xad \xf0\x9f\x98\x80! it's 2024.";
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size), config;
  if (const auto nul = text.find('\0'); nul != std::string_view::npos) {
    config = text.substr(nul + 1);
    text = text.substr(0, nul);
  }
  const std::string where = "fuzz/tokenizer.json";
  bosch::model::TokenizerSpec spec;
  if (!bosch::fuzz::check(
          [&] { spec = bosch::model::tokenizer_spec_from_json_text(text, where, config); }, where))
    return 0;
  // The reader built a Tokenizer from the spec already: building it again must
  // succeed; encoding may still raise bosch::invalid_argument (an spm vocabulary
  // without a byte or unknown token for a character), which names no file.
  const bosch::model::Tokenizer tok(std::move(spec));
  bosch::fuzz::check(
      [&] {
        for (bool special : {false, true}) {
          const auto ids = tok.encode(sample, special, special);
          for (int id : ids)
            bosch::fuzz::require(id >= 0 && id < tok.vocab_size(),
                                 "encode gave an id outside the vocabulary");
          (void)tok.decode(ids, special);
          for (int id : ids) (void)tok.piece(id);
        }
      },
      "");
  return 0;
}
