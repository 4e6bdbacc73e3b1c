// SPDX-License-Identifier: Apache-2.0
// bosch::cuda::Backend::prefill / decode_step: incremental decoding against
// the hybrid KV cache on the device (DecodeState), the layout of the CPU
// backend's cache (model/kv_slots.hpp) packed into one K and one V buffer
// (model/kv_layout.hpp). Kernels: decode.cu.

#include "backend_impl.hpp"
#include "plan.hpp"

#include <bosch/cuda/half.hpp>
#include <bosch/eval/backend_frame.hpp>
#include <bosch/model/kv_layout.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>

namespace bosch::cuda {

using detail::DeviceGuard;

struct DecodeState::Impl {
  kv::Layout layout;
  AttentionWindows windows;
  int positions = 0;
  int device = 0;
  DType dtype = DType::bf16;
  DeviceBuffer k, v;                   // half [layout.total_rows(), head_dim]
  DeviceBuffer offsets, head_windows;  // the layout's per-head row offsets and windows

  static constexpr std::size_t value_bytes = sizeof(std::uint16_t);

  // Device buffers for `next` (exact sizes: bytes() is the formula) and its
  // metadata, uploaded in order on `stream` (the kernels that read it run there).
  void allocate(kv::Layout next, cudaStream_t stream) {
    const std::size_t half_bytes = next.bytes(value_bytes) / 2;  // one of K, V
    const std::string what = "the KV cache (" + std::to_string(next.capacity()) + " positions)";
    DeviceBuffer nk(half_bytes, "keys of " + what), nv(half_bytes, "values of " + what);
    static_assert(sizeof(long long) == sizeof(std::int64_t));
    DeviceBuffer no(next.offsets().size() * sizeof(long long), "KV cache offsets");
    DeviceBuffer nw(next.head_windows().size() * sizeof(int), "KV cache windows");
    BOSCH_CUDA_CHECK(
        cudaMemcpyAsync(no.get(), next.offsets().data(), no.bytes(), cudaMemcpyHostToDevice, stream));
    BOSCH_CUDA_CHECK(
        cudaMemcpyAsync(nw.get(), next.head_windows().data(), nw.bytes(), cudaMemcpyHostToDevice, stream));
    BOSCH_CUDA_CHECK(cudaStreamSynchronize(stream));  // the host vectors may go once this returns
    k = std::move(nk);
    v = std::move(nv);
    offsets = std::move(no);
    head_windows = std::move(nw);
    layout = std::move(next);
  }

  // Room for `capacity` positions, keeping what every head holds: a head's
  // rows move to its new offset; an SWA head below sinks + window rows has
  // not wrapped yet (positions <= its rows), so its slots stay valid.
  void grow(const model::Config& config, int capacity, cudaStream_t stream) {
    const kv::Layout old = layout;
    DeviceBuffer old_k = std::move(k), old_v = std::move(v);
    try {
      allocate(kv::Layout(config, windows, capacity), stream);
    } catch (...) {
      k = std::move(old_k);  // the state stays as it was
      v = std::move(old_v);
      throw;
    }
    const std::size_t row_bytes = static_cast<std::size_t>(layout.head_dim()) * value_bytes;
    for (int l = 0; l < layout.num_layers(); ++l)
      for (int g = 0; g < layout.num_kv_heads(); ++g) {
        const auto rows = static_cast<std::size_t>(std::min(old.rows(l, g), layout.rows(l, g)));
        if (rows == 0) continue;
        const auto from = static_cast<std::size_t>(old.offset(l, g)) * row_bytes;
        const auto to = static_cast<std::size_t>(layout.offset(l, g)) * row_bytes;
        BOSCH_CUDA_CHECK(cudaMemcpyAsync(k.get<char>() + to, old_k.get<char>() + from, rows * row_bytes,
                                         cudaMemcpyDeviceToDevice, stream));
        BOSCH_CUDA_CHECK(cudaMemcpyAsync(v.get<char>() + to, old_v.get<char>() + from, rows * row_bytes,
                                         cudaMemcpyDeviceToDevice, stream));
      }
    BOSCH_CUDA_CHECK(cudaStreamSynchronize(stream));  // before the old buffers are freed
  }

