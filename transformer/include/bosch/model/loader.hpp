// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file model/loader.hpp
/// The steps of bosch::model::load (model.hpp), for callers that want only a
/// part (the configuration of a file, the weights without a tokenizer) and
/// for tests.
///
/// Tensor names and the shapes expected, written slowest dimension first
/// (row-major [out, in] for a linear layer; a GGUF file lists dims fastest
/// first, so its [in, out] is this [out, in]):
///
/// | role            | GGUF                         | Hugging Face                                  | shape          |
/// |-----------------|------------------------------|-----------------------------------------------|----------------|
/// | embedding       | token_embd.weight            | model.embed_tokens.weight                     | [vocab, hidden]|
/// | final norm      | output_norm.weight           | model.norm.weight                             | [hidden]       |
/// | output          | output.weight (optional)     | lm_head.weight (optional)                     | [vocab, hidden]|
/// | attn norm       | blk.N.attn_norm.weight       | model.layers.N.input_layernorm.weight         | [hidden]       |
/// | Q, K, V         | blk.N.attn_{q,k,v}.weight    | model.layers.N.self_attn.{q,k,v}_proj.weight  | [H*d, hidden], [Hkv*d, hidden] |
/// | Q, K, V biases  | blk.N.attn_{q,k,v}.bias      | model.layers.N.self_attn.{q,k,v}_proj.bias    | [H*d], [Hkv*d] |
/// | Q/K norms       | blk.N.attn_{q,k}_norm.weight | model.layers.N.self_attn.{q,k}_norm.weight    | [d]            |
/// | output proj.    | blk.N.attn_output.weight     | model.layers.N.self_attn.o_proj.weight        | [hidden, H*d]  |
/// | FFN norm        | blk.N.ffn_norm.weight        | model.layers.N.post_attention_layernorm.weight| [hidden]       |
/// | gate, up        | blk.N.ffn_{gate,up}.weight   | model.layers.N.mlp.{gate,up}_proj.weight      | [ffn, hidden]  |
/// | down            | blk.N.ffn_down.weight        | model.layers.N.mlp.down_proj.weight           | [hidden, ffn]  |
/// | router (MoE)    | blk.N.ffn_gate_inp.weight    | model.layers.N.mlp.gate.weight                | [E, hidden]    |
/// | expert gate, up | blk.N.ffn_{gate,up}_exps.weight | model.layers.N.mlp.experts.X.{gate,up}_proj.weight | [E, F, hidden]; [F, hidden] each |
/// | expert down     | blk.N.ffn_down_exps.weight   | model.layers.N.mlp.experts.X.down_proj.weight | [E, hidden, F]; [hidden, F] each |
///
/// The last three rows are the sparse layers of qwen3moe (E experts of inner
/// size F, Config::moe) in place of gate/up/down: GGUF stacks the experts in
/// one 3-D tensor (read straight into LayerWeights' stacked matrices,
/// quantized types dequantized block by block as in 2-D tensors), Hugging
/// Face writes one tensor per expert X. Shared-expert tensors (GGUF
/// `*_shexp`, HF `mlp.shared_expert*`), expert score biases and expert
/// tensors in another architecture are refused.
///
/// Biases are required for qwen2 and loaded when present for llama (all
/// three or none); Q/K norms are required for qwen3 and qwen3moe. The output projection is
/// tied to the embedding when it is absent (GGUF), when it is byte-identical to
/// the embedding (GGUF; loaded once), or as config.json's tie_word_embeddings
/// says (HF; when unset, when lm_head.weight is absent). Tensors of layers at
/// or beyond the configured layer count are an error; other extra tensors
/// (e.g. rope_freqs.weight, handled by config_from_gguf) are ignored.

#include <bosch/model/config.hpp>
#include <bosch/model/gguf.hpp>
#include <bosch/model/tokenizer_spec.hpp>
#include <bosch/model/weights.hpp>

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

