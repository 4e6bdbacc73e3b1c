// The held-out report's two routes on SmolLM2-135M (eval/report.hpp,
// docs/deployment.md): one pass per sample (the teacher-forced prefill's
// cache continues the greedy answer when it agrees with the gold one,
// ReportOptions::one_pass) against two (the teacher-forced forward, then a
// fresh prefill for the greedy answer), timed in the same run, interleaved
// over --rounds rounds with the order reversed every other round; the
// speed-up is the median of the per-round ratios. Both reports must be equal
// (log-probabilities bitwise, accuracies and exact matches): the program
// fails otherwise.
//
//   bench_held_out [--context=1024] [--samples=4] [--rounds=3] [--rho=0.5]
//                  [--mask=FILE] [--window=64] [--threads=T]
//
// Tasks: the held-out split of the default suite (4 kinds x --samples at
// --context tokens, texts from $BOSCH_CACHE/text). Mask: --mask FILE (a
// bosch mask of the model's layout), else the first target_count(rho)
// heads of a fixed seeded permutation. The model is $BOSCH_MODEL or the
// default cache path of scripts/fetch-model. Besides the two times it prints
// the share of samples the one-pass route served in one pass.

#include <bosch/cpu/backend.hpp>
#include <bosch/eval/report.hpp>
#include <bosch/eval/suite.hpp>
#include <bosch/io/mask_io.hpp>
#include <bosch/mask.hpp>
#include <bosch/model/model.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <numeric>
#include <string>
#include <vector>

