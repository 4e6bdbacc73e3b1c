// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file cuda/backend.hpp
/// The CUDA forward pass with per-head attention windows: the same interface
/// and semantics as bosch::cpu::Backend (cpu/backend.hpp), so that
/// TransformerEvaluator<cuda::Backend> runs the same search on a GPU.
///
/// Numerics. Weights are uploaded once, converted to bf16 (or fp16,
/// Options::dtype). The residual stream stays in fp32 on the device; each
/// RMSNorm writes its output in the 16-bit type, which feeds the cuBLAS GEMMs
/// (cublasGemmEx, 16-bit inputs, fp32 accumulation and fp32 output). Q/K/V
/// get their bias (Qwen2), per-head RMSNorm (Qwen3) and RoPE in fp32 and are
/// stored in the 16-bit type for attention; attention accumulates in fp32
/// with an online softmax (Milakov & Gimelshein 2018; FlashAttention-2,
/// Dao 2023). The attention output and SwiGLU product are 16-bit GEMM inputs;
/// the o-proj and down-proj GEMMs add into the fp32 residual (beta = 1: the
/// residual adds are fused into the GEMM epilogue). Logits are computed only
/// at the requested rows, in fp32. RoPE angles use the same inverse
/// frequencies as the CPU backend (cpu::rope_inv_freq), with the sines and
/// cosines computed in double on the device.
///
/// Mixture of experts (Qwen3-MoE sparse layers, cpu/moe.hpp). The routing is
/// computed on the host, from the fp32 residual with the CPU backend's own
/// RMSNorm, router GEMM and cpu::route_top_k (one device-to-host copy of the
/// residual per sparse layer); each active expert then runs two cuBLAS GEMMs
/// over its gathered rows (16-bit inputs, fp32 output), and one kernel adds
/// each token's weighted expert outputs, in order of falling weight, to the
/// residual. Scratch: k x (hidden + 3 F) values per token and layer call.
///
/// Attention kernel. Flash-style: a block owns a tile of query rows of one
/// query head, walks the key tiles its KV head may see (attention_tiles.hpp:
/// sink tiles, then the tiles of the sliding window; a key tile wholly
/// outside a head's window is never loaded), keeps the running max and sum
/// in fp32 and masks elements only in tiles that need it. Head dims 64 and
/// 128 use a tensor-core kernel (mma.sync m16n8k16, 16-bit inputs, fp32
/// accumulation; P rounded to 16 bits for the PV product as in
/// FlashAttention-2); other head dims (<= 256) use a CUDA-core kernel with
/// one warp per query row.
///
/// Incremental decoding. prefill + decode_step keep the hybrid KV cache of
/// the CPU backend on the device (DecodeState: the same slots, 16-bit
/// values); a decode step runs its one row through the same GEMMs and Q/K/V
/// kernel and attends the cache with a decode kernel that reads a full head
/// linearly and an SWA head from its sink and ring slots, split over the keys
/// in chunks combined in a fixed order (docs/deployment.md, "Hybrid KV cache").
///
/// Determinism. No atomics anywhere; every reduction has a fixed order, so the
/// same tokens and windows on the same GPU and library build give bit-identical
/// logits (cuBLAS is deterministic for a fixed problem size, stream and
/// architecture). A sequence run alone or inside a batch may differ in the
/// last bits (cuBLAS may pick another algorithm for another GEMM height).
///
/// Threads. Every call takes the backend's mutex and runs on its own CUDA
/// stream, synchronizing before it returns; copies of a Backend share the
/// uploaded weights, the stream and the mutex.
///
/// Errors. Every CUDA and cuBLAS call is checked; a failure throws
/// bosch::device_error naming the call, the error and "file:line"; device
/// memory exhaustion reports the bytes asked for and the bytes free; no
/// device gives a device_error that says so (see device_available()).

#include <bosch/cpu/backend.hpp>
#include <bosch/cuda/half.hpp>
#include <bosch/model/model.hpp>
#include <bosch/model/windows.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace bosch::cuda {

/// Which attention kernel run_layers uses.
enum class AttentionKernel {
  automatic,    ///< tensor_core when head_dim is 64 or 128, simple otherwise
  tensor_core,  ///< mma.sync kernel; head_dim 64 or 128 only (else invalid_argument)
  simple,       ///< CUDA-core kernel, one warp per query row; head_dim <= 256
};

/// Backend settings. Defaults suit an H100/H200.
struct Options {
  int device = 0;                ///< CUDA device index (cudaSetDevice)
  DType dtype = DType::bf16;     ///< storage type of weights and activations
  AttentionKernel attention = AttentionKernel::automatic;
  int query_tile = 64;           ///< query rows per attention block: 64 or 128
  int key_tile = 64;             ///< keys per attention tile: 32 or 64
  /// Rows per chunk of the QKV and FFN GEMMs: bounds the fp32 scratch (rows x
  /// (q+k+v or 2 x intermediate) floats); >= 1.
  int row_chunk = 8192;
};

/// True when a CUDA device with index `device` exists and this build has
/// kernels for it. Otherwise false, with the reason in `*why` (when given):
/// no driver, no device, or no kernel image for its compute capability.
bool device_available(std::string* why = nullptr, int device = 0);

