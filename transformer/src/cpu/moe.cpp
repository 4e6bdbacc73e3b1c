// SPDX-License-Identifier: Apache-2.0
// bosch::cpu::moe_ffn and route_top_k: Qwen3-MoE's feed-forward block (see
// cpu/moe.hpp).

#include <bosch/cpu/kernels.hpp>
#include <bosch/cpu/moe.hpp>

#include "eigen.hpp"
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>

namespace bosch::cpu {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstMap = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;
using Map = Eigen::Map<RowMatrix, 0, Eigen::OuterStride<>>;

// Work items of the expert GEMMs: a block of at most `row_block` rows of one
// expert by a block of at most `col_block` output columns. The blocks depend
// only on the routing, never on the thread count, so each item is the same
// serial Eigen GEMM whichever thread runs it. 128 x 256 keeps Eigen's serial
// GEMM near its best rate while one decoded token (a row per expert) still
// splits into (k x columns / 256) items.
constexpr int row_block = 128;
constexpr int col_block = 256;

struct Item {
  int expert;
  int p0;  // first grouped position
  int rows;
  int c0;  // first output column
  int cols;
};

std::vector<Item> plan_items(const Routing& r, int out_cols) {
  std::vector<Item> items;
  for (int e = 0; e < r.num_experts; ++e)
    for (int p = r.offsets[static_cast<std::size_t>(e)]; p < r.offsets[static_cast<std::size_t>(e) + 1];
         p += row_block) {
      const int rows = std::min(row_block, r.offsets[static_cast<std::size_t>(e) + 1] - p);
      for (int c = 0; c < out_cols; c += col_block) items.push_back({e, p, rows, c, std::min(col_block, out_cols - c)});
    }
  return items;
}

}  // namespace

void route_top_k(const float* logits, std::size_t rows, int num_experts, int top_k, bool normalize,
                 Routing& out) {
  const auto E = static_cast<std::size_t>(num_experts), k = static_cast<std::size_t>(top_k);
  out.top_k = top_k;
  out.num_experts = num_experts;
  out.expert.resize(rows * k);
  out.weight.resize(rows * k);
  const auto n = static_cast<std::ptrdiff_t>(rows);
#pragma omp parallel if (rows * E > 4096)
  {
    std::vector<double> p(E);
    std::vector<int> order(E);
#pragma omp for schedule(static)
    for (std::ptrdiff_t r = 0; r < n; ++r) {
      const float* z = logits + static_cast<std::size_t>(r) * E;
      const double mx = *std::max_element(z, z + E);
      double sum = 0.0;
      for (std::size_t e = 0; e < E; ++e) sum += p[e] = std::exp(static_cast<double>(z[e]) - mx);
      std::iota(order.begin(), order.end(), 0);
      std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                        [&](int a, int b) { return p[static_cast<std::size_t>(a)] > p[static_cast<std::size_t>(b)] ||
                                                   (p[static_cast<std::size_t>(a)] == p[static_cast<std::size_t>(b)] && a < b); });
      double chosen = 0.0;
      for (std::size_t j = 0; j < k; ++j) chosen += p[static_cast<std::size_t>(order[j])];
      const double scale = normalize ? 1.0 / chosen : 1.0 / sum;
      for (std::size_t j = 0; j < k; ++j) {
        const std::size_t slot = static_cast<std::size_t>(r) * k + j;
        out.expert[slot] = order[j];
        out.weight[slot] = static_cast<float>(p[static_cast<std::size_t>(order[j])] * scale);
      }
    }
  }
  // Group the slots by expert (a counting sort: rows ascending per expert).
  out.offsets.assign(E + 1, 0);
  for (int e : out.expert) ++out.offsets[static_cast<std::size_t>(e) + 1];
  for (std::size_t e = 0; e < E; ++e) out.offsets[e + 1] += out.offsets[e];
  std::vector<int> next(out.offsets.begin(), out.offsets.end() - 1);
  out.row_of.resize(rows * k);
  out.position.resize(rows * k);
  for (std::size_t slot = 0; slot < rows * k; ++slot) {
    const int at = next[static_cast<std::size_t>(out.expert[slot])]++;
    out.row_of[static_cast<std::size_t>(at)] = static_cast<int>(slot / k);
    out.position[slot] = at;
  }
}

