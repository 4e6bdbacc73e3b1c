// SPDX-License-Identifier: Apache-2.0
// bosch::cuda::Backend: weight upload, the layer loop over packed sequences
// (cuBLAS GEMMs + the kernels of kernels.hpp), logits at chosen rows.

#include "backend_impl.hpp"
#include "plan.hpp"

#include <bosch/cpu/kernels.hpp>
#include <bosch/cpu/moe.hpp>
#include <bosch/cpu/rope.hpp>
#include <bosch/cuda/backend.hpp>
#include <bosch/eval/backend_frame.hpp>
#include <bosch/model/validate.hpp>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <mutex>
#include <string>

namespace bosch::cuda {

using detail::DeviceBuffer;
using detail::DeviceGuard;
using detail::StreamBuffer;

namespace {

// GGUF tensor names, as the CPU backend's messages use them.
std::string layer_name(int l, const char* what) {
  return "blk." + std::to_string(l) + "." + what;
}

// Rows of several [*, cols] matrices stacked, converted to the 16-bit type, uploaded.
DeviceBuffer upload_half(std::initializer_list<const model::Matrix*> parts, DType dtype,
                         const std::string& name) {
  std::size_t count = 0;
  for (const auto* m : parts) count += m->data.size();
  std::vector<std::uint16_t> host(count);
  std::size_t at = 0;
  for (const auto* m : parts)
    for (float f : m->data) host[at++] = to_half_bits(f, dtype);
  DeviceBuffer buffer(count * sizeof(std::uint16_t), "weights '" + name + "'");
  BOSCH_CUDA_CHECK(cudaMemcpy(buffer.get(), host.data(), buffer.bytes(), cudaMemcpyHostToDevice));
  return buffer;
}

// The stacked experts' gate and up matrices ([E F, hidden] each) as one half
// [E 2F, hidden] buffer: expert e's F gate rows, then its F up rows, so that
// one GEMM gives its [rows, 2F] gate | up block (the launch_swiglu layout).
DeviceBuffer upload_expert_gate_up(const model::Matrix& gate, const model::Matrix& up, int experts,
                                   DType dtype, const std::string& name) {
  std::vector<std::uint16_t> host(gate.data.size() + up.data.size());
  const std::size_t block = gate.data.size() / static_cast<std::size_t>(experts);  // F x hidden
  std::size_t at = 0;
  for (std::size_t e = 0; e < static_cast<std::size_t>(experts); ++e)
    for (const model::Matrix* m : {&gate, &up})
      for (std::size_t i = 0; i < block; ++i) host[at++] = to_half_bits(m->data[e * block + i], dtype);
  DeviceBuffer buffer(host.size() * sizeof(std::uint16_t), "weights '" + name + "'");
  BOSCH_CUDA_CHECK(cudaMemcpy(buffer.get(), host.data(), buffer.bytes(), cudaMemcpyHostToDevice));
  return buffer;
}

DeviceBuffer upload_floats(std::initializer_list<const std::vector<float>*> parts,
                           const std::string& name) {
  std::vector<float> host;
  for (const auto* v : parts) host.insert(host.end(), v->begin(), v->end());
  DeviceBuffer buffer(host.size() * sizeof(float), "weights '" + name + "'");
  if (!host.empty())
    BOSCH_CUDA_CHECK(cudaMemcpy(buffer.get(), host.data(), buffer.bytes(), cudaMemcpyHostToDevice));
  return buffer;
}

template <class T>
DeviceBuffer upload_vector(const std::vector<T>& host, const std::string& what) {
  DeviceBuffer buffer(host.size() * sizeof(T), what);
  if (!host.empty())
    BOSCH_CUDA_CHECK(cudaMemcpy(buffer.get(), host.data(), buffer.bytes(), cudaMemcpyHostToDevice));
  return buffer;
}

// Byte offset of element `index` in a 16-bit buffer.
inline void* half_at(void* base, std::size_t index) {
  return static_cast<std::uint16_t*>(base) + index;
}
inline const void* half_at(const void* base, std::size_t index) {
  return static_cast<const std::uint16_t*>(base) + index;
}

// One set of windows for all `count` inputs, or one each; each fits `layout`.
void check_window_sets(std::span<const AttentionWindows* const> windows, std::size_t count, const char* inputs,
                       const HeadLayout& layout, const char* where) {
  if (windows.size() != 1 && windows.size() != count)
    throw invalid_argument(std::to_string(windows.size()) + " window sets for " + std::to_string(count) + " " +
                               inputs + " (give 1 or one each)",
                           where);
  for (const AttentionWindows* w : windows) {
    if (!w) throw invalid_argument("null windows", where);
    w->check(layout, where);
  }
}

}  // namespace

Backend::Impl::Impl(const model::Model& m, Options o) : model(&m), options(o) {
  const model::Config& c = m.config;
  const model::Weights& w = m.weights;
  model::validate(m);  // shapes first: nothing is allocated for a malformed model
  layout = c.layout();
  hidden = c.hidden_size;
  inter = c.intermediate_size;
  hq = c.num_heads;
  hkv = c.num_kv_heads;
  d = c.head_dim;
  vocab = c.vocab_size;
  num_layers = c.num_layers;
  qkv_dim = (hq + 2 * hkv) * d;
  eps = static_cast<float>(c.rms_eps);
  tensor_core = detail::check_options(options, d);
  elem = detail::elem_of(options.dtype);
  data_type = options.dtype == DType::bf16 ? CUDA_R_16BF : CUDA_R_16F;
  const std::vector<double> freq = cpu::rope_inv_freq(c);

  std::string why;
  if (!device_available(&why, options.device))
    throw device_error("no usable CUDA device: " + why, "cuda::Backend");
  DeviceGuard guard(options.device);
  BOSCH_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_handle.h, cudaStreamNonBlocking));
  stream = stream_handle.h;
  BOSCH_CUBLAS_CHECK(cublasCreate(&blas_handle.h));
  blas = blas_handle.h;
  BOSCH_CUBLAS_CHECK(cublasSetStream(blas, stream));
  BOSCH_CUBLAS_CHECK(cublasSetAtomicsMode(blas, CUBLAS_ATOMICS_NOT_ALLOWED));
  cudaMemPoolProps props{};
  props.allocType = cudaMemAllocationTypePinned;
  props.location.type = cudaMemLocationTypeDevice;
  props.location.id = options.device;
  // A stream-ordered pool for per-call scratch; where the runtime has none
  // (some virtualized drivers), scratch falls back to cudaMalloc/cudaFree.
  if (cudaMemPoolCreate(&pool_handle.h, &props) == cudaSuccess) {
    pool = pool_handle.h;
    std::uint64_t keep = std::numeric_limits<std::uint64_t>::max();  // keep freed scratch pooled
    BOSCH_CUDA_CHECK(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep));
  } else {
    pool_handle.h = nullptr;
    cudaGetLastError();
  }

  embedding = upload_half({&w.embedding}, options.dtype, "token_embd");
  if (!w.lm_head.empty()) lm_head = upload_half({&w.lm_head}, options.dtype, "output");
  final_norm = upload_floats({&w.final_norm}, "output_norm");
  inv_freq = upload_vector(freq, "RoPE frequencies");
  weight_bytes = embedding.bytes() + lm_head.bytes() + final_norm.bytes();
  layers.resize(static_cast<std::size_t>(num_layers));
  for (int l = 0; l < num_layers; ++l) {
    const model::LayerWeights& lw = w.layers[static_cast<std::size_t>(l)];
    LayerDevice& ld = layers[static_cast<std::size_t>(l)];
    ld.wqkv = upload_half({&lw.wq, &lw.wk, &lw.wv}, options.dtype, layer_name(l, "wqkv"));
    ld.wo = upload_half({&lw.wo}, options.dtype, layer_name(l, "wo"));
    if (c.is_sparse_layer(l)) {
      ld.wgu_exps = upload_expert_gate_up(lw.gate_exps, lw.up_exps, c.moe.num_experts, options.dtype,
                                          layer_name(l, "ffn_gate_up_exps"));
      ld.wdown_exps = upload_half({&lw.down_exps}, options.dtype, layer_name(l, "ffn_down_exps"));
    } else {
      ld.wgu = upload_half({&lw.w_gate, &lw.w_up}, options.dtype, layer_name(l, "w_gate_up"));
      ld.wdown = upload_half({&lw.w_down}, options.dtype, layer_name(l, "w_down"));
    }
    ld.attn_norm = upload_floats({&lw.attn_norm}, layer_name(l, "attn_norm"));
    ld.ffn_norm = upload_floats({&lw.ffn_norm}, layer_name(l, "ffn_norm"));
    if (!lw.bq.empty()) ld.bias = upload_floats({&lw.bq, &lw.bk, &lw.bv}, layer_name(l, "bqkv"));
    if (!lw.q_norm.empty()) ld.q_norm = upload_floats({&lw.q_norm}, layer_name(l, "attn_q_norm"));
    if (!lw.k_norm.empty()) ld.k_norm = upload_floats({&lw.k_norm}, layer_name(l, "attn_k_norm"));
    weight_bytes += ld.wqkv.bytes() + ld.wo.bytes() + ld.wgu.bytes() + ld.wdown.bytes() +
                    ld.wgu_exps.bytes() + ld.wdown_exps.bytes() +
                    ld.attn_norm.bytes() + ld.ffn_norm.bytes() + ld.bias.bytes() +
                    ld.q_norm.bytes() + ld.k_norm.bytes();
  }
}

