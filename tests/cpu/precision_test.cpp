// The precision setting of the CPU backend (cpu/precision.hpp,
// docs/precision.md): the dispatch rule and its fallback to fp32 where the
// instructions are missing (forced with BOSCH_CPU_DISABLE), and the bf16
// forward against the fp32 forward on random tiny models and on the
// committed stories260K checkpoint, for full, windowed and mixed masks.
//
// Tolerance of the bf16 forward (logits, against the fp32 forward of the
// same model): max |bf16 - fp32| <= 0.05 x max(1, max |fp32 logit|) and the
// mean |difference| <= 0.01 x max(1, max |fp32 logit|). Why: bf16 keeps 8
// significant bits, so every product input moves by up to 2^-8 = 0.4%
// relative; over two (tiny models) or five (stories260K) layers of seven
// products each, with softmax and norms in between, the measured deviations
// are 0.5-1.3% of the logit scale at most and 0.07-0.15% on average (printed
// by the test); the bounds leave a 4-6x margin and still catch a wrong
// panel, bias or padding, which moves logits by tens of percent. The per-mask scores that
// rank masks are checked on SmolLM2 by bench/precision_check.cpp.

#include "test_support.hpp"
#include "tiny_model.hpp"

#include <bosch/cpu/backend.hpp>
#include <bosch/cpu/precision.hpp>
#include <bosch/model/model.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace bosch;

/// Sets an environment variable for the scope and restores it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    ::setenv(name, value, 1);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_, old_->c_str(), 1);
    else
      ::unsetenv(name_);
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

cpu::CpuFeatures all_features() {
  cpu::CpuFeatures f;
  f.avx2_fma = f.avx512 = f.avx512_bf16 = f.amx_bf16 = true;
  return f;
}

struct Deviation {
  double max_abs = 0, mean_abs = 0, scale = 0;
};

Deviation deviation(const std::vector<float>& got, const std::vector<float>& want) {
  Deviation d;
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const double e = std::abs(static_cast<double>(got[i]) - want[i]);
    REQUIRE(std::isfinite(e));
    d.max_abs = std::max(d.max_abs, e);
    d.mean_abs += e;
    d.scale = std::max(d.scale, std::abs(static_cast<double>(want[i])));
  }
  d.mean_abs /= static_cast<double>(std::max<std::size_t>(1, got.size()));
  return d;
}

constexpr double max_tolerance = 0.05, mean_tolerance = 0.01;

/// The bf16 forward of `m` against its fp32 forward under `w`; returns the deviation.
Deviation check_bf16_forward(const model::Model& m, const AttentionWindows& w, const std::vector<int>& tokens,
                             const std::string& what) {
  const cpu::Backend fp32(m);
  const cpu::Backend bf16(m, {.precision = cpu::Precision::bf16});
  REQUIRE(fp32.precision().precision == cpu::Precision::fp32);
  REQUIRE(bf16.precision().precision == cpu::Precision::bf16);
  const auto pos = test::all_positions(static_cast<int>(tokens.size()));
  const auto want = fp32.forward(tokens, w, pos);
  const auto got = bf16.forward(tokens, w, pos);
  const Deviation d = deviation(got, want);
  const double s = std::max(1.0, d.scale);
  MESSAGE(what << ": bf16 vs fp32 logits, max |diff| " << d.max_abs << " = " << d.max_abs / s
               << " of the scale " << d.scale << ", mean " << d.mean_abs / s);
  CHECK(d.max_abs <= max_tolerance * s);
  CHECK(d.mean_abs <= mean_tolerance * s);
  CHECK(d.max_abs > 0);  // bf16 really ran (rounding moves some logit)
  return d;
}

}  // namespace

