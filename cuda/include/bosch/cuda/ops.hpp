// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file cuda/ops.hpp
/// Single kernels of the CUDA backend on host data, for tests and benchmarks:
/// each call uploads its inputs (rounded to Options::dtype where the backend
/// stores them in 16 bits), runs exactly the kernel the backend runs, and
/// returns the result as fp32 on the host. Not meant for speed (except
/// AttentionBench, which keeps its data on the device). Every function throws
/// bosch::device_error when no device is usable and bosch::invalid_argument
/// for inconsistent sizes.

#include <bosch/cuda/backend.hpp>
#include <bosch/model/config.hpp>

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace bosch::cuda::ops {

/// RMSNorm of `rows` rows of `cols` fp32 values with gain [cols]; the output
/// is rounded to options.dtype (as the backend feeds it to the GEMMs).
std::vector<float> rms_norm(std::span<const float> x, int rows, int cols,
                            std::span<const float> gain, float eps, const Options& options = {});

/// The Q/K post-processing of the backend (one launch of its fused kernel on
/// `num_heads` query-type heads): per head of `head_dim` fp32 values,
/// optional bias ([num_heads * head_dim]), optional per-head RMSNorm (gain
/// [head_dim], eps), optional RoPE with `rope`'s theta, style and scaling at
/// positions[t]. Output rounded to options.dtype.
struct HeadTransform {
  int num_heads = 0;
  int head_dim = 0;
  std::span<const float> bias;        ///< empty = none
  std::span<const float> norm_gain;   ///< empty = no per-head RMSNorm
  float eps = 1e-6f;
  const model::Config* rope = nullptr;  ///< null = no RoPE
};
/// x: [n, num_heads, head_dim] fp32; positions: n values >= 0.
std::vector<float> head_transform(std::span<const float> x, int n, const HeadTransform& transform,
                                  std::span<const int> positions, const Options& options = {});

/// SwiGLU: gate_up [n, 2 inter] (gate columns, then up) fp32 -> [n, inter]
/// silu(gate) * up rounded to options.dtype.
std::vector<float> swiglu(std::span<const float> gate_up, int n, int inter,
                          const Options& options = {});

/// An attention problem over sequences packed back to back.
struct AttentionProblem {
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  std::vector<int> lengths;   ///< tokens per sequence (each >= 1)
  std::vector<int> windows;   ///< per (sequence, KV head), 0 = full: B * Hkv values, or Hkv for all
  std::vector<int> sinks;     ///< per sequence (B values) or one for all; used by windowed heads
  /// Total rows.
  int rows() const;
  /// Query-key pairs visible to all query heads (the useful work).
  double visible_pairs() const;
  /// Useful floating-point operations: 4 x head_dim per (query head, visible key).
  double flops() const;
};

/// Attention with the backend's kernel (options.attention, tiles, dtype):
/// q [N, Hq, d], k and v [N, Hkv, d] fp32 (rounded to options.dtype on
/// upload) -> [N, Hq, d], rounded to options.dtype. Scale 1/sqrt(d).
std::vector<float> attention(std::span<const float> q, std::span<const float> k,
                             std::span<const float> v, const AttentionProblem& problem,
                             const Options& options = {});

/// A decode-attention problem: one query at position `position` whose keys
/// and values (positions 0 .. position) were stored in the hybrid KV cache
/// of one layer the way the backend stores them (model/kv_slots.hpp):
/// positions [0, prefill) by one prefill write (first reader `prefill`),
/// then every later position by its own decode-step write (first reader
/// itself), so SWA heads wrap their rings when position >= sinks + window.
struct DecodeProblem {
  int num_q_heads = 0;
  int num_kv_heads = 0;
  int head_dim = 0;
  int position = 0;          ///< the query's position p >= 0
  int prefill = 1;           ///< positions of the first write, in [1, p + 1]
  std::vector<int> windows;  ///< per KV head, 0 = full; empty = all full
  int sinks = 0;             ///< sinks of the windowed heads
};

/// What decode_attention returns: the attention output and the cache as the
/// kernels left it.
struct DecodeResult {
  std::vector<float> out;                      ///< [Hq, d], rounded to options.dtype
  std::vector<std::vector<float>> keys;        ///< per KV head, its rows [kv::rows, d] in slot order
  std::vector<std::vector<float>> values;      ///< as keys; unwritten slots are NaN
};

/// The backend's KV-cache write kernel and decode-attention kernel on host
/// data: q [Hq, d] (the query at `position`), k and v [position + 1, Hkv, d]
/// fp32 (rounded to options.dtype on upload). Scale 1/sqrt(d). A full head
/// gets position + 1 rows, an SWA head min(position + 1, sinks + window).
DecodeResult decode_attention(std::span<const float> q, std::span<const float> k, std::span<const float> v,
                              const DecodeProblem& problem, const Options& options = {});

/// Device-resident random inputs of an attention problem (2^20 values uniform
/// in [-1, 1) from Boost.Random with `seed`, repeated with a shift to fill
/// large problems quickly) and timed runs of the kernel (CUDA events).
class AttentionBench {
 public:
  AttentionBench(const AttentionProblem& problem, const Options& options, std::uint64_t seed);
  ~AttentionBench();
  AttentionBench(const AttentionBench&) = delete;
  AttentionBench& operator=(const AttentionBench&) = delete;
  /// Runs the kernel `iterations` times back to back; milliseconds per run.
  double run(int iterations);
  const AttentionProblem& problem() const noexcept;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace bosch::cuda::ops