Backend::Impl::~Impl() {
  int previous = -1;
  cudaGetDevice(&previous);
  cudaSetDevice(options.device);
  if (stream) cudaStreamSynchronize(stream);
  // Weights are freed by their DeviceBuffers, then the handles by theirs.
  cudaGetLastError();
  if (previous >= 0) cudaSetDevice(previous);
}

Backend::Impl::Pass::Pass(const Impl& m, std::span<const int> lengths,
                          std::span<const AttentionWindows* const> windows, int first_layer, int last,
                          const CacheHook* cache_hook)
    : first(first_layer), chunk(0), hook(cache_hook) {
  const detail::Plan plan = detail::make_plan(lengths, m.options.query_tile);
  batch = static_cast<int>(lengths.size());
  n = plan.total;
  chunk = std::min(n, m.options.row_chunk);

  // Integer metadata in one upload: seq_start | positions | sinks | windows | tiles.
  std::vector<int> meta;
  const std::size_t at_start = 0;
  meta.insert(meta.end(), plan.seq_start.begin(), plan.seq_start.end());
  const std::size_t at_positions = meta.size();
  for (int b = 0; b < batch; ++b)
    for (int t = 0; t < lengths[static_cast<std::size_t>(b)]; ++t) meta.push_back(t);
  const std::size_t at_sinks = meta.size();
  for (int b = 0; b < batch; ++b)
    meta.push_back(windows[windows.size() == 1 ? 0 : static_cast<std::size_t>(b)]->sinks);
  const std::size_t at_windows = meta.size();
  for (int l = first; l < last; ++l)
    for (int b = 0; b < batch; ++b) {
      const AttentionWindows& w = *windows[windows.size() == 1 ? 0 : static_cast<std::size_t>(b)];
      for (int g = 0; g < m.hkv; ++g) meta.push_back(w.is_swa(l, g) ? w.window : 0);
    }
  const std::size_t at_tiles = meta.size();
  for (const detail::AttentionTile& t : plan.tiles) {
    meta.push_back(t.seq);
    meta.push_back(t.q0);
    meta.push_back(t.q1);
    meta.push_back(t.pad);
  }
  dmeta = m.scratch(meta.size() * sizeof(int), "attention metadata");
  BOSCH_CUDA_CHECK(cudaMemcpyAsync(dmeta.get(), meta.data(), meta.size() * sizeof(int),
                                   cudaMemcpyHostToDevice, m.stream));
  const int* dm = dmeta.get<int>();
  positions = dm + at_positions;
  windows_meta = dm + at_windows;

  // RoPE table for positions [start, start + max_len): row t of a sequence
  // (its local index, the positions above) is position start + t.
  const int half = m.d / 2;
  const std::size_t table = static_cast<std::size_t>(plan.max_len) * half;
  rope_cos = m.scratch(table * sizeof(float), "RoPE cos table");
  rope_sin = m.scratch(table * sizeof(float), "RoPE sin table");
  detail::launch_rope_table(m.inv_freq.get<double>(), half, hook ? hook->start : 0, plan.max_len,
                            rope_cos.get<float>(), rope_sin.get<float>(), m.stream);

  const std::size_t rows = static_cast<std::size_t>(n);
  const std::size_t hs = sizeof(std::uint16_t);
  h = m.scratch(rows * m.hidden * hs, "normalized activations");
  q = m.scratch(rows * m.hq * m.d * hs, "queries");
  k = m.scratch(rows * m.hkv * m.d * hs, "keys");
  v = m.scratch(rows * m.hkv * m.d * hs, "values");
  att = m.scratch(rows * m.hq * m.d * hs, "attention output");
  wide = m.scratch(static_cast<std::size_t>(chunk) * std::max(m.qkv_dim, 2 * m.inter) * sizeof(float),
                   "QKV / gate-up projections");
  gate = m.scratch(static_cast<std::size_t>(chunk) * m.inter * hs, "SwiGLU activations");

  attention.q = q.get();
  attention.k = k.get();
  attention.v = v.get();
  attention.out = att.get();
  attention.elem = m.elem;
  attention.head_dim = m.d;
  attention.num_q_heads = m.hq;
  attention.num_kv_heads = m.hkv;
  attention.seq_start = dm + at_start;
  attention.sinks = dm + at_sinks;
  attention.tiles = reinterpret_cast<const detail::AttentionTile*>(dm + at_tiles);
  attention.num_tiles = static_cast<int>(plan.tiles.size());
  attention.query_tile = m.options.query_tile;
  attention.key_tile = m.options.key_tile;
  attention.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(m.d)));
  attention.tensor_core = m.tensor_core;
}

