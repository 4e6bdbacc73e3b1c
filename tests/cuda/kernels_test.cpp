// The CUDA kernels one by one against float64 references computed from the
// same (rounded) inputs. Without a GPU every case prints
// "SKIPPED: no CUDA device: <reason>" and passes.
//
// Tolerances, |got - ref| <= atol + rtol |ref| (u = unit roundoff of the
// 16-bit type: bf16 2^-8, fp16 2^-11):
// - RMSNorm, SwiGLU, RoPE, Q/K head norm: the kernel computes in fp32 and
//   rounds its output once to 16 bits, so rtol = u plus 1e-5 for the fp32
//   arithmetic (sum of squares, sin/cos tables, expf); atol covers results
//   that cancel to near zero (1e-5 of the input scale).
// - Attention, tensor-core kernel: P is rounded to 16 bits before P V (as in
//   FlashAttention-2) and the row sum adds the same rounded values, so the
//   output is an exact convex combination with weights perturbed by at most
//   2u relative: error <= 2u max|v|, plus one rounding u |ref| of the output.
//   atol = 2.5 u max|v|, rtol = 1.1 u.
// - Attention, CUDA-core kernel (P kept in fp32): atol = 0.25 u max|v| for
//   the fp32 online softmax (rescaled once per key: errors of a few 1e-6
//   relative over hundreds of keys), rtol = 1.1 u.
// - Decode attention (one query against the hybrid KV cache, P in fp32, key
//   chunks combined in fp32): the CUDA-core kernel's tolerance; the cache the
//   write kernel filled must hold every key the query sees, bit for bit.

#include "../cpu/tiny_model.hpp"
#include "cuda_support.hpp"

#include <bosch/cuda/attention_tiles.hpp>
#include <bosch/cuda/half.hpp>
#include <bosch/cuda/ops.hpp>
#include <bosch/model/kv_slots.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>
#include <boost/random/uniform_real_distribution.hpp>

#include <cmath>
#include <numbers>
#include <vector>

using namespace bosch;
using cuda::DType;

