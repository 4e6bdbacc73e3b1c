// SPDX-License-Identifier: Apache-2.0
#pragma once

// The host-side interface of the CUDA kernels (internal to bosch::cuda):
// plain device pointers and sizes, no Eigen and no model types, so the .cu
// files stay small. Every launch is checked (bosch::device_error on failure)
// and enqueued on `stream`; nothing here synchronizes.
//
// 16-bit buffers ("half" below) hold bf16 or fp16 per `Elem`. Row-major
// throughout. Offsets are computed in 64 bits.

#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

namespace bosch::cuda::detail {

/// Element type of 16-bit buffers.
enum class Elem { bf16, fp16 };

/// x[t, :] = table[tokens[t], :] (half table [vocab, hidden] -> fp32 x [n, hidden]).
/// Token ids must already be checked against the vocabulary.
void launch_embed(const void* table, Elem elem, const int* tokens, int n, int hidden, float* x,
                  cudaStream_t stream);

/// out[r, :] = x[src, :] / sqrt(mean(x[src, :]^2) + eps) * gain, src = rows ? rows[r] : r,
/// for r in [0, n); x fp32 [*, cols], out half [n, cols]. Sum of squares in
/// fp32 with a fixed reduction tree.
void launch_rms_norm(const float* x, const int* rows, int n, int cols, const float* gain,
                     float eps, void* out, Elem elem, cudaStream_t stream);

/// cos/sin tables [positions, half] (fp32): row r holds (first + r) * inv_freq[i],
/// computed in double (so a position's row is the same in every table).
void launch_rope_table(const double* inv_freq, int half, int first, int positions, float* cos_table,
                       float* sin_table, cudaStream_t stream);

/// Post-processing of the fused QKV projection, per token t and head:
/// in fp32 [n, ld] holds num_q_heads Q heads, then num_kv_heads K heads, then
/// num_kv_heads V heads of head_dim values each (ld >= their total).
///   v = in + bias            (bias: fp32 [(Hq + 2 Hkv) * d], or null)
///   Q, K: v = RMSNorm_head(v) * norm_gain  (q_norm / k_norm: fp32 [d], or null; eps)
///   Q, K: RoPE at positions[t] with cos/sin tables [*, d/2] (null: no RoPE),
///         pairs (2i, 2i+1) when interleaved, (i, i + d/2) otherwise
/// and stores Q half [n, Hq, d], K and V half [n, Hkv, d] (k, v may be null
/// when num_kv_heads is 0).
struct QkvPostArgs {
  const float* in = nullptr;
  long long ld = 0;
  int n = 0;
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  const float* bias = nullptr;
  const float* q_norm = nullptr;
  const float* k_norm = nullptr;
  float eps = 1e-6f;
  const float* cos_table = nullptr;
  const float* sin_table = nullptr;
  const int* positions = nullptr;
  bool interleaved = false;
  void* q = nullptr;
  void* k = nullptr;
  void* v = nullptr;
  Elem elem = Elem::bf16;
};
void launch_qkv_post(const QkvPostArgs& args, cudaStream_t stream);

/// out[t, i] = silu(gu[t, i]) * gu[t, inter + i]: gu fp32 [n, 2 inter]
/// (gate columns first, then up), out half [n, inter]. silu(g) = g / (1 + e^-g).
void launch_swiglu(const float* gate_up, int n, int inter, void* out, Elem elem,
                   cudaStream_t stream);

/// dst[p, :] = src[rows[p], :] for p in [0, n): 16-bit rows of `cols` values
/// (the rows routed to the experts, grouped by expert).
void launch_gather_rows(const void* src, const int* rows, int n, int cols, void* dst, cudaStream_t stream);

/// x[r, :] += sum_j weight[r k + j] * out[position[r k + j], :] for r in
/// [0, n), j in [0, k) in that order (fp32): the weighted sum of a token's
/// expert outputs (out [*, cols], grouped by expert) added to the residual.
void launch_moe_combine(const float* out, const int* position, const float* weight, int n, int k, int cols,
                        float* x, cudaStream_t stream);

/// One work item of the attention kernel: query rows [q0, q1) of sequence `seq`.
struct AttentionTile {
  int seq;
  int q0;
  int q1;
  int pad;
};

/// Causal grouped-query attention over packed sequences (varlen): sequence b
/// holds rows [seq_start[b], seq_start[b+1]) of q [N, Hq, d], k, v [N, Hkv, d]
/// (half) and out [N, Hq, d] (half). Query head h reads KV head
/// h / (Hq / Hkv). KV head g of sequence b uses window windows[b * Hkv + g]
/// (0 = full) and, when windowed, sinks[b] sink keys. Scores are scaled by
/// `scale`; softmax in fp32. `tiles` lists the work items (every row of every
/// sequence in exactly one tile of at most query_tile rows).
struct AttentionArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* out = nullptr;
  Elem elem = Elem::bf16;
  int head_dim = 0;
  int num_q_heads = 0;
  int num_kv_heads = 0;
  const int* seq_start = nullptr;
  const int* windows = nullptr;
  const int* sinks = nullptr;
  const AttentionTile* tiles = nullptr;
  int num_tiles = 0;
  int query_tile = 64;
  int key_tile = 64;
  float scale = 1.0f;
  bool tensor_core = true;
};
void launch_attention(const AttentionArgs& args, cudaStream_t stream);

