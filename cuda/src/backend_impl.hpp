// SPDX-License-Identifier: Apache-2.0
#pragma once

// The state of bosch::cuda::Backend (internal): uploaded weights, handles,
// and the decoder layer's ops over one pass of packed rows, shared by the
// forward pass (backend.cpp) and incremental decoding (decode.cpp).

#include "blas_check.hpp"
#include "check.hpp"
#include "kernels.hpp"
#include "memory.hpp"

#include <bosch/cuda/backend.hpp>
#include <bosch/eval/backend_frame.hpp>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <mutex>
#include <span>
#include <string>
#include <vector>

namespace bosch::cuda {

namespace detail {

/// One decoder layer's weights on the device.
struct LayerDevice {
  DeviceBuffer wqkv;       // half [(Hq + 2 Hkv) d, hidden]: wq | wk | wv rows
  DeviceBuffer wo;         // half [hidden, Hq d]
  DeviceBuffer wgu;        // half [2 inter, hidden]: w_gate | w_up rows (dense layer)
  DeviceBuffer wdown;      // half [hidden, inter] (dense layer)
  DeviceBuffer wgu_exps;   // half [E 2F, hidden]: per expert its gate | up rows (sparse layer)
  DeviceBuffer wdown_exps; // half [E hidden, F] (sparse layer)
  DeviceBuffer attn_norm;  // fp32 [hidden]
  DeviceBuffer ffn_norm;   // fp32 [hidden]
  DeviceBuffer bias;       // fp32 [(Hq + 2 Hkv) d] or empty
  DeviceBuffer q_norm;     // fp32 [d] or empty
  DeviceBuffer k_norm;     // fp32 [d] or empty
};

}  // namespace detail

using detail::DeviceBuffer;
using detail::LayerDevice;
using detail::StreamBuffer;

struct Backend::Impl {
  const model::Model* model = nullptr;
  Options options;
  detail::Elem elem = detail::Elem::bf16;
  cudaDataType_t data_type = CUDA_R_16BF;
  bool tensor_core = false;
  int hidden = 0, inter = 0, hq = 0, hkv = 0, d = 0, qkv_dim = 0, vocab = 0, num_layers = 0;
  float eps = 1e-5f;
  HeadLayout layout;

  // Handles, released in reverse order of declaration after ~Impl synchronized.
  struct StreamHandle {
    cudaStream_t h = nullptr;
    ~StreamHandle() { if (h) cudaStreamDestroy(h); }
  } stream_handle;
  struct PoolHandle {
    cudaMemPool_t h = nullptr;
    ~PoolHandle() { if (h) cudaMemPoolDestroy(h); }
  } pool_handle;
  struct BlasHandle {
    cublasHandle_t h = nullptr;
    ~BlasHandle() { if (h) cublasDestroy(h); }
  } blas_handle;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  cudaMemPool_t pool = nullptr;

  DeviceBuffer embedding;     // half [vocab, hidden]
  DeviceBuffer lm_head;       // half [vocab, hidden]; empty when tied
  DeviceBuffer final_norm;    // fp32 [hidden]
  DeviceBuffer inv_freq;      // double [d / 2]
  std::vector<LayerDevice> layers;
  std::size_t weight_bytes = 0;
  std::mutex mutex;

  Impl(const model::Model& m, Options o);
  ~Impl();
  Impl(const Impl&) = delete;
  Impl& operator=(const Impl&) = delete;

  const void* output_weights() const { return lm_head.bytes() ? lm_head.get() : embedding.get(); }