namespace {

std::vector<float> random_vector(std::size_t n, double lo, double hi, std::uint64_t seed) {
  boost::random::mt19937_64 rng(seed);
  boost::random::uniform_real_distribution<double> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(u(rng));
  return v;
}

std::vector<float> rounded(std::vector<float> v, DType t) {
  for (auto& x : v) x = cuda::round_to(x, t);
  return v;
}

// RoPE inverse frequencies, written from the Hugging Face formulas
// (independently of cpu::rope_inv_freq, which the backend uses).
std::vector<double> inv_freq(const model::Config& c) {
  std::vector<double> f;
  for (int i = 0; i < c.head_dim / 2; ++i) f.push_back(std::pow(c.rope_theta, -2.0 * i / c.head_dim));
  const auto& s = c.rope_scaling;
  if (s.type == "linear") {
    for (auto& x : f) x /= s.factor;
  } else if (s.type == "llama3") {
    const double low = s.original_max_position / s.low_freq_factor;
    const double high = s.original_max_position / s.high_freq_factor;
    for (auto& x : f) {
      const double wavelen = 2 * std::numbers::pi / x;
      if (wavelen > low) {
        x /= s.factor;
      } else if (wavelen >= high) {
        const double t = (s.original_max_position / wavelen - s.low_freq_factor) /
                         (s.high_freq_factor - s.low_freq_factor);
        x = (1 - t) * x / s.factor + t * x;
      }
    }
  }
  return f;
}

// Reference of ops::head_transform in double.
std::vector<double> head_transform_ref(const std::vector<float>& x, int n, int heads, int d,
                                       const std::vector<float>& bias, const std::vector<float>& gain,
                                       double eps, const model::Config* rope,
                                       const std::vector<int>& positions) {
  std::vector<double> out(x.size());
  std::vector<double> f;
  if (rope) {
    model::Config c = *rope;
    c.head_dim = d;
    f = inv_freq(c);
  }
  for (int t = 0; t < n; ++t)
    for (int h = 0; h < heads; ++h) {
      const std::size_t base = (static_cast<std::size_t>(t) * heads + h) * d;
      std::vector<double> v(static_cast<std::size_t>(d));
      for (int c = 0; c < d; ++c) v[c] = x[base + c] + (bias.empty() ? 0.0 : bias[static_cast<std::size_t>(h) * d + c]);
      if (!gain.empty()) {
        double ss = 0;
        for (double e : v) ss += e * e;
        const double inv = 1.0 / std::sqrt(ss / d + eps);
        for (int c = 0; c < d; ++c) v[c] *= inv * gain[c];
      }
      if (rope) {
        const bool inter = rope->rope_style == model::RopeStyle::interleaved;
        std::vector<double> r = v;
        for (int i = 0; i < d / 2; ++i) {
          const int i0 = inter ? 2 * i : i, i1 = inter ? 2 * i + 1 : i + d / 2;
          const double a = positions[static_cast<std::size_t>(t)] * f[static_cast<std::size_t>(i)];
          r[i0] = v[i0] * std::cos(a) - v[i1] * std::sin(a);
          r[i1] = v[i0] * std::sin(a) + v[i1] * std::cos(a);
        }
        v = r;
      }
      for (int c = 0; c < d; ++c) out[base + c] = v[c];
    }
  return out;
}

// Reference attention in double over packed sequences.
std::vector<double> attention_ref(const std::vector<float>& q, const std::vector<float>& k,
                                  const std::vector<float>& v, const cuda::ops::AttentionProblem& p) {
  const int hq = p.num_q_heads, hkv = p.num_kv_heads, d = p.head_dim, group = hq / hkv;
  std::vector<double> out(q.size(), 0.0);
  int base = 0;
  for (std::size_t b = 0; b < p.lengths.size(); ++b) {
    const int len = p.lengths[b];
    const int sinks = p.sinks.empty() ? 0 : p.sinks[p.sinks.size() == 1 ? 0 : b];
    for (int h = 0; h < hq; ++h) {
      const int g = h / group;
      int window = 0;
      if (p.windows.size() == static_cast<std::size_t>(hkv)) window = p.windows[static_cast<std::size_t>(g)];
      else if (!p.windows.empty()) window = p.windows[b * hkv + g];
      for (int i = 0; i < len; ++i) {
        const float* qi = q.data() + (static_cast<std::size_t>(base + i) * hq + h) * d;
        std::vector<double> s;
        std::vector<int> keys;
        double mx = -INFINITY;
        for (int j = 0; j <= i; ++j) {
          if (!cuda::key_visible(i, j, window, sinks)) continue;
          const float* kj = k.data() + (static_cast<std::size_t>(base + j) * hkv + g) * d;
          double dot = 0;
          for (int c = 0; c < d; ++c) dot += static_cast<double>(qi[c]) * kj[c];
          dot /= std::sqrt(static_cast<double>(d));
          s.push_back(dot);
          keys.push_back(j);
          mx = std::max(mx, dot);
        }
        double sum = 0;
        for (auto& e : s) sum += (e = std::exp(e - mx));
        double* oi = out.data() + (static_cast<std::size_t>(base + i) * hq + h) * d;
        for (std::size_t m = 0; m < s.size(); ++m) {
          const float* vj = v.data() + (static_cast<std::size_t>(base + keys[m]) * hkv + g) * d;
          for (int c = 0; c < d; ++c) oi[c] += s[m] / sum * vj[c];
        }
      }
    }
    base += len;
  }
  return out;
}

double max_abs(const std::vector<float>& v) {
  double m = 0;
  for (float x : v) m = std::max(m, static_cast<double>(std::abs(x)));
  return m;
}

// Runs one attention problem with random inputs and checks it.
void check_attention(const std::string& name, const cuda::ops::AttentionProblem& p,
                     const cuda::Options& options, std::uint64_t seed, double q_scale = 3.0) {
  const std::size_t n = static_cast<std::size_t>(p.rows());
  const std::size_t qn = n * p.num_q_heads * p.head_dim, kn = n * p.num_kv_heads * p.head_dim;
  // Inputs rounded to the device type first: the reference sees what the kernel sees.
  const auto q = rounded(random_vector(qn, -q_scale, q_scale, seed), options.dtype);
  const auto k = rounded(random_vector(kn, -1.0, 1.0, seed + 1), options.dtype);
  const auto v = rounded(random_vector(kn, -1.0, 1.0, seed + 2), options.dtype);
  const auto got = cuda::ops::attention(q, k, v, p, options);
  const auto ref = attention_ref(q, k, v, p);
  const double u = cuda::unit_roundoff(options.dtype);
  const bool tc = options.attention == cuda::AttentionKernel::tensor_core ||
                  (options.attention == cuda::AttentionKernel::automatic &&
                   (p.head_dim == 64 || p.head_dim == 128));
  const test::Tolerance tol{(tc ? 2.5 : 0.25) * u * max_abs(v) + 1e-6, 1.1 * u};
  test::check_close(name + (tc ? " [tensor cores, " : " [CUDA cores, ") + cuda::to_string(options.dtype) + "]",
                    got, ref, tol);
}

}  // namespace

