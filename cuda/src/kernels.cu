// SPDX-License-Identifier: Apache-2.0
// Element-wise and row-wise kernels of the CUDA forward pass: embedding
// gather, RMSNorm, RoPE tables, the Q/K/V post-processing (bias, per-head
// RMSNorm, RoPE) and SwiGLU. See kernels.hpp for the contracts.

#include "check.hpp"
#include "device_types.cuh"
#include "kernels.hpp"

#include <string>

namespace bosch::cuda::detail {
namespace {

constexpr int kRowThreads = 256;

template <class T>
__global__ void embed_kernel(const T* __restrict__ table, const int* __restrict__ tokens,
                             int hidden, float* __restrict__ x) {
  const std::size_t t = blockIdx.x;
  const T* src = table + static_cast<std::size_t>(tokens[t]) * hidden;
  float* dst = x + t * hidden;
  for (int c = threadIdx.x; c < hidden; c += blockDim.x) dst[c] = to_float<T>(src[c]);
}

template <class T>
__global__ void rms_norm_kernel(const float* __restrict__ x, const int* __restrict__ rows,
                                int cols, const float* __restrict__ gain, float eps,
                                T* __restrict__ out) {
  __shared__ float scratch[32];
  const std::size_t r = blockIdx.x;
  const std::size_t src = rows ? static_cast<std::size_t>(rows[r]) : r;
  const float* xr = x + src * cols;
  float ss = 0.0f;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) ss += xr[c] * xr[c];
  ss = block_sum(ss, scratch);
  const float inv = 1.0f / sqrtf(ss / static_cast<float>(cols) + eps);
  T* o = out + r * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) o[c] = from_float<T>(xr[c] * inv * gain[c]);
}

__global__ void rope_table_kernel(const double* __restrict__ inv_freq, int half, int first, int positions,
                                  float* __restrict__ cos_table, float* __restrict__ sin_table) {
  const std::size_t idx = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= static_cast<std::size_t>(positions) * half) return;
  const int p = first + static_cast<int>(idx / half);
  const int i = static_cast<int>(idx % half);
  double s, c;
  sincos(static_cast<double>(p) * inv_freq[i], &s, &c);
  cos_table[idx] = static_cast<float>(c);
  sin_table[idx] = static_cast<float>(s);
}

constexpr int kPostWarps = 4;
constexpr int kMaxHeadDim = 256;

template <class T>
__global__ void __launch_bounds__(kPostWarps * 32) qkv_post_kernel(QkvPostArgs a) {
  __shared__ float buffer[kPostWarps][kMaxHeadDim];
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const std::size_t t = blockIdx.x;
  const int head = blockIdx.y * kPostWarps + warp;
  const int hq = a.num_q_heads;
  const int hkv = a.num_kv_heads;
  const int d = a.head_dim;
  if (head >= hq + 2 * hkv) return;  // whole warp; no block barrier below

  float* b = buffer[warp];
  const float* in = a.in + t * static_cast<std::size_t>(a.ld) + static_cast<std::size_t>(head) * d;
  for (int c = lane; c < d; c += 32)
    b[c] = in[c] + (a.bias ? a.bias[static_cast<std::size_t>(head) * d + c] : 0.0f);

  const int kind = head < hq ? 0 : (head < hq + hkv ? 1 : 2);  // Q, K, V
  T* out;
  if (kind == 0) {
    out = static_cast<T*>(a.q) + (t * hq + head) * d;
  } else if (kind == 1) {
    out = static_cast<T*>(a.k) + (t * hkv + (head - hq)) * d;
  } else {
    out = static_cast<T*>(a.v) + (t * hkv + (head - hq - hkv)) * d;
  }

  const float* gain = kind == 0 ? a.q_norm : (kind == 1 ? a.k_norm : nullptr);
  if (gain) {  // per-head RMSNorm (Qwen3), before RoPE
    float ss = 0.0f;
    for (int c = lane; c < d; c += 32) ss += b[c] * b[c];
    ss = warp_sum(ss);
    const float inv = 1.0f / sqrtf(ss / static_cast<float>(d) + a.eps);
    for (int c = lane; c < d; c += 32) b[c] = b[c] * inv * gain[c];
  }
  __syncwarp();

  if (kind < 2 && a.cos_table) {
    const int half = d / 2;
    const std::size_t row = static_cast<std::size_t>(a.positions[t]) * half;
    const float* cs = a.cos_table + row;
    const float* sn = a.sin_table + row;
    for (int i = lane; i < half; i += 32) {
      const int i0 = a.interleaved ? 2 * i : i;
      const int i1 = a.interleaved ? 2 * i + 1 : i + half;
      const float x0 = b[i0];
      const float x1 = b[i1];
      const float c = cs[i];
      const float s = sn[i];
      out[i0] = from_float<T>(x0 * c - x1 * s);
      out[i1] = from_float<T>(x0 * s + x1 * c);
    }
  } else {
    for (int c = lane; c < d; c += 32) out[c] = from_float<T>(b[c]);
  }
}