TEST_CASE("precision: names round-trip, unknown names are refused") {
  for (auto p : {cpu::Precision::fp32, cpu::Precision::bf16, cpu::Precision::automatic})
    CHECK(cpu::parse_precision(cpu::to_string(p)) == p);
  CHECK(cpu::parse_precision("auto") == cpu::Precision::automatic);
  try {
    (void)cpu::parse_precision("fp16", "--precision");
    FAIL("fp16 accepted");
  } catch (const invalid_argument& e) {
    CHECK(e.where() == "--precision");
    CHECK(contains(e.message(), "fp16"));
  }
}

TEST_CASE("precision dispatch: the rule on given CPU features") {
#if defined(__x86_64__) && defined(__linux__)
  const auto all = all_features();
  auto c = cpu::choose_precision(cpu::Precision::automatic, all);
  CHECK(c.precision == cpu::Precision::bf16);
  CHECK(c.kernel == cpu::Bf16Kernel::amx);
  CHECK(c.name() == "bf16 (amx-bf16)");
  c = cpu::choose_precision(cpu::Precision::bf16, all);
  CHECK(c.kernel == cpu::Bf16Kernel::amx);
  c = cpu::choose_precision(cpu::Precision::fp32, all);
  CHECK(c.precision == cpu::Precision::fp32);
  CHECK(c.name() == "fp32");

  // AVX512_BF16 without AMX (Cooper Lake, Zen 4): the AVX512_BF16 kernel.
  const auto no_amx = cpu::disable_features(all, "amx");
  c = cpu::choose_precision(cpu::Precision::automatic, no_amx);
  CHECK(c.precision == cpu::Precision::bf16);
  CHECK(c.kernel == cpu::Bf16Kernel::avx512);
  CHECK(c.name() == "bf16 (avx512-bf16)");
  CHECK(contains(c.reason, "BOSCH_CPU_DISABLE=amx"));

  // An AVX2-only CPU: automatic falls back to fp32 and says why; an explicit
  // bf16 runs the emulation.
  const auto avx2 = cpu::disable_features(all, "avx512");
  CHECK(!avx2.avx512);
  CHECK(!avx2.avx512_bf16);
  CHECK(!avx2.amx_bf16);
  c = cpu::choose_precision(cpu::Precision::automatic, avx2);
  CHECK(c.precision == cpu::Precision::fp32);
  CHECK(contains(c.reason, "AVX512F"));
  CHECK(contains(c.reason, "BOSCH_CPU_DISABLE=avx512"));
  c = cpu::choose_precision(cpu::Precision::bf16, avx2);
  CHECK(c.precision == cpu::Precision::bf16);
  CHECK(c.kernel == cpu::Bf16Kernel::emulated);
  CHECK(contains(c.reason, "emulated"));

  // AVX-512 without BF16 (Skylake-X, Ice Lake): fp32 as well.
  const auto no_bf16 = cpu::disable_features(all, " avx512_bf16 ");
  CHECK(no_bf16.avx512);
  CHECK(!no_bf16.avx512_bf16);
  c = cpu::choose_precision(cpu::Precision::automatic, no_bf16);
  CHECK(c.precision == cpu::Precision::fp32);
  CHECK(contains(c.reason, "lacks AVX512_BF16"));

  CHECK(!no_bf16.amx_bf16);  // AMX is used only with AVX512_BF16

  CHECK(cpu::disable_features(all, "").disabled.empty());
  CHECK(cpu::disable_features(all, "avx2,avx512_bf16").disabled == "avx2,avx512_bf16");
  CHECK_THROWS_AS(cpu::disable_features(all, "avx512,sse9"), invalid_argument);
#else
  MESSAGE("not an x86-64 Linux build: no bf16 kernel but the emulation");
  CHECK(cpu::choose_precision(cpu::Precision::automatic).precision == cpu::Precision::fp32);
#endif
}

