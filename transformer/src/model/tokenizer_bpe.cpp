// SPDX-License-Identifier: Apache-2.0
// Byte-level BPE (GPT-2 style): merges ranked by priority, applied per word.

#include "tokenizer_detail.hpp"

#include <algorithm>

namespace bosch::model {

void Tokenizer::Impl::bpe_word(std::string_view word, std::vector<int>& out) const {
  if (word.empty()) return;
  if (ignore_merges) {
    // Llama 3: a word that is itself a token is taken whole.
    const int whole = find(detail::byte_level_encode(word));
    if (whole >= 0) {
      out.push_back(whole);
      return;
    }
  }
  // One symbol per byte in a doubly linked list; id -1 marks a removed symbol
  // (or a byte without a token, which then never merges and is dropped, as
  // llama.cpp does).
  struct Symbol {
    int id, prev, next;
  };
  const int n = static_cast<int>(word.size());
  std::vector<Symbol> sym(static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i)
    sym[i] = {byte_tokens[static_cast<unsigned char>(word[i])], i - 1, i + 1 < n ? i + 1 : -1};

  struct Candidate {
    int rank, left, right, left_id, right_id, result;
  };
  // Lowest rank first; among equal ranks the leftmost (tokenizers, llama.cpp).
  const auto later = [](const Candidate& a, const Candidate& b) {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  };
  std::vector<Candidate> heap;
  const auto consider = [&](int left, int right) {
    if (left < 0 || right < 0) return;
    const int a = sym[left].id, b = sym[right].id;
    if (a < 0 || b < 0) return;
    auto it = merges.find(pair_key(a, b));
    if (it == merges.end()) return;
    heap.push_back({it->second.rank, left, right, a, b, it->second.result});
    std::push_heap(heap.begin(), heap.end(), later);
  };
  for (int i = 0; i + 1 < n; ++i) consider(i, i + 1);
  while (!heap.empty()) {
    std::pop_heap(heap.begin(), heap.end(), later);
    const Candidate c = heap.back();
    heap.pop_back();
    Symbol& l = sym[c.left];
    // Stale when either side has merged since (ids change) or no longer adjacent.
    if (l.id != c.left_id || l.next != c.right || sym[c.right].id != c.right_id) continue;
    l.id = c.result;
    const int after = sym[c.right].next;
    l.next = after;
    if (after >= 0) sym[after].prev = c.left;
    sym[c.right].id = -1;
    sym[c.right].next = sym[c.right].prev = -1;
    consider(l.prev, c.left);
    consider(c.left, after);
  }
  for (int i = 0; i >= 0; i = sym[i].next)
    if (sym[i].id >= 0) out.push_back(sym[i].id);
}

void Tokenizer::Impl::bpe_fragment(
    std::string_view text, std::vector<int>& out,
    std::unordered_map<std::string_view, std::pair<std::size_t, std::size_t>>& cache,
    std::vector<int>& cached) const {
  std::vector<std::pair<std::size_t, std::size_t>> words;
  splitter->split(text, words);
  for (const auto& [begin, end] : words) {
    const std::string_view word = text.substr(begin, end - begin);
    auto it = cache.find(word);
    if (it == cache.end()) {
      const std::size_t start = cached.size();
      bpe_word(word, cached);
      it = cache.emplace(word, std::pair{start, cached.size() - start}).first;
    }
    const auto [start, count] = it->second;
    out.insert(out.end(), cached.begin() + static_cast<std::ptrdiff_t>(start),
               cached.begin() + static_cast<std::ptrdiff_t>(start + count));
  }
}

}  // namespace bosch::model
