// SPDX-License-Identifier: Apache-2.0
// The AMX-BF16 kernel of the bf16 products (cpu/bf16.hpp). As in
// bf16_avx512.cpp, each function carries its target attribute (nothing else
// in this file is compiled for AMX or AVX-512), and the dispatch calls it
// only after detect_cpu_features found AMX enabled by the OS and granted to
// the process.
//
// Tiles: C0..C2 (tiles 0-2) hold 16 rows x 16 fp32 outputs of the group's
// up to 3 panels, A (tile 3) 16 rows x 16 pairs of the activation, B0..B2
// (tiles 4-6) 16 pairs x 16 outputs of each panel, loaded straight from the
// packed layout (a panel's pairs are np x 64 bytes apart). A tail of fewer
// than 16 rows runs under a second configuration with that many rows.

#include "bf16_kernels.hpp"

#include <algorithm>
#include <cstdint>
#include <cstring>

#if defined(__x86_64__) && defined(__linux__) && \
    ((defined(__clang__) && __clang_major__ >= 12) || (!defined(__clang__) && defined(__GNUC__) && __GNUC__ >= 11))
#include <immintrin.h>
#define BOSCH_BF16_AMX 1
#define BOSCH_TARGET_AMX __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512bf16")))
#endif

namespace bosch::cpu::bf16 {

#if BOSCH_BF16_AMX

namespace {

/// The LDTILECFG memory layout (palette 1).
struct alignas(64) TileConfig {
  std::uint8_t palette = 1;
  std::uint8_t start_row = 0;
  std::uint8_t reserved[14] = {};
  std::uint16_t colsb[16] = {};
  std::uint8_t rows[16] = {};
};
static_assert(sizeof(TileConfig) == 64);

/// Configures tiles 0-6: C and A with `m` rows (1..16), B with 16 pairs; 64 bytes a row.
BOSCH_TARGET_AMX void configure(int m) {
  TileConfig cfg;
  for (int t = 0; t < 7; ++t) {
    cfg.colsb[t] = 64;
    cfg.rows[t] = static_cast<std::uint8_t>(t <= 3 ? m : 16);
  }
  _tile_loadconfig(&cfg);
}

/// Stores C tile q (0..2; the tile number must be a literal for GCC's
/// intrinsics) to `dst` with a row stride of `stride` bytes.
BOSCH_TARGET_AMX void store_tile(int q, void* dst, long stride) {
  switch (q) {
    case 0: _tile_stored(0, dst, stride); break;
    case 1: _tile_stored(1, dst, stride); break;
    default: _tile_stored(2, dst, stride); break;
  }
}

/// Writes `m` rows of C tile `q` (+ bias) to the first `ncols` columns of c.
BOSCH_TARGET_AMX void store(int q, float* c, std::size_t ldc, int m, int ncols, const float* bias) {
  if (m == 16 && ncols >= 16 && bias == nullptr) {
    store_tile(q, c, static_cast<long>(ldc * sizeof(float)));
    return;
  }
  alignas(64) float tmp[16 * 16];
  store_tile(q, tmp, 64);
  const int n = std::min(16, ncols);
  const __mmask16 mask = n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
  const __m512 add = bias ? _mm512_maskz_loadu_ps(mask, bias) : _mm512_setzero_ps();
  for (int r = 0; r < m; ++r) {
    const __m512 v = _mm512_load_ps(tmp + 16 * r);
    _mm512_mask_storeu_ps(c + static_cast<std::size_t>(r) * ldc, mask, bias ? _mm512_add_ps(v, add) : v);
  }
}

/// m (1..16) rows starting at row r of the block, all NP panels, all pairs.
template <int NP>
BOSCH_TARGET_AMX void rows_tile(const Block& k, std::size_t r, int m) {
  _tile_zero(0);
  if constexpr (NP > 1) _tile_zero(1);
  if constexpr (NP > 2) _tile_zero(2);
  const std::uint16_t* a = k.a + r * k.lda;
  const long a_stride = static_cast<long>(k.lda * sizeof(std::uint16_t));
  const long b_stride = NP * 64;
  for (int t = 0; t < k.k2p; t += 16) {
    const std::uint16_t* b = k.b + static_cast<std::size_t>(t) * NP * 32;
    _tile_loadd(3, a + 2 * static_cast<std::size_t>(t), a_stride);
    _tile_loadd(4, b, b_stride);
    _tile_dpbf16ps(0, 3, 4);
    if constexpr (NP > 1) {
      _tile_loadd(5, b + 32, b_stride);
      _tile_dpbf16ps(1, 3, 5);
    }
    if constexpr (NP > 2) {
      _tile_loadd(6, b + 64, b_stride);
      _tile_dpbf16ps(2, 3, 6);
    }
  }
  float* c = k.c + r * k.ldc;
  for (int q = 0; q < NP; ++q) store(q, c + 16 * q, k.ldc, m, k.ncols - 16 * q, k.bias ? k.bias + 16 * q : nullptr);
}

template <int NP>
BOSCH_TARGET_AMX void rows_np(const Block& k) {
  std::size_t r = 0;
  if (k.rows >= 16) {
    configure(16);
    for (; r + 16 <= k.rows; r += 16) rows_tile<NP>(k, r, 16);
  }
  if (r < k.rows) {
    const int m = static_cast<int>(k.rows - r);
    configure(m);
    rows_tile<NP>(k, r, m);
  }
  _tile_release();
}

}  // namespace

bool amx_compiled() noexcept { return true; }

BOSCH_TARGET_AMX void block_amx(const Block& k) {
  // A panel beyond ncols holds zero weights (ncols > 16 (np - 1)).
  switch (k.np) {
    case 1: rows_np<1>(k); break;
    case 2: rows_np<2>(k); break;
    default: rows_np<3>(k); break;
  }
}

#else  // no AMX kernel in this build

bool amx_compiled() noexcept { return false; }
void block_amx(const Block& k) { block_avx512(k); }

#endif

}  // namespace bosch::cpu::bf16
