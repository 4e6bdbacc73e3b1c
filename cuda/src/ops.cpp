// SPDX-License-Identifier: Apache-2.0
// bosch::cuda::ops: single kernels on host data (tests, benchmarks).

#include "check.hpp"
#include "kernels.hpp"
#include "memory.hpp"
#include "plan.hpp"

#include <bosch/cpu/rope.hpp>
#include <bosch/cuda/ops.hpp>
#include <bosch/model/kv_slots.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_real_distribution.hpp>

#include <algorithm>
#include <cmath>
#include <string>

namespace bosch::cuda::ops {

using detail::DeviceBuffer;
using detail::DeviceGuard;

namespace {

void require_device(int device) {
  std::string why;
  if (!device_available(&why, device)) throw device_error("no usable CUDA device: " + why, "cuda::ops");
}

void require(bool ok, const std::string& message, const char* where) {
  if (!ok) throw invalid_argument(message, where);
}

DeviceBuffer upload_half(std::span<const float> host, DType t, const char* what) {
  std::vector<std::uint16_t> bits(host.size());
  for (std::size_t i = 0; i < host.size(); ++i) bits[i] = to_half_bits(host[i], t);
  DeviceBuffer b(bits.size() * sizeof(std::uint16_t), what);
  if (!bits.empty())
    BOSCH_CUDA_CHECK(cudaMemcpy(b.get(), bits.data(), b.bytes(), cudaMemcpyHostToDevice));
  return b;
}

template <class T>
DeviceBuffer upload(std::span<const T> host, const char* what) {
  DeviceBuffer b(host.size() * sizeof(T), what);
  if (!host.empty())
    BOSCH_CUDA_CHECK(cudaMemcpy(b.get(), host.data(), b.bytes(), cudaMemcpyHostToDevice));
  return b;
}

std::vector<float> download_half(const DeviceBuffer& b, std::size_t count, DType t) {
  std::vector<std::uint16_t> bits(count);
  BOSCH_CUDA_CHECK(cudaDeviceSynchronize());
  if (count)
    BOSCH_CUDA_CHECK(cudaMemcpy(bits.data(), b.get(), count * sizeof(std::uint16_t), cudaMemcpyDeviceToHost));
  std::vector<float> out(count);
  for (std::size_t i = 0; i < count; ++i) out[i] = from_half_bits(bits[i], t);
  return out;
}

// Per-(sequence, KV head) windows and per-sequence sinks, expanded.
void expand(const AttentionProblem& p, std::vector<int>& windows, std::vector<int>& sinks) {
  const std::size_t b = p.lengths.size();
  const std::size_t hkv = static_cast<std::size_t>(p.num_kv_heads);
  const char* where = "cuda::ops::AttentionProblem";
  require(p.windows.empty() || p.windows.size() == hkv || p.windows.size() == b * hkv,
          "windows must hold Hkv or B * Hkv values", where);
  require(p.sinks.empty() || p.sinks.size() == 1 || p.sinks.size() == b,
          "sinks must hold 1 or B values", where);
  windows.assign(b * hkv, 0);
  sinks.assign(b, 0);
  for (std::size_t s = 0; s < b; ++s) {
    for (std::size_t g = 0; g < hkv; ++g) {
      int w = 0;
      if (p.windows.size() == hkv) w = p.windows[g];
      else if (!p.windows.empty()) w = p.windows[s * hkv + g];
      require(w >= 0, "window must be >= 0 (0 = full)", where);
      windows[s * hkv + g] = w;
    }
    sinks[s] = p.sinks.empty() ? 0 : p.sinks[p.sinks.size() == 1 ? 0 : s];
    require(sinks[s] >= 0, "sinks must be >= 0", where);
  }
}

void check_problem(const AttentionProblem& p) {
  const char* where = "cuda::ops::AttentionProblem";
  require(p.num_q_heads > 0 && p.num_kv_heads > 0 && p.num_q_heads % p.num_kv_heads == 0,
          "query heads must be a positive multiple of KV heads", where);
  require(!p.lengths.empty(), "no sequences", where);
}

// Device metadata of an attention problem.
struct AttentionDevice {
  detail::Plan plan;
  DeviceBuffer seq_start, windows, sinks, tiles;
  detail::AttentionArgs args;

