// The whole-forward tolerance of the CUDA tests (see the top of
// forward_test.cpp for its derivation): CUDA logits against fp32 CPU logits,
// calibrated by how much rounding the weights alone to the 16-bit type moves
// the CPU's logits; for Qwen3-MoE, inputs whose routing is decisive. Shared
// by forward_test.cpp and decode_test.cpp.
#pragma once

#include "../cpu/reference.hpp"
#include "../cpu/tiny_model.hpp"
#include "cuda_support.hpp"

#include <bosch/cuda/half.hpp>
#include <bosch/model/model.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

namespace bosch::test {

using cuda::DType;

/// Rounds every value of `m` to `t`.
inline void round_matrix(model::Matrix& m, DType t) {
  for (auto& x : m.data) x = cuda::round_to(x, t);
}

/// The model with every GEMM weight and the embedding rounded to `t` (norm
/// gains, biases and the Qwen3-MoE router stay fp32, as on the device: the
/// router runs on the host).
inline model::Model rounded_weights(model::Model m, DType t) {
  round_matrix(m.weights.embedding, t);
  round_matrix(m.weights.lm_head, t);
  for (auto& l : m.weights.layers) {
    for (auto* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down, &l.gate_exps, &l.up_exps,
                    &l.down_exps})
      round_matrix(*w, t);
  }
  return m;
}

/// n random tokens (the first of `tries` seeds from `seed`) whose routing in
/// every sparse layer of `m` under `w` is decisive: the naive reference's
/// k-th and (k+1)-th router logits at least `margin` apart for every token.
/// The CUDA residual differs from the CPU's by 16-bit rounding (about 1e-2
/// relative), which moves router logits of magnitude ~3 by a few 1e-2: a
/// margin of 0.25 keeps both backends on the same experts, so a comparison
/// tests the experts' arithmetic, not a coin flip at a near tie.
inline std::vector<int> decisive_tokens(const model::Model& m, int n, const AttentionWindows& w, double margin,
                                        std::uint64_t seed, int tries = 2000) {
  for (int t = 0; t < tries; ++t) {
    auto tokens = random_tokens(n, m.config.vocab_size, seed + static_cast<std::uint64_t>(t));
    double got = 0;
    (void)reference_logits(m, tokens, w, {}, nullptr, nullptr, &got);
    if (got >= margin) return tokens;
  }
  FAIL("no decisive token sequence among " << tries << " seeds");
  return {};
}

/// Largest and mean |a - b| of two logit vectors.
struct ErrorStats {
  double max = 0;
  double mean = 0;
};

inline ErrorStats error_stats(const std::vector<float>& a, const std::vector<float>& b) {
  ErrorStats s;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double e = std::abs(static_cast<double>(a[i]) - b[i]);
    s.max = std::max(s.max, e);
    s.mean += e;
  }
  if (!a.empty()) s.mean /= static_cast<double>(a.size());
  return s;
}

/// Checks CUDA logits `got` against the fp32 reference `ref` of `model`,
/// calibrated as described at the top of forward_test.cpp. `vocab` = row length.
inline void check_logits(const std::string& name, const std::vector<float>& got,
                  const std::vector<float>& ref, const std::vector<float>& ref_rounded, int vocab,
                  DType t) {
  REQUIRE(got.size() == ref.size());
  const double u = cuda::unit_roundoff(t);
  const double scale = test::rms(ref);
  const ErrorStats w = error_stats(ref_rounded, ref);
  const test::Tolerance tol{4 * w.max + 2 * u * scale, u};
  MESSAGE(name << ": weight rounding alone moves logits by max " << w.max << ", mean " << w.mean
               << " (rms of logits " << scale << ")");
  test::check_close(name, got, ref, tol);
  const ErrorStats e = error_stats(got, ref);
  const double mean_limit = 4 * w.mean + 0.5 * u * scale;
  MESSAGE(name << ": mean |err| " << e.mean << " = " << 100.0 * e.mean / mean_limit
               << "% of its limit " << mean_limit);
  CHECK(e.mean <= mean_limit);
  // Argmax agreement where the reference is decisive.
  std::size_t decisive = 0, agree = 0;
  for (std::size_t r = 0; r + static_cast<std::size_t>(vocab) <= ref.size(); r += static_cast<std::size_t>(vocab)) {
    std::vector<float> row(ref.begin() + static_cast<std::ptrdiff_t>(r),
                           ref.begin() + static_cast<std::ptrdiff_t>(r) + vocab);
    const auto top = std::max_element(row.begin(), row.end()) - row.begin();
    std::nth_element(row.begin(), row.begin() + 1, row.end(), std::greater<>());
    if (row[0] - row[1] <= 2 * (tol.atol + tol.rtol * std::abs(row[0]))) continue;
    ++decisive;
    const auto g0 = got.begin() + static_cast<std::ptrdiff_t>(r);
    agree += (std::max_element(g0, g0 + vocab) - g0) == top;
  }
  MESSAGE(name << ": argmax agrees at " << agree << " of " << decisive << " decisive rows");
  CHECK(agree == decisive);
}

}  // namespace bosch::test
