// SPDX-License-Identifier: Apache-2.0
// bosch::cpu::decoder_layer: the one decoder layer (see cpu/layer.hpp).

#include <bosch/cpu/kernels.hpp>
#include <bosch/cpu/layer.hpp>
#include <bosch/cpu/moe.hpp>

#include <algorithm>

namespace bosch::cpu {

namespace {

/// Values of the bf16 input buffer: rows x the widest input's row stride of
/// the products over all rows, or a feed-forward block's down input.
std::size_t bf16_values(const model::Config& c, std::size_t rows) {
  return std::max(rows * bf16_stride(std::max(c.hidden_size, c.num_heads * c.head_dim)),
                  std::min(rows, ffn_block_rows) * bf16_stride(c.intermediate_size));
}

/// The products of one layer, in fp32 or bf16: `input` names the activation
/// the next products read (converted to bf16 once for all of them), `apply`
/// runs one product.
class Products {
 public:
  Products(const Bf16Weights* bf16, Bf16Vector& buffer) : bf16_(bf16), buffer_(buffer) {}

  void input(const float* x, std::size_t rows, int cols) {
    x_ = x;
    rows_ = rows;
    cols_ = static_cast<std::size_t>(cols);
    if (bf16_) convert_bf16(x, rows, cols, buffer_.data(), bf16_->kernel);
  }

  /// y = the input's rows [from, rows) times w (+ bias).
  void apply(const model::Matrix& w, const PackedMatrix& packed, const float* bias, float* y,
             std::size_t from = 0) const {
    if (bf16_)
      gemm_bf16(buffer_.data() + from * bf16_stride(static_cast<int>(cols_)), rows_ - from, packed, bias, y,
                bf16_->kernel);
    else
      linear(x_ + from * cols_, rows_ - from, w, bias, y);
  }

