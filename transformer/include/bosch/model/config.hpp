// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file model/config.hpp
/// The architecture description of a decoder-only transformer, as read from a
/// GGUF file's metadata or a Hugging Face config.json.

#include <bosch/mask.hpp>

#include <string>
#include <vector>

namespace bosch::model {

/// Supported architectures.
enum class Arch {
  llama,  ///< Llama 2/3, SmolLM2, Mistral: RMSNorm, SwiGLU, RoPE, GQA
  qwen2,  ///< as llama, plus biases on the Q, K and V projections
  qwen3,  ///< as llama, plus RMSNorm on each head of Q and K (before RoPE)
};

/// Which pairs of dimensions RoPE rotates inside one head of size d.
enum class RopeStyle {
  /// Adjacent pairs (2i, 2i+1): the GGUF `llama` layout, where the converter
  /// permuted the rows of Q and K (llama.cpp's "normal" rope).
  interleaved,
  /// Halves (i, i + d/2): Hugging Face checkpoints and GGUF `qwen2`/`qwen3`
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

/// Hyper-parameters of a decoder. All sizes are per layer unless noted.
struct Config {
  Arch arch = Arch::llama;
  std::string name;            ///< general.name / model id, informational
  int vocab_size = 0;
  int hidden_size = 0;         ///< d_model
  int intermediate_size = 0;   ///< FFN inner size (SwiGLU)
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

  /// The decision layout for BOSCH.
  HeadLayout layout() const { return {num_layers, num_heads, num_kv_heads}; }
};

/// The RoPE inverse frequencies of `config` (head_dim / 2 values), scaling
/// applied (formulas in cpu/rope.hpp). Throws bosch::invalid_argument
/// (where = the field) for an odd or non-positive head_dim, a non-positive
/// theta, or an unknown or ill-formed scaling; model::validate relies on it.
std::vector<double> rope_inv_freq(const Config& config);

/// Human-readable name of an architecture ("llama", "qwen2", "qwen3").
inline const char* to_string(Arch a) {
  switch (a) {
    case Arch::llama: return "llama";
    case Arch::qwen2: return "qwen2";
    case Arch::qwen3: return "qwen3";
  }
  return "?";
}

}  // namespace bosch::model