  // Y [n, out] (fp32) = X [n, in] (half) W^T (W half [out, in]) + beta Y
  // (beta 1: the residual add).
  void linear(const void* w, const void* x, float* y, int n, int out, int in, float beta) const {
    if (n <= 0) return;
    const float alpha = 1.0f;
    BOSCH_CUBLAS_CHECK(cublasGemmEx(blas, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &alpha, w, data_type,
                                    in, x, data_type, in, &beta, y, CUDA_R_32F, out,
                                    CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }
  void linear(const DeviceBuffer& w, const void* x, float* y, int n, int out, int in, float beta) const {
    linear(w.get(), x, y, n, out, in, beta);
  }

  StreamBuffer scratch(std::size_t bytes, const std::string& what) const {
    return StreamBuffer(bytes, pool, stream, what);
  }

  void check_tokens(std::span<const int> tokens, const char* where) const {
    frame::check_tokens(tokens, vocab, where);
  }
  // A residual stream of this model on this backend's device.
  void check_residual(const Residual& x, const char* where) const {
    frame::check_residual(x.n_tokens(), x.hidden(), x.bytes() / sizeof(float), hidden, where);
    if (x.device() != options.device)
      throw invalid_argument("residual stream on device " + std::to_string(x.device()) +
                                 ", the backend runs on device " + std::to_string(options.device),
                             where);
  }

  // x [n, hidden] fp32 = embedding[tokens] (tokens already checked).
  void embed_into(float* x, std::span<const int> tokens) const {
    if (tokens.empty()) return;
    StreamBuffer ids = scratch(tokens.size() * sizeof(int), "token ids");
    BOSCH_CUDA_CHECK(cudaMemcpyAsync(ids.get(), tokens.data(), tokens.size() * sizeof(int),
                                     cudaMemcpyHostToDevice, stream));
    detail::launch_embed(embedding.get(), elem, ids.get<int>(), static_cast<int>(tokens.size()),
                         hidden, x, stream);
    BOSCH_CUDA_CHECK(cudaStreamSynchronize(stream));
  }

  // The hybrid KV cache of incremental decoding as one pass sees it (none in
  // a plain forward; decode.cpp). The pass runs one sequence whose rows are
  // positions start .. start + n - 1; each layer stores their keys and values
  // in the cache (those kv::stored keeps for first_reader: prefill n, a
  // decode step its own position), and in a decode step (decode = true, one
  // row) attention reads the cache instead of the pass's own rows.
  struct CacheHook {
    detail::KvCacheArgs cache;
    int start = 0;
    int first_reader = 0;
    bool decode = false;
    int chunks = 1;            // decode: key chunks per query head (the largest head's)
    float* partial = nullptr;  // decode: fp32 [hq, chunks, d + 2] of partial softmax results
  };

  // One run_packed call's plan, metadata and activations (rows of all stacked sequences).
  struct Pass {
    Pass(const Impl& m, std::span<const int> lengths, std::span<const AttentionWindows* const> windows,
         int first, int last, const CacheHook* hook = nullptr);
    int first, batch = 0, n = 0, chunk;
    StreamBuffer dmeta, rope_cos, rope_sin;
    StreamBuffer h, q, k, v, att;  // half: normalized rows, Q, K, V, attention output
    StreamBuffer wide, gate;       // fp32 QKV / gate|up of a chunk of rows; half SwiGLU of a chunk
    const int* positions = nullptr;     // device: RoPE table row of each row
    const int* windows_meta = nullptr;  // device: [layer - first][batch][hkv] windows
    detail::AttentionArgs attention;    // all but the layer's windows
    const CacheHook* hook = nullptr;    // incremental decoding, or null
  };
  // The ops of the decoder layer (names as in cpu/layer.hpp).
  void rms_norm(const float* x, const DeviceBuffer& gain, int n, void* out) const;
  void qk_norm_rope(const LayerDevice& L, const Pass& s, std::size_t row, int rows) const;
  void attention(const Pass& s, int layer) const;
  void store_keys(const Pass& s, int layer) const;        // cache hook: keys and values into the cache
  void decode_attention(const Pass& s, int layer) const;  // cache hook: one row's attention from the cache
  void silu_mul(const Pass& s, int rows) const;
  void moe_ffn(int layer, float* x, const Pass& s) const;  // Qwen3-MoE sparse layers (backend.cpp)
  void decoder_layer(int layer, float* x, const Pass& s) const;
  // Runs layers [first, last) on the packed rows x (synchronizes).
  void run_packed(float* x, std::span<const int> lengths,
                  std::span<const AttentionWindows* const> windows, int first, int last,
                  const CacheHook* hook = nullptr) const;
  std::vector<float> logits_rows(const float* x, const std::vector<int>& rows) const;
};

}  // namespace bosch::cuda
