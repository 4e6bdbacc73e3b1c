// Kernels of incremental decoding with the hybrid KV cache: storing a pass's
// keys and values in their slots, and the attention of one query row that
// reads full heads linearly and SWA heads from their sink and ring slots
// (split over the keys, flash-decoding style, combined in a fixed order).
// Contracts: kernels.hpp (KvCacheArgs, DecodeAttentionArgs); slots:
// bosch/model/kv_slots.hpp, shared with the CPU cache.

#include "attention_step.cuh"
#include "check.hpp"
#include "device_types.cuh"
#include "kernels.hpp"

#include <bosch/model/kv_slots.hpp>

#include <cmath>
#include <string>

namespace bosch::cuda::detail {
namespace {

constexpr int kMaxDim = 256;       // as the CUDA-core attention kernel
constexpr int kDecodeWarps = 4;    // warps per (query head, key chunk) block
constexpr int kChunkKeys = 128;    // keys per block
constexpr int kWriteThreads = 64;
constexpr int kCombineThreads = 128;

// Block (row r, KV head g): position start + r into its slot when the head keeps it.
template <class T>
__global__ void __launch_bounds__(kWriteThreads)
    kv_write_kernel(KvCacheArgs c, int layer, const T* __restrict__ k, const T* __restrict__ v, int start,
                    int first_reader) {
  const int r = blockIdx.x;
  const int g = blockIdx.y;
  const int head = layer * c.num_kv_heads + g;
  const int window = c.windows[head];
  const bool swa = window > 0;
  const int j = start + r;
  if (!kv::stored(swa, window, c.sinks, j, first_reader)) return;
  const int d = c.head_dim;
  const std::size_t row = static_cast<std::size_t>(c.offsets[head] + kv::slot(swa, window, c.sinks, j));
  const std::size_t src = (static_cast<std::size_t>(r) * c.num_kv_heads + g) * d;
  T* kd = static_cast<T*>(c.k) + row * d;
  T* vd = static_cast<T*>(c.v) + row * d;
  for (int i = threadIdx.x; i < d; i += kWriteThreads) {
    kd[i] = k[src + i];
    vd[i] = v[src + i];
  }
}

// Block (query head h, chunk c): keys t in [c * kChunkKeys, (c + 1) * kChunkKeys)
// of the head's read list (kv::reads), warp w taking t = t0 + w, t0 + w + 4,
// ...; lanes hold dims lane, lane + 32, ...; per key warp_row_attend
// (attention_step.cuh, as the CUDA-core forward kernel): a fixed-order
// butterfly dot product and an fp32 online softmax in log2 units. The warps'
// states are combined in warp order; the block writes (max, sum, output[d]).
// CPU reference: decode_ref in tests/cuda/kernels_test.cpp.
template <class T>
__global__ void __launch_bounds__(kDecodeWarps * 32) decode_attention_kernel(DecodeAttentionArgs a) {
  constexpr int E = kMaxDim / 32;
  __shared__ float sm_m[kDecodeWarps];
  __shared__ float sm_l[kDecodeWarps];
  __shared__ float sm_o[kDecodeWarps][kMaxDim];
  const KvCacheArgs& c = a.cache;
  const int h = blockIdx.x;
  const int chunk = blockIdx.y;
  const int d = c.head_dim;
  const int g = h / (a.num_q_heads / c.num_kv_heads);
  const int head = a.layer * c.num_kv_heads + g;
  const int window = c.windows[head];
  const bool swa = window > 0;
  const kv::Reads reads = kv::reads(swa, window, c.sinks, a.position);
  const int t0 = chunk * kChunkKeys;
  const int t1 = min(reads.count(), t0 + kChunkKeys);
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;

  const T* qr = static_cast<const T*>(a.q) + static_cast<std::size_t>(h) * d;
  const std::size_t base = static_cast<std::size_t>(c.offsets[head]) * d;
  const T* kb = static_cast<const T*>(c.k) + base;
  const T* vb = static_cast<const T*>(c.v) + base;
  float qv[E], ov[E];
  warp_row_begin<T>(qr, d, lane, qv, ov);
  const float scale = a.scale * kLog2e;
  float m = -INFINITY;
  float l = 0.0f;
  for (int t = t0 + warp; t < t1; t += kDecodeWarps) {
    const std::size_t row = static_cast<std::size_t>(kv::slot(swa, window, c.sinks, reads.at(t))) * d;
    warp_row_attend<T>(qv, kb + row, vb + row, d, lane, scale, m, l, ov);
  }
  if (lane == 0) {
    sm_m[warp] = m;
    sm_l[warp] = l;
  }
#pragma unroll
  for (int e = 0; e < E; ++e) {
    const int col = lane + 32 * e;
    if (col < d) sm_o[warp][col] = ov[e];
  }
  __syncthreads();
  float mx = -INFINITY;
#pragma unroll
  for (int w = 0; w < kDecodeWarps; ++w) mx = fmaxf(mx, sm_m[w]);
  float* out = a.partial + (static_cast<std::size_t>(h) * a.chunks + chunk) * (d + 2);
  const bool any = mx != -INFINITY;  // a chunk past this head's keys holds none
  for (int i = threadIdx.x; i < d; i += kDecodeWarps * 32) {
    float o = 0.0f;
    if (any)
      for (int w = 0; w < kDecodeWarps; ++w) o += sm_o[w][i] * exp2f(sm_m[w] - mx);
    out[2 + i] = o;
  }
  if (threadIdx.x == 0) {
    float sum = 0.0f;
    if (any)
      for (int w = 0; w < kDecodeWarps; ++w) sum += sm_l[w] * exp2f(sm_m[w] - mx);
    out[0] = mx;
    out[1] = sum;
  }
}

// Block h: the chunks of query head h combined in chunk order; out = O / l.
template <class T>
__global__ void __launch_bounds__(kCombineThreads) decode_combine_kernel(DecodeAttentionArgs a) {
  const int h = blockIdx.x;
  const int d = a.cache.head_dim;
  const std::size_t stride = static_cast<std::size_t>(d) + 2;
  const float* p = a.partial + static_cast<std::size_t>(h) * a.chunks * stride;
  float mx = -INFINITY;
  for (int c = 0; c < a.chunks; ++c) mx = fmaxf(mx, p[c * stride]);
  float sum = 0.0f;
  for (int c = 0; c < a.chunks; ++c)
    if (p[c * stride] != -INFINITY) sum += p[c * stride + 1] * exp2f(p[c * stride] - mx);
  const float inv = 1.0f / sum;  // sum >= 1: the query's own key is always read
  T* out = static_cast<T*>(a.out) + static_cast<std::size_t>(h) * d;
  for (int i = threadIdx.x; i < d; i += kCombineThreads) {
    float o = 0.0f;
    for (int c = 0; c < a.chunks; ++c)
      if (p[c * stride] != -INFINITY) o += p[c * stride + 2 + i] * exp2f(p[c * stride] - mx);
    out[i] = from_float<T>(o * inv);
  }
}

}  // namespace

int decode_chunk_keys() { return kChunkKeys; }

void launch_kv_write(const KvCacheArgs& cache, int layer, const void* k, const void* v, int rows, int start,
                     int first_reader, cudaStream_t stream) {
  if (rows <= 0 || cache.num_kv_heads <= 0) return;
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(cache.num_kv_heads));
  if (cache.elem == Elem::bf16)
    kv_write_kernel<__nv_bfloat16><<<grid, kWriteThreads, 0, stream>>>(
        cache, layer, static_cast<const __nv_bfloat16*>(k), static_cast<const __nv_bfloat16*>(v), start,
        first_reader);
  else
    kv_write_kernel<__half><<<grid, kWriteThreads, 0, stream>>>(
        cache, layer, static_cast<const __half*>(k), static_cast<const __half*>(v), start, first_reader);
  BOSCH_CUDA_CHECK_LAUNCH("kv_write_kernel");
}

