// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: GGUF files (bosch::model::gguf::File), their tokenizer
// metadata, configuration and weights, and the whole bosch::model::load path.

#include "fuzz_support.hpp"

#include <bosch/model/gguf.hpp>
#include <bosch/model/loader.hpp>
#include <bosch/model/model.hpp>
#include <bosch/model/tokenizer.hpp>

#include <utility>
#include <vector>

namespace {

using namespace bosch;
using namespace bosch::model;

// Text with ASCII, digits, spaces, multi-byte UTF-8 and special-token text.
constexpr std::string_view sample =
    "Hello world 123\n  x<|endoftext|>y \xc3\xa9\xe4\xb8\xad \xf0\x9f\x98\x80!";

void exercise_tokenizer(const Tokenizer& tok) {
  const auto ids = tok.encode(sample, true, true);
  (void)tok.decode(ids, true);
  (void)tok.decode(ids, false);
  for (int id : ids) (void)tok.piece(id);
}

void exercise_file(const gguf::File& f, const std::string& p) {
  for (const auto& k : f.keys()) {
    const gguf::Value& v = f.at(k);
    fuzz::require(v.is_array() || v.array_size() == 0, "scalar with array elements");
  }
  std::vector<float> buf;
  for (const auto& t : f.tensors()) {
    const auto bytes = f.tensor_data(t);
    fuzz::require(bytes.size() == t.size, "tensor_data size differs from the directory");
    fuzz::require(t.offset + t.size <= f.file_size(), "tensor beyond the end of the file");
    if (can_dequantize(t.ggml_type())) {
      buf.resize(static_cast<std::size_t>(t.elements()));
      dequantize(t.ggml_type(), bytes, buf);  // the directory was checked: must not throw
    }
  }
  TokenizerSpec spec;
  // The spec's own errors name the file; whether it makes a Tokenizer is
  // checked by load() below (Tokenizer errors name only the field).
  if (fuzz::check([&] { spec = tokenizer_spec_from_gguf(f); }, p))
    fuzz::check([&] { exercise_tokenizer(Tokenizer(std::move(spec))); }, "");
  fuzz::check(
      [&] {
        const Config c = config_from_gguf(f);
        (void)weights_from_gguf(f, c);
      },
      p);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const auto path = fuzz::write_scratch("model.gguf", data, size);
  const std::string p = path.string();
  fuzz::check([&] { exercise_file(gguf::File(path), p); }, p);
  Model m;
  if (fuzz::check([&] { m = load(path); }, p))
    fuzz::check([&] { exercise_tokenizer(m.tokenizer); }, "");
  return 0;
}