void Backend::Impl::rms_norm(const float* x, const DeviceBuffer& gain, int n, void* out) const {
  detail::launch_rms_norm(x, nullptr, n, hidden, gain.get<float>(), eps, out, elem, stream);
}

void Backend::Impl::qk_norm_rope(const LayerDevice& L, const Pass& s, std::size_t r, int rows) const {
  detail::QkvPostArgs post;
  post.in = s.wide.get<float>();
  post.ld = qkv_dim;
  post.n = rows;
  post.num_q_heads = hq;
  post.num_kv_heads = hkv;
  post.head_dim = d;
  post.bias = L.bias.get<float>();
  post.q_norm = L.q_norm.get<float>();
  post.k_norm = L.k_norm.get<float>();
  post.eps = eps;
  post.cos_table = s.rope_cos.get<float>();
  post.sin_table = s.rope_sin.get<float>();
  post.positions = s.positions + r;
  post.interleaved = model->config.rope_style == model::RopeStyle::interleaved;
  post.q = half_at(s.q.get(), r * hq * d);
  post.k = half_at(s.k.get(), r * hkv * d);
  post.v = half_at(s.v.get(), r * hkv * d);
  post.elem = elem;
  detail::launch_qkv_post(post, stream);
}

void Backend::Impl::attention(const Pass& s, int layer) const {
  detail::AttentionArgs args = s.attention;
  args.windows = s.windows_meta + static_cast<std::size_t>(layer - s.first) * s.batch * hkv;
  detail::launch_attention(args, stream);
}

