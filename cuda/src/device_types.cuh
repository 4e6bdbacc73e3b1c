// SPDX-License-Identifier: Apache-2.0
#pragma once

// Device-side helpers shared by the kernels (internal to bosch::cuda):
// conversions between fp32 and the 16-bit types, warp reductions with a fixed
// order, 32-bit packed loads and stores.

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

namespace bosch::cuda::detail {

template <class T>
__device__ __forceinline__ float to_float(T x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __bfloat162float(x);
  else return __half2float(x);
}

template <class T>
__device__ __forceinline__ T from_float(float x) {
  if constexpr (std::is_same_v<T, __nv_bfloat16>) return __float2bfloat16_rn(x);
  else return __float2half_rn(x);
}

/// x rounded to T (nearest even) and back.
template <class T>
__device__ __forceinline__ float round_to(float x) { return to_float<T>(from_float<T>(x)); }

/// Two floats rounded to T and packed in 32 bits (lo in the low half).
template <class T>
__device__ __forceinline__ std::uint32_t pack2(float lo, float hi) {
  std::uint32_t r;
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
    static_assert(sizeof(v) == sizeof(r));
    memcpy(&r, &v, sizeof(r));
  } else {
    __half2 v = __floats2half2_rn(lo, hi);
    static_assert(sizeof(v) == sizeof(r));
    memcpy(&r, &v, sizeof(r));
  }
  return r;
}

/// Sum over the 32 lanes of a warp by a butterfly: every lane gets the same
/// value (each step adds the same two operands, in either order), and the
/// order is fixed, so the result is deterministic.
__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

/// Sum over a block whose size is a multiple of 32 (at most 1024); every
/// thread gets the result. `scratch` holds 32 floats; one call per kernel.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  v = warp_sum(v);
  const int lane = threadIdx.x & 31;
  const int warp = threadIdx.x >> 5;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = static_cast<int>(blockDim.x) >> 5;
  v = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(v);
}

__device__ __forceinline__ std::uint32_t load32(const void* p) {
  return *static_cast<const std::uint32_t*>(p);
}
__device__ __forceinline__ void store32(void* p, std::uint32_t v) {
  *static_cast<std::uint32_t*>(p) = v;
}

}  // namespace bosch::cuda::detail
