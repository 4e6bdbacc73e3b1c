// SPDX-License-Identifier: Apache-2.0
// Inline vector helpers of the CPU backend (exp, row max, exp-and-sum).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>

#if defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
#define BOSCH_CPU_AVX2 1
#endif

namespace bosch::cpu::simd {

// exp(x) by Cody-Waite range reduction and the Cephes expf polynomial
// (max relative error 8e-8 over [-87, 88]; inputs clamped to that range, so
// exp(-inf) gives ~1e-38, never NaN). The scalar and the AVX2 versions do the
// same operations; which one an element takes depends only on its index and
// the count, so results never depend on alignment.
constexpr float exp_lo = -87.33654f, exp_hi = 88.37626f, log2e = 1.44269504088896341f;
constexpr float c1 = 0.693359375f, c2 = -2.12194440e-4f;
constexpr float p0 = 1.9875691500e-4f, p1 = 1.3981999507e-3f, p2 = 8.3334519073e-3f,
                p3 = 4.1665795894e-2f, p4 = 1.6666665459e-1f, p5 = 5.0000001201e-1f;

inline float exp_scalar(float x) {
  x = std::min(std::max(x, exp_lo), exp_hi);
  const float k = std::floor(std::fma(x, log2e, 0.5f));
  float r = std::fma(k, -c1, x);
  r = std::fma(k, -c2, r);
  float p = std::fma(p0, r, p1);
  p = std::fma(p, r, p2);
  p = std::fma(p, r, p3);
  p = std::fma(p, r, p4);
  p = std::fma(p, r, p5);
  p = std::fma(p, r * r, r) + 1.0f;
  std::int32_t bits = (static_cast<std::int32_t>(k) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, sizeof scale);
  return p * scale;
}

#if BOSCH_CPU_AVX2
inline __m256 exp_avx2(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(exp_lo)), _mm256_set1_ps(exp_hi));
  const __m256 k = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(log2e), _mm256_set1_ps(0.5f)));
  __m256 r = _mm256_fmadd_ps(k, _mm256_set1_ps(-c1), x);
  r = _mm256_fmadd_ps(k, _mm256_set1_ps(-c2), r);
  __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(p0), r, _mm256_set1_ps(p1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(p2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(p3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(p4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(p5));
  p = _mm256_add_ps(_mm256_fmadd_ps(p, _mm256_mul_ps(r, r), r), _mm256_set1_ps(1.0f));
  const __m256i bits = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvttps_epi32(k), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(bits));
}
#endif

/// max of x[0..n) (n >= 1).
inline float row_max(const float* x, std::size_t n) {
  std::size_t i = 0;
  float m = -std::numeric_limits<float>::infinity();
#if BOSCH_CPU_AVX2
  if (n >= 8) {
    __m256 v = _mm256_loadu_ps(x);
    for (i = 8; i + 8 <= n; i += 8) v = _mm256_max_ps(v, _mm256_loadu_ps(x + i));
    alignas(32) float lanes[8];
    _mm256_store_ps(lanes, v);
    for (float l : lanes) m = std::max(m, l);
  }
#endif
  for (; i < n; ++i) m = std::max(m, x[i]);
  return m;
}

/// x[i] = exp(x[i] - shift) for i < n; returns the sum (order fixed by n).
inline float exp_sum(float* x, std::size_t n, float shift) {
  std::size_t i = 0;
  float sum = 0.0f;
#if BOSCH_CPU_AVX2
  const __m256 s = _mm256_set1_ps(shift);
  __m256 acc = _mm256_setzero_ps();
  for (; i + 8 <= n; i += 8) {
    const __m256 e = exp_avx2(_mm256_sub_ps(_mm256_loadu_ps(x + i), s));
    _mm256_storeu_ps(x + i, e);
    acc = _mm256_add_ps(acc, e);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, acc);
  for (float l : lanes) sum += l;
#endif
  for (; i < n; ++i) {
    x[i] = exp_scalar(x[i] - shift);
    sum += x[i];
  }
  return sum;
}

/// x[i] *= a for i < n.
inline void scale(float* x, std::size_t n, float a) {
  std::size_t i = 0;
#if BOSCH_CPU_AVX2
  const __m256 v = _mm256_set1_ps(a);
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), v));
#endif
  for (; i < n; ++i) x[i] *= a;
}

}  // namespace bosch::cpu::simd