void Backend::Impl::silu_mul(const Pass& s, int rows) const {
  detail::launch_swiglu(s.wide.get<float>(), rows, inter, s.gate.get(), elem, stream);
}

// The mixture-of-experts FFN of cpu/moe.hpp (Qwen3-MoE), the simple way: the
// routing is computed on the host from the fp32 residual with the CPU
// backend's own ops (rms_norm, the router GEMM, route_top_k), so both
// backends choose experts from the same arithmetic; the expert rows are
// gathered on the device, each active expert runs two cuBLAS GEMMs (gate|up,
// then down) over its rows, and one kernel adds each token's weighted expert
// outputs to the residual. s.h holds the normalized rows (half).
void Backend::Impl::moe_ffn(int l, float* x, const Pass& s) const {
  const model::Config& c = model->config;
  const model::LayerWeights& lw = model->weights.layers[static_cast<std::size_t>(l)];
  const LayerDevice& L = layers[static_cast<std::size_t>(l)];
  const int n = s.n, E = c.moe.num_experts, k = c.moe.num_experts_used, F = c.moe.expert_intermediate_size;
  const std::size_t slots = static_cast<std::size_t>(n) * static_cast<std::size_t>(k);

  // Routing on the host.
  std::vector<float> h(static_cast<std::size_t>(n) * static_cast<std::size_t>(hidden));
  BOSCH_CUDA_CHECK(cudaMemcpyAsync(h.data(), x, h.size() * sizeof(float), cudaMemcpyDeviceToHost, stream));
  BOSCH_CUDA_CHECK(cudaStreamSynchronize(stream));
  cpu::rms_norm(h.data(), h.data(), static_cast<std::size_t>(n), hidden, lw.ffn_norm.data(), eps);
  std::vector<float> logits(static_cast<std::size_t>(n) * static_cast<std::size_t>(E));
  cpu::linear(h.data(), static_cast<std::size_t>(n), lw.router, nullptr, logits.data());
  cpu::Routing r;
  cpu::route_top_k(logits.data(), static_cast<std::size_t>(n), E, k, c.moe.norm_topk_prob, r);

  // row_of | position, then the weights, in one upload each.
  std::vector<int> index(r.row_of);
  index.insert(index.end(), r.position.begin(), r.position.end());
  StreamBuffer dindex = scratch(index.size() * sizeof(int), "expert routing");
  StreamBuffer dweight = scratch(slots * sizeof(float), "expert weights");
  BOSCH_CUDA_CHECK(cudaMemcpyAsync(dindex.get(), index.data(), index.size() * sizeof(int),
                                   cudaMemcpyHostToDevice, stream));
  BOSCH_CUDA_CHECK(cudaMemcpyAsync(dweight.get(), r.weight.data(), slots * sizeof(float),
                                   cudaMemcpyHostToDevice, stream));

  const std::size_t hs = sizeof(std::uint16_t);
  StreamBuffer rows = scratch(slots * hidden * hs, "expert inputs");
  StreamBuffer gate_up = scratch(slots * 2 * F * sizeof(float), "expert gate | up");
  StreamBuffer act = scratch(slots * F * hs, "expert activations");
  StreamBuffer out = scratch(slots * hidden * sizeof(float), "expert outputs");
  detail::launch_gather_rows(s.h.get(), dindex.get<int>(), static_cast<int>(slots), hidden, rows.get(), stream);
  const std::size_t gu_block = static_cast<std::size_t>(2) * F * hidden, down_block = static_cast<std::size_t>(hidden) * F;
  for (int e = 0; e < E; ++e) {
    const int p0 = r.offsets[static_cast<std::size_t>(e)], count = r.offsets[static_cast<std::size_t>(e) + 1] - p0;
    if (count == 0) continue;  // inactive experts cost nothing
    const auto p = static_cast<std::size_t>(p0);
    linear(half_at(L.wgu_exps.get(), static_cast<std::size_t>(e) * gu_block), half_at(rows.get(), p * hidden),
           gate_up.get<float>() + p * 2 * F, count, 2 * F, hidden, 0.0f);
  }
  detail::launch_swiglu(gate_up.get<float>(), static_cast<int>(slots), F, act.get(), elem, stream);
  for (int e = 0; e < E; ++e) {
    const int p0 = r.offsets[static_cast<std::size_t>(e)], count = r.offsets[static_cast<std::size_t>(e) + 1] - p0;
    if (count == 0) continue;
    const auto p = static_cast<std::size_t>(p0);
    linear(half_at(L.wdown_exps.get(), static_cast<std::size_t>(e) * down_block), half_at(act.get(), p * F),
           out.get<float>() + p * hidden, count, hidden, F, 0.0f);
  }
  detail::launch_moe_combine(out.get<float>(), dindex.get<int>() + slots, dweight.get<float>(), n, k, hidden, x,
                             stream);
}

