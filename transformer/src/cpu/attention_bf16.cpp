// SPDX-License-Identifier: Apache-2.0
// bf16 keys and values for the tiled attention (attention_bf16.hpp).

#include "attention_bf16.hpp"

#include "bf16_kernels.hpp"

#include <algorithm>

namespace bosch::cpu::detail {
namespace {

constexpr std::size_t panel = 16;  // outputs per panel; values of a pair of a panel: 32

void run_block(Bf16Kernel kernel, const bf16::Block& blk) {
  // AMX reads only the packed group layout; AMX CPUs have AVX512_BF16, whose
  // kernel gives the bits of the file comment of cpu/bf16.hpp.
  if (kernel == Bf16Kernel::emulated)
    bf16::block_emulated(blk);
  else
    bf16::block_avx512(blk);
}

}  // namespace

Bf16KeyValues::Bf16KeyValues(const float* k, const float* v, std::span<const int> offsets,
                             const AttentionShape& shape, Bf16Kernel kernel)
    : kernel_(kernel), hd_(shape.head_dim) {
  const std::size_t sequences = offsets.size() - 1;
  first_panel_.resize(sequences);
  for (std::size_t b = 0; b < sequences; ++b) {
    first_panel_[b] = key_panels_;
    key_panels_ += (static_cast<std::size_t>(offsets[b + 1] - offsets[b]) + panel - 1) / panel;
  }
  const auto hd = static_cast<std::size_t>(hd_);
  hd_pairs_ = bf16_stride(hd_) / 2;
  channel_panels_ = (hd + panel - 1) / panel;
  const std::size_t kv = static_cast<std::size_t>(shape.num_kv_heads);
  const std::size_t key_panel_size = hd_pairs_ * 2 * panel;          // one panel of 16 keys
  const std::size_t value_panel_size = key_panels_ * panel * panel;  // one panel of 16 channels: all key pairs
  keys_.assign(kv * key_panels_ * key_panel_size, 0);
  values_.assign(kv * channel_panels_ * value_panel_size, 0);
  std::vector<std::uint16_t> row(hd);
  const auto jobs = static_cast<std::ptrdiff_t>(kv * sequences);
#pragma omp parallel for schedule(dynamic, 1) firstprivate(row) if (static_cast<std::size_t>(offsets.back()) * kv * hd > 65536)
  for (std::ptrdiff_t job = 0; job < jobs; ++job) {
    const std::size_t g = static_cast<std::size_t>(job) / sequences, b = static_cast<std::size_t>(job) % sequences;
    const int n = offsets[b + 1] - offsets[b];
    for (int j = 0; j < n; ++j) {
      const std::size_t src = static_cast<std::size_t>(offsets[b] + j) * shape.kv_stride + g * hd;
      const std::size_t pj = first_panel_[b] * panel + static_cast<std::size_t>(j);  // packed key index
      // Keys: panel pj / 16, for each pair t of head_dim, key pj % 16's two values.
      round(k + src, hd, row.data(), hd);
      std::uint16_t* kd = keys_.data() + (g * key_panels_ + pj / panel) * key_panel_size + 2 * (pj % panel);
      for (std::size_t d = 0; d < hd; ++d) kd[d / 2 * 2 * panel + d % 2] = row[d];
      // Values: channel panel c / 16, key pair pj / 2, channel c % 16, key pj % 2.
      round(v + src, hd, row.data(), hd);
      std::uint16_t* vd = values_.data() + g * channel_panels_ * value_panel_size + pj / 2 * 2 * panel + pj % 2;
      for (std::size_t c = 0; c < hd; ++c) vd[c / panel * value_panel_size + c % panel * 2] = row[c];
    }
  }
}

void Bf16KeyValues::round(const float* x, std::size_t n, std::uint16_t* out, std::size_t padded) const {
  if (kernel_ != Bf16Kernel::emulated)
    bf16::convert_avx512(x, n, out);
  else
    for (std::size_t i = 0; i < n; ++i) out[i] = to_bf16(x[i]);
  std::fill(out + n, out + padded, std::uint16_t{0});
}

void Bf16KeyValues::product(const std::uint16_t* a, std::size_t lda, std::size_t rows, const std::uint16_t* b,
                            std::size_t panel_stride, int pairs, int outputs, float* c, std::size_t ldc) const {
  // Groups of 4 panels (64 outputs), the kernels' widest register tile.
  for (int c0 = 0; c0 < outputs; c0 += 64) {
    bf16::Block blk;
    blk.a = a;
    blk.lda = lda;
    blk.rows = rows;
    blk.b = b + static_cast<std::size_t>(c0) / panel * panel_stride;
    blk.k2 = pairs;
    blk.k2p = pairs;
    blk.np = std::min(4, (outputs - c0 + 15) / 16);
    blk.ncols = std::min(64, outputs - c0);
    blk.c = c + c0;
    blk.ldc = ldc;
    blk.pair_stride = 2 * panel;
    blk.panel_stride = panel_stride;
    run_block(kernel_, blk);
  }
}

void Bf16KeyValues::scores(const std::uint16_t* q, std::size_t ldq, std::size_t rows, int b, int g, int j0, int len,
                           float* s, std::size_t lds) const {
  const std::size_t key_panel_size = hd_pairs_ * 2 * panel;
  const std::uint16_t* base = keys_.data() + (static_cast<std::size_t>(g) * key_panels_ +
                                              first_panel_[static_cast<std::size_t>(b)] +
                                              static_cast<std::size_t>(j0) / panel) *
                                                 key_panel_size;
  product(q, ldq, rows, base, key_panel_size, (hd_ + 1) / 2, len, s, lds);
}

void Bf16KeyValues::values(const std::uint16_t* p, std::size_t ldp, std::size_t rows, int b, int g, int j0, int len,
                           float* out) const {
  const std::size_t value_panel_size = key_panels_ * panel * panel;
  const std::size_t first_pair = (first_panel_[static_cast<std::size_t>(b)] * panel + static_cast<std::size_t>(j0)) / 2;
  const std::uint16_t* base =
      values_.data() + static_cast<std::size_t>(g) * channel_panels_ * value_panel_size + first_pair * 2 * panel;
  product(p, ldp, rows, base, value_panel_size, len / 2, hd_, out, static_cast<std::size_t>(hd_));
}

}  // namespace bosch::cpu::detail
