// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file model/config.hpp
/// The architecture description of a decoder-only transformer, as read from a
/// GGUF file's metadata or a Hugging Face config.json.

#include <bosch/mask.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace bosch::model {

/// Supported architectures.
enum class Arch {
  llama,  ///< Llama 2/3, SmolLM2, Mistral: RMSNorm, SwiGLU, RoPE, GQA
  qwen2,  ///< as llama, plus biases on the Q, K and V projections
  qwen3,  ///< as llama, plus RMSNorm on each head of Q and K (before RoPE)
  /// as qwen3, with mixture-of-experts feed-forward blocks (Qwen3-MoE,
  /// docs/architectures.md): a softmax router picks the top-k of E SwiGLU
  /// experts per token; layers named by the configuration stay dense
  qwen3moe,
};

/// Which pairs of dimensions RoPE rotates inside one head of size d.
enum class RopeStyle {
  /// Adjacent pairs (2i, 2i+1): the GGUF `llama` layout, where the converter
  /// permuted the rows of Q and K (llama.cpp's "normal" rope).
  interleaved,
  /// Halves (i, i + d/2): Hugging Face checkpoints and GGUF `qwen2`/`qwen3`/`qwen3moe`
  /// (llama.cpp's "neox" rope).
  neox,
};

/// RoPE frequency scaling (Llama 3 style). type "none" leaves frequencies as
/// theta^(-2i/d); "linear" divides positions by `factor`; "llama3" applies the
/// Llama 3.1 smooth interpolation with the fields below.
struct RopeScaling {
  std::string type = "none";
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_position = 8192;
};

/// The mixture-of-experts feed-forward of Qwen3-MoE (docs/architectures.md).
/// In a sparse layer, token h (after the FFN norm) is routed by
///     p = softmax(router h)                    over all num_experts logits
///     S = the num_experts_used largest p (ties: the lower expert index)
///     w_e = p_e / sum_{S} p   (norm_topk_prob)   or   p_e   (otherwise)
///     y = sum_{e in S} w_e * down_e(silu(gate_e h) * up_e h)
/// with each expert a SwiGLU of inner size expert_intermediate_size.
/// num_experts == 0: no expert anywhere (every dense model).
struct MoeConfig {
  int num_experts = 0;               ///< E: experts of a sparse layer
  int num_experts_used = 0;          ///< k: experts each token is routed to (1 <= k <= E)
  int expert_intermediate_size = 0;  ///< inner size of one expert's SwiGLU
  bool norm_topk_prob = true;        ///< renormalize the k chosen probabilities to sum 1
  /// One entry per layer: true where the layer's FFN is the mixture, false
  /// where it is the dense SwiGLU of Config::intermediate_size. Empty when
  /// num_experts == 0.
  std::vector<bool> sparse_layers;
};

/// Hyper-parameters of a decoder. All sizes are per layer unless noted.
struct Config {
  Arch arch = Arch::llama;
  std::string name;            ///< general.name / model id, informational
  int vocab_size = 0;
  int hidden_size = 0;         ///< d_model
  int intermediate_size = 0;   ///< FFN inner size (SwiGLU) of the dense layers
  int num_layers = 0;
  int num_heads = 0;           ///< query heads
  int num_kv_heads = 0;        ///< key/value heads (GQA)
  int head_dim = 0;            ///< usually hidden_size / num_heads
  int max_position = 0;        ///< trained context length
  double rms_eps = 1e-5;
  double rope_theta = 10000.0;
  RopeStyle rope_style = RopeStyle::neox;
  RopeScaling rope_scaling;
  bool tie_embeddings = false; ///< output projection = token embedding
  bool qkv_bias = false;       ///< Qwen2
  bool qk_norm = false;        ///< Qwen3
  MoeConfig moe;               ///< Qwen3-MoE experts; none otherwise

  /// The decision layout for BOSCH.
  HeadLayout layout() const { return {num_layers, num_heads, num_kv_heads}; }
  /// True when layer `layer`'s FFN is the mixture of experts.
  bool is_sparse_layer(int layer) const noexcept {
    return layer >= 0 && static_cast<std::size_t>(layer) < moe.sparse_layers.size() &&
           moe.sparse_layers[static_cast<std::size_t>(layer)];
  }
  /// True when some layer's FFN is dense (it then needs intermediate_size).
  bool has_dense_layer() const noexcept {
    for (int l = 0; l < num_layers; ++l)
      if (!is_sparse_layer(l)) return true;
    return false;
  }
};

/// Floating-point operations of layer `layer`'s feed-forward block for one
/// token (2 per multiply-add): 3 matrices of hidden x intermediate_size in a
/// dense layer; in a sparse layer the router (hidden x num_experts) plus the
/// 3 matrices of the num_experts_used experts the token runs (the inactive
/// experts cost nothing). The norm, activation and weighted sum are not
/// counted (as the backends count no element-wise work).
inline double ffn_flops(const Config& c, int layer) {
  const double d = c.hidden_size;
  if (!c.is_sparse_layer(layer)) return 2.0 * 3.0 * d * c.intermediate_size;
  return 2.0 * (d * c.moe.num_experts +
                static_cast<double>(c.moe.num_experts_used) * 3.0 * d * c.moe.expert_intermediate_size);
}

/// The RoPE inverse frequencies of `config` (head_dim / 2 values), scaling
/// applied (formulas in cpu/rope.hpp). Throws bosch::invalid_argument
/// (where = the field) for an odd or non-positive head_dim, a non-positive
/// theta, or an unknown or ill-formed scaling; model::validate relies on it.
std::vector<double> rope_inv_freq(const Config& config);

/// Human-readable name of an architecture ("llama", "qwen2", "qwen3",
/// "qwen3moe": the GGUF general.architecture values).
inline const char* to_string(Arch a) {
  switch (a) {
    case Arch::llama: return "llama";
    case Arch::qwen2: return "qwen2";
    case Arch::qwen3: return "qwen3";
    case Arch::qwen3moe: return "qwen3moe";
  }
  return "?";
}

}  // namespace bosch::model