void launch_decode_attention(const DecodeAttentionArgs& a, cudaStream_t stream) {
  if (a.num_q_heads <= 0) return;
  if (a.cache.head_dim > kMaxDim || a.chunks < 1)
    throw bosch::invalid_argument("decode attention needs head_dim <= " + std::to_string(kMaxDim) +
                                      " and at least one key chunk, got head_dim " +
                                      std::to_string(a.cache.head_dim) + ", " + std::to_string(a.chunks) +
                                      " chunks",
                                  "cuda decode attention");
  const dim3 grid(static_cast<unsigned>(a.num_q_heads), static_cast<unsigned>(a.chunks));
  if (a.cache.elem == Elem::bf16) {
    decode_attention_kernel<__nv_bfloat16><<<grid, kDecodeWarps * 32, 0, stream>>>(a);
    BOSCH_CUDA_CHECK_LAUNCH("decode_attention_kernel");
    decode_combine_kernel<__nv_bfloat16><<<a.num_q_heads, kCombineThreads, 0, stream>>>(a);
  } else {
    decode_attention_kernel<__half><<<grid, kDecodeWarps * 32, 0, stream>>>(a);
    BOSCH_CUDA_CHECK_LAUNCH("decode_attention_kernel");
    decode_combine_kernel<__half><<<a.num_q_heads, kCombineThreads, 0, stream>>>(a);
  }
  BOSCH_CUDA_CHECK_LAUNCH("decode_combine_kernel");
}

}  // namespace bosch::cuda::detail
