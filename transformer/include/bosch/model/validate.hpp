// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file model/validate.hpp
/// The one check of a model that every consumer relies on: the loader runs it
/// on what it read, and both backends (cpu::Backend, cuda::Backend) on the
/// model they are given, so a model built or edited in memory meets the same
/// rules as one read from a file.

#include <bosch/model/config.hpp>
#include <bosch/model/model.hpp>

#include <string>

namespace bosch::model {

/// Checks a configuration: vocab_size, hidden_size, num_layers, num_heads,
/// num_kv_heads and head_dim positive, intermediate_size too when a layer is
/// dense; the MoE fields (only for qwen3moe: 1 <= num_experts <= 65536,
/// 1 <= num_experts_used <= num_experts, expert_intermediate_size positive,
/// one sparse_layers entry per layer, stacked expert rows within int); num_heads a
/// multiple of num_kv_heads; head_dim even (RoPE rotates pairs);
/// num_heads * head_dim within int; rms_eps positive and finite; rope_theta
/// and the RoPE scaling well-formed (rope_inv_freq). Throws
/// bosch::invalid_argument whose where() is "<source>: <field>", `source`
/// naming the model (a file, or the config's name when empty).
void validate(const Config& config, const std::string& source = {});

/// Checks a model: validate(config) and every weight tensor against it
/// (layer count; shapes of the embedding, output, final norm and each
/// layer's tensors; Q/K/V biases exactly when config.qkv_bias, Q/K norms
/// exactly when config.qk_norm; in a sparse layer the router and stacked
/// experts and no dense FFN, in a dense layer the reverse). Throws bosch::invalid_argument whose where()
/// is "<model>: <field>" or "<model>: tensor '<GGUF name>'" (e.g.
/// "m.gguf: tensor 'blk.1.attn_k'"), <model> being model.source, else the
/// config's name, else "model".
void validate(const Model& model);

}  // namespace bosch::model
