// SPDX-License-Identifier: Apache-2.0
// Causal grouped-query attention with per-(sequence, KV head) sliding windows
// and sinks over packed (varlen) sequences: a flash-style tensor-core kernel
// (head_dim 64/128) and a CUDA-core kernel for any head_dim <= 256.
// Contract: kernels.hpp (AttentionArgs); tile walk: bosch/cuda/attention_tiles.hpp.

#include "attention_step.cuh"
#include "check.hpp"
#include "device_types.cuh"
#include "kernels.hpp"

#include <bosch/cuda/attention_tiles.hpp>

#include <cmath>
#include <string>

namespace bosch::cuda::detail {
namespace {

// D += A B for one m16n8k16 tile: A 16x16 (row-major fragment, 4 registers of
// two 16-bit values), B 16x8 (column fragment, 2 registers), D 16x8 fp32.
// Fragment layouts (PTX ISA, "mma.m16n8k16"), g = lane / 4, t = lane % 4:
//   A: a[0] = (row g, cols 2t..2t+1), a[1] = (row g+8, cols 2t..),
//      a[2] = (row g, cols 2t+8..), a[3] = (row g+8, cols 2t+8..)
//   B: b0 = (rows 2t..2t+1, col g), b1 = (rows 2t+8..2t+9, col g)
//   D: d[0..1] = (row g, cols 2t..2t+1), d[2..3] = (row g+8, cols 2t..2t+1)
template <class T>
__device__ __forceinline__ void mma16816(float (&d)[4], const std::uint32_t (&a)[4],
                                         std::uint32_t b0, std::uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (std::is_same_v<T, __nv_bfloat16>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
        "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
#else
  __trap();  // the tensor-core kernel needs sm_80 or newer
#endif
}

// Four 8x8 16-bit matrices from shared memory, transposed: lanes 8m..8m+7 give
// the row addresses (16 bytes each) of matrix m, and lane l receives of each
// matrix the elements (row 2(l%4), col l/4) and (row 2(l%4)+1, col l/4) -
// the B fragment of mma.m16n8k16 for a row-major [k, n] operand (PTX ISA,
// "ldmatrix").
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], const void* p) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address)
               : "memory");
#else
  __trap();
#endif
}

