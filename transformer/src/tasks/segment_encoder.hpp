// SPDX-License-Identifier: Apache-2.0
// Internal to bosch::tasks: tokenization of prompt segments in their left context.
#pragma once

#include <bosch/tasks/codec.hpp>

#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace bosch::tasks::detail {

/// Tokenizes text segments as they appear after a left neighbour: the ids of
/// encode(anchor + text) after those of encode(anchor), where the anchor is the
/// tail of the previous text (its last word, at most 32 bytes), checked to be a
/// token prefix; "." and "x" are tried next. Throws bosch::invalid_argument when
/// no anchor separates (a tokenizer merging across the segment boundary).
class SegmentEncoder {
 public:
  explicit SegmentEncoder(const TextCodec& codec);

  /// Ids of `text` at the very start of the prompt (nothing before it).
  std::vector<int> first(std::string_view text, bool special) const;
  /// Ids of `text` right after `previous` (non-empty).
  std::vector<int> after(std::string_view previous, std::string_view text, bool special) const;
  /// after(".", text) through a cache: for haystack units and needles, which
  /// always follow a sentence end or a word.
  std::vector<int> unit(std::string_view text) const;

  const TextCodec& codec() const noexcept { return codec_; }

 private:
  bool try_anchor(std::string_view anchor, std::string_view text, bool special,
                  std::vector<int>& out) const;

  const TextCodec& codec_;
  mutable std::unordered_map<std::string, std::vector<int>> anchors_[2];
  mutable std::unordered_map<std::string, std::vector<int>> units_;
};

/// The last word of `text` (after its last space), at most 32 bytes, starting on
/// a UTF-8 character boundary.
std::string_view tail(std::string_view text) noexcept;

}  // namespace bosch::tasks::detail
