// The CUDA forward pass against the CPU backend (fp32) on tiny random models,
// the stories260K fixture (and its float64 reference logits) and, when
// fetched, the default SmolLM2 model; bitwise identities (determinism,
// layer-wise = whole, wide window = full); batches; errors. Without a GPU
// every device case prints "SKIPPED: no CUDA device: <reason>" and passes.
//
// Tolerance of a whole forward (|got - ref| <= atol + rtol |ref|). The CUDA
// backend rounds every weight to 16 bits and the activations at about seven
// points per layer (norm outputs, Q/K/V, P and the attention output, SwiGLU),
// each with the same unit roundoff u (bf16 2^-8, fp16 2^-11). How much that
// moves the logits depends on the model (a random model with sharp attention
// is far more sensitive than a trained one), so the tolerance is calibrated
// in the test itself: the CPU backend runs the model once with fp32 weights
// (the reference) and once with the weights rounded to the 16-bit type; the
// largest and the mean logit change of the latter, E_max and E_mean, measure
// the model's sensitivity to one rounding of every weight. Activations add
// errors of the same kind and order, so the CUDA logits must satisfy
//   |got - ref| <= 4 E_max + 2 u rms(ref)  +  u |ref|   (every logit)
//   mean |got - ref| <= 4 E_mean + u rms(ref)/2         (on average)
// i.e. weights and activations together may cost four times what the weights
// alone cost. (A float64 emulation of the device's rounding points, run on the
// CPU over this file's models, gave 1.1-2.3 times the weight-only largest
// error and 1.3-1.8 times its mean: a margin of at least 1.7.) A wrong kernel (bad RoPE pairing, wrong window, wrong KV head)
// moves logits by a sizeable fraction of rms(ref) and fails. In addition the
// argmax must agree wherever the reference's top-2 margin exceeds twice the
// threshold.

#include "../cpu/tiny_model.hpp"
#include "cuda_support.hpp"
#include "logits_check.hpp"

#include <bosch/cpu/backend.hpp>
#include <bosch/cuda/backend.hpp>
#include <bosch/eval/backend.hpp>
#include <bosch/model/model.hpp>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

using namespace bosch;
using cuda::DType;
using test::check_logits;
using test::error_stats;
using test::ErrorStats;
using test::rounded_weights;

static_assert(bosch::Backend<cuda::Backend>, "cuda::Backend models the Backend concept");
static_assert(std::copyable<cuda::Residual>);

namespace {

// CUDA forward vs CPU forward (fp32 and rounded weights) of one model.
void compare_forward(const std::string& name, const model::Model& m, const std::vector<int>& tokens,
                     const AttentionWindows& windows, const std::vector<int>& positions,
                     const cuda::Options& options) {
  const auto ref = cpu::Backend(m).forward(tokens, windows, positions);
  const model::Model mr = rounded_weights(m, options.dtype);
  const auto ref_rounded = cpu::Backend(mr).forward(tokens, windows, positions);
  const cuda::Backend gpu(m, options);
  const auto got = gpu.forward(tokens, windows, positions);
  check_logits(name + " " + cuda::to_string(options.dtype), got, ref, ref_rounded,
               m.config.vocab_size, options.dtype);
}

// A mask with every other KV head windowed (layer-dependent offset).
HeadMask alternating(const HeadLayout& layout) {
  HeadMask mask(layout);
  for (int l = 0; l < layout.num_layers; ++l)
    for (int g = 0; g < layout.num_kv_heads; ++g) mask.set(l, g, (l + g) % 2 == 0);
  return mask;
}

model::Config tc_config(model::Arch arch, int head_dim) {
  model::Config c = test::tiny_config(arch, 2);
  c.hidden_size = 256;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = head_dim;
  c.intermediate_size = 512;
  c.num_layers = 3;
  c.vocab_size = 300;
  c.max_position = 4096;
  return c;
}

// stories260K's reference logits (float64, full attention): tokens and rows.
bool read_reference(const std::filesystem::path& path, std::vector<int>& tokens,
                    std::vector<float>& logits) {
  std::ifstream in(path);
  if (!in) return false;
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("# tokens:", 0) == 0) {
      std::istringstream s(line.substr(9));
      int t;
      while (s >> t) tokens.push_back(t);
    } else if (!line.empty() && line[0] != '#') {
      std::istringstream s(line);
      int position;
      s >> position;
      float v;
      while (s >> v) logits.push_back(v);
    }
  }
  return !tokens.empty();
}

}  // namespace