  AttentionDevice(const AttentionProblem& p, const Options& o) {
    check_problem(p);
    const bool tc = detail::check_options(o, p.head_dim);
    plan = detail::make_plan(p.lengths, o.query_tile);
    std::vector<int> w, s;
    expand(p, w, s);
    seq_start = upload<int>(plan.seq_start, "sequence starts");
    windows = upload<int>(w, "windows");
    sinks = upload<int>(s, "sinks");
    tiles = upload<detail::AttentionTile>(plan.tiles, "tiles");
    args.elem = detail::elem_of(o.dtype);
    args.head_dim = p.head_dim;
    args.num_q_heads = p.num_q_heads;
    args.num_kv_heads = p.num_kv_heads;
    args.seq_start = seq_start.get<int>();
    args.windows = windows.get<int>();
    args.sinks = sinks.get<int>();
    args.tiles = tiles.get<detail::AttentionTile>();
    args.num_tiles = static_cast<int>(plan.tiles.size());
    args.query_tile = o.query_tile;
    args.key_tile = o.key_tile;
    args.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(p.head_dim)));
    args.tensor_core = tc;
  }
};

}  // namespace

int AttentionProblem::rows() const {
  long long n = 0;
  for (int len : lengths) n += len;
  return static_cast<int>(n);
}

double AttentionProblem::visible_pairs() const {
  std::vector<int> w, s;
  expand(*this, w, s);
  const int group = num_kv_heads > 0 ? num_q_heads / num_kv_heads : 0;
  double total = 0;
  for (std::size_t b = 0; b < lengths.size(); ++b)
    for (int g = 0; g < num_kv_heads; ++g)
      total += group * detail::visible_pairs(lengths[b], w[b * num_kv_heads + g], s[b]);
  return total;
}

double AttentionProblem::flops() const { return 4.0 * head_dim * visible_pairs(); }

std::vector<float> rms_norm(std::span<const float> x, int rows, int cols,
                            std::span<const float> gain, float eps, const Options& options) {
  const char* where = "cuda::ops::rms_norm";
  require(rows >= 0 && cols > 0 && x.size() == static_cast<std::size_t>(rows) * cols &&
              gain.size() == static_cast<std::size_t>(cols),
          "x must be [rows, cols] and gain [cols]", where);
  require_device(options.device);
  DeviceGuard guard(options.device);
  DeviceBuffer dx = upload<float>(x, "x");
  DeviceBuffer dg = upload<float>(gain, "gain");
  DeviceBuffer out(x.size() * sizeof(std::uint16_t), "output");
  detail::launch_rms_norm(dx.get<float>(), nullptr, rows, cols, dg.get<float>(), eps, out.get(),
                          detail::elem_of(options.dtype), nullptr);
  return download_half(out, x.size(), options.dtype);
}