// Tensor-core kernel. Block: WARPS warps, query rows [q0, q1) of one tile
// (16 rows per warp), one query head (blockIdx.y). Per key tile: the block
// loads K and V [BK, D] into shared memory (only tiles that meet the head's
// window: key_tiles()); each warp computes its 16 x BK
// scores S = Q K^T with mma.sync, scales them to log2 units, masks them when
// the tile is not fully visible to its rows, updates the running max m and
// sum l (fp32; the sum adds the probabilities as rounded to T, the values
// multiplied with V, so the weights sum to exactly what l holds), rescales
// its output accumulator and adds P V (V's B fragments by ldmatrix.trans).
// The output is O / l rounded to T.
template <class T, int D, int WARPS, int BK>
__global__ void __launch_bounds__(WARPS * 32) attention_tc_kernel(AttentionArgs a) {
  constexpr int KS = D / 16;        // k-steps of Q K^T over the head dim
  constexpr int NT = BK / 8;        // 8-key column tiles of S
  constexpr int DT = D / 8;         // 8-dim column tiles of O
  constexpr int KSTRIDE = D + 8;    // padded rows: conflict-free fragment loads
  constexpr int VSTRIDE = D + 8;
  constexpr int THREADS = WARPS * 32;
  static_assert(D % 16 == 0 && BK % 16 == 0, "tile shapes");
  __shared__ __align__(16) T ks[BK * KSTRIDE];
  __shared__ __align__(16) T vs[BK * VSTRIDE];

  const AttentionTile tile = a.tiles[blockIdx.x];
  const int h = blockIdx.y;
  const int g = h / (a.num_q_heads / a.num_kv_heads);
  const int base = a.seq_start[tile.seq];
  const int len = a.seq_start[tile.seq + 1] - base;
  const int window = a.windows[tile.seq * a.num_kv_heads + g];
  const int sinks = window > 0 ? a.sinks[tile.seq] : 0;
  const int q0 = tile.q0;
  const int q1 = tile.q1;

  const int tid = threadIdx.x;
  const int warp = tid >> 5;
  const int lane = tid & 31;
  const int gr = lane >> 2;  // fragment row group
  const int tq = lane & 3;   // thread in group
  const int wq0 = q0 + warp * 16;
  const int wq1 = min(wq0 + 16, q1);
  const bool active = wq0 < q1;

  const T* qp = static_cast<const T*>(a.q);
  const T* kp = static_cast<const T*>(a.k);
  const T* vp = static_cast<const T*>(a.v);
  const std::size_t q_stride = static_cast<std::size_t>(a.num_q_heads) * D;
  const std::size_t kv_stride = static_cast<std::size_t>(a.num_kv_heads) * D;

  // Q fragments of rows ra = wq0 + gr and rb = ra + 8 (zero past the tile).
  const int ra = wq0 + gr;
  const int rb = ra + 8;
  std::uint32_t qf[KS][4];
  {
    const T* pa = qp + static_cast<std::size_t>(base + (ra < q1 ? ra : q0)) * q_stride +
                  static_cast<std::size_t>(h) * D;
    const T* pb = qp + static_cast<std::size_t>(base + (rb < q1 ? rb : q0)) * q_stride +
                  static_cast<std::size_t>(h) * D;
#pragma unroll
    for (int s = 0; s < KS; ++s) {
      const int col = s * 16 + 2 * tq;
      qf[s][0] = ra < q1 ? load32(pa + col) : 0u;
      qf[s][1] = rb < q1 ? load32(pb + col) : 0u;
      qf[s][2] = ra < q1 ? load32(pa + col + 8) : 0u;
      qf[s][3] = rb < q1 ? load32(pb + col + 8) : 0u;
    }
  }

  float o[DT][4];
#pragma unroll
  for (int j = 0; j < DT; ++j) o[j][0] = o[j][1] = o[j][2] = o[j][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};  // per-thread partial sums over its columns
  const float scale = a.scale * kLog2e;

  const KeyTiles walk = key_tiles(q0, q1, window, sinks, BK);
  const int count = walk.count();
  for (int it = 0; it < count; ++it) {
    const int k0 = walk.at(it) * BK;
    __syncthreads();  // the previous tile's shared data is no longer read
    for (int idx = tid; idx < BK * (D / 8); idx += THREADS) {
      const int r = idx / (D / 8);
      const int c = (idx % (D / 8)) * 8;
      const int key = k0 + r;
      uint4 kv = make_uint4(0u, 0u, 0u, 0u);
      uint4 vv = make_uint4(0u, 0u, 0u, 0u);
      if (key < len) {
        const std::size_t off =
            static_cast<std::size_t>(base + key) * kv_stride + static_cast<std::size_t>(g) * D + c;
        kv = *reinterpret_cast<const uint4*>(kp + off);
        vv = *reinterpret_cast<const uint4*>(vp + off);
      }
      *reinterpret_cast<uint4*>(ks + r * KSTRIDE + c) = kv;
      *reinterpret_cast<uint4*>(vs + r * VSTRIDE + c) = vv;
    }
    __syncthreads();
    if (!active || !tile_touches(wq0, wq1, k0, k0 + BK, window, sinks)) continue;
    const bool full = tile_fully_visible(wq0, wq1, k0, k0 + BK, window, sinks);

    float s[NT][4];
#pragma unroll
    for (int n = 0; n < NT; ++n) {
      s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
      const T* kr = ks + (n * 8 + gr) * KSTRIDE + 2 * tq;
#pragma unroll
      for (int k = 0; k < KS; ++k) mma16816<T>(s[n], qf[k], load32(kr + k * 16), load32(kr + k * 16 + 8));
    }

    float mx[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int n = 0; n < NT; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        float x = s[n][e] * scale;
        if (!full) {
          const int row = wq0 + gr + (e >> 1) * 8;
          const int key = k0 + n * 8 + 2 * tq + (e & 1);
          if (!key_visible(row, key, window, sinks) || key >= len) x = -INFINITY;
        }
        s[n][e] = x;
        mx[e >> 1] = fmaxf(mx[e >> 1], x);
      }
    }
    float alpha[2], base_m[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
      mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
      const float mn = fmaxf(m[r], mx[r]);
      base_m[r] = mn == -INFINITY ? 0.0f : mn;  // a row with nothing visible yet
      alpha[r] = exp2f(m[r] - base_m[r]);       // 0 when m was -inf
      m[r] = mn;
    }
    float rs[2] = {0.0f, 0.0f};
#pragma unroll
    for (int n = 0; n < NT; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float p = round_to<T>(exp2f(s[n][e] - base_m[e >> 1]));
        s[n][e] = p;
        rs[e >> 1] += p;
      }
    }
    l[0] = l[0] * alpha[0] + rs[0];
    l[1] = l[1] * alpha[1] + rs[1];