void moe_ffn(const float* h, std::size_t rows, const model::LayerWeights& L, const model::Config& c,
             MoeScratch& s, float* y) {
  if (rows == 0) return;
  const int E = c.moe.num_experts, k = c.moe.num_experts_used, F = c.moe.expert_intermediate_size;
  const int D = c.hidden_size;
  const auto d = static_cast<std::size_t>(D), f = static_cast<std::size_t>(F);
  const std::size_t slots = rows * static_cast<std::size_t>(k);

  // Router and routing.
  s.logits.resize(rows * static_cast<std::size_t>(E));
  linear(h, rows, L.router, nullptr, s.logits.data());
  Routing& r = s.routing;
  route_top_k(s.logits.data(), rows, E, k, c.moe.norm_topk_prob, r);

  // Gather each expert's rows (grouped order).
  s.rows.resize(slots * d);
  s.act.resize(slots * f);
  const auto n_slots = static_cast<std::ptrdiff_t>(slots);
#pragma omp parallel for schedule(static) if (slots * d > 65536)
  for (std::ptrdiff_t p = 0; p < n_slots; ++p)
    std::copy_n(h + static_cast<std::size_t>(r.row_of[static_cast<std::size_t>(p)]) * d, d,
                s.rows.data() + static_cast<std::size_t>(p) * d);

  // act = silu(X W_gate^T) * (X W_up^T), expert by expert, in blocks.
  const std::vector<Item> up_items = plan_items(r, F);
  const auto n_up = static_cast<std::ptrdiff_t>(up_items.size());
  const double down_flops = 2.0 * static_cast<double>(slots) * static_cast<double>(d) * static_cast<double>(f);
#pragma omp parallel if (n_up > 1 && 2 * down_flops > 2e6)
  {
    RowMatrix gate, up;
#pragma omp for schedule(dynamic, 1)
    for (std::ptrdiff_t t = 0; t < n_up; ++t) {
      const Item& it = up_items[static_cast<std::size_t>(t)];
      const std::size_t w0 = (static_cast<std::size_t>(it.expert) * f + static_cast<std::size_t>(it.c0)) * d;
      ConstMap X(s.rows.data() + static_cast<std::size_t>(it.p0) * d, it.rows, D, Eigen::OuterStride<>(D));
      ConstMap Wg(L.gate_exps.data.data() + w0, it.cols, D, Eigen::OuterStride<>(D));
      ConstMap Wu(L.up_exps.data.data() + w0, it.cols, D, Eigen::OuterStride<>(D));
      gate.noalias() = X * Wg.transpose();
      up.noalias() = X * Wu.transpose();
      for (int i = 0; i < it.rows; ++i) {
        float* g = gate.data() + static_cast<std::size_t>(i) * static_cast<std::size_t>(it.cols);
        silu_mul(g, up.data() + static_cast<std::size_t>(i) * static_cast<std::size_t>(it.cols),
                 static_cast<std::size_t>(it.cols));
        std::copy_n(g, it.cols, s.act.data() + (static_cast<std::size_t>(it.p0 + i)) * f + static_cast<std::size_t>(it.c0));
      }
    }
  }

  // out = act W_down^T, over the gathered inputs (no longer needed).
  const std::vector<Item> down_items = plan_items(r, D);
  const auto n_down = static_cast<std::ptrdiff_t>(down_items.size());
#pragma omp parallel for schedule(dynamic, 1) if (n_down > 1 && down_flops > 2e6)
  for (std::ptrdiff_t t = 0; t < n_down; ++t) {
    const Item& it = down_items[static_cast<std::size_t>(t)];
    const std::size_t w0 = (static_cast<std::size_t>(it.expert) * d + static_cast<std::size_t>(it.c0)) * f;
    ConstMap A(s.act.data() + static_cast<std::size_t>(it.p0) * f, it.rows, F, Eigen::OuterStride<>(F));
    ConstMap Wd(L.down_exps.data.data() + w0, it.cols, F, Eigen::OuterStride<>(F));
    Map O(s.rows.data() + static_cast<std::size_t>(it.p0) * d + static_cast<std::size_t>(it.c0), it.rows, it.cols,
          Eigen::OuterStride<>(D));
    O.noalias() = A * Wd.transpose();
  }

  // y[r] = sum_j w(r, j) out[position(r, j)], in order of falling weight.
  const auto n_rows = static_cast<std::ptrdiff_t>(rows);
#pragma omp parallel for schedule(static) if (slots * d > 65536)
  for (std::ptrdiff_t row = 0; row < n_rows; ++row) {
    float* yr = y + static_cast<std::size_t>(row) * d;
    for (int j = 0; j < k; ++j) {
      const std::size_t slot = static_cast<std::size_t>(row) * static_cast<std::size_t>(k) + static_cast<std::size_t>(j);
      const float w = r.weight[slot];
      const float* o = s.rows.data() + static_cast<std::size_t>(r.position[slot]) * d;
      if (j == 0)
        for (std::size_t e = 0; e < d; ++e) yr[e] = w * o[e];
      else
        for (std::size_t e = 0; e < d; ++e) yr[e] += w * o[e];
    }
  }
}

}  // namespace bosch::cpu
