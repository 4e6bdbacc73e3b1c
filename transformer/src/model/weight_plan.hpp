// SPDX-License-Identifier: Apache-2.0
#pragma once
// Private to src/model: filling Weights from a named-tensor source (GGUF or
// safetensors), checking every tensor before allocating any.

#include <bosch/model/config.hpp>
#include <bosch/model/weights.hpp>

#include <cstdint>
#include <filesystem>
#include <utility>
#include <span>
#include <string>
#include <vector>

namespace bosch::model::detail {

/// A set of named tensors, shapes written slowest dimension first.
class TensorSource {
 public:
  virtual ~TensorSource() = default;
  virtual bool has(const std::string& name) const = 0;
  /// Shape, slowest first (only for names that exist).
  virtual std::vector<std::uint64_t> shape(const std::string& name) const = 0;
  /// Throws format_error when the tensor's element type cannot be converted.
  virtual void check_convertible(const std::string& name) const = 0;
  /// Converts the tensor to fp32 into dst (dst.size() == element count).
  virtual void read(const std::string& name, std::span<float> dst) const = 0;
  /// "<file>: tensor '<name>'" for an existing or missing tensor.
  virtual std::string where_tensor(const std::string& name) const = 0;
};

/// Tensor names of one checkpoint format.
struct TensorNames {
  std::string embedding, final_norm, output;
  /// Per-layer tensors are named layer_prefix + layer index + "." + suffix.
  std::string layer_prefix;
  /// The suffix of each role: attn_norm, q, k, v, o, q_bias, k_bias, v_bias,
  /// q_norm, k_norm, ffn_norm, gate, up, down, and for sparse (MoE) layers
  /// router, gate_exps, up_exps, down_exps. An expert role whose suffix holds
  /// "{e}" names one tensor per expert (Hugging Face:
  /// "mlp.experts.{e}.gate_proj.weight", [F, hidden] each); otherwise one
  /// 3-D tensor holds all experts (GGUF: "ffn_gate_exps.weight", [E, F, hidden]).
  std::vector<std::pair<std::string, std::string>> roles;
  /// Name of a per-layer tensor (a role without a suffix is used as one).
  std::string layer(int layer, const std::string& role) const;
  /// Name of expert `expert`'s tensor of `role` ("{e}" replaced by the index).
  std::string expert(int layer, const std::string& role, int expert) const;
  /// True when `role` names one tensor per expert.
  bool per_expert(const std::string& role) const;
};

/// What to read besides the always-present tensors.
struct WeightOptions {
  bool output = false;   ///< read a separate output projection (untied)
  bool qkv_bias = false;
  bool qk_norm = false;
};

/// Checks presence, type and shape of every tensor `config` needs, then
/// allocates and reads them. Throws format_error naming the tensor.
Weights fill_weights(const TensorSource& src, const Config& config, const TensorNames& names,
                     const WeightOptions& options);

/// The configuration of a Hugging Face directory without reading weights
/// (hf_model.cpp; tensor names only when tie_word_embeddings is unset).
Config read_hf_config_only(const std::filesystem::path& dir);

/// "[a, b]".
std::string shape_text(const std::vector<std::uint64_t>& shape);

/// model::validate(config, where) (model/validate.hpp) for a configuration
/// read from the file or directory `where`: its invalid_argument becomes a
/// format_error (the file is malformed).
void check_config(const Config& config, const std::string& where);

}  // namespace bosch::model::detail