  detail::KvCacheArgs args() const {
    detail::KvCacheArgs a;
    a.k = k.get();
    a.v = v.get();
    a.offsets = offsets.get<const long long>();
    a.windows = head_windows.get<const int>();
    a.sinks = layout.sinks();
    a.num_kv_heads = layout.num_kv_heads();
    a.head_dim = layout.head_dim();
    a.elem = detail::elem_of(dtype);
    return a;
  }

  // Row `position` of (layer, kv_head) from `buffer`, or empty when not held.
  std::vector<float> row(const DeviceBuffer& buffer, int layer, int kv_head, int position) const {
    if (layer < 0 || layer >= layout.num_layers() || kv_head < 0 || kv_head >= layout.num_kv_heads()) return {};
    const bool swa = layout.swa(layer, kv_head);
    if (!kv::holds(swa, layout.window(), layout.sinks(), positions, position)) return {};
    const auto d = static_cast<std::size_t>(layout.head_dim());
    const auto at = static_cast<std::size_t>(layout.offset(layer, kv_head) +
                                             kv::slot(swa, layout.window(), layout.sinks(), position));
    std::vector<std::uint16_t> bits(d);
    DeviceGuard guard(device);
    BOSCH_CUDA_CHECK(cudaMemcpy(bits.data(), buffer.get<std::uint16_t>() + at * d, d * value_bytes,
                                cudaMemcpyDeviceToHost));
    std::vector<float> out(d);
    for (std::size_t i = 0; i < d; ++i) out[i] = from_half_bits(bits[i], dtype);
    return out;
  }
};

namespace {

const AttentionWindows kNoWindows{};

}  // namespace

DecodeState::DecodeState() = default;
DecodeState::~DecodeState() = default;
DecodeState::DecodeState(DecodeState&& other) noexcept = default;
DecodeState& DecodeState::operator=(DecodeState&& other) noexcept = default;

bool DecodeState::empty() const noexcept { return !impl_ || impl_->layout.empty(); }
int DecodeState::positions() const noexcept { return impl_ ? impl_->positions : 0; }
int DecodeState::capacity() const noexcept { return impl_ ? impl_->layout.capacity() : 0; }
std::size_t DecodeState::bytes() const noexcept { return impl_ ? impl_->k.bytes() + impl_->v.bytes() : 0; }
const AttentionWindows& DecodeState::windows() const noexcept { return impl_ ? impl_->windows : kNoWindows; }

std::int64_t DecodeState::head_rows(int layer, int kv_head) const noexcept {
  if (empty() || layer < 0 || layer >= impl_->layout.num_layers() || kv_head < 0 ||
      kv_head >= impl_->layout.num_kv_heads())
    return 0;
  return impl_->layout.rows(layer, kv_head);
}

std::vector<float> DecodeState::key(int layer, int kv_head, int position) const {
  return empty() ? std::vector<float>{} : impl_->row(impl_->k, layer, kv_head, position);
}

std::vector<float> DecodeState::value(int layer, int kv_head, int position) const {
  return empty() ? std::vector<float>{} : impl_->row(impl_->v, layer, kv_head, position);
}

std::size_t Backend::kv_bytes(const AttentionWindows& windows, std::int64_t tokens) const {
  return kv::bytes(config(), windows, tokens, DecodeState::Impl::value_bytes);
}

DecodeState Backend::prefill(std::span<const int> tokens, const AttentionWindows& windows,
                             std::vector<float>* last_logits, int capacity) const {
  Impl& m = *impl_;
  frame::check_prefill(config(), tokens, windows, capacity, "cuda::Backend::prefill");  // before any work
  const int n = static_cast<int>(tokens.size());
  std::lock_guard lock(m.mutex);
  DeviceGuard guard(m.options.device);
  DecodeState state;
  state.impl_ = std::make_unique<DecodeState::Impl>();
  DecodeState::Impl& s = *state.impl_;
  s.windows = windows;
  s.device = m.options.device;
  s.dtype = m.options.dtype;
  s.allocate(kv::Layout(config(), windows, std::max(n, capacity)), m.stream);

  // The forward pass of forward(), with the cache hook storing what each
  // head will read from position n on (attention reads the pass's own rows,
  // so the logits stay bitwise those of forward()).
  Impl::CacheHook hook;
  hook.cache = s.args();
  hook.start = 0;
  hook.first_reader = n;
  StreamBuffer x = m.scratch(static_cast<std::size_t>(n) * m.hidden * sizeof(float), "residual stream");
  m.embed_into(x.get<float>(), tokens);
  const int lengths[1] = {n};
  const AttentionWindows* ws[1] = {&windows};
  m.run_packed(x.get<float>(), lengths, ws, 0, m.num_layers, &hook);
  s.positions = n;
  if (last_logits) *last_logits = m.logits_rows(x.get<float>(), {n - 1});
  return state;
}

std::vector<float> Backend::decode_step(DecodeState& state, int token, const AttentionWindows& windows) const {
  Impl& m = *impl_;
  const char* where = "cuda::Backend::decode_step";
  // The state was made by prefill on a backend of this model, device and type.
  if (state.empty() || state.positions() < 1 || state.positions() > state.capacity())
    throw invalid_argument("empty or inconsistent decode state; make it with prefill", where);
  DecodeState::Impl& s = *state.impl_;
  if (s.layout.num_layers() != m.num_layers || s.layout.num_kv_heads() != m.hkv || s.layout.head_dim() != m.d ||
      s.device != m.options.device || s.dtype != m.options.dtype)
    throw invalid_argument("decode state of " + std::to_string(s.layout.num_layers()) + " layers x " +
                               std::to_string(s.layout.num_kv_heads()) + " KV heads x head_dim " +
                               std::to_string(s.layout.head_dim()) + " (" + to_string(s.dtype) + ", device " +
                               std::to_string(s.device) + ") does not fit the backend (" +
                               std::to_string(m.num_layers) + " x " + std::to_string(m.hkv) + " x " +
                               std::to_string(m.d) + ", " + to_string(m.options.dtype) + ", device " +
                               std::to_string(m.options.device) + "); make it with this backend's prefill",
                           where);
  frame::check_decode_step(config(), s.positions, token, windows, s.windows, where);
  const int p = s.positions;
  std::lock_guard lock(m.mutex);
  DeviceGuard guard(m.options.device);
  if (p >= s.layout.capacity())
    s.grow(config(), p < (1 << 29) ? std::max(p + 1, 2 * p) : p + 1, m.stream);

  // Key chunks of the decode-attention kernel: enough for the head that
  // reads the most keys (a full head reads p + 1).
  const int chunks = detail::decode_chunks(s.layout.head_windows(), s.layout.sinks(), p);
  StreamBuffer partial = m.scratch(static_cast<std::size_t>(m.hq) * chunks * (m.d + 2) * sizeof(float),
                                   "decode attention partial results");
  Impl::CacheHook hook;
  hook.cache = s.args();
  hook.start = p;
  hook.first_reader = p;
  hook.decode = true;
  hook.chunks = chunks;
  hook.partial = partial.get<float>();

  // The decoder layers on one row at position p. A failure part-way leaves
  // positions at p: the rows written at p sit in slots no query before
  // p + 1 reads, so the state stays usable (as the CPU cache's).
  StreamBuffer x = m.scratch(static_cast<std::size_t>(m.hidden) * sizeof(float), "residual stream");
  const int ids[1] = {token};
  m.embed_into(x.get<float>(), ids);
  const int lengths[1] = {1};
  const AttentionWindows* ws[1] = {&windows};
  m.run_packed(x.get<float>(), lengths, ws, 0, m.num_layers, &hook);
  s.positions = p + 1;
  return m.logits_rows(x.get<float>(), {0});
}

void Backend::Impl::store_keys(const Pass& s, int layer) const {
  detail::launch_kv_write(s.hook->cache, layer, s.k.get(), s.v.get(), s.n, s.hook->start, s.hook->first_reader,
                          stream);
}

void Backend::Impl::decode_attention(const Pass& s, int layer) const {
  detail::DecodeAttentionArgs a;
  a.cache = s.hook->cache;
  a.layer = layer;
  a.q = s.q.get();
  a.out = s.att.get();
  a.num_q_heads = hq;
  a.position = s.hook->start;
  a.chunks = s.hook->chunks;
  a.partial = s.hook->partial;
  a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  detail::launch_decode_attention(a, stream);
}

}  // namespace bosch::cuda