TEST_CASE("CUDA RMSNorm matches float64") {
  if (!test::cuda_device()) return;
  for (DType t : {DType::bf16, DType::fp16}) {
    for (int cols : {8, 64, 576, 1000}) {
      const int rows = 37;
      const auto x = random_vector(static_cast<std::size_t>(rows) * cols, -3.0, 3.0, test::seed(10 + cols));
      const auto gain = random_vector(static_cast<std::size_t>(cols), 0.5, 1.5, test::seed(11 + cols));
      const double eps = 1e-5;
      cuda::Options o;
      o.dtype = t;
      const auto got = cuda::ops::rms_norm(x, rows, cols, gain, static_cast<float>(eps), o);
      std::vector<double> ref(x.size());
      for (int r = 0; r < rows; ++r) {
        double ss = 0;
        for (int c = 0; c < cols; ++c) ss += static_cast<double>(x[r * cols + c]) * x[r * cols + c];
        const double inv = 1.0 / std::sqrt(ss / cols + eps);
        for (int c = 0; c < cols; ++c) ref[r * cols + c] = x[r * cols + c] * inv * gain[c];
      }
      const double u = cuda::unit_roundoff(t);
      test::check_close("rms_norm " + std::to_string(cols) + " " + cuda::to_string(t), got, ref,
                        {1e-6, u + 1e-5});
    }
  }
}

TEST_CASE("CUDA RoPE (interleaved and neox, llama3 scaling), Q/K norm and bias match float64") {
  if (!test::cuda_device()) return;
  const int n = 50, heads = 3;
  std::vector<int> positions(n);
  boost::random::mt19937_64 rng(test::seed(20));
  boost::random::uniform_int_distribution<int> pos(0, 40000);
  for (int t = 0; t < n; ++t) positions[t] = t < 10 ? t : pos(rng);  // small and large angles
  for (DType dt : {DType::bf16, DType::fp16}) {
    for (int d : {8, 64, 128}) {
      const auto x = random_vector(static_cast<std::size_t>(n) * heads * d, -2.0, 2.0, test::seed(21 + d));
      const auto bias = random_vector(static_cast<std::size_t>(heads) * d, -0.5, 0.5, test::seed(22 + d));
      const auto gain = random_vector(static_cast<std::size_t>(d), 0.7, 1.3, test::seed(23 + d));
      for (auto style : {model::RopeStyle::interleaved, model::RopeStyle::neox}) {
        for (const char* scaling : {"none", "llama3", "linear"}) {
          model::Config c;
          c.head_dim = d;
          c.rope_theta = 500000.0;
          c.rope_style = style;
          c.rope_scaling.type = scaling;
          c.rope_scaling.factor = 8.0;
          c.rope_scaling.low_freq_factor = 1.0;
          c.rope_scaling.high_freq_factor = 4.0;
          c.rope_scaling.original_max_position = 8192;
          cuda::Options o;
          o.dtype = dt;
          const std::string name = std::string("rope d") + std::to_string(d) +
                                   (style == model::RopeStyle::neox ? " neox " : " interleaved ") +
                                   scaling + " " + cuda::to_string(dt);
          const double u = cuda::unit_roundoff(dt);
          cuda::ops::HeadTransform tr;
          tr.num_heads = heads;
          tr.head_dim = d;
          tr.rope = &c;
          test::check_close(name, cuda::ops::head_transform(x, n, tr, positions, o),
                            head_transform_ref(x, n, heads, d, {}, {}, 0, &c, positions),
                            {1e-5 * 2.0, u + 1e-5});
          // Qwen2 bias + Qwen3 head norm + RoPE in one launch.
          tr.bias = bias;
          tr.norm_gain = gain;
          tr.eps = 1e-6f;
          test::check_close(name + " +bias +qk_norm", cuda::ops::head_transform(x, n, tr, positions, o),
                            head_transform_ref(x, n, heads, d, bias, gain, 1e-6, &c, positions),
                            {1e-5 * 2.0, u + 1e-5});
        }
      }
      // Head norm alone (no RoPE).
      cuda::ops::HeadTransform tr;
      tr.num_heads = heads;
      tr.head_dim = d;
      tr.norm_gain = gain;
      tr.eps = 1e-6f;
      cuda::Options o;
      o.dtype = dt;
      test::check_close("qk_norm d" + std::to_string(d), cuda::ops::head_transform(x, n, tr, positions, o),
                        head_transform_ref(x, n, heads, d, {}, gain, 1e-6, nullptr, positions),
                        {1e-6, cuda::unit_roundoff(dt) + 1e-5});
    }
  }
}

