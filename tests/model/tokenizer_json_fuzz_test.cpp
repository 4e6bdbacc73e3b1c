// SPDX-License-Identifier: Apache-2.0
// Regression cases for malformed tokenizer.json files found by
// fuzz/fuzz_tokenizer_json: each is a bosch::format_error naming the file and
// the field, never an unbounded allocation or another exception type.
#include <bosch/error.hpp>
#include <bosch/model/tokenizer.hpp>
#include <bosch/model/tokenizer_json.hpp>

#include "model/writers.hpp"
#include "test_support.hpp"

#include <nlohmann/json.hpp>

#include <string>

using nlohmann::json;

namespace {

/// A minimal byte-level tokenizer.json: the 256 byte-level characters
/// (GPT-2's table: printable bytes stand for themselves, the others for
/// U+0100 onwards) with ids 0..255 and a ByteLevel pre-tokenizer.
json minimal() {
  json vocab = json::object();
  for (int b = 0; b < 256; ++b) vocab[bosch::test::writers::byte_level_char(static_cast<std::uint8_t>(b))] = b;
  return {{"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array()}}},
          {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}}}};
}

std::string where_of(const std::string& text) {
  try {
    (void)bosch::model::tokenizer_spec_from_json_text(text, "t.json");
  } catch (const bosch::format_error& e) {
    return e.where();
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("fuzz regression: vocabulary ids are bounded by the file's size") {
  // {"x": 2000000000} in the vocab made the reader allocate 2 * 10^9 token
  // slots (64 GB) for the holes below it.
  REQUIRE(where_of(minimal().dump()) == "(accepted)");
  json j = minimal();
  j["model"]["vocab"]["big"] = 2000000000;
  CHECK(where_of(j.dump()) == "t.json: model.vocab");
  j = minimal();
  j["added_tokens"] = json::array({{{"id", 1500000000}, {"content", "<x>"}, {"special", true}}});
  CHECK(where_of(j.dump()) == "t.json: added_tokens[0].id");
  // Holes are still allowed (they become unused tokens) while the file could list them.
  j = minimal();
  j["added_tokens"] = json::array({{{"id", 300}, {"content", "<x>"}, {"special", true}}});
  REQUIRE(j.dump().size() > 300);
  const auto spec = bosch::model::tokenizer_spec_from_json_text(j.dump(), "t.json");
  CHECK(spec.tokens.size() == 301);
}
