// SPDX-License-Identifier: Apache-2.0
// bosch::model::validate: the one model check (see model/validate.hpp).

#include <bosch/error.hpp>
#include <bosch/model/validate.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

namespace bosch::model {
namespace {

constexpr int max_experts = 1 << 16;

std::string label(const std::string& source, const Config& c) {
  if (!source.empty()) return source;
  if (!c.name.empty()) return "model '" + c.name + "'";
  return "model";
}

std::string shape_text(std::size_t rows, std::size_t cols) {
  return "[" + std::to_string(rows) + ", " + std::to_string(cols) + "]";
}

struct TensorCheck {
  std::string model;
  void matrix(const Matrix& m, int rows, int cols, const std::string& name) const {
    if (m.rows != rows || m.cols != cols ||
        m.data.size() != static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols))
      throw invalid_argument("shape " + shape_text(m.rows, m.cols) + " with " + std::to_string(m.data.size()) +
                                 " values, expected " + shape_text(rows, cols),
                             model + ": tensor '" + name + "'");
  }
  void vector(const std::vector<float>& v, std::size_t size, const std::string& name) const {
    if (v.size() != size)
      throw invalid_argument(std::to_string(v.size()) + " values, expected " + std::to_string(size),
                             model + ": tensor '" + name + "'");
  }
};

/// The mixture-of-experts fields: none outside qwen3moe; E, k and the expert
/// size positive, k <= E, one sparse_layers entry per layer.
void validate_moe(const Config& c, const std::string& where) {
  const MoeConfig& m = c.moe;
  if (m.num_experts == 0 && m.sparse_layers.empty()) return;
  if (c.arch != Arch::qwen3moe)
    throw invalid_argument(std::string("mixture of experts is supported only for qwen3moe, not ") + to_string(c.arch),
                           where + "moe.num_experts");
  if (m.num_experts <= 0 || m.num_experts > max_experts)
    throw invalid_argument("must be in [1, " + std::to_string(max_experts) + "], got " +
                               std::to_string(m.num_experts),
                           where + "moe.num_experts");
  if (m.num_experts_used <= 0 || m.num_experts_used > m.num_experts)
    throw invalid_argument("must be in [1, num_experts = " + std::to_string(m.num_experts) + "], got " +
                               std::to_string(m.num_experts_used),
                           where + "moe.num_experts_used");
  if (m.expert_intermediate_size <= 0)
    throw invalid_argument("must be positive, got " + std::to_string(m.expert_intermediate_size),
                           where + "moe.expert_intermediate_size");
  if (m.sparse_layers.size() != static_cast<std::size_t>(c.num_layers))
    throw invalid_argument(std::to_string(m.sparse_layers.size()) + " entries for " + std::to_string(c.num_layers) +
                               " layers",
                           where + "moe.sparse_layers");
  // Stacked expert matrices are indexed with int rows.
  const auto rows = static_cast<std::uint64_t>(m.num_experts) *
                    static_cast<std::uint64_t>(std::max(c.hidden_size, m.expert_intermediate_size));
  if (rows > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
    throw invalid_argument("num_experts * max(hidden_size, expert_intermediate_size) overflows int",
                           where + "moe.num_experts");
}

}  // namespace

void validate(const Config& c, const std::string& source) {
  const std::string where = label(source, c) + ": ";
  auto positive = [&](int v, const char* field) {
    if (v <= 0) throw invalid_argument("must be positive, got " + std::to_string(v), where + field);
  };
  positive(c.vocab_size, "vocab_size");
  positive(c.hidden_size, "hidden_size");
  positive(c.num_layers, "num_layers");
  validate_moe(c, where);
  if (c.has_dense_layer()) positive(c.intermediate_size, "intermediate_size");
  positive(c.num_heads, "num_heads");
  positive(c.num_kv_heads, "num_kv_heads");
  positive(c.head_dim, "head_dim");
  if (c.num_heads % c.num_kv_heads != 0)
    throw invalid_argument("num_heads " + std::to_string(c.num_heads) + " is not a multiple of num_kv_heads " +
                               std::to_string(c.num_kv_heads),
                           where + "num_kv_heads");
  if (c.head_dim % 2 != 0)
    throw invalid_argument("head_dim " + std::to_string(c.head_dim) + " is odd (RoPE rotates pairs)",
                           where + "head_dim");
  // Every matrix must be indexable with int rows/cols.
  const auto qdim = static_cast<std::uint64_t>(c.num_heads) * static_cast<std::uint64_t>(c.head_dim);
  if (qdim > static_cast<std::uint64_t>(std::numeric_limits<int>::max()))
    throw invalid_argument("num_heads * head_dim overflows int", where + "head_dim");
  if (!(c.rms_eps > 0.0) || !std::isfinite(c.rms_eps))
    throw invalid_argument("must be positive and finite, got " + std::to_string(c.rms_eps), where + "rms_eps");
  try {
    (void)rope_inv_freq(c);  // theta and scaling
  } catch (const invalid_argument& e) {
    throw invalid_argument(e.message(), where + e.where());
  }
}

void validate(const Model& model) {
  const auto& c = model.config;
  const std::string name = label(model.source.string(), c);
  validate(c, name);
  const TensorCheck check{name};
  const auto& w = model.weights;
  const int d = c.hidden_size, hd = c.head_dim;
  const int qd = c.num_heads * hd, kvd = c.num_kv_heads * hd, ff = c.intermediate_size;
  check.matrix(w.embedding, c.vocab_size, d, "token_embd");
  if (!w.lm_head.empty()) check.matrix(w.lm_head, c.vocab_size, d, "output");
  check.vector(w.final_norm, static_cast<std::size_t>(d), "output_norm");
  if (w.layers.size() != static_cast<std::size_t>(c.num_layers))
    throw invalid_argument("weights hold " + std::to_string(w.layers.size()) + " layers, config says " +
                               std::to_string(c.num_layers),
                           name + ": num_layers");
  const std::size_t bias = c.qkv_bias ? 1 : 0, norm = c.qk_norm ? 1 : 0;
  for (int l = 0; l < c.num_layers; ++l) {
    const auto& L = w.layers[static_cast<std::size_t>(l)];
    const std::string p = "blk." + std::to_string(l) + ".";
    check.vector(L.attn_norm, static_cast<std::size_t>(d), p + "attn_norm");
    check.matrix(L.wq, qd, d, p + "attn_q");
    check.matrix(L.wk, kvd, d, p + "attn_k");
    check.matrix(L.wv, kvd, d, p + "attn_v");
    check.matrix(L.wo, d, qd, p + "attn_output");
    check.vector(L.bq, bias * qd, p + "attn_q.bias");
    check.vector(L.bk, bias * kvd, p + "attn_k.bias");
    check.vector(L.bv, bias * kvd, p + "attn_v.bias");
    check.vector(L.q_norm, norm * hd, p + "attn_q_norm");
    check.vector(L.k_norm, norm * hd, p + "attn_k_norm");
    check.vector(L.ffn_norm, static_cast<std::size_t>(d), p + "ffn_norm");
    const bool sparse = c.is_sparse_layer(l);
    const int E = sparse ? c.moe.num_experts : 0, F = sparse ? c.moe.expert_intermediate_size : 0;
    const int dense_ff = sparse ? 0 : ff, dense_d = sparse ? 0 : d;
    check.matrix(L.w_gate, dense_ff, dense_d, p + "ffn_gate");
    check.matrix(L.w_up, dense_ff, dense_d, p + "ffn_up");
    check.matrix(L.w_down, dense_d, dense_ff, p + "ffn_down");
    check.matrix(L.router, E, sparse ? d : 0, p + "ffn_gate_inp");
    check.matrix(L.gate_exps, E * F, sparse ? d : 0, p + "ffn_gate_exps");
    check.matrix(L.up_exps, E * F, sparse ? d : 0, p + "ffn_up_exps");
    check.matrix(L.down_exps, E * d, F, p + "ffn_down_exps");
  }
}

}  // namespace bosch::model
