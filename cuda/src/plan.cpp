// SPDX-License-Identifier: Apache-2.0
#include "plan.hpp"

#include <bosch/model/kv_slots.hpp>

#include <algorithm>
#include <string>

namespace bosch::cuda::detail {

bool check_options(const Options& o, int head_dim) {
  if (o.device < 0)
    throw invalid_argument("device index must be >= 0, got " + std::to_string(o.device),
                           "cuda::Options::device");
  if (o.query_tile != 64 && o.query_tile != 128)
    throw invalid_argument("query_tile must be 64 or 128, got " + std::to_string(o.query_tile),
                           "cuda::Options::query_tile");
  if (o.key_tile != 32 && o.key_tile != 64)
    throw invalid_argument("key_tile must be 32 or 64, got " + std::to_string(o.key_tile),
                           "cuda::Options::key_tile");
  if (o.row_chunk < 1)
    throw invalid_argument("row_chunk must be >= 1, got " + std::to_string(o.row_chunk),
                           "cuda::Options::row_chunk");
  if (head_dim < 2 || head_dim % 2 != 0 || head_dim > simple_max_head_dim())
    throw invalid_argument("head_dim must be even and in [2, " +
                               std::to_string(simple_max_head_dim()) + "], got " +
                               std::to_string(head_dim),
                           "head_dim");
  switch (o.attention) {
    case AttentionKernel::automatic: return tensor_core_head_dim(head_dim);
    case AttentionKernel::simple: return false;
    case AttentionKernel::tensor_core:
      if (!tensor_core_head_dim(head_dim))
        throw invalid_argument("the tensor-core attention kernel needs head_dim 64 or 128, got " +
                                   std::to_string(head_dim),
                               "cuda::Options::attention");
      return true;
  }
  return false;
}

Plan make_plan(std::span<const int> lengths, int query_tile) {
  Plan p;
  p.seq_start.reserve(lengths.size() + 1);
  p.seq_start.push_back(0);
  for (std::size_t b = 0; b < lengths.size(); ++b) {
    const int n = lengths[b];
    if (n < 1) throw invalid_argument("empty sequence " + std::to_string(b), "cuda attention plan");
    if (p.total > 0x7fffffff - n) throw invalid_argument("more than 2^31 rows", "cuda attention plan");
    p.total += n;
    p.max_len = std::max(p.max_len, n);
    p.seq_start.push_back(p.total);
    for (int q0 = 0; q0 < n; q0 += query_tile)
      p.tiles.push_back({static_cast<int>(b), q0, std::min(n, q0 + query_tile), 0});
  }
  // Longest causal span first: the tail of the schedule is short tiles.
  std::stable_sort(p.tiles.begin(), p.tiles.end(),
                   [](const AttentionTile& a, const AttentionTile& b) { return a.q1 > b.q1; });
  return p;
}

int decode_chunks(std::span<const int> head_windows, int sinks, int position) {
  int longest = 1;
  for (int w : head_windows) longest = std::max(longest, kv::reads(w > 0, w, sinks, position).count());
  return (longest + decode_chunk_keys() - 1) / decode_chunk_keys();
}

}  // namespace bosch::cuda::detail
