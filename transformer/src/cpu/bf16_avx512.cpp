// SPDX-License-Identifier: Apache-2.0
// The AVX512_BF16 kernels of the bf16 products (cpu/bf16.hpp). Each function
// here carries the AVX-512 target attribute instead of the whole file being
// compiled with -mavx512*: nothing else in this translation unit (no inline
// function from a header) is compiled for AVX-512, so the linker can never
// pick an AVX-512 copy of shared code, and the library keeps running on
// AVX2-only CPUs. The dispatch (precision.cpp) calls these only after cpuid
// reports AVX512F/BW/VL and AVX512_BF16.

#include <bosch/cpu/bf16.hpp>

#include "bf16_kernels.hpp"

#include <cstring>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <immintrin.h>
#define BOSCH_BF16_AVX512 1
#define BOSCH_TARGET_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#endif

namespace bosch::cpu::bf16 {

#if BOSCH_BF16_AVX512

namespace {

/// Rows per micro-tile; outputs per tile = 16 x NP (NP panels of a group).
/// 8 x 3 accumulators + 3 weight vectors fit the 32 zmm registers.
constexpr int MR = 8;

/// One micro-tile: `mr` rows of `a` times `NP` panels, all k2 pairs, then
/// stored (+ bias) into the first ncols columns of c.
template <int MR_, int NP>
BOSCH_TARGET_AVX512_BF16 void tile(const std::uint16_t* a, std::size_t lda, const std::uint16_t* b,
                                   std::size_t pair_stride, std::size_t panel_stride, int k2, float* c,
                                   std::size_t ldc, const float* bias, int ncols) {
  __m512 acc[MR_][NP];
#pragma GCC unroll 8
  for (int r = 0; r < MR_; ++r)
#pragma GCC unroll 3
    for (int q = 0; q < NP; ++q) acc[r][q] = _mm512_setzero_ps();
  const std::uint16_t* bp = b;
  for (int t = 0; t < k2; ++t, bp += pair_stride) {
    __m512bh w[NP];
#pragma GCC unroll 3
    for (int q = 0; q < NP; ++q) w[q] = (__m512bh)_mm512_loadu_si512(bp + q * panel_stride);
#pragma GCC unroll 8
    for (int r = 0; r < MR_; ++r) {
      std::int32_t pair;
      std::memcpy(&pair, a + static_cast<std::size_t>(r) * lda + 2 * static_cast<std::size_t>(t), sizeof pair);
      const __m512bh x = (__m512bh)_mm512_set1_epi32(pair);
#pragma GCC unroll 3
      for (int q = 0; q < NP; ++q) acc[r][q] = _mm512_dpbf16_ps(acc[r][q], x, w[q]);
    }
  }
#pragma GCC unroll 3
  for (int q = 0; q < NP; ++q) {
    const int n = ncols - 16 * q;
    if (n <= 0) break;
    const __mmask16 m = n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1u);
    const __m512 add = bias ? _mm512_maskz_loadu_ps(m, bias + 16 * q) : _mm512_setzero_ps();
#pragma GCC unroll 8
    for (int r = 0; r < MR_; ++r)
      _mm512_mask_storeu_ps(c + static_cast<std::size_t>(r) * ldc + 16 * q, m,
                            bias ? _mm512_add_ps(acc[r][q], add) : acc[r][q]);
  }
}

template <int NP>
BOSCH_TARGET_AVX512_BF16 void rows_np(const Block& k) {
  const std::size_t ps = k.pair_stride ? k.pair_stride : NP * 32, qs = k.panel_stride ? k.panel_stride : 32;
  // 4 panels: 6 x 4 accumulators + 4 weight vectors.
  constexpr int mr = NP == 4 ? 6 : MR;
  std::size_t r = 0;
  for (; r + mr <= k.rows; r += mr)
    tile<mr, NP>(k.a + r * k.lda, k.lda, k.b, ps, qs, k.k2, k.c + r * k.ldc, k.ldc, k.bias, k.ncols);
  const auto* a = k.a + r * k.lda;
  float* c = k.c + r * k.ldc;
  switch (k.rows - r) {
    case 0: break;
    case 1: tile<1, NP>(a, k.lda, k.b, ps, qs, k.k2, c, k.ldc, k.bias, k.ncols); break;
    case 2: tile<2, NP>(a, k.lda, k.b, ps, qs, k.k2, c, k.ldc, k.bias, k.ncols); break;
    case 3: tile<3, NP>(a, k.lda, k.b, ps, qs, k.k2, c, k.ldc, k.bias, k.ncols); break;
    case 4: tile<4, NP>(a, k.lda, k.b, ps, qs, k.k2, c, k.ldc, k.bias, k.ncols); break;
    case 5: tile<5, NP>(a, k.lda, k.b, ps, qs, k.k2, c, k.ldc, k.bias, k.ncols); break;
    case 6: tile<6, NP>(a, k.lda, k.b, ps, qs, k.k2, c, k.ldc, k.bias, k.ncols); break;
    default: tile<7, NP>(a, k.lda, k.b, ps, qs, k.k2, c, k.ldc, k.bias, k.ncols); break;
  }
}

}  // namespace

bool avx512_compiled() noexcept { return true; }

BOSCH_TARGET_AVX512_BF16 void block_avx512(const Block& k) {
  switch (k.np) {
    case 1: rows_np<1>(k); break;
    case 2: rows_np<2>(k); break;
    case 3: rows_np<3>(k); break;
    default: rows_np<4>(k); break;
  }
}

BOSCH_TARGET_AVX512_BF16 void convert_avx512(const float* x, std::size_t n, std::uint16_t* out) {
  std::size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512 lo = _mm512_loadu_ps(x + i), hi = _mm512_loadu_ps(x + i + 16);
    _mm512_storeu_si512(out + i, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
  }
  if (i < n) {
    // The tail through masked loads (zeros beyond n), stored masked.
    const std::size_t rest = n - i;
    const __mmask16 mlo = rest >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << rest) - 1u);
    const __mmask16 mhi = rest > 16 ? static_cast<__mmask16>((1u << (rest - 16)) - 1u) : static_cast<__mmask16>(0);
    const __m512 lo = _mm512_maskz_loadu_ps(mlo, x + i), hi = _mm512_maskz_loadu_ps(mhi, x + i + 16);
    const __mmask32 m = static_cast<__mmask32>((1ull << rest) - 1ull);
    _mm512_mask_storeu_epi16(out + i, m, (__m512i)_mm512_cvtne2ps_pbh(hi, lo));
  }
}

#else  // no AVX-512 kernel in this build

bool avx512_compiled() noexcept { return false; }
void block_avx512(const Block& k) { block_emulated(k); }
void convert_avx512(const float* x, std::size_t n, std::uint16_t* out) {
  for (std::size_t i = 0; i < n; ++i) out[i] = to_bf16(x[i]);
}

#endif

}  // namespace bosch::cpu::bf16
