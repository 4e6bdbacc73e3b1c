// SPDX-License-Identifier: Apache-2.0
// GGUF file -> Config and Weights (see bosch/model/loader.hpp).

#include "weight_plan.hpp"

#include <bosch/error.hpp>
#include <bosch/model/loader.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numbers>

namespace bosch::model {

namespace {

/// Llama 3.1 frequency factor of one rotary pair (the HF formula), as the
/// divisor of the unscaled frequency.
double llama3_factor(double freq, const RopeScaling& s) {
  const double wavelen = 2.0 * std::numbers::pi / freq;
  const double old_ctx = s.original_max_position;
  if (wavelen < old_ctx / s.high_freq_factor) return 1.0;
  if (wavelen > old_ctx / s.low_freq_factor) return s.factor;
  const double smooth = (old_ctx / wavelen - s.low_freq_factor) / (s.high_freq_factor - s.low_freq_factor);
  return 1.0 / ((1.0 - smooth) / s.factor + smooth);
}

/// Recovers Llama 3.1 RoPE scaling from llama.cpp's per-pair frequency
/// factors. The frequencies depend only on factor and on the line
/// smooth(x) = (old_ctx * x - low) / (high - low), x = 1 / wavelength; with
/// old_ctx fixed (from metadata, else 8192) two intermediate pairs give low
/// and high. The result is verified against every factor.
RopeScaling llama3_from_factors(const std::vector<float>& ff, const Config& c, int old_ctx,
                                const std::string& where) {
  RopeScaling s;
  const double factor = ff.back();
  if (std::all_of(ff.begin(), ff.end(), [](float x) { return std::abs(x - 1.0f) < 1e-6f; })) return s;
  s.type = "llama3";
  s.factor = factor;
  s.original_max_position = old_ctx;
  const int half = c.head_dim / 2;
  std::vector<double> xs, ys;
  for (int i = 0; i < half; ++i) {
    const double r = ff[static_cast<std::size_t>(i)];
    if (r > 1.0 + 1e-4 && r < factor * (1.0 - 1e-4)) {
      const double freq = std::pow(c.rope_theta, -2.0 * i / c.head_dim);
      xs.push_back(old_ctx * freq / (2.0 * std::numbers::pi));
      ys.push_back((1.0 / r - 1.0 / factor) / (1.0 - 1.0 / factor));  // smooth
    }
  }
  if (xs.size() >= 2) {
    const double slope = (ys.back() - ys.front()) / (xs.back() - xs.front());
    const double intercept = ys.front() - slope * xs.front();
    if (slope > 0) {
      s.low_freq_factor = -intercept / slope;
      s.high_freq_factor = s.low_freq_factor + 1.0 / slope;
    }
  }
  bool ok = factor > 0 && s.low_freq_factor > 0 && s.high_freq_factor > s.low_freq_factor;
  for (int i = 0; ok && i < half; ++i) {
    const double freq = std::pow(c.rope_theta, -2.0 * i / c.head_dim);
    const double want = ff[static_cast<std::size_t>(i)];
    ok = std::abs(llama3_factor(freq, s) - want) <= 1e-3 * want;
  }
  if (!ok)
    throw format_error("RoPE frequency factors do not follow the Llama 3.1 scaling formula (unsupported)",
                       where);
  return s;
}

class GgufSource final : public detail::TensorSource {
 public:
  explicit GgufSource(const gguf::File& f) : f_(f) {}
  bool has(const std::string& n) const override { return f_.find_tensor(n) != nullptr; }
  std::vector<std::uint64_t> shape(const std::string& n) const override {
    const auto& s = f_.find_tensor(n)->shape;
    return {s.rbegin(), s.rend()};  // GGUF lists dims fastest first
  }
  void check_convertible(const std::string& n) const override {
    const auto* t = f_.find_tensor(n);
    if (!can_dequantize(t->ggml_type()))
      throw format_error("unsupported tensor type " + type_name(t->type) +
                             " (supported: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K)",
                         where_tensor(n));
  }
  void read(const std::string& n, std::span<float> dst) const override {
    const auto* t = f_.find_tensor(n);
    dequantize(t->ggml_type(), f_.tensor_data(*t), dst);
  }
  std::string where_tensor(const std::string& n) const override { return f_.where_tensor(n); }