TEST_CASE("CUDA SwiGLU matches float64") {
  if (!test::cuda_device()) return;
  for (DType t : {DType::bf16, DType::fp16}) {
    const int n = 29, inter = 300;
    const auto gu = random_vector(static_cast<std::size_t>(n) * 2 * inter, -8.0, 8.0, test::seed(30));
    cuda::Options o;
    o.dtype = t;
    const auto got = cuda::ops::swiglu(gu, n, inter, o);
    std::vector<double> ref(static_cast<std::size_t>(n) * inter);
    for (int r = 0; r < n; ++r)
      for (int i = 0; i < inter; ++i) {
        const double g = gu[r * 2 * inter + i], up = gu[r * 2 * inter + inter + i];
        ref[r * inter + i] = g / (1.0 + std::exp(-g)) * up;
      }
    test::check_close(std::string("swiglu ") + cuda::to_string(t), got, ref,
                      {1e-6, cuda::unit_roundoff(t) + 1e-5});
  }
}

TEST_CASE("CUDA attention: full, SWA, sinks, GQA, varlen, both kernels, both types") {
  if (!test::cuda_device()) return;
  using cuda::ops::AttentionProblem;
  std::uint64_t s = test::seed(40);
  for (DType t : {DType::bf16, DType::fp16}) {
    cuda::Options o;
    o.dtype = t;
    for (int d : {64, 128}) {
      AttentionProblem full{4, 2, d, {200}, {}, {}};
      check_attention("full GQA 4/2 n200 d" + std::to_string(d), full, o, s += 3);
      AttentionProblem swa{4, 2, d, {300}, {37, 37}, {0}};
      check_attention("SWA w37 d" + std::to_string(d), swa, o, s += 3);
      AttentionProblem sinks{8, 2, d, {300}, {0, 20}, {4}};
      check_attention("mixed full/SWA w20 s4 GQA 8/2 d" + std::to_string(d), sinks, o, s += 3);
      AttentionProblem mha{3, 3, d, {130}, {1, 64, 0}, {3}};
      check_attention("MHA w1/w64/full s3 d" + std::to_string(d), mha, o, s += 3);
      AttentionProblem varlen{4, 1, d, {1, 17, 130, 64, 65}, {0, 5, 100, 16, 1}, {0, 2, 0, 70, 1}};
      check_attention("varlen 5 sequences d" + std::to_string(d), varlen, o, s += 3);
    }
    // Every tile shape of the tensor-core kernel.
    for (int qt : {64, 128})
      for (int kt : {32, 64}) {
        cuda::Options ot = o;
        ot.query_tile = qt;
        ot.key_tile = kt;
        AttentionProblem p{6, 2, 64, {250, 33}, {0, 45}, {2}};
        check_attention("tiles " + std::to_string(qt) + "x" + std::to_string(kt), p, ot, s += 3);
      }
    // The CUDA-core kernel: other head sizes and the same problems.
    cuda::Options simple = o;
    simple.attention = cuda::AttentionKernel::simple;
    for (int d : {8, 40, 64, 96, 256}) {
      AttentionProblem p{4, 2, d, {150, 7}, {0, 11}, {3}};
      check_attention("simple d" + std::to_string(d), p, simple, s += 3);
    }
  }
}