namespace {

using namespace bosch;
using clock_type = std::chrono::steady_clock;

struct Settings {
  int context = 1024;
  int samples = 4;
  int rounds = 3;
  double rho = 0.5;
  int window = 64;
  int threads = 0;
  std::string mask;
};

std::filesystem::path model_path() {
  if (const char* env = std::getenv("BOSCH_MODEL")) return env;
  const char* cache = std::getenv("BOSCH_CACHE");
  const char* home = std::getenv("HOME");
  const std::filesystem::path base = cache ? std::filesystem::path(cache)
                                           : std::filesystem::path(home ? home : "/tmp") / ".cache" / "bosch";
  return base / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf";
}

HeadMask permutation_mask(const HeadLayout& layout, double rho) {
  HeadMask m(layout);
  std::vector<std::size_t> idx(m.size());
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  boost::random::mt19937_64 rng(11);
  for (std::size_t i = 0; i + 1 < idx.size(); ++i) {
    boost::random::uniform_int_distribution<std::size_t> pick(i, idx.size() - 1);
    std::swap(idx[i], idx[pick(rng)]);
  }
  const std::size_t count = target_count(layout, rho);
  for (std::size_t i = 0; i < count; ++i) m.set_flat(idx[i], true);
  return m;
}

/// A CPU backend that counts the passes over a whole sequence (forward and prefill).
struct Counting {
  using Residual = cpu::Residual;
  const cpu::Backend* inner;
  mutable int passes = 0;
  const model::Config& config() const noexcept { return inner->config(); }
  Residual embed(std::span<const int> t) const { return inner->embed(t); }
  void run_layers(Residual& x, int first, int last, const AttentionWindows& w) const {
    inner->run_layers(x, first, last, w);
  }
  std::vector<float> logits(const Residual& x, std::span<const int> p) const { return inner->logits(x, p); }
  std::vector<float> forward(std::span<const int> t, const AttentionWindows& w, std::span<const int> p) const {
    ++passes;
    return inner->forward(t, w, p);
  }
  cpu::DecodeState prefill(std::span<const int> t, const AttentionWindows& w, std::vector<float>* last = nullptr,
                           int capacity = 0) const {
    ++passes;
    return inner->prefill(t, w, last, capacity);
  }
  cpu::DecodeState prefill(std::span<const int> t, const AttentionWindows& w, std::span<const int> p,
                           std::vector<float>& out, int capacity = 0) const {
    ++passes;
    return inner->prefill(t, w, p, out, capacity);
  }
  std::vector<float> decode_step(cpu::DecodeState& s, int token, const AttentionWindows& w) const {
    return inner->decode_step(s, token, w);
  }
};

bool same(const HeldOutReport& a, const HeldOutReport& b) {
  if (a.samples.size() != b.samples.size()) return false;
  for (std::size_t i = 0; i < a.samples.size(); ++i) {
    const auto &x = a.samples[i], &y = b.samples[i];
    if (x.logprob != y.logprob || x.accuracy != y.accuracy || x.exact != y.exact) return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Settings set;
  for (int i = 1; i < argc; ++i) {
    const char* a = argv[i];
    auto value = [&](const char* prefix) -> const char* {
      const std::size_t n = std::strlen(prefix);
      return std::strncmp(a, prefix, n) == 0 ? a + n : nullptr;
    };
    if (const char* v = value("--context=")) set.context = std::atoi(v);
    else if (const char* v2 = value("--samples=")) set.samples = std::atoi(v2);
    else if (const char* v3 = value("--rounds=")) set.rounds = std::atoi(v3);
    else if (const char* v4 = value("--rho=")) set.rho = std::atof(v4);
    else if (const char* v5 = value("--window=")) set.window = std::atoi(v5);
    else if (const char* v6 = value("--threads=")) set.threads = std::atoi(v6);
    else if (const char* v7 = value("--mask=")) set.mask = v7;
    else {
      std::fprintf(stderr, "bench_held_out: unknown argument %s\n", a);
      return 2;
    }
  }
  if (set.context < 32 || set.samples < 1 || set.rounds < 1 || set.window < 1 || set.threads < 0 ||
      !(set.rho > 0 && set.rho < 1)) {
    std::fprintf(stderr, "bench_held_out: need --context >= 32, --samples >= 1, --rounds >= 1, --window >= 1, "
                         "--threads >= 0 and --rho in (0, 1)\n");
    return 2;
  }
  try {
    if (set.threads > 0) omp_set_num_threads(set.threads);
    const auto path = model_path();
    const model::Model model = model::load(path);
    const cpu::Backend backend(model);
    const HeadMask mask = set.mask.empty() ? permutation_mask(model.config.layout(), set.rho)
                                           : io::read_mask_json(set.mask).mask;
    if (mask.layout() != model.config.layout())
      throw invalid_argument("mask layout " + to_string(mask.layout()) + " is not the model's " +
                                 to_string(model.config.layout()),
                             "--mask");
    const auto windows = AttentionWindows::from_mask(mask, set.window, 0);
    TaskSuiteOptions suite;
    suite.context_length = set.context;
    suite.calibration_samples = 1;
    suite.held_out_samples = set.samples;
    const TaskSuite tasks = make_task_suite(suite, model.tokenizer, true);
    std::printf("model %s (%s); %zu held-out samples of %d tokens; mask %zu of %zu KV heads SWA, window %d; "
                "%d threads\n",
                path.string().c_str(), to_string(model.config.layout()).c_str(), tasks.held_out.samples.size(),
                set.context, mask.count(), mask.size(), set.window, omp_get_max_threads());

    ReportOptions one, two;
    one.extra_new_tokens = two.extra_new_tokens = 4;  // as bosch evaluate
    two.one_pass = false;
    std::vector<double> t_one, t_two, ratio;
    HeldOutReport r_one, r_two;
    for (int round = 0; round < set.rounds; ++round) {
      double s1 = 0, s2 = 0;
      for (int k = 0; k < 2; ++k) {
        const bool first_one = (round % 2 == 0) == (k == 0);
        const auto t0 = clock_type::now();
        if (first_one)
          r_one = evaluate_held_out(backend, model.tokenizer, tasks.held_out, windows, one);
        else
          r_two = evaluate_held_out(backend, model.tokenizer, tasks.held_out, windows, two);
        (first_one ? s1 : s2) = std::chrono::duration<double>(clock_type::now() - t0).count();
      }
      t_one.push_back(s1);
      t_two.push_back(s2);
      ratio.push_back(s2 / s1);
      std::printf("  round %d: one pass %.2f s, two passes %.2f s (%.2fx)\n", round + 1, s1, s2, s2 / s1);
    }
    if (!same(r_one, r_two)) {
      std::fprintf(stderr, "bench_held_out: the two routes gave different reports\n");
      return 1;
    }
    Counting counting{&backend};
    evaluate_held_out(counting, model.tokenizer, tasks.held_out, windows, one);
    const double n = static_cast<double>(tasks.held_out.samples.size());
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    std::printf("summary: one pass %.2f s, two passes %.2f s per report (medians); speed-up %.2fx (median of the "
                "per-round ratios); %.0f%% of the samples in one pass (%d passes for %.0f samples); reports "
                "equal; accuracy %.3f, log-prob %.4f\n",
                median(t_one), median(t_two), median(ratio), 100.0 * (2.0 * n - counting.passes) / n,
                counting.passes, n, r_one.all.accuracy, r_one.all.mean_logprob);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_held_out: %s\n", e.what());
    return 1;
  }
  return 0;
}
