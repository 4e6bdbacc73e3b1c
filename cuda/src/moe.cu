// SPDX-License-Identifier: Apache-2.0
// The two data-movement kernels of the mixture-of-experts FFN (Qwen3-MoE):
// gathering each expert's rows and the weighted sum of a token's experts.
// The routing is computed on the host (cpu::route_top_k) and the experts run
// as cuBLAS GEMMs (backend.cpp). See kernels.hpp for the contracts.

#include "check.hpp"
#include "device_types.cuh"
#include "kernels.hpp"

namespace bosch::cuda::detail {
namespace {

constexpr int kThreads = 256;

__global__ void gather_rows_kernel(const std::uint16_t* __restrict__ src, const int* __restrict__ rows,
                                   int cols, std::uint16_t* __restrict__ dst) {
  const std::size_t p = blockIdx.x;
  const std::uint16_t* s = src + static_cast<std::size_t>(rows[p]) * cols;
  std::uint16_t* d = dst + p * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) d[c] = s[c];
}

__global__ void moe_combine_kernel(const float* __restrict__ out, const int* __restrict__ position,
                                   const float* __restrict__ weight, int k, int cols, float* __restrict__ x) {
  const std::size_t r = blockIdx.x;
  const int* pos = position + r * k;
  const float* w = weight + r * k;
  float* xr = x + r * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) {
    float y = 0.0f;
    for (int j = 0; j < k; ++j) y += w[j] * out[static_cast<std::size_t>(pos[j]) * cols + c];
    xr[c] += y;
  }
}

}  // namespace

void launch_gather_rows(const void* src, const int* rows, int n, int cols, void* dst, cudaStream_t stream) {
  if (n <= 0 || cols <= 0) return;
  gather_rows_kernel<<<n, kThreads, 0, stream>>>(static_cast<const std::uint16_t*>(src), rows, cols,
                                                 static_cast<std::uint16_t*>(dst));
  BOSCH_CUDA_CHECK_LAUNCH("gather_rows_kernel");
}

void launch_moe_combine(const float* out, const int* position, const float* weight, int n, int k, int cols,
                        float* x, cudaStream_t stream) {
  if (n <= 0 || cols <= 0) return;
  moe_combine_kernel<<<n, kThreads, 0, stream>>>(out, position, weight, k, cols, x);
  BOSCH_CUDA_CHECK_LAUNCH("moe_combine_kernel");
}

}  // namespace bosch::cuda::detail
