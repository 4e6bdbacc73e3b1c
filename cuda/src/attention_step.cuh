// SPDX-License-Identifier: Apache-2.0
#pragma once

// The warp-per-query-row attention step shared by the CUDA-core forward
// kernel (attention.cu, attention_simple_kernel) and the decode kernel
// (decode.cu, decode_attention_kernel), internal to bosch::cuda. A warp holds
// one query row; lane holds dims lane, lane + 32, ... (E = max head_dim / 32
// values per lane, those at or past head_dim unused). Keys are visited one at
// a time with an online softmax in fp32 and log2 units (P not rounded).
// CPU references: attention_ref and decode_ref in tests/cuda/kernels_test.cpp
// (float64, max-subtracted softmax over the visible keys); the forward oracle
// in tests/cpu/reference.hpp.

#include "device_types.cuh"

#include <cmath>

namespace bosch::cuda::detail {

/// log2(e): scores are scaled by scale * kLog2e so that exp2f gives e^x.
constexpr float kLog2e = 1.4426950408889634f;

/// Loads this lane's dims of the query row `qr` (head_dim d) into qv, 0 past d,
/// and zeroes the output accumulator ov.
template <class T, int E>
__device__ __forceinline__ void warp_row_begin(const T* qr, int d, int lane, float (&qv)[E], float (&ov)[E]) {
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int c = lane + 32 * e;
    qv[e] = c < d ? to_float<T>(qr[c]) : 0.0f;
    ov[e] = 0.0f;
  }
}

/// One key (rows kr, vr of head_dim d): x = (q . k) * scale by a fixed-order
/// butterfly (warp_sum), then the running max m, sum l and output ov updated:
/// mn = max(m, x), alpha = 2^(m - mn) (0 for the first key, m = -inf),
/// p = 2^(x - mn), l = l alpha + p, ov = ov alpha + p v, m = mn.
/// `scale` is in log2 units (the caller's scale * kLog2e).
template <class T, int E>
__device__ __forceinline__ void warp_row_attend(const float (&qv)[E], const T* kr, const T* vr, int d, int lane,
                                                float scale, float& m, float& l, float (&ov)[E]) {
  float dot = 0.0f;
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int c = lane + 32 * e;
    if (c < d) dot += qv[e] * to_float<T>(kr[c]);
  }
  const float x = warp_sum(dot) * scale;
  const float mn = fmaxf(m, x);
  const float alpha = exp2f(m - mn);
  const float p = exp2f(x - mn);
  l = l * alpha + p;
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int c = lane + 32 * e;
    if (c < d) ov[e] = ov[e] * alpha + p * to_float<T>(vr[c]);
  }
  m = mn;
}

}  // namespace bosch::cuda::detail
