// SPDX-License-Identifier: Apache-2.0
// Tokenization of prompt segments in their left context (see generate.hpp).
#include "segment_encoder.hpp"

#include <bosch/error.hpp>

#include <algorithm>

namespace bosch::tasks::detail {

std::string_view tail(std::string_view text) noexcept {
  constexpr std::size_t kMax = 32;
  std::size_t b = text.size() > kMax ? text.size() - kMax : 0;
  const std::size_t space = text.find_last_of(' ');
  if (space != std::string_view::npos && space + 1 < text.size() && space + 1 > b) b = space + 1;
  while (b < text.size() && (static_cast<unsigned char>(text[b]) & 0xC0) == 0x80) ++b;
  return text.substr(b);
}

SegmentEncoder::SegmentEncoder(const TextCodec& codec) : codec_(codec) {
  if (!codec_.encode) throw invalid_argument("codec without an encode function", "tasks::generate");
}

std::vector<int> SegmentEncoder::first(std::string_view text, bool special) const {
  return codec_.encode(text, special);
}

bool SegmentEncoder::try_anchor(std::string_view anchor, std::string_view text, bool special,
                                std::vector<int>& out) const {
  auto& cache = anchors_[special ? 1 : 0];
  auto it = cache.find(std::string(anchor));
  if (it == cache.end()) it = cache.emplace(std::string(anchor), codec_.encode(anchor, special)).first;
  const std::vector<int>& a = it->second;
  std::string joined;
  joined.reserve(anchor.size() + text.size());
  joined.append(anchor);
  joined.append(text);
  std::vector<int> ids = codec_.encode(joined, special);
  if (ids.size() < a.size() || !std::equal(a.begin(), a.end(), ids.begin())) return false;
  if (ids.size() == a.size() && !text.empty()) return false;
  out.assign(ids.begin() + static_cast<std::ptrdiff_t>(a.size()), ids.end());
  return true;
}

std::vector<int> SegmentEncoder::after(std::string_view previous, std::string_view text,
                                       bool special) const {
  std::vector<int> out;
  if (text.empty()) return out;
  const std::string_view t = tail(previous);
  if (!t.empty() && try_anchor(t, text, special, out)) return out;
  if (try_anchor(".", text, special, out)) return out;
  if (try_anchor("x", text, special, out)) return out;
  std::string excerpt(text.substr(0, 40));
  throw invalid_argument("the tokenizer merges across the boundary before '" + excerpt +
                             "': cannot tokenize it apart from its left context",
                         "tasks::generate");
}

std::vector<int> SegmentEncoder::unit(std::string_view text) const {
  auto it = units_.find(std::string(text));
  if (it != units_.end()) return it->second;
  if (units_.size() > 4096) units_.clear();  // natural text rarely repeats: bound the memory
  return units_.emplace(std::string(text), after(".", text, false)).first->second;
}

}  // namespace bosch::tasks::detail