TEST_CASE("CUDA forward matches the CPU backend: tiny llama/qwen2/qwen3 (CUDA-core attention)") {
  if (!test::cuda_device()) return;
  for (auto arch : {model::Arch::llama, model::Arch::qwen2, model::Arch::qwen3}) {
    const auto cfg = test::tiny_config(arch, 2);
    const auto m = test::tiny_model(cfg, test::seed(200 + static_cast<int>(arch)));
    const auto tokens = test::random_tokens(70, cfg.vocab_size, test::seed(210));
    const auto positions = test::all_positions(70);
    for (DType t : {DType::bf16, DType::fp16}) {
      cuda::Options o;
      o.dtype = t;
      const std::string name = model::to_string(arch);
      compare_forward(name + " full", m, tokens, AttentionWindows::full(), positions, o);
      compare_forward(name + " all SWA w5", m, tokens,
                      AttentionWindows::from_mask(HeadMask::filled(cfg.layout(), true), 5), positions, o);
      compare_forward(name + " mixed SWA w4 s2", m, tokens,
                      AttentionWindows::from_mask(alternating(cfg.layout()), 4, 2), positions, o);
    }
  }
}

TEST_CASE("CUDA forward matches the CPU backend: head_dim 64/128 (tensor-core attention)") {
  if (!test::cuda_device()) return;
  const std::vector<int> lengths = {300};
  for (auto [arch, d] : {std::pair{model::Arch::llama, 64}, std::pair{model::Arch::qwen2, 128},
                         std::pair{model::Arch::qwen3, 64}}) {
    auto cfg = tc_config(arch, d);
    cfg.tie_embeddings = arch != model::Arch::llama;  // one untied output projection
    const auto m = test::tiny_model(cfg, test::seed(220 + d));
    const auto tokens = test::random_tokens(300, cfg.vocab_size, test::seed(221));
    const auto positions = test::all_positions(300);
    const std::string name = std::string(model::to_string(arch)) + " d" + std::to_string(d);
    for (DType t : {DType::bf16, DType::fp16}) {
      cuda::Options o;
      o.dtype = t;
      compare_forward(name + " full", m, tokens, AttentionWindows::full(), positions, o);
      compare_forward(name + " mixed SWA w37 s4", m, tokens,
                      AttentionWindows::from_mask(alternating(cfg.layout()), 37, 4), positions, o);
    }
    cuda::Options tiles;
    tiles.query_tile = 128;
    tiles.key_tile = 32;
    tiles.row_chunk = 100;  // several GEMM chunks
    compare_forward(name + " tiles 128x32, chunks of 100 rows", m, tokens,
                    AttentionWindows::from_mask(alternating(cfg.layout()), 50, 1), positions, tiles);
    cuda::Options simple;
    simple.attention = cuda::AttentionKernel::simple;
    compare_forward(name + " CUDA-core attention", m, tokens,
                    AttentionWindows::from_mask(HeadMask::filled(cfg.layout(), true), 20), positions, simple);
  }
}

TEST_CASE("CUDA forward on stories260K matches the float64 reference logits and the CPU backend") {
  if (!test::cuda_device()) return;
  const auto path = test::fixture("models/stories260K.gguf");
  if (path.empty()) return;
  const model::Model m = model::load(path);
  std::vector<int> tokens;
  std::vector<float> reference;
  REQUIRE(read_reference(test::fixture("models/stories260K.logits.txt"), tokens, reference));
  REQUIRE(reference.size() == tokens.size() * static_cast<std::size_t>(m.config.vocab_size));
  const auto positions = test::all_positions(static_cast<int>(tokens.size()));
  for (DType t : {DType::bf16, DType::fp16}) {
    cuda::Options o;
    o.dtype = t;
    const cuda::Backend gpu(m, o);
    const auto got = gpu.forward(tokens, AttentionWindows::full(), positions);
    const auto rounded = cpu::Backend(rounded_weights(m, t)).forward(tokens, AttentionWindows::full(), positions);
    check_logits(std::string("stories260K vs float64 reference ") + cuda::to_string(t), got, reference,
                 rounded, m.config.vocab_size, t);
    // Longer random input, windowed heads with sinks, against the CPU backend.
    const auto long_tokens = test::random_tokens(256, m.config.vocab_size, test::seed(230));
    compare_forward("stories260K n256 mixed SWA w16 s2", m, long_tokens,
                    AttentionWindows::from_mask(alternating(m.config.layout()), 16, 2),
                    test::all_positions(256), o);
  }
}