std::vector<float> head_transform(std::span<const float> x, int n, const HeadTransform& t,
                                  std::span<const int> positions, const Options& options) {
  const char* where = "cuda::ops::head_transform";
  const std::size_t width = static_cast<std::size_t>(t.num_heads) * t.head_dim;
  require(n >= 0 && t.num_heads > 0 && t.head_dim >= 2 && t.head_dim % 2 == 0 &&
              t.head_dim <= detail::simple_max_head_dim() && x.size() == width * n &&
              positions.size() == static_cast<std::size_t>(n),
          "x must be [n, heads, head_dim] (head_dim even, <= 256) with n positions", where);
  require(t.bias.empty() || t.bias.size() == width, "bias must hold heads * head_dim values", where);
  require(t.norm_gain.empty() || t.norm_gain.size() == static_cast<std::size_t>(t.head_dim),
          "norm gain must hold head_dim values", where);
  int max_pos = 0;
  for (int p : positions) {
    require(p >= 0, "positions must be >= 0", where);
    max_pos = std::max(max_pos, p);
  }
  std::vector<double> freq;
  if (t.rope) {
    model::Config c = *t.rope;
    c.head_dim = t.head_dim;
    freq = cpu::rope_inv_freq(c);
  }
  require_device(options.device);
  DeviceGuard guard(options.device);
  DeviceBuffer dx = upload<float>(x, "x");
  DeviceBuffer db = upload<float>(t.bias, "bias");
  DeviceBuffer dn = upload<float>(t.norm_gain, "norm gain");
  DeviceBuffer dp = upload<int>(positions, "positions");
  DeviceBuffer df = upload<double>(freq, "RoPE frequencies");
  const int half = t.head_dim / 2;
  const std::size_t table = t.rope ? static_cast<std::size_t>(max_pos + 1) * half : 0;
  DeviceBuffer dcos(table * sizeof(float), "RoPE cos");
  DeviceBuffer dsin(table * sizeof(float), "RoPE sin");
  if (t.rope)
    detail::launch_rope_table(df.get<double>(), half, 0, max_pos + 1, dcos.get<float>(),
                              dsin.get<float>(), nullptr);
  DeviceBuffer out(x.size() * sizeof(std::uint16_t), "output");
  detail::QkvPostArgs a;
  a.in = dx.get<float>();
  a.ld = static_cast<long long>(width);
  a.n = n;
  a.num_q_heads = t.num_heads;
  a.num_kv_heads = 0;
  a.head_dim = t.head_dim;
  a.bias = db.get<float>();
  a.q_norm = dn.get<float>();
  a.eps = t.eps;
  a.cos_table = t.rope ? dcos.get<float>() : nullptr;
  a.sin_table = t.rope ? dsin.get<float>() : nullptr;
  a.positions = dp.get<int>();
  a.interleaved = t.rope && t.rope->rope_style == model::RopeStyle::interleaved;
  a.q = out.get();
  a.elem = detail::elem_of(options.dtype);
  detail::launch_qkv_post(a, nullptr);
  return download_half(out, x.size(), options.dtype);
}

std::vector<float> swiglu(std::span<const float> gate_up, int n, int inter, const Options& options) {
  require(n >= 0 && inter > 0 && gate_up.size() == static_cast<std::size_t>(n) * 2 * inter,
          "gate_up must be [n, 2 inter]", "cuda::ops::swiglu");
  require_device(options.device);
  DeviceGuard guard(options.device);
  DeviceBuffer dx = upload<float>(gate_up, "gate_up");
  const std::size_t count = static_cast<std::size_t>(n) * inter;
  DeviceBuffer out(count * sizeof(std::uint16_t), "output");
  detail::launch_swiglu(dx.get<float>(), n, inter, out.get(), detail::elem_of(options.dtype), nullptr);
  return download_half(out, count, options.dtype);
}

std::vector<float> attention(std::span<const float> q, std::span<const float> k,
                             std::span<const float> v, const AttentionProblem& p,
                             const Options& options) {
  check_problem(p);
  const std::size_t n = static_cast<std::size_t>(p.rows());
  const std::size_t qn = n * p.num_q_heads * p.head_dim;
  const std::size_t kn = n * p.num_kv_heads * p.head_dim;
  require(q.size() == qn && k.size() == kn && v.size() == kn,
          "q must be [N, Hq, d], k and v [N, Hkv, d]", "cuda::ops::attention");
  require_device(options.device);
  DeviceGuard guard(options.device);
  AttentionDevice dev(p, options);
  DeviceBuffer dq = upload_half(q, options.dtype, "q");
  DeviceBuffer dk = upload_half(k, options.dtype, "k");
  DeviceBuffer dv = upload_half(v, options.dtype, "v");
  DeviceBuffer out(qn * sizeof(std::uint16_t), "output");
  BOSCH_CUDA_CHECK(cudaMemset(out.get(), 0xff, out.bytes()));  // NaN: unwritten rows show up
  dev.args.q = dq.get();
  dev.args.k = dk.get();
  dev.args.v = dv.get();
  dev.args.out = out.get();
  detail::launch_attention(dev.args, nullptr);
  return download_half(out, qn, options.dtype);
}

