// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file model/weights.hpp
/// Model weights, dequantized to fp32 on load (one copy in memory; the file
/// is memory-mapped only while loading).

#include <cstddef>
#include <cstdint>
#include <vector>

namespace bosch::model {

/// A dense fp32 matrix, row-major: element (r, c) at data[r * cols + c].
/// Linear layers are stored [out_features, in_features] (PyTorch and GGUF
/// order), so y = W x for a column vector x, Y = X W^T for rows X.
struct Matrix {
  std::vector<float> data;
  int rows = 0;
  int cols = 0;
  bool empty() const noexcept { return data.empty(); }
  float* row(int r) noexcept { return data.data() + static_cast<std::size_t>(r) * cols; }
  const float* row(int r) const noexcept { return data.data() + static_cast<std::size_t>(r) * cols; }
};

/// The weights of one transformer block.
struct LayerWeights {
  std::vector<float> attn_norm;  ///< [hidden] RMSNorm gain before attention
  Matrix wq;                     ///< [num_heads * head_dim, hidden]
  Matrix wk;                     ///< [num_kv_heads * head_dim, hidden]
  Matrix wv;                     ///< [num_kv_heads * head_dim, hidden]
  Matrix wo;                     ///< [hidden, num_heads * head_dim]
  std::vector<float> bq, bk, bv; ///< Qwen2 projection biases; empty otherwise
  std::vector<float> q_norm;     ///< [head_dim] Qwen3 per-head RMSNorm of Q; empty otherwise
  std::vector<float> k_norm;     ///< [head_dim] Qwen3 per-head RMSNorm of K; empty otherwise
  std::vector<float> ffn_norm;   ///< [hidden] RMSNorm gain before the FFN
  Matrix w_gate;                 ///< [intermediate, hidden]; empty in a sparse (MoE) layer
  Matrix w_up;                   ///< [intermediate, hidden]; empty in a sparse layer
  Matrix w_down;                 ///< [hidden, intermediate]; empty in a sparse layer
  // Mixture of experts (Config::is_sparse_layer; empty in a dense layer). The
  // experts' matrices are stacked, E = num_experts, F = expert_intermediate_size:
  // expert e's gate is rows [e F, (e + 1) F) of gate_exps (the layout of
  // GGUF's 3-D ffn_gate_exps, read without a copy).
  Matrix router;                 ///< [E, hidden] router logits (ffn_gate_inp / mlp.gate)
  Matrix gate_exps;              ///< [E * F, hidden]
  Matrix up_exps;                ///< [E * F, hidden]
  Matrix down_exps;              ///< [E * hidden, F]: expert e's down is rows [e hidden, (e + 1) hidden)
};

/// All weights of a decoder.
struct Weights {
  Matrix embedding;                 ///< [vocab, hidden]
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;    ///< [hidden]
  Matrix lm_head;                   ///< [vocab, hidden]; empty when tied to `embedding`

  /// The output projection (lm_head, or the embedding when tied).
  const Matrix& output() const noexcept { return lm_head.empty() ? embedding : lm_head; }

  /// Bytes held by all tensors.
  std::size_t bytes() const noexcept {
    std::size_t n = embedding.data.size() + final_norm.size() + lm_head.data.size();
    for (const auto& l : layers)
      n += l.attn_norm.size() + l.wq.data.size() + l.wk.data.size() + l.wv.data.size() +
           l.wo.data.size() + l.bq.size() + l.bk.size() + l.bv.size() + l.q_norm.size() +
           l.k_norm.size() + l.ffn_norm.size() + l.w_gate.data.size() + l.w_up.data.size() +
           l.w_down.data.size() + l.router.data.size() + l.gate_exps.data.size() + l.up_exps.data.size() +
           l.down_exps.data.size();
    return n * sizeof(float);
  }
};

}  // namespace bosch::model