TEST_CASE("CUDA forward on the default model (SmolLM2-135M) matches the CPU backend") {
  if (!test::cuda_device()) return;
  const auto path = test::default_model();
  if (path.empty()) return;
  const model::Model m = model::load(path);
  const auto text = test::fixture("text/emma.txt");
  std::vector<int> tokens;
  if (!text.empty()) {
    std::ifstream in(text);
    std::string s(20000, '\0');
    in.read(s.data(), static_cast<std::streamsize>(s.size()));
    s.resize(static_cast<std::size_t>(in.gcount()));
    tokens = m.tokenizer.encode(s);
  }
  if (tokens.size() < 512) tokens = test::random_tokens(512, m.config.vocab_size, test::seed(240));
  tokens.resize(512);
  std::vector<int> positions;
  for (int p = 256; p < 512; p += 8) positions.push_back(p);
  cuda::Options o;
  compare_forward("SmolLM2 n512 full", m, tokens, AttentionWindows::full(), positions, o);
  compare_forward("SmolLM2 n512 all SWA w64 s4", m, tokens,
                  AttentionWindows::from_mask(HeadMask::filled(m.config.layout(), true), 64, 4), positions, o);
}

TEST_CASE("CUDA forward: bitwise identities (determinism, layer-wise, wide window, residual copies)") {
  if (!test::cuda_device()) return;
  for (int d : {8, 64}) {
    const auto cfg = d == 8 ? test::tiny_config(model::Arch::qwen3, 2) : tc_config(model::Arch::llama, 64);
    const auto m = test::tiny_model(cfg, test::seed(250 + d));
    const int n = 150;
    const auto tokens = test::random_tokens(n, cfg.vocab_size, test::seed(251));
    const auto positions = test::all_positions(n);
    const cuda::Backend gpu(m);
    const auto windows = AttentionWindows::from_mask(alternating(cfg.layout()), 9, 2);
    const auto a = gpu.forward(tokens, windows, positions);
    CHECK(gpu.forward(tokens, windows, positions) == a);  // same mask -> same bits

    // embed + run_layers in two parts + logits == forward, and the cached copy
    // of the stream entering layer k is untouched by running on.
    const int k = cfg.num_layers / 2 + 1;
    auto x = gpu.embed(tokens);
    gpu.run_layers(x, 0, k, windows);
    const cuda::Residual cached = x;
    const auto cached_host = cached.download();
    gpu.run_layers(x, k, cfg.num_layers, windows);
    CHECK(gpu.logits(x, positions) == a);
    CHECK(cached.download() == cached_host);
    cuda::Residual restart = cached;  // restart from the cache: same result
    gpu.run_layers(restart, k, k, windows);  // empty range: no-op
    CHECK(restart.download() == cached_host);
    gpu.run_layers(restart, k, cfg.num_layers, windows);
    CHECK(gpu.logits(restart, positions) == a);
    CHECK(restart.download() == x.download());
    // Assignment copies too; moves leave the source empty.
    cuda::Residual assigned;
    assigned = cached;
    CHECK(assigned.download() == cached_host);
    cuda::Residual moved = std::move(assigned);
    CHECK(assigned.n_tokens() == 0);
    CHECK(moved.download() == cached_host);
    // Upload/download round trip.
    const auto up = cuda::Residual::upload(cached_host, cached.n_tokens(), cached.hidden());
    CHECK(up.download() == cached_host);

    // A window at least as long as the sequence is exactly full attention.
    const auto full = gpu.forward(tokens, AttentionWindows::full(), positions);
    const auto wide = gpu.forward(tokens, AttentionWindows::from_mask(HeadMask::filled(cfg.layout(), true), n, 3),
                                  positions);
    CHECK(wide == full);
    CHECK(a != full);
  }
}