#pragma unroll
    for (int j = 0; j < DT; ++j) {
      o[j][0] *= alpha[0];
      o[j][1] *= alpha[0];
      o[j][2] *= alpha[1];
      o[j][3] *= alpha[1];
    }
#pragma unroll
    for (int kk = 0; kk < BK / 16; ++kk) {
      // The D layout of two adjacent 8-key tiles is the A layout of a 16-key step.
      const std::uint32_t pf[4] = {pack2<T>(s[2 * kk][0], s[2 * kk][1]),
                                   pack2<T>(s[2 * kk][2], s[2 * kk][3]),
                                   pack2<T>(s[2 * kk + 1][0], s[2 * kk + 1][1]),
                                   pack2<T>(s[2 * kk + 1][2], s[2 * kk + 1][3])};
      // Lane l addresses key kk*16 + l%16 at dims (j + l/16)*8: matrices
      // 0/1 are keys 0-7/8-15 of dim tile j, 2/3 the same of dim tile j+1.
      const T* vr = vs + (kk * 16 + (lane & 15)) * VSTRIDE + (lane >> 4) * 8;
#pragma unroll
      for (int j = 0; j < DT; j += 2) {
        std::uint32_t b[4];
        ldmatrix_x4_trans(b, vr + j * 8);
        mma16816<T>(o[j], pf, b[0], b[1]);
        mma16816<T>(o[j + 1], pf, b[2], b[3]);
      }
    }
  }
  if (!active) return;

#pragma unroll
  for (int r = 0; r < 2; ++r) {
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 1);
    l[r] += __shfl_xor_sync(0xffffffffu, l[r], 2);
  }
  const float ia = l[0] > 0.0f ? 1.0f / l[0] : 0.0f;
  const float ib = l[1] > 0.0f ? 1.0f / l[1] : 0.0f;
  T* op = static_cast<T*>(a.out);
#pragma unroll
  for (int j = 0; j < DT; ++j) {
    const int col = j * 8 + 2 * tq;
    if (ra < q1)
      store32(op + static_cast<std::size_t>(base + ra) * q_stride + static_cast<std::size_t>(h) * D + col,
              pack2<T>(o[j][0] * ia, o[j][1] * ia));
    if (rb < q1)
      store32(op + static_cast<std::size_t>(base + rb) * q_stride + static_cast<std::size_t>(h) * D + col,
              pack2<T>(o[j][2] * ib, o[j][3] * ib));
  }
}

// CUDA-core kernel: one warp per query row (rows q0 + warp, q0 + warp + WARPS,
// ...), lane holding dims lane, lane + 32, ...; keys visited one at a time,
// only the visible ones (sinks [0, min(s, lo)), then the window [lo, i]);
// per key warp_row_attend (attention_step.cuh, as the decode kernel): scores
// by a fixed-order butterfly, online softmax in fp32 (P not rounded).
// CPU reference: attention_ref in tests/cuda/kernels_test.cpp.
constexpr int kSimpleWarps = 4;
constexpr int kSimpleMaxDim = 256;

