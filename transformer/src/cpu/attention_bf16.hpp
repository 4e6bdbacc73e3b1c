// SPDX-License-Identifier: Apache-2.0
// The bf16 products of the tiled attention (cpu/attention.hpp, with a bf16
// kernel): one call's keys and values rounded to bf16 once and packed for the
// bf16 block kernels (bf16_kernels.hpp), and the two products of a chunk of
// 16-aligned keys, S = Q K^T and acc += P V, with fp32 accumulation in
// VDPBF16PS's order (docs/precision.md).
#pragma once

#include <bosch/cpu/attention.hpp>
#include <bosch/cpu/bf16.hpp>

#include <cstddef>
#include <cstdint>
#include <span>

namespace bosch::cpu::detail {

/// Keys and values of every sequence of one attention call in bf16. Each
/// sequence's rows are padded with zero rows to a multiple of 16, so a chunk
/// of keys that starts at a multiple of 16 of its sequence starts a panel.
/// Per KV head: keys in panels of 16 (the outputs of Q K^T; head_dim in
/// pairs), values transposed (the outputs of P V are the head_dim channels,
/// in panels of 16; consecutive keys in pairs), panel after panel.
class Bf16KeyValues {
 public:
  Bf16KeyValues(const float* k, const float* v, std::span<const int> offsets, const AttentionShape& shape,
                Bf16Kernel kernel);

  /// S[r][c] for rows r < rows and keys c < len (len a multiple of 16):
  /// q (bf16, row stride ldq) times the keys [j0, j0 + len) of sequence b
  /// (j0 a multiple of 16) of KV head g, into s (row stride lds).
  void scores(const std::uint16_t* q, std::size_t ldq, std::size_t rows, int b, int g, int j0, int len, float* s,
              std::size_t lds) const;

  /// out[r][c] = sum over keys j of p[r][j] v[j][c] for c < head_dim: p
  /// (bf16, row stride ldp, len values) times the values of keys [j0, j0 +
  /// len) of sequence b, KV head g (j0 and len multiples of 16); out has
  /// row stride head_dim.
  void values(const std::uint16_t* p, std::size_t ldp, std::size_t rows, int b, int g, int j0, int len,
              float* out) const;

  /// Rounds x[0 .. n) to bf16 on this object's kernel, zeros up to `padded`.
  void round(const float* x, std::size_t n, std::uint16_t* out, std::size_t padded) const;

 private:
  /// c[r][o] (row stride ldc) for r < rows, o < outputs: a (bf16, row stride
  /// lda, `pairs` pairs) times `outputs` packed outputs at b, panels of 16
  /// `panel_stride` values apart, each pair of a panel 32 values after the
  /// last; in groups of 4 panels (64 outputs of S, or a head_dim of 64 of P V
  /// in one group), the kernels' widest register tile.
  void product(const std::uint16_t* a, std::size_t lda, std::size_t rows, const std::uint16_t* b,
               std::size_t panel_stride, int pairs, int outputs, float* c, std::size_t ldc) const;

  Bf16Kernel kernel_;
  int hd_ = 0;
  std::size_t key_panels_ = 0;  // key panels of all sequences (per KV head)
  std::size_t hd_pairs_ = 0;    // pairs of head_dim stored per key (padded)
  std::size_t channel_panels_ = 0;
  std::vector<std::size_t> first_panel_;  // per sequence
  Bf16Vector keys_, values_;
};

}  // namespace bosch::cpu::detail