TEST_CASE("CUDA forward_batch: several sequences and several masks in one batch") {
  if (!test::cuda_device()) return;
  for (int d : {8, 64}) {
    const auto cfg = d == 8 ? test::tiny_config(model::Arch::llama, 2) : tc_config(model::Arch::qwen2, 64);
    const auto m = test::tiny_model(cfg, test::seed(260 + d));
    const cuda::Backend gpu(m);
    const std::vector<std::vector<int>> sequences = {
        test::random_tokens(90, cfg.vocab_size, test::seed(261)), {},
        test::random_tokens(1, cfg.vocab_size, test::seed(262)),
        test::random_tokens(200, cfg.vocab_size, test::seed(263))};
    const std::vector<std::vector<int>> positions = {{0, 45, 89}, {}, {0}, test::all_positions(200)};
    const auto w_full = AttentionWindows::full();
    const auto w_mixed = AttentionWindows::from_mask(alternating(cfg.layout()), 7, 1);
    const auto w_all = AttentionWindows::from_mask(HeadMask::filled(cfg.layout(), true), 12);
    const std::vector<const AttentionWindows*> per_sequence = {&w_mixed, &w_full, &w_all, &w_mixed};
    const auto batch = gpu.forward_batch(sequences, per_sequence, positions);
    REQUIRE(batch.size() == sequences.size());
    CHECK(batch[1].empty());
    const DType t = gpu.options().dtype;
    for (std::size_t b = 0; b < sequences.size(); ++b) {
      if (sequences[b].empty()) continue;
      const auto alone = gpu.forward(sequences[b], *per_sequence[b], positions[b]);
      const auto ref = cpu::Backend(m).forward(sequences[b], *per_sequence[b], positions[b]);
      const auto ref_rounded = cpu::Backend(rounded_weights(m, t)).forward(sequences[b], *per_sequence[b], positions[b]);
      // Alone and in a batch the kernels are the same; only cuBLAS may pick
      // another GEMM algorithm for another height, so compare with the
      // calibrated tolerance against the CPU, and closely with each other.
      check_logits("batch item " + std::to_string(b), batch[b], ref, ref_rounded, cfg.vocab_size, t);
      const ErrorStats e = error_stats(batch[b], alone);
      const ErrorStats w = error_stats(ref_rounded, ref);
      MESSAGE("batch item " << b << " vs alone: max |diff| " << e.max);
      CHECK(e.max <= 4 * w.max);
    }
    // One window set for all; run_layers_batch on cached streams.
    const auto shared = gpu.forward_batch(sequences, w_mixed, positions);
    std::vector<cuda::Residual> xs;
    for (const auto& s : sequences) xs.push_back(gpu.embed(s));
    std::vector<cuda::Residual*> ptrs;
    for (auto& x : xs) ptrs.push_back(&x);
    const std::vector<const AttentionWindows*> one = {&w_mixed};
    gpu.run_layers_batch(ptrs, 0, 1, one);
    gpu.run_layers_batch(ptrs, 1, cfg.num_layers, one);
    for (std::size_t b = 0; b < sequences.size(); ++b) {
      const auto l = gpu.logits(xs[b], positions[b]);
      REQUIRE(l.size() == shared[b].size());
      const ErrorStats e = error_stats(l, shared[b]);
      // Same stacked layers, so the same bits up to the logits GEMM, which
      // runs here on fewer rows (another cuBLAS algorithm may reorder the
      // fp32 sums: relative differences around 1e-6).
      MESSAGE("run_layers_batch item " << b << " vs forward_batch: max |diff| " << e.max);
      CHECK(e.max <= 1e-4 * test::rms(shared[b]));
    }
  }
}

TEST_CASE("CUDA backend: bad inputs raise invalid_argument naming what is wrong") {
  if (!test::cuda_device()) return;
  const auto cfg = test::tiny_config();
  const auto m = test::tiny_model(cfg, test::seed(270));
  const cuda::Backend gpu(m);
  const std::vector<int> bad_token{1, cfg.vocab_size};
  CHECK_THROWS_AS(gpu.embed(bad_token), invalid_argument);
  const std::vector<int> tokens{1, 2, 3};
  const std::vector<int> out_of_range{3};
  CHECK_THROWS_AS(gpu.forward(tokens, AttentionWindows::full(), out_of_range), invalid_argument);
  HeadMask other(HeadLayout{3, 4, 2});
  other.set(0, 0, true);
  const std::vector<int> p0{0};
  CHECK_THROWS_AS(gpu.forward(tokens, AttentionWindows::from_mask(other, 4), p0), invalid_argument);
  AttentionWindows no_window{HeadMask::filled(cfg.layout(), true), 0, 0};
  CHECK_THROWS_AS(gpu.forward(tokens, no_window, p0), invalid_argument);
  auto x = gpu.embed(tokens);
  CHECK_THROWS_AS(gpu.run_layers(x, 1, 5, AttentionWindows::full()), invalid_argument);
  CHECK_THROWS_AS(gpu.run_layers(x, 2, 1, AttentionWindows::full()), invalid_argument);
  cpu::HeadStats stats;
  cpu::StatsRequest request;
  CHECK_THROWS_AS(gpu.run_layers(x, 0, 1, AttentionWindows::full(), &stats, &request), invalid_argument);
  CHECK_THROWS_AS(gpu.logits(x, out_of_range), invalid_argument);
  const auto foreign = cuda::Residual::upload(std::vector<float>(6, 0.0f), 2, 3);
  CHECK_THROWS_AS(gpu.logits(foreign, p0), invalid_argument);
  // Device memory exhaustion names the bytes asked for (2^46 bytes here).
  try {
    const cuda::Residual huge(1 << 30, 1 << 14, 0);
    FAIL("allocated 64 TiB");
  } catch (const device_error& e) {
    const std::string what = e.what();
    MESSAGE("out-of-memory message: " << what);
    CHECK(what.find("out of device memory") != std::string::npos);
    CHECK(what.find("70368744177664 bytes") != std::string::npos);
  }
  // Empty sequences: empty results, no device work.
  const std::vector<int> none;
  CHECK(gpu.forward(none, AttentionWindows::full(), none).empty());
  auto empty = gpu.embed(none);
  CHECK(empty.n_tokens() == 0);
  gpu.run_layers(empty, 0, cfg.num_layers, AttentionWindows::full());
  CHECK(gpu.logits(empty, none).empty());
}