template <class T>
__global__ void __launch_bounds__(kSimpleWarps * 32) attention_simple_kernel(AttentionArgs a) {
  constexpr int E = kSimpleMaxDim / 32;
  const AttentionTile tile = a.tiles[blockIdx.x];
  const int h = blockIdx.y;
  const int g = h / (a.num_q_heads / a.num_kv_heads);
  const int d = a.head_dim;
  const int base = a.seq_start[tile.seq];
  const int window = a.windows[tile.seq * a.num_kv_heads + g];
  const int sinks = window > 0 ? a.sinks[tile.seq] : 0;
  const int warp = threadIdx.x >> 5;
  const int lane = threadIdx.x & 31;
  const T* qp = static_cast<const T*>(a.q);
  const T* kp = static_cast<const T*>(a.k);
  const T* vp = static_cast<const T*>(a.v);
  T* op = static_cast<T*>(a.out);
  const std::size_t q_stride = static_cast<std::size_t>(a.num_q_heads) * d;
  const std::size_t kv_stride = static_cast<std::size_t>(a.num_kv_heads) * d;
  const float scale = a.scale * kLog2e;

  for (int i = tile.q0 + warp; i < tile.q1; i += kSimpleWarps) {
    const T* qr = qp + static_cast<std::size_t>(base + i) * q_stride + static_cast<std::size_t>(h) * d;
    float qv[E], ov[E];
    warp_row_begin<T>(qr, d, lane, qv, ov);
    float m = -INFINITY;
    float l = 0.0f;
    const int lo = window > 0 ? max(0, i - window + 1) : 0;
    const int sink_end = window > 0 ? min(sinks, lo) : 0;
    auto visit = [&](int j) {
      const std::size_t off = static_cast<std::size_t>(base + j) * kv_stride + static_cast<std::size_t>(g) * d;
      warp_row_attend<T>(qv, kp + off, vp + off, d, lane, scale, m, l, ov);
    };
    for (int j = 0; j < sink_end; ++j) visit(j);
    for (int j = lo; j <= i; ++j) visit(j);
    const float inv = 1.0f / l;  // l >= 1: key i is always visible
    T* orow = op + static_cast<std::size_t>(base + i) * q_stride + static_cast<std::size_t>(h) * d;
#pragma unroll
    for (int e = 0; e < E; ++e) {
      const int c = lane + 32 * e;
      if (c < d) orow[c] = from_float<T>(ov[e] * inv);
    }
  }
}

template <class T, int D, int WARPS, int BK>
void launch_tc(const AttentionArgs& a, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>(a.num_tiles), static_cast<unsigned>(a.num_q_heads));
  attention_tc_kernel<T, D, WARPS, BK><<<grid, WARPS * 32, 0, stream>>>(a);
}

template <class T, int D>
void launch_tc_tiles(const AttentionArgs& a, cudaStream_t stream) {
  if (a.query_tile == 64 && a.key_tile == 64) launch_tc<T, D, 4, 64>(a, stream);
  else if (a.query_tile == 64 && a.key_tile == 32) launch_tc<T, D, 4, 32>(a, stream);
  else if (a.query_tile == 128 && a.key_tile == 64) launch_tc<T, D, 8, 64>(a, stream);
  else if (a.query_tile == 128 && a.key_tile == 32) launch_tc<T, D, 8, 32>(a, stream);
  else
    throw bosch::invalid_argument("unsupported attention tiles " + std::to_string(a.query_tile) +
                                  " x " + std::to_string(a.key_tile) +
                                  " (query tile 64 or 128, key tile 32 or 64)",
                                  "cuda::Options");
}

template <class T>
void launch_tc_dim(const AttentionArgs& a, cudaStream_t stream) {
  if (a.head_dim == 64) launch_tc_tiles<T, 64>(a, stream);
  else if (a.head_dim == 128) launch_tc_tiles<T, 128>(a, stream);
  else
    throw bosch::invalid_argument("the tensor-core attention kernel supports head_dim 64 or 128, got " +
                                  std::to_string(a.head_dim), "cuda::Options::attention");
}

}  // namespace

bool tensor_core_head_dim(int head_dim) { return head_dim == 64 || head_dim == 128; }
int simple_max_head_dim() { return kSimpleMaxDim; }

void launch_attention(const AttentionArgs& a, cudaStream_t stream) {
  if (a.num_tiles <= 0 || a.num_q_heads <= 0) return;
  if (a.tensor_core) {
    if (a.elem == Elem::bf16) launch_tc_dim<__nv_bfloat16>(a, stream);
    else launch_tc_dim<__half>(a, stream);
    BOSCH_CUDA_CHECK_LAUNCH("attention_tc_kernel");
    return;
  }
  if (a.head_dim > kSimpleMaxDim)
    throw bosch::invalid_argument("head_dim " + std::to_string(a.head_dim) + " exceeds " +
                                  std::to_string(kSimpleMaxDim), "cuda attention");
  const dim3 grid(static_cast<unsigned>(a.num_tiles), static_cast<unsigned>(a.num_q_heads));
  if (a.elem == Elem::bf16)
    attention_simple_kernel<__nv_bfloat16><<<grid, kSimpleWarps * 32, 0, stream>>>(a);
  else
    attention_simple_kernel<__half><<<grid, kSimpleWarps * 32, 0, stream>>>(a);
  BOSCH_CUDA_CHECK_LAUNCH("attention_simple_kernel");
}

}  // namespace bosch::cuda::detail