 private:
  const gguf::File& f_;
};

/// Parses "blk.<N>." and returns N, or -1.
long layer_index(const std::string& name, const std::string& prefix) {
  if (name.compare(0, prefix.size(), prefix) != 0) return -1;
  std::size_t i = prefix.size();
  long n = 0;
  bool digit = false;
  while (i < name.size() && name[i] >= '0' && name[i] <= '9' && n < 1000000) {
    n = n * 10 + (name[i] - '0');
    ++i;
    digit = true;
  }
  return (digit && i < name.size() && name[i] == '.') ? n : -1;
}

/// Refuses the tensors of mixture-of-experts variants bosch does not run
/// (shared experts, expert score biases) in any file, and expert tensors in
/// an architecture without experts.
void refuse_unsupported_expert_tensors(const gguf::File& f, Arch arch) {
  for (const auto& t : f.tensors()) {
    const std::string& n = t.name;
    if (n.find("_shexp") != std::string::npos)
      throw format_error("shared-expert tensor: mixture of experts with shared experts (Qwen2-MoE, DeepSeek) "
                         "is not supported",
                         f.where_tensor(n));
    if (n.find("exp_probs_b") != std::string::npos)
      throw format_error("expert score bias: routers other than Qwen3-MoE's softmax top-k are not supported",
                         f.where_tensor(n));
    if (arch != Arch::qwen3moe && (n.find("ffn_gate_inp") != std::string::npos || n.find("_exps") != std::string::npos))
      throw format_error(std::string("expert tensor in a ") + to_string(arch) +
                             " model: mixture of experts is supported only for architecture qwen3moe",
                         f.where_tensor(n));
  }
}

/// The mixture-of-experts keys of a qwen3moe file (llama.cpp's converter,
/// docs/architectures.md): expert_count, expert_used_count,
/// expert_feed_forward_length; expert_weights_norm (default true: llama.cpp
/// always renormalizes for qwen3moe). Keys of variants bosch does not run
/// (shared experts, another gating function, scaled or grouped routing) are
/// refused. A layer is sparse when it holds blk.N.ffn_gate_inp.weight (every
/// layer, as llama.cpp writes Qwen3-MoE), dense with ffn_gate/up/down of
/// feed_forward_length otherwise.
void read_moe(const gguf::File& f, Config& c, const std::string& a) {
  auto key = [&](const char* k) { return a + k; };
  auto positive = [&](const char* k) {
    const int v = f.get_int32(key(k));
    if (v <= 0) throw format_error("must be positive, got " + std::to_string(v), f.where_key(key(k)));
    return v;
  };
  MoeConfig& m = c.moe;
  m.num_experts = positive("expert_count");
  m.num_experts_used = positive("expert_used_count");
  if (m.num_experts_used > m.num_experts)
    throw format_error("expert_used_count " + std::to_string(m.num_experts_used) + " exceeds expert_count " +
                           std::to_string(m.num_experts),
                       f.where_key(key("expert_used_count")));
  m.expert_intermediate_size = positive("expert_feed_forward_length");
  for (const char* k : {"expert_shared_count", "expert_shared_feed_forward_length"})
    if (f.contains(key(k)) && f.get_int(key(k)) != 0)
      throw format_error("shared experts are not supported (Qwen3-MoE has none; Qwen2-MoE's shared expert "
                         "is not implemented)",
                         f.where_key(key(k)));
  for (const char* k : {"expert_group_count", "expert_group_used_count"})
    if (f.contains(key(k)) && f.get_int(key(k)) > 1)
      throw format_error("grouped expert routing is not supported (only Qwen3-MoE's softmax top-k)",
                         f.where_key(key(k)));
  if (f.contains(key("expert_gating_func"))) {
    const auto g = f.get_int(key("expert_gating_func"));
    if (g != 0 && g != 1)
      throw format_error("expert gating function " + std::to_string(g) +
                             " is not supported (supported: 1, softmax over the expert logits)",
                         f.where_key(key("expert_gating_func")));
  }
  if (f.contains(key("expert_weights_scale")) && f.get_float(key("expert_weights_scale")) != 1.0)
    throw format_error("scaled expert weights are not supported (Qwen3-MoE uses 1)",
                       f.where_key(key("expert_weights_scale")));
  m.norm_topk_prob = f.get_bool(key("expert_weights_norm"), true);

  // Every layer needs a tensor: bound the count before allocating per layer.
  if (static_cast<std::size_t>(c.num_layers) > f.tensors().size())
    throw format_error("missing tensor", f.where_tensor("blk." + std::to_string(c.num_layers - 1) + ".attn_norm.weight"));
  m.sparse_layers.assign(static_cast<std::size_t>(c.num_layers), false);
  int dense = -1;
  for (int l = 0; l < c.num_layers; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    if (f.find_tensor(p + "ffn_gate_inp.weight")) {
      m.sparse_layers[static_cast<std::size_t>(l)] = true;
    } else if (f.find_tensor(p + "ffn_gate.weight")) {
      if (dense < 0) dense = l;
    } else {
      throw format_error("missing tensor (a qwen3moe layer holds the router ffn_gate_inp, or the dense ffn_gate)",
                         f.where_tensor(p + "ffn_gate_inp.weight"));
    }
  }
  if (dense >= 0 && c.intermediate_size <= 0)
    throw format_error("missing or not positive, but layer " + std::to_string(dense) +
                           " is dense (no ffn_gate_inp router)",
                       f.where_key(key("feed_forward_length")));
}

bool identical_tensors(const gguf::File& f, const gguf::TensorInfo& a, const gguf::TensorInfo& b) {
  if (a.type != b.type || a.shape != b.shape || a.size != b.size) return false;
  const auto da = f.tensor_data(a), db = f.tensor_data(b);
  return std::memcmp(da.data(), db.data(), da.size()) == 0;
}

}  // namespace

Config config_from_gguf(const gguf::File& f) {
  Config c;
  const std::string& arch = f.get_string("general.architecture");
  if (arch == "llama") {
    c.arch = Arch::llama;
    c.rope_style = RopeStyle::interleaved;
  } else if (arch == "qwen2") {
    c.arch = Arch::qwen2;
    c.rope_style = RopeStyle::neox;
  } else if (arch == "qwen3") {
    c.arch = Arch::qwen3;
    c.rope_style = RopeStyle::neox;
  } else if (arch == "qwen3moe") {
    c.arch = Arch::qwen3moe;
    c.rope_style = RopeStyle::neox;
  } else {
    throw format_error("unsupported architecture '" + arch + "' (supported: llama, qwen2, qwen3, qwen3moe)",
                       f.where_key("general.architecture"));
  }
  refuse_unsupported_expert_tensors(f, c.arch);
  const std::string a = arch + ".";
  auto key = [&](const char* k) { return a + k; };
  c.name = f.get_string("general.name", "");
  auto positive = [&](const std::string& k, int v) {
    if (v <= 0) throw format_error("must be positive, got " + std::to_string(v), f.where_key(k));
    return v;
  };
  c.num_layers = positive(key("block_count"), f.get_int32(key("block_count")));
  c.hidden_size = positive(key("embedding_length"), f.get_int32(key("embedding_length")));
  if (c.arch == Arch::qwen3moe) {
    c.intermediate_size = f.get_int32(key("feed_forward_length"), 0);  // dense layers only (read_moe)
  } else {
    c.intermediate_size = positive(key("feed_forward_length"), f.get_int32(key("feed_forward_length")));
    if (f.contains(key("expert_count")) && f.get_int(key("expert_count")) != 0)
      throw format_error("mixture of experts is supported only for architecture qwen3moe, not " + arch,
                         f.where_key(key("expert_count")));
  }
  c.num_heads = positive(key("attention.head_count"), f.get_int32(key("attention.head_count")));
  c.num_kv_heads = positive(key("attention.head_count_kv"),
                            f.get_int32(key("attention.head_count_kv"), c.num_heads));
  if (c.num_heads % c.num_kv_heads != 0)
    throw format_error("head_count " + std::to_string(c.num_heads) + " is not a multiple of head_count_kv " +
                           std::to_string(c.num_kv_heads),
                       f.where_key(key("attention.head_count_kv")));
  if (f.contains(key("attention.key_length"))) {
    c.head_dim = positive(key("attention.key_length"), f.get_int32(key("attention.key_length")));
  } else {
    if (c.hidden_size % c.num_heads != 0)
      throw format_error("embedding_length is not a multiple of head_count and key_length is absent",
                         f.where_key(key("embedding_length")));
    c.head_dim = c.hidden_size / c.num_heads;
  }
  if (f.contains(key("attention.value_length")) && f.get_int32(key("attention.value_length")) != c.head_dim)
    throw format_error("value_length differs from the key length " + std::to_string(c.head_dim) +
                           " (unsupported)",
                       f.where_key(key("attention.value_length")));
  if (f.contains(key("rope.dimension_count")) && f.get_int32(key("rope.dimension_count")) != c.head_dim)
    throw format_error("partial rotary embedding (dimension_count " +
                           std::to_string(f.get_int32(key("rope.dimension_count"))) + " != head dim " +
                           std::to_string(c.head_dim) + ") is not supported",
                       f.where_key(key("rope.dimension_count")));
  if (c.head_dim % 2 != 0)
    throw format_error("odd head dimension " + std::to_string(c.head_dim), f.where_key(key("attention.key_length")));
  c.max_position = f.get_int32(key("context_length"), 0);  // 0: not given
  if (c.max_position < 0)
    throw format_error("must not be negative, got " + std::to_string(c.max_position),
                       f.where_key(key("context_length")));
  // Every float the model reads: finite and positive (NaN, infinity, 0 and
  // negatives are refused, naming the key).
  auto positive_float = [&](const std::string& k, double fallback) {
    const double v = f.get_float(k, fallback);
    if (!(v > 0.0) || !std::isfinite(v))
      throw format_error("must be positive and finite, got " + std::to_string(v), f.where_key(k));
    return v;
  };
  c.rms_eps = positive_float(key("attention.layer_norm_rms_epsilon"), 1e-5);
  c.rope_theta = positive_float(key("rope.freq_base"), 10000.0);

  const std::string stype = f.get_string(key("rope.scaling.type"), "none");
  if (stype == "linear") {
    c.rope_scaling.type = "linear";
    c.rope_scaling.factor = positive_float(key("rope.scaling.factor"), 1.0);
  } else if (stype != "none") {
    throw format_error("unsupported RoPE scaling type '" + stype + "' (supported: none, linear)",
                       f.where_key(key("rope.scaling.type")));
  }
  if (const auto* rf = f.find_tensor("rope_freqs.weight")) {
    const std::string where = f.where_tensor("rope_freqs.weight");
    if (rf->elements() != static_cast<std::uint64_t>(c.head_dim / 2) || rf->ggml_type() != GgmlType::f32)
      throw format_error("expected " + std::to_string(c.head_dim / 2) + " F32 frequency factors", where);
    if (c.rope_scaling.type != "none")
      throw format_error("frequency factors combined with rope.scaling.type '" + stype + "'", where);
    std::vector<float> ff(static_cast<std::size_t>(rf->elements()));
    dequantize(GgmlType::f32, f.tensor_data(*rf), ff);
    const int old_ctx = f.get_int32(key("rope.scaling.original_context_length"), 8192);
    c.rope_scaling = llama3_from_factors(ff, c, old_ctx, where);
  }

  // Vocabulary: <arch>.vocab_size, else the token list, else the embedding.
  const gguf::TensorInfo* emb = f.find_tensor("token_embd.weight");
  if (f.contains(key("vocab_size"))) {
    c.vocab_size = positive(key("vocab_size"), f.get_int32(key("vocab_size")));
  } else if (const auto* tok = f.find("tokenizer.ggml.tokens"); tok && tok->is_array()) {
    c.vocab_size = static_cast<int>(std::min<std::size_t>(tok->array_size(), 0x7fffffff));
  } else if (emb && emb->shape.size() == 2 && emb->shape[1] <= 0x7fffffffu) {
    c.vocab_size = static_cast<int>(emb->shape[1]);
  }
  if (c.vocab_size <= 0)
    throw format_error("no vocabulary size (no vocab_size key, token list or embedding)", f.where_key(key("vocab_size")));

  const gguf::TensorInfo* out = f.find_tensor("output.weight");
  c.tie_embeddings = out == nullptr || (emb != nullptr && f.mapped() && identical_tensors(f, *emb, *out));
  c.qkv_bias = c.arch == Arch::qwen2 || f.find_tensor("blk.0.attn_q.bias") != nullptr;
  c.qk_norm = c.arch == Arch::qwen3 || c.arch == Arch::qwen3moe;
  if (c.arch == Arch::qwen3moe) read_moe(f, c, a);
  detail::check_config(c, f.path().string());
  return c;
}

Weights weights_from_gguf(const gguf::File& f, const Config& c) {
  for (const auto& t : f.tensors()) {
    const long l = layer_index(t.name, "blk.");
    if (l >= c.num_layers)
      throw format_error("tensor of layer " + std::to_string(l) + " but the model has " +
                             std::to_string(c.num_layers) + " layers",
                         f.where_tensor(t.name));
  }
  detail::TensorNames names;
  names.embedding = "token_embd.weight";
  names.final_norm = "output_norm.weight";
  names.output = "output.weight";
  names.layer_prefix = "blk.";
  names.roles = {{"attn_norm", "attn_norm.weight"}, {"q", "attn_q.weight"},       {"k", "attn_k.weight"},
                 {"v", "attn_v.weight"},            {"o", "attn_output.weight"},  {"q_bias", "attn_q.bias"},
                 {"k_bias", "attn_k.bias"},         {"v_bias", "attn_v.bias"},    {"q_norm", "attn_q_norm.weight"},
                 {"k_norm", "attn_k_norm.weight"},  {"ffn_norm", "ffn_norm.weight"}, {"gate", "ffn_gate.weight"},
                 {"up", "ffn_up.weight"},           {"down", "ffn_down.weight"},
                 {"router", "ffn_gate_inp.weight"}, {"gate_exps", "ffn_gate_exps.weight"},
                 {"up_exps", "ffn_up_exps.weight"}, {"down_exps", "ffn_down_exps.weight"}};
  detail::WeightOptions opt;
  opt.output = !c.tie_embeddings;
  opt.qkv_bias = c.qkv_bias;
  opt.qk_norm = c.qk_norm;
  return detail::fill_weights(GgufSource(f), c, names, opt);
}

Checkpoint read_gguf(const std::filesystem::path& path) {
  gguf::File f(path);
  Checkpoint ck;
  ck.config = config_from_gguf(f);
  ck.tokenizer = tokenizer_spec_from_gguf(f);
  ck.weights = weights_from_gguf(f, ck.config);
  f.release();
  ck.source = std::filesystem::absolute(path);
  ck.files = {ck.source};
  ck.fingerprint = fingerprint(ck.files);
  return ck;
}

}  // namespace bosch::model