 private:
  const Bf16Weights* bf16_;
  Bf16Vector& buffer_;
  const float* x_ = nullptr;
  std::size_t rows_ = 0, cols_ = 0;
};

}  // namespace

LayerScratch::LayerScratch(const model::Config& c, std::size_t rows, bool bf16)
    : h(rows * c.hidden_size),
      q(rows * c.num_heads * c.head_dim),
      k(rows * c.num_kv_heads * c.head_dim),
      v(rows * c.num_kv_heads * c.head_dim),
      att(rows * c.num_heads * c.head_dim),
      gate(c.has_dense_layer() ? std::min(rows, ffn_block_rows) * c.intermediate_size : 0),
      up(c.has_dense_layer() ? std::min(rows, ffn_block_rows) * c.intermediate_size : 0),
      xb(bf16 ? bf16_values(c, rows) : 0) {}

std::size_t LayerScratch::bytes(const model::Config& c, std::size_t rows, bool bf16) {
  const auto hd = static_cast<std::size_t>(c.head_dim);
  const std::size_t ff = c.has_dense_layer() ? 2 * static_cast<std::size_t>(c.intermediate_size) : 0;
  const std::size_t floats = rows * (static_cast<std::size_t>(c.hidden_size) + 2 * c.num_heads * hd +
                                     2 * c.num_kv_heads * hd) +
                             std::min(rows, ffn_block_rows) * ff;
  return floats * sizeof(float) + (bf16 ? bf16_values(c, rows) * sizeof(std::uint16_t) : 0);
}

AttentionShape attention_shape(const model::Config& c) {
  AttentionShape shape;
  shape.num_heads = c.num_heads;
  shape.num_kv_heads = c.num_kv_heads;
  shape.head_dim = c.head_dim;
  shape.q_stride = shape.out_stride = static_cast<std::size_t>(c.num_heads) * c.head_dim;
  shape.kv_stride = static_cast<std::size_t>(c.num_kv_heads) * c.head_dim;
  return shape;
}

void layer_windows(const AttentionWindows& windows, int layer, std::span<HeadWindow> out) {
  for (std::size_t g = 0; g < out.size(); ++g)
    out[g] = windows.is_swa(layer, static_cast<int>(g)) ? HeadWindow{windows.window, windows.sinks} : HeadWindow{};
}

void decoder_layer(const model::Model& model, int layer, float* x, const LayerRows& rows,
                   const RopeTable& rope, std::span<const HeadWindow> windows, const AttentionTiles& tiles,
                   LayerScratch& s, const LayerHooks& hooks, const Bf16Weights* bf16) {
  const auto& c = model.config;
  const auto& L = model.weights.layers[static_cast<std::size_t>(layer)];
  const std::size_t N = static_cast<std::size_t>(rows.offsets.back());
  const int d = c.hidden_size, hd = c.head_dim;
  const float eps = static_cast<float>(c.rms_eps);
  const AttentionShape shape = attention_shape(c);
  auto bias = [](const std::vector<float>& b) { return b.empty() ? nullptr : b.data(); };
  static const Bf16Layer fp32_layer;  // unused packed weights of the fp32 path
  const Bf16Layer& P = bf16 ? bf16->layers[static_cast<std::size_t>(layer)] : fp32_layer;
  Products products(bf16, s.xb);
  // bf16: attention's two products too (cpu/attention.hpp).
  const std::optional<Bf16Kernel> attention_kernel =
      bf16 ? std::optional<Bf16Kernel>(bf16->kernel) : std::nullopt;

  // Rows [F, N) leave the layer (LayerRows::outputs_from): the queries, the
  // attention output, x from the output projection on and the feed-forward
  // hold those M rows only (F = 0: all rows).
  const std::size_t F = static_cast<std::size_t>(std::max(0, rows.outputs_from));
  const std::size_t M = N - F;

  // Attention block.
  rms_norm(x, s.h.data(), N, d, L.attn_norm.data(), eps);
  products.input(s.h.data(), N, d);
  products.apply(L.wq, P.wq, bias(L.bq), s.q.data(), F);
  products.apply(L.wk, P.wk, bias(L.bk), s.k.data());
  products.apply(L.wv, P.wv, bias(L.bv), s.v.data());
  if (!L.q_norm.empty()) rms_norm(s.q.data(), s.q.data(), M * c.num_heads, hd, L.q_norm.data(), eps);
  if (!L.k_norm.empty()) rms_norm(s.k.data(), s.k.data(), N * c.num_kv_heads, hd, L.k_norm.data(), eps);
  for (std::size_t b = 0; b + 1 < rows.offsets.size(); ++b) {
    const auto n = static_cast<std::size_t>(rows.offsets[b + 1] - rows.offsets[b]);
    const auto o = static_cast<std::size_t>(rows.offsets[b]);
    // F > 0 only with a single sequence: its queries are rows F.. of it.
    rope.apply(s.q.data() + o * shape.q_stride, n - F, shape.q_stride, c.num_heads,
               rows.start + static_cast<int>(F));
    rope.apply(s.k.data() + o * shape.kv_stride, n, shape.kv_stride, c.num_kv_heads, rows.start);
  }
  const LayerView view{layer, static_cast<int>(N), s.q.data(), s.k.data(), s.v.data(), shape, rows.offsets, windows};
  const KeyValues kv = hooks.cache ? hooks.cache(view) : KeyValues{s.k.data(), s.v.data(), static_cast<int>(N)};
  if (hooks.inspect) hooks.inspect(view);
  if (hooks.attend)
    hooks.attend(view, s.att.data());
  else if (kv.rows == static_cast<int>(N) && F == 0)
    attention(s.q.data(), kv.k, kv.v, s.att.data(), rows.offsets, shape, windows, tiles, attention_kernel);
  else
    attention_rows(s.q.data(), kv.k, kv.v, s.att.data(), kv.rows, kv.rows - static_cast<int>(M), shape, windows,
                   tiles, attention_kernel);
  if (hooks.blend) hooks.blend(view, s.att.data());
  x += F * static_cast<std::size_t>(d);
  products.input(s.att.data(), M, c.num_heads * hd);
  products.apply(L.wo, P.wo, nullptr, s.h.data());
  add_inplace(x, s.h.data(), M * d);

  // Feed-forward block: SwiGLU, or the mixture of experts (cpu/moe.hpp).
  rms_norm(x, s.h.data(), M, d, L.ffn_norm.data(), eps);
  if (c.is_sparse_layer(layer)) {
    // The experts' products stay fp32 (cpu/moe.hpp).
    moe_ffn(s.h.data(), M, L, c, s.moe, s.h.data());
    add_inplace(x, s.h.data(), M * d);
    return;
  }
  // In blocks of rows (ffn_block_rows): each block's down product overwrites
  // the block's rows of h, which its gate and up products have read.
  for (std::size_t r0 = 0; r0 < M; r0 += ffn_block_rows) {
    const std::size_t m = std::min(ffn_block_rows, M - r0);
    float* hb = s.h.data() + r0 * static_cast<std::size_t>(d);
    products.input(hb, m, d);
    products.apply(L.w_gate, P.w_gate, nullptr, s.gate.data());
    products.apply(L.w_up, P.w_up, nullptr, s.up.data());
    silu_mul(s.gate.data(), s.up.data(), m * static_cast<std::size_t>(c.intermediate_size));
    products.input(s.gate.data(), m, c.intermediate_size);
    products.apply(L.w_down, P.w_down, nullptr, hb);
  }
  add_inplace(x, s.h.data(), M * d);
}

}  // namespace bosch::cpu