TEST_CASE("precision dispatch: a CPU forced to lack AVX512_BF16 gets fp32 with the reason") {
  const auto m = test::tiny_model(test::tiny_config(), test::seed(40));
  {
    ScopedEnv env("BOSCH_CPU_DISABLE", "avx512_bf16");
    const auto f = cpu::detect_cpu_features();
    CHECK(!f.avx512_bf16);
    CHECK(f.disabled == "avx512_bf16");
    const cpu::Backend b(m, {.precision = cpu::Precision::automatic});
    CHECK(b.precision().requested == cpu::Precision::automatic);
    CHECK(b.precision().precision == cpu::Precision::fp32);
    CHECK(contains(b.precision().reason, "AVX512_BF16"));
    CHECK(contains(b.precision().reason, "BOSCH_CPU_DISABLE=avx512_bf16"));
    CHECK(b.packed_bytes() == 0);
    // Explicit bf16 runs the emulation, with the same numbers as the native
    // kernel (compared in the next test case).
    const cpu::Backend e(m, {.precision = cpu::Precision::bf16});
    CHECK(e.precision().precision == cpu::Precision::bf16);
    CHECK(e.precision().kernel == cpu::Bf16Kernel::emulated);
    CHECK(e.packed_bytes() > 0);
  }
  {
    ScopedEnv env("BOSCH_CPU_DISABLE", "avx2,avx512");
    const auto f = cpu::detect_cpu_features();
    CHECK(!f.avx2_fma);
    CHECK(!f.avx512);
    CHECK(cpu::choose_precision(cpu::Precision::automatic).precision == cpu::Precision::fp32);
  }
  {
    ScopedEnv env("BOSCH_CPU_DISABLE", "avx1024");
    CHECK_THROWS_AS(cpu::detect_cpu_features(), invalid_argument);
    CHECK_THROWS_AS(cpu::Backend(m, {.precision = cpu::Precision::automatic}), invalid_argument);
    CHECK(cpu::Backend(m).precision().precision == cpu::Precision::fp32);  // fp32 detects nothing
  }
  // The default stays fp32 whatever the CPU.
  CHECK(cpu::Backend(m).precision().precision == cpu::Precision::fp32);
}

/// The bf16 forward on the kernel that BOSCH_CPU_DISABLE=`disable` leaves.
std::vector<float> forward_with(const model::Model& m, const char* disable, cpu::Bf16Kernel expect,
                                const std::vector<int>& tokens, const AttentionWindows& w) {
  ScopedEnv env("BOSCH_CPU_DISABLE", disable);
  const cpu::Backend b(m, {.precision = cpu::Precision::bf16});
  REQUIRE(b.precision().kernel == expect);
  return b.forward(tokens, w, test::all_positions(static_cast<int>(tokens.size())));
}

TEST_CASE("precision: the bf16 forward on each kernel: AVX512_BF16 = emulation bitwise, AMX within fp32 rounding") {
  const auto m = test::tiny_model(test::tiny_config(model::Arch::qwen2), test::seed(41));
  const auto tokens = test::random_tokens(45, m.config.vocab_size, test::seed(42));
  const auto mask = test::random_mask(m.config.layout(), test::seed(43));
  const auto w = AttentionWindows::from_mask(mask, 7, 2);
  const auto f = cpu::detect_cpu_features();
  if (!(f.avx512 && f.avx512_bf16)) {
    MESSAGE("this CPU has no AVX512_BF16: " << cpu::choose_precision(cpu::Precision::bf16).reason);
    CHECK(cpu::choose_precision(cpu::Precision::bf16).kernel == cpu::Bf16Kernel::emulated);
    return;
  }
  const auto emulated = forward_with(m, "avx512_bf16", cpu::Bf16Kernel::emulated, tokens, w);
  const auto avx512 = forward_with(m, "amx", cpu::Bf16Kernel::avx512, tokens, w);
  REQUIRE(avx512.size() == emulated.size());
  CHECK(std::memcmp(avx512.data(), emulated.data(), avx512.size() * sizeof(float)) == 0);
  if (!f.amx_bf16) {
    MESSAGE("no AMX here: " << (f.amx_note.empty() ? "the CPU lacks AMX-BF16" : f.amx_note));
    return;
  }
  const auto amx = forward_with(m, "", cpu::Bf16Kernel::amx, tokens, w);
  // fp32-level accumulation differences, amplified only where they cross a
  // bf16 rounding boundary of a later product's input (see the decode test).
  const Deviation d = deviation(amx, avx512);
  MESSAGE("AMX vs AVX512_BF16 forward: max |diff| " << d.max_abs << " of the scale " << d.scale);
  CHECK(d.max_abs <= 5e-3 * std::max(1.0, d.scale));
}