/// The hybrid KV cache of one sequence on the device (model/kv_layout.hpp,
/// model/kv_slots.hpp): K and V half buffers of [total rows, head_dim]; KV
/// head g of layer l owns the rows from offsets[l * num_kv_heads + g] and
/// has window windows[l * num_kv_heads + g] (0 = full); position j sits at
/// row offset + kv::slot(window > 0, window, sinks, j).
struct KvCacheArgs {
  void* k = nullptr;
  void* v = nullptr;
  const long long* offsets = nullptr;  ///< device, [layers * num_kv_heads]
  const int* windows = nullptr;        ///< device, [layers * num_kv_heads]
  int sinks = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  Elem elem = Elem::bf16;
};

/// Stores `rows` rows of k and v (half [rows, Hkv, d], row r = position
/// start + r) into layer `layer` of the cache: each KV head the positions
/// kv::stored(swa, window, sinks, j, first_reader) keeps, at their slots.
/// Positions a head keeps never share a slot within one call (checked by the
/// caller's first_reader: prefill n, decode step its own position).
void launch_kv_write(const KvCacheArgs& cache, int layer, const void* k, const void* v, int rows, int start,
                     int first_reader, cudaStream_t stream);

/// Keys per block of the decode-attention kernel (the split of the key range).
int decode_chunk_keys();

/// Attention of one query row at position `position` (q half [Hq, d],
/// unscaled) against layer `layer` of the cache: query head h reads KV head
/// h / (Hq / Hkv), the keys kv::reads gives (a full head every position
/// [0, position] in order, an SWA head its sinks then its ring), scores
/// scaled by `scale`, softmax in fp32 (P not rounded). The keys of a head are
/// split into chunks of decode_chunk_keys(); block (h, c) writes the running
/// max, sum and unnormalized output of chunk c to `partial` (fp32 [Hq,
/// chunks, d + 2]), and a second kernel combines the chunks of each head in
/// order into out (half [Hq, d]). `chunks` must cover the longest head's
/// keys (ceil(count / decode_chunk_keys())). Fixed order throughout:
/// deterministic.
struct DecodeAttentionArgs {
  KvCacheArgs cache;
  int layer = 0;
  const void* q = nullptr;
  void* out = nullptr;
  int num_q_heads = 0;
  int position = 0;
  int chunks = 1;
  float* partial = nullptr;
  float scale = 1.0f;
};
void launch_decode_attention(const DecodeAttentionArgs& args, cudaStream_t stream);

/// True when the tensor-core kernel supports head_dim (64 or 128).
bool tensor_core_head_dim(int head_dim);
/// Largest head_dim of the simple kernel (256).
int simple_max_head_dim();

/// False (with the reason in *why) when this build has no kernel image that
/// runs on `device` (compute capability not covered by CMAKE_CUDA_ARCHITECTURES).
bool kernel_image_available(int device, std::string* why);

}  // namespace bosch::cuda::detail