// The decoder layer of cpu/layer.hpp, op for op; on the GPU the Q/K/V and the
// gate/up projections are one fused GEMM each (over chunks of rows), biases,
// Q/K norms and RoPE one kernel, and each residual add is its GEMM's beta = 1.
void Backend::Impl::decoder_layer(int l, float* x, const Pass& s) const {
  const LayerDevice& L = layers[static_cast<std::size_t>(l)];
  const int n = s.n;
  // Attention block.
  rms_norm(x, L.attn_norm, n, s.h.get());                                 // h = rms_norm(x, attn_norm)
  for (int r0 = 0; r0 < n; r0 += s.chunk) {
    const int rows = std::min(s.chunk, n - r0);
    const auto r = static_cast<std::size_t>(r0);
    linear(L.wqkv, half_at(s.h.get(), r * hidden), s.wide.get<float>(), rows, qkv_dim, hidden, 0.0f);
    qk_norm_rope(L, s, r, rows);                                          // q, k = rope(rms_norm(q), rms_norm(k))
  }
  if (s.hook) store_keys(s, l);                                           // cache hook: store k, v
  if (s.hook && s.hook->decode) decode_attention(s, l);                   // att = attention(q, cache)
  else attention(s, l);                                                   // att = attention(q, k, v)
  linear(L.wo, s.att.get(), x, n, hidden, hq * d, 1.0f);                  // x += linear(att, wo)
  // Feed-forward block (SwiGLU, or the mixture of experts).
  rms_norm(x, L.ffn_norm, n, s.h.get());                                  // h = rms_norm(x, ffn_norm)
  if (model->config.is_sparse_layer(l)) {
    moe_ffn(l, x, s);                                                     // x += moe_ffn(h)
    return;
  }
  for (int r0 = 0; r0 < n; r0 += s.chunk) {
    const int rows = std::min(s.chunk, n - r0);
    const auto r = static_cast<std::size_t>(r0);
    linear(L.wgu, half_at(s.h.get(), r * hidden), s.wide.get<float>(), rows, 2 * inter, hidden, 0.0f);
    silu_mul(s, rows);                                                    // silu_mul(gate, up)
    linear(L.wdown, s.gate.get(), x + r * hidden, rows, hidden, inter, 1.0f);  // x += linear(., w_down)
  }
}

