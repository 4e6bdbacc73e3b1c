// SPDX-License-Identifier: Apache-2.0
// A TextCodec backed by bosch::model::Tokenizer.
#include <bosch/tasks/codec.hpp>

namespace bosch::tasks {

TextCodec codec_of(const model::Tokenizer& tokenizer) {
  TextCodec c;
  c.encode = [tokenizer](std::string_view text, bool special) {
    return tokenizer.encode(text, /*add_special=*/false, special);
  };
  c.decode = [tokenizer](std::span<const int> ids) { return tokenizer.decode(ids); };
  c.bos = tokenizer.bos();
  c.eos = tokenizer.eos();
  c.add_bos = tokenizer.spec().add_bos && tokenizer.bos() >= 0;
  return c;
}

}  // namespace bosch::tasks