TEST_CASE("precision: the bf16 forward agrees with fp32 on random tiny models (full, windowed, mixed masks)") {
  for (auto arch : {model::Arch::llama, model::Arch::qwen2, model::Arch::qwen3})
    for (int kv : {1, 2, 4}) {
      const auto m = test::tiny_model(test::tiny_config(arch, kv), test::seed(50 + kv));
      const auto tokens = test::random_tokens(53, m.config.vocab_size, test::seed(60 + kv));
      const std::string name = std::string(model::to_string(arch)) + " kv " + std::to_string(kv);
      check_bf16_forward(m, AttentionWindows::full(), tokens, name + " full");
      check_bf16_forward(m, AttentionWindows::from_mask(HeadMask::filled(m.config.layout(), true), 6, 1), tokens,
                         name + " all windowed (w 6, 1 sink)");
      check_bf16_forward(m, AttentionWindows::from_mask(test::random_mask(m.config.layout(), test::seed(70 + kv)), 9, 2),
                         tokens, name + " mixed (w 9, 2 sinks)");
    }
}

TEST_CASE("precision: the bf16 forward agrees with fp32 on stories260K (full, windowed, mixed masks)") {
  const auto path = test::fixture("models/stories260K.gguf");
  if (path.empty()) return;
  const auto m = model::load(path);
  const auto tokens = test::random_tokens(200, m.config.vocab_size, test::seed(80));
  const auto layout = m.config.layout();
  check_bf16_forward(m, AttentionWindows::full(), tokens, "stories260K full");
  check_bf16_forward(m, AttentionWindows::from_mask(HeadMask::filled(layout, true), 32, 4), tokens,
                     "stories260K all windowed (w 32, 4 sinks)");
  for (std::uint64_t s : {81, 82, 83})
    check_bf16_forward(m, AttentionWindows::from_mask(test::random_mask(layout, test::seed(s)), 16, 2), tokens,
                       "stories260K mixed (w 16, 2 sinks)");
}

TEST_CASE("precision: bf16 prefill and decode follow the bf16 forward") {
  const auto m = test::tiny_model(test::tiny_config(model::Arch::llama, 2), test::seed(90));
  const cpu::Backend b(m, {.precision = cpu::Precision::bf16});
  const auto tokens = test::random_tokens(30, m.config.vocab_size, test::seed(91));
  const auto w = AttentionWindows::from_mask(test::random_mask(m.config.layout(), test::seed(92)), 5, 1);
  std::vector<float> last;
  auto state = b.prefill(std::span<const int>(tokens.data(), 20), w, &last, 30);
  const auto ref = b.forward(std::span<const int>(tokens.data(), 20), w, std::vector<int>{19});
  CHECK(std::memcmp(last.data(), ref.data(), ref.size() * sizeof(float)) == 0);  // same layer path: bitwise
  for (int i = 20; i < 30; ++i) {
    const auto step = b.decode_step(state, tokens[static_cast<std::size_t>(i)], w);
    const auto full = b.forward(std::span<const int>(tokens.data(), static_cast<std::size_t>(i) + 1), w,
                                std::vector<int>{i});
    const Deviation d = deviation(step, full);
    // Attention sums in another order (cpu/backend.hpp), otherwise the same
    // bf16 products: fp32-level agreement, except where an fp32-level change
    // of an attention output crosses a bf16 rounding boundary of the O
    // product's input (one element moves by 2^-8 relative), hence 5e-3
    // rather than fp32's 1e-5; the bf16 forward itself deviates by ~1e-2.
    CHECK(d.max_abs <= 5e-3 * std::max(1.0, d.scale));
  }
}