void Backend::Impl::run_packed(float* x, std::span<const int> lengths,
                               std::span<const AttentionWindows* const> windows, int first,
                               int last, const CacheHook* hook) const {
  if (first >= last) return;
  const Pass pass(*this, lengths, windows, first, last, hook);
  for (int l = first; l < last; ++l) decoder_layer(l, x, pass);
  BOSCH_CUDA_CHECK(cudaStreamSynchronize(stream));
}

std::vector<float> Backend::Impl::logits_rows(const float* x, const std::vector<int>& rows) const {
  if (rows.empty()) return {};
  const int p = static_cast<int>(rows.size());
  StreamBuffer drows = scratch(rows.size() * sizeof(int), "logit rows");
  BOSCH_CUDA_CHECK(cudaMemcpyAsync(drows.get(), rows.data(), rows.size() * sizeof(int),
                                   cudaMemcpyHostToDevice, stream));
  StreamBuffer xn = scratch(rows.size() * hidden * sizeof(std::uint16_t), "final norm rows");
  detail::launch_rms_norm(x, drows.get<int>(), p, hidden, final_norm.get<float>(), eps, xn.get(),
                          elem, stream);
  const std::size_t count = rows.size() * static_cast<std::size_t>(vocab);
  StreamBuffer out = scratch(count * sizeof(float), "logits");
  linear(output_weights(), xn.get(), out.get<float>(), p, vocab, hidden, 0.0f);
  std::vector<float> host(count);
  BOSCH_CUDA_CHECK(cudaMemcpyAsync(host.data(), out.get(), count * sizeof(float),
                                   cudaMemcpyDeviceToHost, stream));
  BOSCH_CUDA_CHECK(cudaStreamSynchronize(stream));
  return host;
}

