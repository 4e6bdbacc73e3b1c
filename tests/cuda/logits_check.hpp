// The whole-forward tolerance of the CUDA tests (see the top of
// forward_test.cpp for its derivation): CUDA logits against fp32 CPU logits,
// calibrated by how much rounding the weights alone to the 16-bit type moves
// the CPU's logits. Shared by forward_test.cpp and decode_test.cpp.
#pragma once

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
/// gains and biases stay fp32, as on the device).
inline model::Model rounded_weights(model::Model m, DType t) {
  round_matrix(m.weights.embedding, t);
  round_matrix(m.weights.lm_head, t);
  for (auto& l : m.weights.layers) {
    for (auto* w : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) round_matrix(*w, t);
  }
  return m;
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
