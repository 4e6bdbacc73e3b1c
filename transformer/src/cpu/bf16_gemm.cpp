// SPDX-License-Identifier: Apache-2.0
// bf16 products with fp32 accumulation (cpu/bf16.hpp): rounding, packing,
// the task split over OpenMP threads and the emulated kernel.

#include <bosch/cpu/bf16.hpp>
#include <bosch/error.hpp>

#include "bf16_kernels.hpp"
#include "simd.hpp"
#include <omp.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <string>

namespace bosch::cpu {

std::uint16_t to_bf16(float x) noexcept {
  std::uint32_t u;
  std::memcpy(&u, &x, sizeof u);
  if ((u & 0x7f800000u) == 0x7f800000u && (u & 0x007fffffu) != 0) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  if ((u & 0x7f800000u) == 0) return static_cast<std::uint16_t>((u >> 16) & 0x8000u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

float from_bf16(std::uint16_t b) noexcept {
  const std::uint32_t u = static_cast<std::uint32_t>(b) << 16;
  float x;
  std::memcpy(&x, &u, sizeof x);
  return x;
}

namespace bf16 {
namespace {

// The emulated micro-tile: `MR_` rows times one panel of 16 outputs (the
// first ncols stored). Per output and pair t, as VDPBF16PS does: the odd
// product, then the even one, each an fp32 FMA (exact product, one rounding).
template <int MR_>
void panel_emulated(const std::uint16_t* a, std::size_t lda, const std::uint16_t* b, std::size_t bstride, int k2,
                    float* c, std::size_t ldc, const float* bias, int ncols) {
#if BOSCH_CPU_AVX2
  __m256 acc[MR_][2];
  for (int r = 0; r < MR_; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  const __m256i high = _mm256_set1_epi32(static_cast<int>(0xFFFF0000u));
  for (int t = 0; t < k2; ++t) {
    const std::uint16_t* bp = b + static_cast<std::size_t>(t) * bstride;
    const __m256i w0 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp));
    const __m256i w1 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(bp + 16));
    const __m256 we0 = _mm256_castsi256_ps(_mm256_slli_epi32(w0, 16)), wo0 = _mm256_castsi256_ps(_mm256_and_si256(w0, high));
    const __m256 we1 = _mm256_castsi256_ps(_mm256_slli_epi32(w1, 16)), wo1 = _mm256_castsi256_ps(_mm256_and_si256(w1, high));
    for (int r = 0; r < MR_; ++r) {
      std::int32_t pair;
      std::memcpy(&pair, a + static_cast<std::size_t>(r) * lda + 2 * static_cast<std::size_t>(t), sizeof pair);
      const __m256i p = _mm256_set1_epi32(pair);
      const __m256 xe = _mm256_castsi256_ps(_mm256_slli_epi32(p, 16)), xo = _mm256_castsi256_ps(_mm256_and_si256(p, high));
      acc[r][0] = _mm256_fmadd_ps(xe, we0, _mm256_fmadd_ps(xo, wo0, acc[r][0]));
      acc[r][1] = _mm256_fmadd_ps(xe, we1, _mm256_fmadd_ps(xo, wo1, acc[r][1]));
    }
  }
  for (int r = 0; r < MR_; ++r) {
    alignas(32) float out[16];
    _mm256_store_ps(out, acc[r][0]);
    _mm256_store_ps(out + 8, acc[r][1]);
    float* cr = c + static_cast<std::size_t>(r) * ldc;
    for (int j = 0; j < ncols; ++j) cr[j] = bias ? out[j] + bias[j] : out[j];
  }
#else
  for (int r = 0; r < MR_; ++r) {
    const std::uint16_t* ar = a + static_cast<std::size_t>(r) * lda;
    for (int j = 0; j < ncols; ++j) {
      float acc = 0.0f;
      for (int t = 0; t < k2; ++t) {
        const std::uint16_t* bp = b + static_cast<std::size_t>(t) * bstride + 2 * j;
        acc = std::fma(from_bf16(ar[2 * t + 1]), from_bf16(bp[1]), acc);
        acc = std::fma(from_bf16(ar[2 * t]), from_bf16(bp[0]), acc);
      }
      c[static_cast<std::size_t>(r) * ldc + j] = bias ? acc + bias[j] : acc;
    }
  }
#endif
}

}  // namespace

void block_emulated(const Block& k) {
  constexpr int MR = 4;
  const std::size_t bstride = k.pair_stride ? k.pair_stride : static_cast<std::size_t>(k.np) * 32;
  const std::size_t qstride = k.panel_stride ? k.panel_stride : 32;
  for (int q = 0; q < k.np; ++q) {
    const int n = std::min(16, k.ncols - 16 * q);
    if (n <= 0) break;
    const std::uint16_t* b = k.b + qstride * static_cast<std::size_t>(q);
    const float* bias = k.bias ? k.bias + 16 * q : nullptr;
    std::size_t r = 0;
    for (; r + MR <= k.rows; r += MR)
      panel_emulated<MR>(k.a + r * k.lda, k.lda, b, bstride, k.k2, k.c + r * k.ldc + 16 * q, k.ldc, bias, n);
    for (; r < k.rows; ++r)
      panel_emulated<1>(k.a + r * k.lda, k.lda, b, bstride, k.k2, k.c + r * k.ldc + 16 * q, k.ldc, bias, n);
  }
}

}  // namespace bf16

std::size_t bf16_stride(int cols) noexcept {
  const std::size_t pairs = (static_cast<std::size_t>(std::max(cols, 0)) + 1) / 2;
  return 2 * ((pairs + 15) / 16 * 16);
}

PackedMatrix pack_bf16(const model::Matrix& w) {
  if (w.rows < 0 || w.cols < 0 || w.data.size() != static_cast<std::size_t>(w.rows) * static_cast<std::size_t>(w.cols))
    throw invalid_argument("matrix of " + std::to_string(w.rows) + " x " + std::to_string(w.cols) + " holding " +
                               std::to_string(w.data.size()) + " values",
                           "pack_bf16");
  PackedMatrix p;
  p.rows = w.rows;
  p.cols = w.cols;
  const std::size_t k2 = static_cast<std::size_t>(p.padded_pairs());
  const int panels = p.panels();
  p.data.assign(static_cast<std::size_t>(panels) * k2 * 32, 0);
  for (int col = 0; col < w.rows; ++col) {
    const int g = col / 48, q = (col % 48) / 16, j = col % 16;
    const std::size_t np = static_cast<std::size_t>(std::min(3, panels - 3 * g));
    std::uint16_t* dst = p.data.data() + static_cast<std::size_t>(3 * g) * k2 * 32 + static_cast<std::size_t>(q) * 32 +
                         2 * static_cast<std::size_t>(j);
    const float* src = w.data.data() + static_cast<std::size_t>(col) * static_cast<std::size_t>(w.cols);
    for (int k = 0; k < w.cols; ++k)
      dst[static_cast<std::size_t>(k / 2) * np * 32 + static_cast<std::size_t>(k % 2)] = to_bf16(src[k]);
  }
  return p;
}

void convert_bf16(const float* x, std::size_t rows, int cols, std::uint16_t* out, Bf16Kernel kernel) {
  const std::size_t n = static_cast<std::size_t>(cols), ld = bf16_stride(cols);
  const auto count = static_cast<std::ptrdiff_t>(rows);
#pragma omp parallel for schedule(static) if (rows * n > 65536)
  for (std::ptrdiff_t r = 0; r < count; ++r) {
    const float* xr = x + static_cast<std::size_t>(r) * n;
    std::uint16_t* o = out + static_cast<std::size_t>(r) * ld;
    if (kernel != Bf16Kernel::emulated)
      bf16::convert_avx512(xr, n, o);
    else
      for (std::size_t i = 0; i < n; ++i) o[i] = to_bf16(xr[i]);
    std::fill(o + n, o + ld, std::uint16_t{0});
  }
}

void gemm_bf16(const std::uint16_t* xb, std::size_t rows, const PackedMatrix& w, const float* bias, float* y,
               Bf16Kernel kernel) {
  if (rows == 0 || w.rows == 0) return;
  const int k2 = w.pairs(), k2p = w.padded_pairs(), panels = w.panels(), groups = (panels + 2) / 3;
  const std::size_t lda = 2 * static_cast<std::size_t>(k2p), ldc = static_cast<std::size_t>(w.rows);
  const std::size_t panel_size = static_cast<std::size_t>(k2p) * 32;
  // Tasks: blocks of rows (multiples of 8, at most 256: a block's activations,
  // 256 x 2 x cols bytes, stay in L2 beside one group of weights) times
  // ranges of panel groups, about 2 tasks per thread; dynamic scheduling
  // evens out cores shared with other work. The split changes no result.
  const int threads = omp_get_max_threads();
  const std::size_t want = 2 * static_cast<std::size_t>(threads);
  const std::size_t per = (rows + want - 1) / want;
  const std::size_t row_block = std::clamp<std::size_t>((per + 7) / 8 * 8, 32, 256);
  const std::size_t row_tasks = (rows + row_block - 1) / row_block;
  std::size_t col_tasks = 1;
  if (row_tasks < want) col_tasks = std::min<std::size_t>((want + row_tasks - 1) / row_tasks, static_cast<std::size_t>(groups));
  const std::size_t groups_per = (static_cast<std::size_t>(groups) + col_tasks - 1) / col_tasks;
  const auto tasks = static_cast<std::ptrdiff_t>(row_tasks * col_tasks);
  const double flops = 2.0 * static_cast<double>(rows) * static_cast<double>(w.cols) * static_cast<double>(w.rows);
#pragma omp parallel for schedule(dynamic, 1) if (threads > 1 && tasks > 1 && flops > 2e6)
  for (std::ptrdiff_t task = 0; task < tasks; ++task) {
    const std::size_t r0 = static_cast<std::size_t>(task) / col_tasks * row_block;
    const std::size_t g0 = static_cast<std::size_t>(task) % col_tasks * groups_per;
    const std::size_t g1 = std::min(static_cast<std::size_t>(groups), g0 + groups_per);
    for (std::size_t g = g0; g < g1; ++g) {
      bf16::Block blk;
      blk.a = xb + r0 * lda;
      blk.lda = lda;
      blk.rows = std::min(row_block, rows - r0);
      blk.b = w.data.data() + 3 * g * panel_size;
      blk.k2 = k2;
      blk.k2p = k2p;
      blk.np = std::min(3, panels - 3 * static_cast<int>(g));
      blk.ncols = std::min(48, w.rows - 48 * static_cast<int>(g));
      blk.c = y + r0 * ldc + 48 * g;
      blk.ldc = ldc;
      blk.bias = bias ? bias + 48 * g : nullptr;
      switch (kernel) {
        case Bf16Kernel::amx: bf16::block_amx(blk); break;
        case Bf16Kernel::avx512: bf16::block_avx512(blk); break;
        case Bf16Kernel::emulated: bf16::block_emulated(blk); break;
      }
    }
  }
}

std::size_t Bf16Weights::bytes() const noexcept {
  std::size_t b = 0;
  for (const auto& L : layers)
    for (const PackedMatrix* m : {&L.wq, &L.wk, &L.wv, &L.wo, &L.w_gate, &L.w_up, &L.w_down}) b += m->bytes();
  return b;
}

Bf16Weights pack_bf16(const model::Model& model, Bf16Kernel kernel) {
  Bf16Weights out;
  out.kernel = kernel;
  const auto& src = model.weights.layers;
  out.layers.resize(src.size());
  constexpr int per_layer = 7;
  const auto jobs = static_cast<std::ptrdiff_t>(src.size() * per_layer);
#pragma omp parallel for schedule(dynamic, 1)
  for (std::ptrdiff_t job = 0; job < jobs; ++job) {
    const auto l = static_cast<std::size_t>(job / per_layer);
    const auto& L = src[l];
    auto& P = out.layers[l];
    const std::array<std::pair<const model::Matrix*, PackedMatrix*>, per_layer> m{{{&L.wq, &P.wq},
                                                                                  {&L.wk, &P.wk},
                                                                                  {&L.wv, &P.wv},
                                                                                  {&L.wo, &P.wo},
                                                                                  {&L.w_gate, &P.w_gate},
                                                                                  {&L.w_up, &P.w_up},
                                                                                  {&L.w_down, &P.w_down}}};
    const auto& [from, to] = m[static_cast<std::size_t>(job % per_layer)];
    *to = pack_bf16(*from);
  }
  return out;
}

}  // namespace bosch::cpu