Backend::Backend(const model::Model& model, Options options)
    : impl_(std::make_shared<Impl>(model, options)) {}

const model::Config& Backend::config() const noexcept { return impl_->model->config; }
const model::Model& Backend::model() const noexcept { return *impl_->model; }
HeadLayout Backend::layout() const { return impl_->layout; }
const Options& Backend::options() const noexcept { return impl_->options; }
std::size_t Backend::weight_bytes() const noexcept { return impl_->weight_bytes; }

Residual Backend::embed(std::span<const int> tokens) const {
  Impl& m = *impl_;
  m.check_tokens(tokens, "cuda::Backend::embed");
  if (tokens.empty()) return Residual(0, m.hidden, m.options.device);  // no device memory
  std::lock_guard lock(m.mutex);
  DeviceGuard guard(m.options.device);
  Residual x(static_cast<int>(tokens.size()), m.hidden, m.options.device);
  m.embed_into(x.data(), tokens);
  return x;
}

void Backend::run_layers(Residual& x, int first, int last, const AttentionWindows& windows,
                         cpu::HeadStats* stats, const cpu::StatsRequest* request) const {
  (void)request;
  if (stats)
    throw invalid_argument("attention statistics are not computed by the CUDA backend; use "
                           "cpu::Backend for them",
                           "cuda::Backend::run_layers");
  Residual* xs[] = {&x};
  const AttentionWindows* ws[] = {&windows};
  run_layers_batch(xs, first, last, ws);
}

void Backend::run_layers_batch(std::span<Residual* const> xs, int first, int last,
                               std::span<const AttentionWindows* const> windows) const {
  Impl& m = *impl_;
  const char* where = "cuda::Backend::run_layers";
  frame::check_layer_range(first, last, m.num_layers, where);
  check_window_sets(windows, xs.size(), "streams", m.layout, where);
  // Empty streams (no tokens) have nothing to run; the others are stacked.
  std::vector<Residual*> live;
  std::vector<const AttentionWindows*> live_windows;
  std::vector<int> lengths;
  for (std::size_t b = 0; b < xs.size(); ++b) {
    Residual* x = xs[b];
    if (!x) throw invalid_argument("null residual stream", where);
    if (x->n_tokens() == 0) continue;
    m.check_residual(*x, where);
    live.push_back(x);
    live_windows.push_back(windows[windows.size() == 1 ? 0 : b]);
    lengths.push_back(x->n_tokens());
  }
  if (live.empty() || first == last) return;
  xs = live;
  windows = live_windows;
  std::lock_guard lock(m.mutex);
  DeviceGuard guard(m.options.device);
  if (xs.size() == 1) {
    m.run_packed(xs[0]->data(), lengths, windows, first, last);
    return;
  }
  std::size_t total = 0;
  for (int len : lengths) total += static_cast<std::size_t>(len);
  StreamBuffer packed = m.scratch(total * m.hidden * sizeof(float), "packed residual streams");
  std::size_t at = 0;
  for (Residual* x : xs) {
    BOSCH_CUDA_CHECK(cudaMemcpyAsync(packed.get<float>() + at, x->data(), x->bytes(),
                                     cudaMemcpyDeviceToDevice, m.stream));
    at += x->bytes() / sizeof(float);
  }
  m.run_packed(packed.get<float>(), lengths, windows, first, last);
  at = 0;
  for (Residual* x : xs) {
    BOSCH_CUDA_CHECK(cudaMemcpyAsync(x->data(), packed.get<float>() + at, x->bytes(),
                                     cudaMemcpyDeviceToDevice, m.stream));
    at += x->bytes() / sizeof(float);
  }
  BOSCH_CUDA_CHECK(cudaStreamSynchronize(m.stream));
}