TEST_CASE("CUDA attention: a window covering the sequence gives exactly the full result") {
  if (!test::cuda_device()) return;
  for (auto kernel : {cuda::AttentionKernel::tensor_core, cuda::AttentionKernel::simple}) {
    cuda::Options o;
    o.attention = kernel;
    cuda::ops::AttentionProblem full{4, 2, 64, {190}, {0, 0}, {0}};
    cuda::ops::AttentionProblem wide{4, 2, 64, {190}, {190, 500}, {3}};
    const std::size_t qn = 190 * 4 * 64, kn = 190 * 2 * 64;
    const auto q = random_vector(qn, -3, 3, test::seed(50));
    const auto k = random_vector(kn, -1, 1, test::seed(51));
    const auto v = random_vector(kn, -1, 1, test::seed(52));
    const auto a = cuda::ops::attention(q, k, v, full, o);
    const auto b = cuda::ops::attention(q, k, v, wide, o);
    CHECK(a == b);
    // And the same call twice is bit-identical (no atomics, fixed reduction order).
    CHECK(cuda::ops::attention(q, k, v, full, o) == a);
    // A narrow window changes the result.
    cuda::ops::AttentionProblem narrow{4, 2, 64, {190}, {8, 8}, {0}};
    CHECK(cuda::ops::attention(q, k, v, narrow, o) != a);
  }
}

namespace {

// Reference of one decode query in float64 over the whole sequence: query
// head h at position p attends the keys j <= p that its KV head's window and
// the sinks let it see (cuda::key_visible), independently of the cache's
// slots.
std::vector<double> decode_ref(const std::vector<float>& q, const std::vector<float>& k, const std::vector<float>& v,
                               const cuda::ops::DecodeProblem& p) {
  const int hq = p.num_q_heads, hkv = p.num_kv_heads, d = p.head_dim, group = hq / hkv;
  std::vector<double> out(static_cast<std::size_t>(hq) * d, 0.0);
  for (int h = 0; h < hq; ++h) {
    const int g = h / group;
    const int window = p.windows.empty() ? 0 : p.windows[static_cast<std::size_t>(g)];
    std::vector<double> s;
    std::vector<int> keys;
    double mx = -INFINITY;
    for (int j = 0; j <= p.position; ++j) {
      if (!cuda::key_visible(p.position, j, window, p.sinks)) continue;
      double dot = 0;
      for (int c = 0; c < d; ++c)
        dot += static_cast<double>(q[static_cast<std::size_t>(h) * d + c]) *
               k[(static_cast<std::size_t>(j) * hkv + g) * d + c];
      s.push_back(dot / std::sqrt(static_cast<double>(d)));
      keys.push_back(j);
      mx = std::max(mx, s.back());
    }
    double sum = 0;
    for (auto& e : s) sum += (e = std::exp(e - mx));
    for (std::size_t m = 0; m < s.size(); ++m)
      for (int c = 0; c < d; ++c)
        out[static_cast<std::size_t>(h) * d + c] +=
            s[m] / sum * v[(static_cast<std::size_t>(keys[m]) * hkv + g) * d + c];
  }
  return out;
}

// Runs one decode problem and checks the output against decode_ref and the
// cache against the host's account of the writes: replaying the write
// sequence with kv::stored / kv::slot gives the position each slot must
// hold, every position the query sees is among them, and the slot holds
// exactly that position's (rounded) key and value.
void check_decode(const std::string& name, const cuda::ops::DecodeProblem& p, DType t, std::uint64_t seed) {
  const int hkv = p.num_kv_heads, d = p.head_dim, n = p.position + 1;
  const std::size_t kn = static_cast<std::size_t>(n) * hkv * d;
  const auto q = rounded(random_vector(static_cast<std::size_t>(p.num_q_heads) * d, -3.0, 3.0, seed), t);
  const auto k = rounded(random_vector(kn, -1.0, 1.0, seed + 1), t);
  const auto v = rounded(random_vector(kn, -1.0, 1.0, seed + 2), t);
  cuda::Options o;
  o.dtype = t;
  const auto got = cuda::ops::decode_attention(q, k, v, p, o);
  const double u = cuda::unit_roundoff(t);
  // P stays in fp32 (as in the CUDA-core kernel): the tolerance of that kernel.
  test::check_close(name + " [" + cuda::to_string(t) + "]", got.out, decode_ref(q, k, v, p),
                    {0.25 * u * max_abs(v) + 1e-6, 1.1 * u});
  REQUIRE(got.keys.size() == static_cast<std::size_t>(hkv));
  for (int g = 0; g < hkv; ++g) {
    const int w = p.windows.empty() ? 0 : p.windows[static_cast<std::size_t>(g)];
    const bool swa = w > 0;
    const auto rows = static_cast<std::size_t>(kv::rows(swa, w, p.sinks, n));
    REQUIRE(got.keys[static_cast<std::size_t>(g)].size() == rows * d);
    std::vector<int> holder(rows, -1);
    auto write = [&](int j, int first_reader) {
      if (kv::stored(swa, w, p.sinks, j, first_reader))
        holder[static_cast<std::size_t>(kv::slot(swa, w, p.sinks, j))] = j;
    };
    for (int j = 0; j < p.prefill; ++j) write(j, p.prefill);
    for (int j = p.prefill; j < n; ++j) write(j, j);
    for (int j = 0; j <= p.position; ++j)
      if (cuda::key_visible(p.position, j, w, p.sinks)) {
        INFO(name << ": KV head " << g << ", position " << j);
        CHECK(holder[static_cast<std::size_t>(kv::slot(swa, w, p.sinks, j))] == j);
      }
    bool exact = true;
    for (std::size_t r = 0; r < rows; ++r) {
      if (holder[r] < 0) continue;
      const std::size_t src = (static_cast<std::size_t>(holder[r]) * hkv + g) * d;
      for (int c = 0; c < d; ++c) {
        exact = exact && got.keys[static_cast<std::size_t>(g)][r * d + c] == k[src + c];
        exact = exact && got.values[static_cast<std::size_t>(g)][r * d + c] == v[src + c];
      }
    }
    INFO(name << ": KV head " << g);
    CHECK(exact);
  }
}

}  // namespace

