// SPDX-License-Identifier: Apache-2.0
// Element-wise kernels, RMSNorm and the Eigen GEMM wrappers of the CPU backend.

#include <bosch/cpu/kernels.hpp>
#include <bosch/error.hpp>

#include "eigen.hpp"
#include "simd.hpp"
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

namespace bosch::cpu {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

ThreadScope::ThreadScope(int threads) : previous_(omp_get_max_threads()), current_(previous_) {
  if (threads > 0 && threads != previous_) {
    omp_set_num_threads(threads);
    current_ = threads;
    changed_ = true;
  }
}

ThreadScope::~ThreadScope() {
  if (changed_) omp_set_num_threads(previous_);
}

void rms_norm(const float* x, float* y, std::size_t rows, int dim, const float* gain, float eps) {
  const auto n = static_cast<std::ptrdiff_t>(rows);
#pragma omp parallel for schedule(static) if (rows * static_cast<std::size_t>(dim) > 32768)
  for (std::ptrdiff_t r = 0; r < n; ++r) {
    const float* xr = x + static_cast<std::size_t>(r) * dim;
    float* yr = y + static_cast<std::size_t>(r) * dim;
    double ss = 0.0;
    for (int c = 0; c < dim; ++c) ss += static_cast<double>(xr[c]) * xr[c];
    const float scale = static_cast<float>(1.0 / std::sqrt(ss / dim + static_cast<double>(eps)));
    for (int c = 0; c < dim; ++c) yr[c] = xr[c] * scale * gain[c];
  }
}

void linear(const float* x, std::size_t rows, const model::Matrix& w, const float* bias, float* y) {
  if (rows == 0) return;
  const Eigen::Index in = w.cols, out = w.rows;
  // Tasks: blocks of rows, about 2 per thread but between 256 and 1024 rows
  // (Eigen's serial GEMM gets faster with more rows: ~92 GFLOP/s at 256, ~100
  // at 1024 here); when that gives fewer than 2 tasks per thread the output
  // columns are split too (multiples of 16), so short inputs still use every
  // core. Each task is one serial Eigen GEMM; dynamic scheduling evens out
  // cores shared with other work.
  const int threads = omp_get_max_threads();
  const std::size_t per = (rows + 2 * static_cast<std::size_t>(threads) - 1) / (2 * static_cast<std::size_t>(threads));
  const std::size_t row_block = std::clamp<std::size_t>((per + 63) / 64 * 64, 256, 1024);
  const std::size_t row_tasks = (rows + row_block - 1) / row_block;
  std::size_t col_tasks = 1;
  if (threads > 1 && row_tasks < 2 * static_cast<std::size_t>(threads))
    col_tasks = std::min<std::size_t>((2 * threads + row_tasks - 1) / row_tasks,
                                      std::max<Eigen::Index>(1, out / 64));
  const Eigen::Index col_block = (out / static_cast<Eigen::Index>(col_tasks) + 15) / 16 * 16;
  const auto tasks = static_cast<std::ptrdiff_t>(row_tasks * col_tasks);
  const double flops = 2.0 * static_cast<double>(rows) * static_cast<double>(in) * static_cast<double>(out);
#pragma omp parallel for schedule(dynamic, 1) if (threads > 1 && tasks > 1 && flops > 2e6)
  for (std::ptrdiff_t t = 0; t < tasks; ++t) {
    const std::size_t r0 = static_cast<std::size_t>(t) / col_tasks * row_block;
    const auto c0 = static_cast<Eigen::Index>(static_cast<std::size_t>(t) % col_tasks) * col_block;
    if (c0 >= out) continue;
    const auto nr = static_cast<Eigen::Index>(std::min(row_block, rows - r0));
    const Eigen::Index nc = std::min(col_block, out - c0);
    Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>> X(x + r0 * in, nr, in, Eigen::OuterStride<>(in));
    Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>> W(w.data.data() + c0 * in, nc, in,
                                                          Eigen::OuterStride<>(in));
    Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>> Y(y + r0 * out + c0, nr, nc, Eigen::OuterStride<>(out));
    Y.noalias() = X * W.transpose();
    if (bias != nullptr) Y.rowwise() += Eigen::Map<const Eigen::Matrix<float, 1, Eigen::Dynamic>>(bias + c0, nc);
  }
}

float exp_shifted(float* x, std::size_t count, float shift) { return simd::exp_sum(x, count, shift); }

void silu_mul(float* gate, const float* up, std::size_t count) {
  constexpr std::size_t chunk = 4096;
  const auto chunks = static_cast<std::ptrdiff_t>((count + chunk - 1) / chunk);
#pragma omp parallel for schedule(static) if (count > 65536)
  for (std::ptrdiff_t c = 0; c < chunks; ++c) {
    std::size_t i = static_cast<std::size_t>(c) * chunk;
    const std::size_t end = std::min(count, i + chunk);
#if defined(__AVX2__) && defined(__FMA__)
    const __m256 one = _mm256_set1_ps(1.0f), zero = _mm256_setzero_ps();
    for (; i + 8 <= end; i += 8) {
      const __m256 g = _mm256_loadu_ps(gate + i);
      const __m256 e = simd::exp_avx2(_mm256_sub_ps(zero, g));
      _mm256_storeu_ps(gate + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_add_ps(one, e)), _mm256_loadu_ps(up + i)));
    }
#endif
    for (; i < end; ++i) gate[i] = gate[i] / (1.0f + simd::exp_scalar(0.0f - gate[i])) * up[i];
  }
}

void add_inplace(float* dst, const float* src, std::size_t count) {
  Eigen::Map<Eigen::ArrayXf> d(dst, static_cast<Eigen::Index>(count));
  Eigen::Map<const Eigen::ArrayXf> s(src, static_cast<Eigen::Index>(count));
  d += s;
}

}  // namespace bosch::cpu
