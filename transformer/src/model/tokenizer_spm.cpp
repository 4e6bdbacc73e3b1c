// SPDX-License-Identifier: Apache-2.0
// SentencePiece-style BPE with scores (llama.cpp's "llama" vocabulary type):
// starting from single characters, repeatedly merge the adjacent pair whose
// concatenation is the highest-scoring token; characters without a token fall
// back to their bytes' <0xXX> tokens.

#include "tokenizer_detail.hpp"

#include <bosch/error.hpp>

#include <algorithm>

namespace bosch::model {

void Tokenizer::Impl::spm_fragment(std::string_view text, std::vector<int>& out) const {
  if (text.empty()) return;
  struct Symbol {
    std::size_t offset, length;  // bytes of `text`; length 0: merged away
    int prev, next;
  };
  std::vector<Symbol> sym;
  sym.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t len = detail::utf8_char_length(text, i);
    const int index = static_cast<int>(sym.size());
    sym.push_back({i, len, index - 1, -1});
    if (index > 0) sym[index - 1].next = index;
    i += len;
  }

  struct Candidate {
    float score;
    int left, right;
    std::size_t length;  // bytes of the pair when it was found
  };
  // Highest score first; among equal scores the leftmost (llama.cpp, sentencepiece).
  const auto later = [](const Candidate& a, const Candidate& b) {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  };
  std::vector<Candidate> heap;
  const auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const std::size_t length = sym[left].length + sym[right].length;
    const int id = find(text.substr(sym[left].offset, length));
    if (id < 0) return;
    const float score = spec.scores.empty() ? 0.0f : spec.scores[static_cast<std::size_t>(id)];
    heap.push_back({score, left, right, length});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (int i = 0; i + 1 < static_cast<int>(sym.size()); ++i) consider(i, i + 1);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& l = sym[c.left];
    Symbol& r = sym[c.right];
    // Symbols only grow, so a pair that changed since it was queued has
    // another length (or an emptied side).
    if (l.length == 0 || r.length == 0 || l.length + r.length != c.length) continue;
    l.length += r.length;
    r.length = 0;
    l.next = r.next;
    if (r.next >= 0) sym[r.next].prev = c.left;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }
  for (int i = 0; i >= 0; i = sym[i].next) {
    const std::string_view piece = text.substr(sym[i].offset, sym[i].length);
    const int id = find(piece);
    if (id >= 0) {
      out.push_back(id);
      continue;
    }
    const bool has_bytes = std::all_of(piece.begin(), piece.end(), [&](char ch) {
      return byte_tokens[static_cast<unsigned char>(ch)] >= 0;
    });
    if (has_bytes) {
      for (char ch : piece) out.push_back(byte_tokens[static_cast<unsigned char>(ch)]);
    } else if (spec.unk >= 0) {
      out.push_back(spec.unk);  // one unknown token per character, as sentencepiece
    } else {
      throw invalid_argument("text has a character the vocabulary cannot encode (no byte "
                             "fallback tokens and no unknown token)",
                             "tokenizer: encode");
    }
  }
}

}  // namespace bosch::model