namespace bosch::model {

/// Everything load() reads from a model source, before the Tokenizer is built.
struct Checkpoint {
  Config config;
  Weights weights;
  TokenizerSpec tokenizer;
  std::filesystem::path source;  ///< absolute path of the file or directory
  std::string fingerprint;       ///< fingerprint() of the files read
  std::vector<std::filesystem::path> files;  ///< the files read, in fingerprint order
};

/// The configuration in a GGUF file's metadata (general.architecture "llama",
/// "qwen2", "qwen3" or "qwen3moe"; <arch>.block_count, embedding_length,
/// feed_forward_length, attention.head_count, attention.head_count_kv
/// (default head_count), attention.key_length (default embedding/heads; must
/// equal attention.value_length and rope.dimension_count when present),
/// rope.freq_base (10000), rope.scaling.type/factor ("none", "linear"),
/// attention.layer_norm_rms_epsilon (1e-5), context_length,
/// vocab_size (default: tokenizer.ggml.tokens count, else token_embd rows)).
/// RoPE style: interleaved for llama (Q/K rows stay as the converter permuted
/// them), neox for qwen2/qwen3/qwen3moe. A `rope_freqs.weight` tensor (Llama 3.1 RoPE
/// scaling) is turned back into RopeScaling{"llama3", ...} when it matches that
/// formula (checked to 1e-3 relative), else rejected. tie_embeddings and
/// qkv_bias reflect the tensors present. qwen3moe adds expert_count,
/// expert_used_count, expert_feed_forward_length and expert_weights_norm
/// (default true, as llama.cpp); a layer is sparse when it holds
/// blk.N.ffn_gate_inp.weight, else dense (feed_forward_length then
/// required); keys of unsupported variants (expert_shared_count,
/// expert_shared_feed_forward_length, expert_gating_func other than softmax,
/// expert_weights_scale != 1, expert_group_count > 1) and <arch>.expert_count
/// in another architecture are refused (docs/architectures.md). Throws
/// bosch::format_error naming the file and key.
Config config_from_gguf(const gguf::File& file);

/// Reads all weights of `config` from a mapped GGUF file, dequantizing each
/// tensor straight into its fp32 Matrix. Checks every tensor's presence, type
/// and shape first (format_error naming file and tensor), then allocates.
Weights weights_from_gguf(const gguf::File& file, const Config& config);

/// Reads a GGUF file (config, weights, tokenizer spec), unmapping it afterwards.
Checkpoint read_gguf(const std::filesystem::path& path);

/// Reads a Hugging Face checkpoint directory: config.json, tokenizer.json
/// (through tokenizer_spec_from_json), and model.safetensors, or the shards
/// listed in model.safetensors.index.json's weight_map, or else every
/// *.safetensors file in the directory. Tensors of dtype F32, F16 or BF16.
Checkpoint read_hf(const std::filesystem::path& directory);

/// read_gguf for a file, read_hf for a directory; bosch::file_error when the
/// path does not exist.
Checkpoint read_checkpoint(const std::filesystem::path& path);

/// Only the configuration of a model file or directory (no weights are read;
/// for HF, only config.json plus the tensor names decide tie_embeddings).
Config read_config(const std::filesystem::path& path);

/// XXH64 (seed 0) over, for each file in order, its size and the XXH64 of its
/// whole content (8 bytes each, little-endian), as 16 lowercase hex digits:
/// every byte of every file counts (a changed weight anywhere changes it).
/// Stable across machines, independent of paths; about memory speed, and each
/// file's digest is computed once per process (cached by path, size and
/// modification time).
std::string fingerprint(const std::vector<std::filesystem::path>& files);

/// XXH64 of `bytes` (the reference algorithm, https://github.com/Cyan4973/xxHash).
std::uint64_t xxh64(std::span<const std::byte> bytes, std::uint64_t seed = 0);

}  // namespace bosch::model