DecodeResult decode_attention(std::span<const float> q, std::span<const float> k, std::span<const float> v,
                              const DecodeProblem& p, const Options& options) {
  const char* where = "cuda::ops::DecodeProblem";
  require(p.num_q_heads > 0 && p.num_kv_heads > 0 && p.num_q_heads % p.num_kv_heads == 0,
          "query heads must be a positive multiple of KV heads", where);
  require(p.head_dim >= 1 && p.head_dim <= detail::simple_max_head_dim(), "head_dim must be in [1, 256]", where);
  require(p.position >= 0 && p.prefill >= 1 && p.prefill <= p.position + 1,
          "position must be >= 0 and prefill in [1, position + 1]", where);
  require(p.windows.empty() || p.windows.size() == static_cast<std::size_t>(p.num_kv_heads),
          "windows must hold one value per KV head", where);
  require(p.sinks >= 0, "sinks must be >= 0", where);
  const int hkv = p.num_kv_heads, d = p.head_dim, n = p.position + 1;
  const std::size_t kn = static_cast<std::size_t>(n) * hkv * d;
  require(q.size() == static_cast<std::size_t>(p.num_q_heads) * d && k.size() == kn && v.size() == kn,
          "q must be [Hq, d], k and v [position + 1, Hkv, d]", "cuda::ops::decode_attention");
  // The layout of one layer: per KV head its window and rows, packed.
  std::vector<int> windows(static_cast<std::size_t>(hkv), 0);
  std::vector<long long> offsets(static_cast<std::size_t>(hkv));
  std::vector<long long> rows(static_cast<std::size_t>(hkv));
  long long total = 0;
  for (int g = 0; g < hkv; ++g) {
    const int w = p.windows.empty() ? 0 : p.windows[static_cast<std::size_t>(g)];
    require(w >= 0, "window must be >= 0 (0 = full)", where);
    windows[static_cast<std::size_t>(g)] = w;
    offsets[static_cast<std::size_t>(g)] = total;
    rows[static_cast<std::size_t>(g)] = kv::rows(w > 0, w, p.sinks, n);
    total += rows[static_cast<std::size_t>(g)];
  }
  require_device(options.device);
  DeviceGuard guard(options.device);
  const std::size_t cache_values = static_cast<std::size_t>(total) * d;
  DeviceBuffer ck(cache_values * sizeof(std::uint16_t), "cache keys");
  DeviceBuffer cv(cache_values * sizeof(std::uint16_t), "cache values");
  BOSCH_CUDA_CHECK(cudaMemset(ck.get(), 0xff, ck.bytes()));  // NaN: unwritten slots show up
  BOSCH_CUDA_CHECK(cudaMemset(cv.get(), 0xff, cv.bytes()));
  DeviceBuffer doff = upload<long long>(offsets, "cache offsets");
  DeviceBuffer dwin = upload<int>(windows, "cache windows");
  DeviceBuffer dq = upload_half(q, options.dtype, "q");
  DeviceBuffer dk = upload_half(k, options.dtype, "k");
  DeviceBuffer dv = upload_half(v, options.dtype, "v");
  detail::KvCacheArgs cache;
  cache.k = ck.get();
  cache.v = cv.get();
  cache.offsets = doff.get<const long long>();
  cache.windows = dwin.get<const int>();
  cache.sinks = p.sinks;
  cache.num_kv_heads = hkv;
  cache.head_dim = d;
  cache.elem = detail::elem_of(options.dtype);
  // Writes as the backend issues them: one prefill of [0, prefill), then one
  // decode step per position.
  detail::launch_kv_write(cache, 0, dk.get(), dv.get(), p.prefill, 0, p.prefill, nullptr);
  const std::size_t row = static_cast<std::size_t>(hkv) * d;
  for (int j = p.prefill; j < n; ++j)
    detail::launch_kv_write(cache, 0, static_cast<const std::uint16_t*>(dk.get()) + j * row,
                            static_cast<const std::uint16_t*>(dv.get()) + j * row, 1, j, j, nullptr);
  detail::DecodeAttentionArgs a;
  a.cache = cache;
  a.layer = 0;
  a.q = dq.get();
  a.num_q_heads = p.num_q_heads;
  a.position = p.position;
  a.chunks = detail::decode_chunks(windows, p.sinks, p.position);
  DeviceBuffer partial(static_cast<std::size_t>(p.num_q_heads) * a.chunks * (d + 2) * sizeof(float),
                       "partial results");
  DeviceBuffer out(static_cast<std::size_t>(p.num_q_heads) * d * sizeof(std::uint16_t), "output");
  a.partial = partial.get<float>();
  a.out = out.get();
  a.scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  detail::launch_decode_attention(a, nullptr);
  DecodeResult r;
  r.out = download_half(out, static_cast<std::size_t>(p.num_q_heads) * d, options.dtype);
  const std::vector<float> all_k = download_half(ck, cache_values, options.dtype);
  const std::vector<float> all_v = download_half(cv, cache_values, options.dtype);
  for (int g = 0; g < hkv; ++g) {
    const auto from = static_cast<std::ptrdiff_t>(offsets[static_cast<std::size_t>(g)] * d);
    const auto count = static_cast<std::ptrdiff_t>(rows[static_cast<std::size_t>(g)] * d);
    r.keys.emplace_back(all_k.begin() + from, all_k.begin() + from + count);
    r.values.emplace_back(all_v.begin() + from, all_v.begin() + from + count);
  }
  return r;
}