/// "NAME (compute capability X.Y, N SMs, M GiB)" of `device`; throws
/// bosch::device_error when there is none.
std::string device_description(int device = 0);

/// The residual stream of one sequence in device memory: [n_tokens, hidden]
/// row-major fp32. Owns its buffer (RAII); copying copies the buffer on the
/// device (device-to-device, synchronous), so evaluators can cache it.
class Residual {
 public:
  /// An empty stream (no tokens, no memory).
  Residual() = default;
  /// Uninitialized device memory for [n_tokens, hidden] floats on `device`.
  Residual(int n_tokens, int hidden, int device);
  Residual(const Residual& other);
  Residual& operator=(const Residual& other);
  Residual(Residual&& other) noexcept;
  Residual& operator=(Residual&& other) noexcept;
  ~Residual();

  /// Copies host data ([n_tokens, hidden] row-major) to a new device stream.
  static Residual upload(std::span<const float> host, int n_tokens, int hidden, int device = 0);
  /// The stream's values, copied to the host ([n_tokens, hidden] row-major).
  std::vector<float> download() const;

  int n_tokens() const noexcept { return n_tokens_; }
  int hidden() const noexcept { return hidden_; }
  int device() const noexcept { return device_; }
  /// Device bytes held.
  std::size_t bytes() const noexcept {
    return static_cast<std::size_t>(n_tokens_) * static_cast<std::size_t>(hidden_) * sizeof(float);
  }
  /// The device pointer (null when empty).
  float* data() noexcept { return data_; }
  const float* data() const noexcept { return data_; }

 private:
  float* data_ = nullptr;
  int n_tokens_ = 0;
  int hidden_ = 0;
  int device_ = 0;
};

/// The state of one sequence for incremental (greedy) decoding on the device,
/// made by Backend::prefill and grown by Backend::decode_step: the hybrid KV
/// cache with the CPU backend's layout (model/kv_slots.hpp; docs/deployment.md,
/// "Hybrid KV cache"): per layer and KV head, a full head keeps every
/// position, an SWA head its sinks and a ring of the last `window` positions,
/// in the same slots as cpu::KvCache. Keys (RoPE applied, after the optional
/// K norm) and values are stored in the backend's 16-bit type, every head's
/// rows packed into one K and one V buffer (kv::Layout) allocated once for
/// the capacity, so bytes() is exactly kv::bytes(config, windows, capacity(),
/// 2). Move-only; owns its device memory.
class DecodeState {
 public:
  /// An empty state (no device memory); decode_step refuses it.
  DecodeState();
  ~DecodeState();
  DecodeState(DecodeState&& other) noexcept;
  DecodeState& operator=(DecodeState&& other) noexcept;
  DecodeState(const DecodeState&) = delete;
  DecodeState& operator=(const DecodeState&) = delete;

  bool empty() const noexcept;
  /// Tokens processed so far (the next token sits at this position).
  int positions() const noexcept;
  /// Positions the cache has room for before decode_step must grow it.
  int capacity() const noexcept;
  /// Device bytes of the K and V buffers; equals Backend::kv_bytes(windows(),
  /// capacity()).
  std::size_t bytes() const noexcept;
  /// The windows the cache was built under (decode_step must get the same).
  const AttentionWindows& windows() const noexcept;
  /// Rows (positions) head (layer, kv_head) owns: capacity() for a full head,
  /// min(capacity(), sinks + window) for an SWA head; 0 outside the model.
  std::int64_t head_rows(int layer, int kv_head) const noexcept;
  /// The stored key / value of (layer, kv_head) at `position`, downloaded
  /// (head_dim values, the 16-bit values as fp32), or empty when the head
  /// does not hold that position (not yet written, or evicted from an SWA
  /// head's ring): the same positions as cpu::KvCache::key. For tests.
  std::vector<float> key(int layer, int kv_head, int position) const;
  std::vector<float> value(int layer, int kv_head, int position) const;

 private:
  friend class Backend;
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// The CUDA backend. Holds a reference to the model (which must outlive it)
/// for its configuration and tokenizer; the weights are copied to the device
/// on construction and the host copy is not read again.
class Backend {
 public:
  using Residual = cuda::Residual;

  /// Uploads the weights. Checks come first, so a bad model or option fails
  /// the same way with or without a GPU: bosch::invalid_argument for an
  /// unsupported configuration (odd head_dim, head_dim > 256, bad Options)
  /// or a weight whose shape does not match the config (naming the GGUF
  /// tensor, e.g. "blk.1.attn_k"); then bosch::device_error when no usable
  /// device exists or device memory runs out.
  explicit Backend(const model::Model& model, Options options = {});

  const model::Config& config() const noexcept;
  const model::Model& model() const noexcept;
  HeadLayout layout() const;
  const Options& options() const noexcept;
  /// Device bytes held by the uploaded weights.
  std::size_t weight_bytes() const noexcept;

  /// Token embeddings of `tokens` (the residual stream entering layer 0).
  /// Throws bosch::invalid_argument for an id outside the vocabulary. An
  /// empty sequence gives an empty stream (no device memory); running layers
  /// on it does nothing.
  Residual embed(std::span<const int> tokens) const;