template <class T>
__global__ void swiglu_kernel(const float* __restrict__ gate_up, std::size_t total, int inter,
                              T* __restrict__ out) {
  const std::size_t idx = static_cast<std::size_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (idx >= total) return;
  const std::size_t t = idx / inter;
  const std::size_t i = idx % inter;
  const float g = gate_up[t * 2 * inter + i];
  const float u = gate_up[t * 2 * inter + inter + i];
  out[idx] = from_float<T>(g / (1.0f + expf(-g)) * u);
}

__global__ void probe_kernel(int* p) {
  if (p) *p = 1;
}

unsigned blocks_for(std::size_t total, int threads) {
  return static_cast<unsigned>((total + threads - 1) / threads);
}

}  // namespace

void launch_embed(const void* table, Elem elem, const int* tokens, int n, int hidden, float* x,
                  cudaStream_t stream) {
  if (n <= 0) return;
  if (elem == Elem::bf16)
    embed_kernel<<<n, kRowThreads, 0, stream>>>(static_cast<const __nv_bfloat16*>(table), tokens,
                                                hidden, x);
  else
    embed_kernel<<<n, kRowThreads, 0, stream>>>(static_cast<const __half*>(table), tokens, hidden, x);
  BOSCH_CUDA_CHECK_LAUNCH("embed_kernel");
}

void launch_rms_norm(const float* x, const int* rows, int n, int cols, const float* gain,
                     float eps, void* out, Elem elem, cudaStream_t stream) {
  if (n <= 0) return;
  if (elem == Elem::bf16)
    rms_norm_kernel<<<n, kRowThreads, 0, stream>>>(x, rows, cols, gain, eps,
                                                   static_cast<__nv_bfloat16*>(out));
  else
    rms_norm_kernel<<<n, kRowThreads, 0, stream>>>(x, rows, cols, gain, eps,
                                                   static_cast<__half*>(out));
  BOSCH_CUDA_CHECK_LAUNCH("rms_norm_kernel");
}

void launch_rope_table(const double* inv_freq, int half, int first, int positions, float* cos_table,
                       float* sin_table, cudaStream_t stream) {
  const std::size_t total = static_cast<std::size_t>(positions) * half;
  if (total == 0) return;
  rope_table_kernel<<<blocks_for(total, 256), 256, 0, stream>>>(inv_freq, half, first, positions,
                                                                cos_table, sin_table);
  BOSCH_CUDA_CHECK_LAUNCH("rope_table_kernel");
}

void launch_qkv_post(const QkvPostArgs& args, cudaStream_t stream) {
  if (args.n <= 0) return;
  const int heads = args.num_q_heads + 2 * args.num_kv_heads;
  const dim3 grid(static_cast<unsigned>(args.n), static_cast<unsigned>((heads + kPostWarps - 1) / kPostWarps));
  if (args.elem == Elem::bf16)
    qkv_post_kernel<__nv_bfloat16><<<grid, kPostWarps * 32, 0, stream>>>(args);
  else
    qkv_post_kernel<__half><<<grid, kPostWarps * 32, 0, stream>>>(args);
  BOSCH_CUDA_CHECK_LAUNCH("qkv_post_kernel");
}

void launch_swiglu(const float* gate_up, int n, int inter, void* out, Elem elem,
                   cudaStream_t stream) {
  const std::size_t total = static_cast<std::size_t>(n) * inter;
  if (total == 0) return;
  if (elem == Elem::bf16)
    swiglu_kernel<<<blocks_for(total, 256), 256, 0, stream>>>(gate_up, total, inter,
                                                              static_cast<__nv_bfloat16*>(out));
  else
    swiglu_kernel<<<blocks_for(total, 256), 256, 0, stream>>>(gate_up, total, inter,
                                                              static_cast<__half*>(out));
  BOSCH_CUDA_CHECK_LAUNCH("swiglu_kernel");
}

bool kernel_image_available(int device, std::string* why) {
  int previous = 0;
  if (cudaGetDevice(&previous) != cudaSuccess) previous = device;
  cudaError_t status = cudaSetDevice(device);
  cudaFuncAttributes attributes{};
  if (status == cudaSuccess) status = cudaFuncGetAttributes(&attributes, probe_kernel);
  cudaSetDevice(previous);
  if (status == cudaSuccess) return true;
  cudaGetLastError();
  if (why) {
    int major = 0, minor = 0;
    cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
    cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
    cudaGetLastError();
    *why = "no kernel image for device " + std::to_string(device) + " (compute capability " +
           std::to_string(major) + "." + std::to_string(minor) + "): " + cudaGetErrorName(status) +
           " (" + cudaGetErrorString(status) +
           "); rebuild with CMAKE_CUDA_ARCHITECTURES covering it";
  }
  return false;
}

}  // namespace bosch::cuda::detail
