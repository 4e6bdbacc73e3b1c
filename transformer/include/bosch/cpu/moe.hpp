// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file cpu/moe.hpp
/// The mixture-of-experts feed-forward of Qwen3-MoE on the CPU
/// (model::MoeConfig; docs/architectures.md): top-k routing, then every
/// expert's SwiGLU on the rows routed to it as a few Eigen GEMMs, and the
/// weighted sum of each row's experts. decoder_layer (cpu/layer.hpp) runs
/// moe_ffn in the sparse layers, so every entry point of the backend gets it;
/// the CUDA backend reuses route_top_k for its host-side routing.

#include <bosch/model/config.hpp>
#include <bosch/model/weights.hpp>

#include <cstddef>
#include <vector>

namespace bosch::cpu {

/// Where each row goes: its top_k experts in order of falling probability,
/// with their weights, and the same assignments grouped by expert.
/// Assignment (r, j), the j-th expert of row r, is slot r * top_k + j.
struct Routing {
  int top_k = 0;
  int num_experts = 0;
  std::vector<int> expert;    ///< [rows * top_k] expert of each slot
  std::vector<float> weight;  ///< [rows * top_k] weight of each slot
  /// [num_experts + 1]: expert e's assignments are grouped positions
  /// [offsets[e], offsets[e + 1]).
  std::vector<int> offsets;
  std::vector<int> row_of;   ///< [rows * top_k] row of each grouped position (rows ascending per expert)
  std::vector<int> position; ///< [rows * top_k] grouped position of each slot
};

/// Routes `rows` rows with router logits `logits` ([rows, num_experts],
/// row-major): per row p = softmax(logits) (in double), the top_k largest
/// p (ties: the lower expert index), weights p or, when `normalize`,
/// p / (sum of the chosen p). Fills `out` (resized). Requires
/// 1 <= top_k <= num_experts (not re-checked). Rows are split over the
/// OpenMP threads in force; the result does not depend on their number.
void route_top_k(const float* logits, std::size_t rows, int num_experts, int top_k, bool normalize,
                 Routing& out);

/// Reused buffers of moe_ffn (grown on demand, kept between layers).
struct MoeScratch {
  std::vector<float> logits;  ///< [rows, E] router logits
  std::vector<float> rows;    ///< [rows * k, hidden]: gathered inputs, then expert outputs
  std::vector<float> act;     ///< [rows * k, F]: silu(gate) * up
  Routing routing;
};

/// y = the mixture-of-experts FFN of sparse layer weights `layer` applied to
/// `rows` rows of h ([rows, hidden], already through the FFN norm):
/// y[r] = sum_j weight(r, j) * down_e(silu(gate_e h[r]) * up_e h[r]) over the
/// row's top_k experts e, summed in order of falling weight (fp32). The
/// router is one GEMM; each expert's rows form one GEMM per matrix (split in
/// blocks of rows and columns over the OpenMP threads, each a serial Eigen
/// GEMM), so the cost is that of the active experts only. The expert blocks
/// do not depend on the thread count (the router GEMM's split may, as in
/// every cpu::linear); the same input and thread count give the same bits.
/// `y` may equal `h`. The weights must fit `config` (model::validate).
void moe_ffn(const float* h, std::size_t rows, const model::LayerWeights& layer, const model::Config& config,
             MoeScratch& scratch, float* y);

}  // namespace bosch::cpu
