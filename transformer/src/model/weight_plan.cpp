// SPDX-License-Identifier: Apache-2.0
// Filling Weights from a tensor source (see weight_plan.hpp).

#include "weight_plan.hpp"

#include <bosch/error.hpp>
#include <bosch/model/validate.hpp>


namespace bosch::model::detail {

std::string shape_text(const std::vector<std::uint64_t>& shape) {
  std::string s = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

void check_config(const Config& c, const std::string& where) {
  try {
    validate(c, where);
  } catch (const invalid_argument& e) {
    throw format_error(e.message(), e.where());
  }
}

std::string TensorNames::layer(int l, const std::string& role) const {
  for (const auto& [r, suffix] : roles)
    if (r == role) return layer_prefix + std::to_string(l) + "." + suffix;
  return layer_prefix + std::to_string(l) + "." + role;
}

std::string TensorNames::expert(int l, const std::string& role, int e) const {
  std::string name = layer(l, role);
  const auto at = name.find("{e}");
  if (at != std::string::npos) name.replace(at, 3, std::to_string(e));
  return name;
}

bool TensorNames::per_expert(const std::string& role) const {
  return layer(0, role).find("{e}") != std::string::npos;
}

namespace {

/// One tensor to read: into a vector, or into a matrix of `rows` x `cols`
/// starting at float `offset` (a stacked expert matrix gets one job per
/// expert from Hugging Face files, one job for all experts from GGUF).
struct Job {
  std::string name;
  std::vector<std::uint64_t> shape;  // expected, slowest first
  std::vector<float>* vec = nullptr;
  Matrix* mat = nullptr;
  std::uint64_t rows = 0, cols = 0;  // of *mat
  std::uint64_t offset = 0;          // floats into *mat
};

/// Shapes equal up to leading dimensions of size 1 on either side.
bool same_shape(std::vector<std::uint64_t> a, std::vector<std::uint64_t> b) {
  auto strip = [](std::vector<std::uint64_t>& s) {
    std::size_t i = 0;
    while (i + 1 < s.size() && s[i] == 1) ++i;
    s.erase(s.begin(), s.begin() + static_cast<std::ptrdiff_t>(i));
  };
  strip(a);
  strip(b);
  return a == b;
}

}  // namespace

Weights fill_weights(const TensorSource& src, const Config& c, const TensorNames& names,
                     const WeightOptions& opt) {
  // Bound the layer count by the tensors really present before allocating
  // per-layer structures (a corrupt block_count could be 2^31 - 1).
  for (int l = 0; l < c.num_layers; ++l)
    if (!src.has(names.layer(l, "attn_norm")))
      throw format_error("missing tensor", src.where_tensor(names.layer(l, "attn_norm")));
  Weights w;
  w.layers.resize(static_cast<std::size_t>(c.num_layers));
  const auto V = static_cast<std::uint64_t>(c.vocab_size), D = static_cast<std::uint64_t>(c.hidden_size),
             F = static_cast<std::uint64_t>(c.intermediate_size),
             Q = static_cast<std::uint64_t>(c.num_heads) * static_cast<std::uint64_t>(c.head_dim),
             K = static_cast<std::uint64_t>(c.num_kv_heads) * static_cast<std::uint64_t>(c.head_dim),
             d = static_cast<std::uint64_t>(c.head_dim);
  std::vector<Job> jobs;
  auto mat = [&](const std::string& n, Matrix& m, std::uint64_t rows, std::uint64_t cols) {
    jobs.push_back({n, {rows, cols}, nullptr, &m, rows, cols, 0});
  };
  auto vec = [&](const std::string& n, std::vector<float>& v, std::uint64_t len) {
    jobs.push_back({n, {len}, &v, nullptr, 0, 0, 0});
  };
  const auto E = static_cast<std::uint64_t>(c.moe.num_experts),
             FE = static_cast<std::uint64_t>(c.moe.expert_intermediate_size);
  // The experts of `role` stacked into m: E matrices of rows x cols.
  auto experts = [&](int l, const char* role, Matrix& m, std::uint64_t rows, std::uint64_t cols) {
    if (!names.per_expert(role)) {
      jobs.push_back({names.layer(l, role), {E, rows, cols}, nullptr, &m, E * rows, cols, 0});
      return;
    }
    for (std::uint64_t e = 0; e < E; ++e) {
      const std::string n = names.expert(l, role, static_cast<int>(e));
      // Checked here, not in pass 1: a corrupt expert count must not make
      // millions of jobs before the first missing tensor is noticed.
      if (!src.has(n)) throw format_error("missing tensor", src.where_tensor(n));
      jobs.push_back({n, {rows, cols}, nullptr, &m, E * rows, cols, e * rows * cols});
    }
  };
  mat(names.embedding, w.embedding, V, D);
  for (int l = 0; l < c.num_layers; ++l) {
    auto& L = w.layers[static_cast<std::size_t>(l)];
    auto n = [&](const char* role) { return names.layer(l, role); };
    vec(n("attn_norm"), L.attn_norm, D);
    mat(n("q"), L.wq, Q, D);
    mat(n("k"), L.wk, K, D);
    mat(n("v"), L.wv, K, D);
    mat(n("o"), L.wo, D, Q);
    if (opt.qkv_bias) {
      vec(n("q_bias"), L.bq, Q);
      vec(n("k_bias"), L.bk, K);
      vec(n("v_bias"), L.bv, K);
    }
    if (opt.qk_norm) {
      vec(n("q_norm"), L.q_norm, d);
      vec(n("k_norm"), L.k_norm, d);
    }
    vec(n("ffn_norm"), L.ffn_norm, D);
    if (c.is_sparse_layer(l)) {
      mat(n("router"), L.router, E, D);
      experts(l, "gate_exps", L.gate_exps, FE, D);
      experts(l, "up_exps", L.up_exps, FE, D);
      experts(l, "down_exps", L.down_exps, D, FE);
    } else {
      mat(n("gate"), L.w_gate, F, D);
      mat(n("up"), L.w_up, F, D);
      mat(n("down"), L.w_down, D, F);
    }
  }
  vec(names.final_norm, w.final_norm, D);
  if (opt.output) mat(names.output, w.lm_head, V, D);

  // Pass 1: everything present, convertible and of the configured shape.
  for (const Job& j : jobs) {
    if (!src.has(j.name)) throw format_error("missing tensor", src.where_tensor(j.name));
    src.check_convertible(j.name);
    const auto s = src.shape(j.name);
    if (!same_shape(s, j.shape))
      throw format_error("shape " + shape_text(s) + " does not match the configuration (expected " +
                             shape_text(j.shape) + ")",
                         src.where_tensor(j.name));
  }
  // Pass 2: allocate and convert straight into the destination buffers.
  for (const Job& j : jobs) {
    std::uint64_t n = 1;
    for (auto x : j.shape) n *= x;
    if (j.mat) {
      if (j.mat->data.empty()) {  // the first job of this matrix
        j.mat->rows = static_cast<int>(j.rows);
        j.mat->cols = static_cast<int>(j.cols);
        j.mat->data.resize(static_cast<std::size_t>(j.rows * j.cols));
      }
      src.read(j.name, std::span<float>(j.mat->data).subspan(static_cast<std::size_t>(j.offset),
                                                              static_cast<std::size_t>(n)));
    } else {
      j.vec->resize(static_cast<std::size_t>(n));
      src.read(j.name, *j.vec);
    }
  }
  return w;
}

}  // namespace bosch::model::detail