std::vector<float> Backend::logits(const Residual& x, std::span<const int> positions) const {
  Impl& m = *impl_;
  const char* where = "cuda::Backend::logits";
  m.check_residual(x, where);
  frame::check_positions(positions, x.n_tokens(), where);
  std::vector<int> rows(positions.begin(), positions.end());
  if (rows.empty()) return {};
  std::lock_guard lock(m.mutex);
  DeviceGuard guard(m.options.device);
  return m.logits_rows(x.data(), rows);
}

std::vector<float> Backend::forward(std::span<const int> tokens, const AttentionWindows& windows,
                                    std::span<const int> positions) const {
  const std::vector<int> sequence(tokens.begin(), tokens.end());
  const std::vector<int> rows(positions.begin(), positions.end());
  const AttentionWindows* ws[] = {&windows};
  auto result = forward_batch(std::span<const std::vector<int>>(&sequence, 1), ws,
                              std::span<const std::vector<int>>(&rows, 1));
  return std::move(result.front());
}

std::vector<std::vector<float>> Backend::forward_batch(
    std::span<const std::vector<int>> sequences, const AttentionWindows& windows,
    std::span<const std::vector<int>> positions) const {
  const AttentionWindows* ws[] = {&windows};
  return forward_batch(sequences, ws, positions);
}

std::vector<std::vector<float>> Backend::forward_batch(
    std::span<const std::vector<int>> sequences, std::span<const AttentionWindows* const> windows,
    std::span<const std::vector<int>> positions) const {
  Impl& m = *impl_;
  const char* where = "cuda::Backend::forward";
  frame::check_position_lists(positions.size(), sequences.size(), where);
  check_window_sets(windows, sequences.size(), "sequences", m.layout, where);
  if (sequences.empty()) return {};
  // Empty sequences (no tokens, hence no positions) are left out of the stack.
  std::vector<int> tokens, lengths, rows;
  std::vector<const AttentionWindows*> live_windows;
  for (std::size_t b = 0; b < sequences.size(); ++b) {
    m.check_tokens(sequences[b], where);
    const int start = static_cast<int>(tokens.size());
    const int len = static_cast<int>(sequences[b].size());
    frame::check_positions(positions[b], len, where, static_cast<int>(b));
    for (int p : positions[b]) rows.push_back(start + p);
    if (len == 0) continue;
    tokens.insert(tokens.end(), sequences[b].begin(), sequences[b].end());
    lengths.push_back(len);
    live_windows.push_back(windows[windows.size() == 1 ? 0 : b]);
  }
  std::vector<float> all;
  if (!tokens.empty()) {
    std::lock_guard lock(m.mutex);
    DeviceGuard guard(m.options.device);
    StreamBuffer x = m.scratch(tokens.size() * m.hidden * sizeof(float), "residual stream");
    m.embed_into(x.get<float>(), tokens);
    m.run_packed(x.get<float>(), lengths, live_windows, 0, m.num_layers);
    all = m.logits_rows(x.get<float>(), rows);
  }
  std::vector<std::vector<float>> result(sequences.size());
  std::size_t at = 0;
  for (std::size_t b = 0; b < sequences.size(); ++b) {
    const std::size_t count = positions[b].size() * static_cast<std::size_t>(m.vocab);
    result[b].assign(all.begin() + static_cast<std::ptrdiff_t>(at),
                     all.begin() + static_cast<std::ptrdiff_t>(at + count));
    at += count;
  }
  return result;
}

double Backend::flops(int n, int logit_rows, const AttentionWindows& windows) const {
  return frame::forward_flops(config(), n, logit_rows, windows);
}

}  // namespace bosch::cuda