TEST_CASE("CUDA forward matches the CPU backend: Qwen3-MoE (host routing, per-expert GEMMs)") {
  if (!test::cuda_device()) return;
  struct Variant {
    const char* name;
    model::Config config;
    int n;
  };
  const Variant variants[] = {
      // Every expert active: no discrete choice, any sequence length.
      {"top-4 of 4, layer 1 dense", test::tiny_moe_config(2, 4, 4, false), 70},
      // Top-k of more experts on decisive inputs.
      {"top-2 of 4, renormalized", test::tiny_moe_config(2, 4, 2, true), 16},
      {"top-1 of 3, all sparse", test::tiny_moe_config(2, 3, 1, false, 2, {}), 16},
  };
  for (const auto& v : variants) {
    const auto m = test::tiny_model(v.config, test::seed(290));
    for (const auto& w : {AttentionWindows::full(), AttentionWindows::from_mask(alternating(v.config.layout()), 4, 2)}) {
      const auto tokens = v.config.moe.num_experts_used == v.config.moe.num_experts
                              ? test::random_tokens(v.n, v.config.vocab_size, test::seed(291))
                              : test::decisive_tokens(m, v.n, w, 0.25, test::seed(292));
      for (DType t : {DType::bf16, DType::fp16}) {
        cuda::Options o;
        o.dtype = t;
        compare_forward(std::string(v.name) + (w.mask.count() ? " mixed SWA w4 s2" : " full"), m, tokens, w,
                        test::all_positions(v.n), o);
      }
    }
  }
  // Layer-wise equals whole, and runs are deterministic, with experts too.
  const auto m = test::tiny_model(test::tiny_moe_config(), test::seed(293));
  const cuda::Backend gpu(m);
  const auto tokens = test::random_tokens(40, m.config.vocab_size, test::seed(294));
  const auto positions = test::all_positions(40);
  const auto w = AttentionWindows::from_mask(alternating(m.config.layout()), 5, 1);
  const auto a = gpu.forward(tokens, w, positions);
  CHECK(gpu.forward(tokens, w, positions) == a);
  auto x = gpu.embed(tokens);
  for (int l = 0; l < m.config.num_layers; ++l) gpu.run_layers(x, l, l + 1, w);
  CHECK(gpu.logits(x, positions) == a);
  CHECK(gpu.flops(40, 40, w) == doctest::Approx(cpu::Backend(m).flops(40, 40, w)).epsilon(1e-12));
}

TEST_CASE("CUDA backend: flops counts match the CPU backend's") {
  if (!test::cuda_device()) return;
  const auto cfg = test::tiny_config(model::Arch::llama, 2);
  const auto m = test::tiny_model(cfg, test::seed(280));
  const cuda::Backend gpu(m);
  const cpu::Backend cpu(m);
  for (const auto& w : {AttentionWindows::full(),
                        AttentionWindows::from_mask(alternating(cfg.layout()), 9, 2)}) {
    const double a = gpu.flops(300, 5, w), b = cpu.flops(300, 5, w);
    CHECK(a == doctest::Approx(b).epsilon(1e-12));
  }
}