  /// Runs layers [first, last) on `x` in place (0 <= first <= last <= L).
  /// `windows` covers all layers (its mask, when non-empty, must have the
  /// model's layout). Attention statistics are not computed on the GPU:
  /// passing `stats` throws bosch::invalid_argument (use cpu::Backend for the
  /// static baselines that need them).
  void run_layers(Residual& x, int first, int last, const AttentionWindows& windows,
                  cpu::HeadStats* stats = nullptr, const cpu::StatsRequest* request = nullptr) const;

  /// Runs layers [first, last) on several streams at once, stream b under
  /// windows[b] (or windows[0] for all when windows.size() == 1): the rows of
  /// all streams are stacked so each projection and FFN is one GEMM, and the
  /// attention kernel walks each sequence separately (pad-free, varlen). This
  /// is how several masks are evaluated in one batch.
  void run_layers_batch(std::span<Residual* const> xs, int first, int last,
                        std::span<const AttentionWindows* const> windows) const;

  /// Logits at the given rows of `x` after the final norm and output
  /// projection: [positions.size(), vocab] row-major fp32. Throws
  /// bosch::invalid_argument for a position outside [0, n_tokens).
  std::vector<float> logits(const Residual& x, std::span<const int> positions) const;

  /// embed + run_layers(0, L) + logits.
  std::vector<float> forward(std::span<const int> tokens, const AttentionWindows& windows,
                             std::span<const int> positions) const;

  /// The forward pass of several sequences at once (as cpu::Backend's): rows
  /// stacked back to back, one GEMM per projection, attention per sequence.
  /// Result b holds the logits of sequences[b] at positions[b].
  std::vector<std::vector<float>> forward_batch(std::span<const std::vector<int>> sequences,
                                                const AttentionWindows& windows,
                                                std::span<const std::vector<int>> positions) const;

  /// As above with one set of windows per sequence (windows.size() equal to
  /// sequences.size(), or 1): several masks scored in one batch.
  std::vector<std::vector<float>> forward_batch(std::span<const std::vector<int>> sequences,
                                                std::span<const AttentionWindows* const> windows,
                                                std::span<const std::vector<int>> positions) const;

  /// Incremental decoding, step 1 (as cpu::Backend::prefill): runs the
  /// forward pass over `tokens` (the same pass as forward(), so the logits
  /// are bitwise those of forward(tokens, windows, {n - 1})) while storing in
  /// the hybrid KV cache the keys and values each head will read later. The
  /// cache has room for `capacity` positions (at least the n tokens; 0 = n),
  /// allocated once; decode_step doubles it when the context outgrows it, so
  /// pass the prompt plus the tokens to generate. When `last_logits` is
  /// given it receives the logits of the last position ([vocab]). Throws
  /// bosch::invalid_argument before any device work for windows that do not
  /// fit the model (a mask of another layout, naming both layouts), an empty
  /// sequence, a negative capacity or an id outside the vocabulary
  /// (frame::check_prefill); bosch::device_error when the cache does not fit
  /// in device memory.
  DecodeState prefill(std::span<const int> tokens, const AttentionWindows& windows,
                      std::vector<float>* last_logits = nullptr, int capacity = 0) const;

  /// Incremental decoding, step 2 (as cpu::Backend::decode_step): appends
  /// `token` at position state.positions(), runs it through all layers (one
  /// row: the same GEMMs and Q/K/V kernel as the forward pass), stores its
  /// keys and values (an SWA head overwrites the oldest slot of its ring),
  /// and attends the cache with the decode-attention kernel (a full head
  /// reads its positions in order, an SWA head its sinks and ring: at most
  /// sinks + window keys). Returns the logits ([vocab], fp32). Equal to
  /// forward(all tokens, windows, {n}) up to 16-bit rounding (the forward's
  /// tensor-core kernel rounds P to 16 bits, the decode kernel keeps it in
  /// fp32; GEMMs of one row may sum in another order). `windows` must be the
  /// windows of the prefill (bosch::invalid_argument otherwise), as must the
  /// token range; a state of another model, device or dtype is refused.
  std::vector<float> decode_step(DecodeState& state, int token, const AttentionWindows& windows) const;

  /// Exact device bytes of this backend's hybrid KV cache with room for
  /// `tokens` positions under `windows` (16-bit values: kv::bytes(config,
  /// windows, tokens, 2)); what DecodeState::bytes() reports for a state of
  /// that capacity.
  std::size_t kv_bytes(const AttentionWindows& windows, std::int64_t tokens) const;

  /// Floating-point operations of one forward over n tokens with logits at
  /// `logit_rows` rows (frame::forward_flops, eval/backend_frame.hpp: the
  /// same count as cpu::Backend::flops): 2 x (layer weights) per token (in
  /// a Qwen3-MoE sparse layer the router and the experts a token runs),
  /// 2 x hidden x vocab per logit row, 4 x head_dim per (query head, visible
  /// key).
  double flops(int n, int logit_rows, const AttentionWindows& windows) const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace bosch::cuda