TEST_CASE("CUDA KV-cache writes and decode attention: full and SWA heads, sinks, past the ring, long contexts") {
  if (!test::cuda_device()) return;
  using cuda::ops::DecodeProblem;
  std::uint64_t s = test::seed(60);
  for (DType t : {DType::bf16, DType::fp16}) {
    for (int d : {8, 64, 128, 96, 256}) {
      const std::string dim = " d" + std::to_string(d);
      // A query early in the sequence (the ring not yet full), the ring
      // wrapped many times, and sinks that overlap the window.
      check_decode("full, p 0" + dim, DecodeProblem{4, 2, d, 0, 1, {}, 0}, t, s += 3);
      check_decode("mixed w5 s0, p 3" + dim, DecodeProblem{4, 2, d, 3, 2, {0, 5}, 0}, t, s += 3);
      check_decode("mixed w7 s3, p 100, prefill 40" + dim, DecodeProblem{6, 3, d, 100, 40, {7, 0, 1}, 3}, t, s += 3);
      check_decode("all SWA w16 s2, p 300, prefill 1" + dim, DecodeProblem{4, 1, d, 300, 1, {16}, 2}, t, s += 3);
      check_decode("MHA w4 s9, p 6 (sinks beyond p)" + dim, DecodeProblem{2, 2, d, 6, 3, {4, 4}, 9}, t, s += 3);
    }
    // Several key chunks per head (chunk boundaries, the combine kernel), GQA 3:1.
    check_decode("full + SWA w300 s4, p 1500", DecodeProblem{9, 3, 64, 1500, 1200, {0, 300, 0}, 4}, t, s += 3);
    check_decode("all full, p 700, prefill 700", DecodeProblem{9, 3, 64, 699, 700, {}, 0}, t, s += 3);
  }
}