struct AttentionBench::Impl {
  AttentionProblem problem;
  int device = 0;
  std::unique_ptr<AttentionDevice> dev;
  DeviceBuffer q, k, v, out;
  cudaEvent_t start = nullptr, stop = nullptr;
  ~Impl() {
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
  }
};

AttentionBench::AttentionBench(const AttentionProblem& problem, const Options& options,
                               std::uint64_t seed)
    : impl_(std::make_unique<Impl>()) {
  check_problem(problem);
  require_device(options.device);
  DeviceGuard guard(options.device);
  Impl& m = *impl_;
  m.problem = problem;
  m.device = options.device;
  m.dev = std::make_unique<AttentionDevice>(problem, options);
  const std::size_t n = static_cast<std::size_t>(problem.rows());
  const std::size_t qn = n * problem.num_q_heads * problem.head_dim;
  const std::size_t kn = n * problem.num_kv_heads * problem.head_dim;
  boost::random::mt19937_64 rng(seed);
  boost::random::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  // 2^20 random values, repeated with a shift per block: random enough for
  // timing, and quick to make for 32k-token problems.
  std::vector<float> pool(std::size_t{1} << 20);
  for (float& f : pool) f = uniform(rng);
  auto fill = [&](std::size_t count, const char* what) {
    std::vector<float> host(count);
    for (std::size_t i = 0; i < count; ++i) host[i] = pool[(i + i / pool.size() * 7919) % pool.size()];
    return upload_half(host, options.dtype, what);
  };
  m.q = fill(qn, "q");
  m.k = fill(kn, "k");
  m.v = fill(kn, "v");
  m.out = DeviceBuffer(qn * sizeof(std::uint16_t), "output");
  m.dev->args.q = m.q.get();
  m.dev->args.k = m.k.get();
  m.dev->args.v = m.v.get();
  m.dev->args.out = m.out.get();
  BOSCH_CUDA_CHECK(cudaEventCreate(&m.start));
  BOSCH_CUDA_CHECK(cudaEventCreate(&m.stop));
  detail::launch_attention(m.dev->args, nullptr);  // warm-up (module load, caches)
  BOSCH_CUDA_CHECK(cudaDeviceSynchronize());
}

AttentionBench::~AttentionBench() = default;

const AttentionProblem& AttentionBench::problem() const noexcept { return impl_->problem; }

double AttentionBench::run(int iterations) {
  require(iterations >= 1, "iterations must be >= 1", "cuda::ops::AttentionBench::run");
  Impl& m = *impl_;
  DeviceGuard guard(m.device);
  BOSCH_CUDA_CHECK(cudaEventRecord(m.start, nullptr));
  for (int i = 0; i < iterations; ++i) detail::launch_attention(m.dev->args, nullptr);
  BOSCH_CUDA_CHECK(cudaEventRecord(m.stop, nullptr));
  BOSCH_CUDA_CHECK(cudaEventSynchronize(m.stop));
  float ms = 0;
  BOSCH_CUDA_CHECK(cudaEventElapsedTime(&ms, m.start, m.stop));
  return static_cast<double>(ms) / iterations;
}

}  // namespace bosch::cuda::ops
