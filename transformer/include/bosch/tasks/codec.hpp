// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file tasks/codec.hpp
/// The tokenizer interface the task generators use: a text -> ids function,
/// ids -> text, and the special ids. Made from a bosch::model::Tokenizer with
/// codec_of(); any other tokenizer can be plugged in the same way.

#include <bosch/model/tokenizer.hpp>

#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bosch::tasks {

struct TextCodec {
  /// Token ids of `text`, never with BOS/EOS added. With `parse_special`, control
  /// tokens written in the text ("<|im_start|>") map to their ids.
  std::function<std::vector<int>(std::string_view text, bool parse_special)> encode;
  /// The text of `ids` (control tokens omitted).
  std::function<std::string(std::span<const int> ids)> decode;
  int bos = -1;          ///< beginning-of-sequence id, -1 when none
  int eos = -1;          ///< end-of-sequence id, -1 when none
  bool add_bos = false;  ///< prompts start with `bos`
};

/// A codec backed by `tokenizer` (holds a copy; Tokenizer copies share tables).
/// add_bos = tokenizer.spec().add_bos && tokenizer.bos() >= 0.
TextCodec codec_of(const model::Tokenizer& tokenizer);

}  // namespace bosch::tasks
