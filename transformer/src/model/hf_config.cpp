// SPDX-License-Identifier: Apache-2.0
// Hugging Face config.json -> Config (see bosch/model/hf_config.hpp).

#include <bosch/error.hpp>
#include <bosch/io/atomic_file.hpp>
#include <bosch/model/hf_config.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <fstream>
#include <limits>
#include <sstream>

namespace bosch::model {

namespace {

using nlohmann::json;

struct Reader {
  const json& j;
  const std::string& where;

  [[noreturn]] void fail(const std::string& msg, const std::string& field) const {
    throw format_error(msg, where + ": field '" + field + "'");
  }
  bool has(const char* key) const { return j.contains(key) && !j[key].is_null(); }
  int positive_int(const char* key) const {
    if (!has(key)) fail("missing", key);
    const json& v = j[key];
    if (!v.is_number_integer()) fail("not an integer", key);
    const auto x = v.get<std::int64_t>();
    if (x <= 0 || x > std::numeric_limits<int>::max())
      fail("must be a positive 32-bit integer, got " + std::to_string(x), key);
    return static_cast<int>(x);
  }
  int positive_int(const char* key, int fallback) const { return has(key) ? positive_int(key) : fallback; }
  double number(const json& v, const std::string& field) const {
    if (!v.is_number()) fail("not a number", field);
    return v.get<double>();
  }
  double positive(const char* key, double fallback) const {
    if (!has(key)) return fallback;
    const double x = number(j[key], key);
    if (!(x > 0.0) || !std::isfinite(x)) fail("must be positive and finite", key);
    return x;
  }
  bool flag(const char* key, bool fallback) const {
    if (!has(key)) return fallback;
    if (!j[key].is_boolean()) fail("not a bool", key);
    return j[key].get<bool>();
  }
};

/// True when `key` is present with a value that turns a feature on: not
/// null, false, 0, an empty string or an empty array.
bool set(const json& j, const char* key) {
  if (!j.contains(key)) return false;
  const json& v = j[key];
  if (v.is_null()) return false;
  if (v.is_boolean()) return v.get<bool>();
  if (v.is_number()) return v.get<double>() != 0.0;
  if (v.is_string() || v.is_array() || v.is_object()) return !v.empty();
  return true;
}

/// The mixture-of-experts fields of a Qwen3-MoE config.json (transformers'
/// Qwen3MoeConfig; docs/architectures.md): num_experts,
/// num_experts_per_tok, moe_intermediate_size (required), norm_topk_prob
/// (default false, as transformers), decoder_sparse_step (1) and
/// mlp_only_layers ([]): layer l is sparse unless l is in mlp_only_layers or
/// (l + 1) % decoder_sparse_step != 0. Keys of variants that Qwen3-MoE's
/// block does not implement are refused, each naming its key.
void read_moe(const Reader& r, Config& c) {
  const json& j = r.j;
  // Shared experts (Qwen2-MoE, DeepSeek), other routers and their knobs.
  static const char* const shared[] = {"shared_expert_intermediate_size", "n_shared_experts",
                                       "num_shared_experts", "moe_shared_expert_intermediate_size"};
  for (const char* k : shared)
    if (set(j, k)) r.fail("shared experts are not supported (Qwen3-MoE has none)", k);
  if (r.has("scoring_func") && !(j["scoring_func"].is_string() && j["scoring_func"].get<std::string>() == "softmax"))
    r.fail("only the softmax router is supported", "scoring_func");
  if (r.has("topk_method") && !(j["topk_method"].is_string() && j["topk_method"].get<std::string>() == "greedy"))
    r.fail("only greedy top-k routing is supported", "topk_method");
  for (const char* k : {"n_group", "topk_group"})
    if (r.has(k) && !(j[k].is_number_integer() && j[k].get<std::int64_t>() <= 1))
      r.fail("grouped expert routing is not supported", k);
  if (r.has("routed_scaling_factor") && !(j["routed_scaling_factor"].is_number() &&
                                          j["routed_scaling_factor"].get<double>() == 1.0))
    r.fail("scaled expert weights are not supported", "routed_scaling_factor");
  if (r.has("num_local_experts")) r.fail("Mixtral-style expert count; Qwen3-MoE names it num_experts", "num_local_experts");

  MoeConfig& m = c.moe;
  m.num_experts = r.positive_int("num_experts");
  m.num_experts_used = r.positive_int("num_experts_per_tok");
  if (m.num_experts_used > m.num_experts)
    r.fail("must not exceed num_experts (" + std::to_string(m.num_experts) + "), got " +
               std::to_string(m.num_experts_used),
           "num_experts_per_tok");
  m.expert_intermediate_size = r.positive_int("moe_intermediate_size");
  m.norm_topk_prob = r.flag("norm_topk_prob", false);
  const int step = r.positive_int("decoder_sparse_step", 1);
  m.sparse_layers.assign(static_cast<std::size_t>(c.num_layers), false);
  for (int l = 0; l < c.num_layers; ++l) m.sparse_layers[static_cast<std::size_t>(l)] = (l + 1) % step == 0;
  if (r.has("mlp_only_layers")) {
    const json& v = j["mlp_only_layers"];
    if (!v.is_array()) r.fail("must be an array of layer indices", "mlp_only_layers");
    for (const json& e : v) {
      if (!e.is_number_integer() || e.get<std::int64_t>() < 0 || e.get<std::int64_t>() >= c.num_layers)
        r.fail("entry " + e.dump() + " is not a layer index in [0, " + std::to_string(c.num_layers) + ")",
               "mlp_only_layers");
      m.sparse_layers[static_cast<std::size_t>(e.get<std::int64_t>())] = false;
    }
  }
}

}  // namespace

HfConfig parse_hf_config(std::string_view text, const std::string& where) {
  json j;
  try {
    j = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    throw format_error(std::string("not valid JSON: ") + e.what(), where);
  }
  if (!j.is_object()) throw format_error("not a JSON object", where);
  Reader r{j, where};
  HfConfig out;
  Config& c = out.config;

  std::string arch;
  if (r.has("architectures")) {
    if (!j["architectures"].is_array() || j["architectures"].empty() || !j["architectures"][0].is_string())
      r.fail("must be a non-empty array of strings", "architectures");
    arch = j["architectures"][0].get<std::string>();
  } else if (r.has("model_type")) {
    if (!j["model_type"].is_string()) r.fail("not a string", "model_type");
    arch = j["model_type"].get<std::string>();
  } else {
    r.fail("missing (neither architectures nor model_type)", "architectures");
  }
  const char* arch_field = r.has("architectures") ? "architectures" : "model_type";
  if (arch == "LlamaForCausalLM" || arch == "MistralForCausalLM" || arch == "llama" || arch == "mistral") {
    c.arch = Arch::llama;
  } else if (arch == "Qwen2ForCausalLM" || arch == "qwen2") {
    c.arch = Arch::qwen2;
    c.qkv_bias = true;
  } else if (arch == "Qwen3ForCausalLM" || arch == "qwen3") {
    c.arch = Arch::qwen3;
    c.qk_norm = true;
  } else if (arch == "Qwen3MoeForCausalLM" || arch == "qwen3_moe") {
    c.arch = Arch::qwen3moe;
    c.qk_norm = true;
  } else {
    r.fail("unsupported architecture '" + arch +
               "' (supported: LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM, Qwen3ForCausalLM, "
               "Qwen3MoeForCausalLM)",
           arch_field);
  }
  if (r.has("_name_or_path") && j["_name_or_path"].is_string()) c.name = j["_name_or_path"].get<std::string>();

  c.hidden_size = r.positive_int("hidden_size");
  c.num_layers = r.positive_int("num_hidden_layers");
  if (c.arch == Arch::qwen3moe) {
    read_moe(r, c);
    // The dense SwiGLU size matters only where a layer is dense.
    if (c.has_dense_layer() || r.has("intermediate_size")) c.intermediate_size = r.positive_int("intermediate_size");
  } else {
    c.intermediate_size = r.positive_int("intermediate_size");
    for (const char* k : {"num_experts", "num_local_experts", "n_routed_experts"})
      if (set(j, k))
        r.fail(std::string("mixture of experts is supported only for Qwen3MoeForCausalLM, not ") + arch, k);
  }
  c.num_heads = r.positive_int("num_attention_heads");
  c.num_kv_heads = r.positive_int("num_key_value_heads", c.num_heads);
  if (c.num_heads % c.num_kv_heads != 0)
    r.fail("num_attention_heads " + std::to_string(c.num_heads) + " is not a multiple of " +
               std::to_string(c.num_kv_heads),
           "num_key_value_heads");
  if (r.has("head_dim")) {
    c.head_dim = r.positive_int("head_dim");
  } else {
    if (c.hidden_size % c.num_heads != 0)
      r.fail("hidden_size " + std::to_string(c.hidden_size) + " is not a multiple of num_attention_heads",
             "hidden_size");
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (c.head_dim % 2 != 0) r.fail("RoPE needs an even head dimension", "head_dim");
  c.vocab_size = r.positive_int("vocab_size");
  c.max_position = r.positive_int("max_position_embeddings", 2048);
  c.rms_eps = r.positive("rms_norm_eps", c.arch == Arch::llama ? 1e-5 : 1e-6);
  c.rope_theta = r.positive("rope_theta", 10000.0);
  c.rope_style = RopeStyle::neox;

  if (r.flag("mlp_bias", false)) r.fail("MLP biases are not supported", "mlp_bias");
  if (c.arch == Arch::llama && r.flag("attention_bias", false))
    r.fail("attention biases (including the output projection's) are not supported", "attention_bias");
  if ((c.arch == Arch::qwen3 || c.arch == Arch::qwen3moe) && r.flag("attention_bias", false))
    r.fail(std::string("attention biases are not supported for ") + to_string(c.arch), "attention_bias");

  if (r.has("rope_scaling")) {
    const json& s = j["rope_scaling"];
    if (!s.is_object()) r.fail("must be an object or null", "rope_scaling");
    std::string type;
    for (const char* k : {"rope_type", "type"})
      if (s.contains(k) && s[k].is_string()) {
        type = s[k].get<std::string>();
        break;
      }
    auto num = [&](const char* k, double fallback) {
      if (!s.contains(k) || s[k].is_null()) return fallback;
      return r.number(s[k], std::string("rope_scaling.") + k);
    };
    if (type == "default" || type.empty()) {
      // plain RoPE
    } else if (type == "linear") {
      c.rope_scaling.type = "linear";
      c.rope_scaling.factor = num("factor", 1.0);
    } else if (type == "llama3") {
      c.rope_scaling.type = "llama3";
      c.rope_scaling.factor = num("factor", 8.0);
      c.rope_scaling.low_freq_factor = num("low_freq_factor", 1.0);
      c.rope_scaling.high_freq_factor = num("high_freq_factor", 4.0);
      const double omp = num("original_max_position_embeddings", 8192);
      // Checked before the conversion (a double outside int's range is UB).
      if (!(omp >= 1.0 && omp <= std::numeric_limits<int>::max()))
        r.fail("must be a positive 32-bit integer", "rope_scaling.original_max_position_embeddings");
      c.rope_scaling.original_max_position = static_cast<int>(omp);
    } else {
      r.fail("unsupported RoPE scaling type '" + type + "' (supported: default, linear, llama3)",
             "rope_scaling");
    }
    if (!(c.rope_scaling.factor > 0.0)) r.fail("factor must be positive", "rope_scaling.factor");
    if (c.rope_scaling.type == "llama3" &&
        !(c.rope_scaling.high_freq_factor > c.rope_scaling.low_freq_factor &&
          c.rope_scaling.low_freq_factor > 0.0 && c.rope_scaling.original_max_position > 0))
      r.fail("needs 0 < low_freq_factor < high_freq_factor and original_max_position_embeddings > 0",
             "rope_scaling");
  }
  if (r.has("tie_word_embeddings")) out.tie_word_embeddings = r.flag("tie_word_embeddings", false);
  c.tie_embeddings = out.tie_word_embeddings.value_or(false);
  return out;
}

HfConfig read_hf_config(const std::filesystem::path& path) {
  // A regular file (checked before opening: a FIFO would block), bounded.
  return parse_hf_config(io::read_file(path, std::uintmax_t{16} << 20, "a config.json"), path.string());
}

}  // namespace bosch::model
