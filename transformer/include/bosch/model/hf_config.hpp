// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file model/hf_config.hpp
/// The model configuration of a Hugging Face checkpoint (config.json).
///
/// Architecture from `architectures[0]`, else `model_type`:
/// LlamaForCausalLM / MistralForCausalLM (llama, mistral) -> Arch::llama,
/// Qwen2ForCausalLM (qwen2) -> Arch::qwen2 (qkv_bias), Qwen3ForCausalLM
/// (qwen3) -> Arch::qwen3 (qk_norm), Qwen3MoeForCausalLM (qwen3_moe) ->
/// Arch::qwen3moe (qk_norm; num_experts, num_experts_per_tok,
/// moe_intermediate_size required; norm_topk_prob default false,
/// decoder_sparse_step 1, mlp_only_layers [], as transformers' Qwen3MoeConfig;
/// intermediate_size required only when a layer is dense). Keys of MoE
/// variants bosch does not run are refused naming the key: shared experts
/// (shared_expert_intermediate_size, n_shared_experts, ...), routers other
/// than softmax top-k (scoring_func, topk_method, n_group, topk_group,
/// routed_scaling_factor), num_local_experts, and num_experts /
/// num_local_experts / n_routed_experts in a dense architecture
/// (docs/architectures.md). Fields: hidden_size, intermediate_size,
/// num_hidden_layers, num_attention_heads (required); num_key_value_heads
/// (default num_attention_heads), head_dim (default hidden / heads),
/// rms_norm_eps (1e-6 for Qwen, else 1e-5), rope_theta (10000),
/// rope_scaling (null, "default", "linear" or "llama3"), tie_word_embeddings
/// (default: unset, decided by the presence of lm_head.weight; Config gets
/// false until the loader resolves it), max_position_embeddings (default 2048),
/// vocab_size (required), attention_bias (Llama: true is unsupported; Qwen2:
/// biases always), mlp_bias (true unsupported). RoPE style: neox (HF
/// checkpoints rotate halves). Errors are bosch::format_error naming the file
/// and field.

#include <bosch/model/config.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace bosch::model {

/// A parsed config.json.
struct HfConfig {
  Config config;
  /// tie_word_embeddings as written, or nullopt when the file omits it.
  std::optional<bool> tie_word_embeddings;
};

/// Parses the text of a config.json; `where` (usually its path) prefixes error locations.
HfConfig parse_hf_config(std::string_view json_text, const std::string& where);

/// Reads and parses a config.json file (bosch::file_error when unreadable).
HfConfig read_hf_config(const std::filesystem::path& config_json);

}  // namespace bosch::model
