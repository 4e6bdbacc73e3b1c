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

  /// Floating-point operations of one forward over n tokens with logits at
  /// `logit_rows` rows (the same count as cpu::Backend::flops): 2 x (layer
  /// weights) per token (in a sparse layer the router and the experts a
  /// token runs, model::ffn_flops), 2 x hidden x vocab per logit row, 4 x
  /// head_dim per (query head, visible key).
  double flops(int n, int logit_rows, const AttentionWindows& windows) const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace bosch::cuda
