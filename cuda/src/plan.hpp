// SPDX-License-Identifier: Apache-2.0
#pragma once

// Host-side planning shared by the backend and the kernel entry points
// (internal to bosch::cuda): option checks and the attention work list.

#include "kernels.hpp"

#include <bosch/cuda/backend.hpp>
#include <bosch/eval/backend_frame.hpp>

#include <span>
#include <vector>

namespace bosch::cuda::detail {

/// Throws bosch::invalid_argument (naming the field) for invalid options and
/// returns whether attention over heads of `head_dim` runs on tensor cores.
bool check_options(const Options& options, int head_dim);

/// Packed sequences and the attention work list.
struct Plan {
  std::vector<int> seq_start;         ///< B + 1 row offsets
  std::vector<AttentionTile> tiles;   ///< query tiles, longest causal span first
  int total = 0;                      ///< rows in all
  int max_len = 0;                    ///< longest sequence
};

/// Plans `lengths` (each >= 1) in tiles of `query_tile` rows.
Plan make_plan(std::span<const int> lengths, int query_tile);

/// Keys query i sees and their sum over [0, n), window 0 = full: the FLOP
/// model's counts, shared with the CPU backend (eval/backend_frame.hpp).
using frame::visible_keys;
using frame::visible_pairs;

/// Key chunks (blocks per query head) of the decode-attention kernel for a
/// query at `position`: enough decode_chunk_keys()-key chunks for the head
/// that reads the most keys (kv::reads) among `head_windows` (one per KV
/// head of every layer, 0 = full) with `sinks` sinks; at least 1.
int decode_chunks(std::span<const int> head_windows, int sinks, int position);

inline Elem elem_of(DType t) { return t == DType::bf16 ? Elem::bf16 : Elem::fp16; }

}  // namespace bosch::cuda::detail
