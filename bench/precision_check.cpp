// Does the bf16 forward rank head masks as the fp32 forward does? Scores a
// set of masks with TransformerEvaluator on a real model (SmolLM2-135M by
// default) in fp32 and in bf16 (cpu/precision.hpp, docs/precision.md) and
// prints Spearman's rank correlation of the two score lists (target >= 0.99),
// the largest score difference, the pairwise order agreement, and the
// evaluation time of each precision.
//
//   bench_precision_check [--masks=N] [--log=FILE] [--context=512] [--samples=1]
//                         [--window=64] [--sinks=0] [--seed=1] [--threads=T]
//                         [--precision=bf16|automatic] [--out=FILE.tsv]
//
// Masks: with --log, the distinct masks of an evaluation log written by
// `bosch select --log` (JSON lines with a "mask" bit string), at most N of
// them, evenly spaced through the log. Without it, N masks (default 300)
// from --seed: half uniformly random masks at SWA ratios 0.25 .. 0.75 (a
// random count of SWA heads in that range), half single swaps of one random
// mask at ratio 0.5 (one SWA head made full and one full head made SWA: the
// near-ties that Stage 3 of the search has to order). The calibration set is
// the main job's (scripts/main-job.cfg: 4 tasks x --samples, --context
// tokens, window 64, no sinks). --out writes mask, fp32 score, bf16 score
// per line. The model is $BOSCH_MODEL or the default cache path of
// scripts/fetch-model; the texts come from scripts/fetch-test-data.

#include <bosch/cpu/backend.hpp>
#include <bosch/eval/suite.hpp>
#include <bosch/eval/transformer_evaluator.hpp>
#include <bosch/model/model.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>
#include <nlohmann/json.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <set>
#include <string>
#include <vector>

namespace {

using namespace bosch;
using clock_type = std::chrono::steady_clock;

struct Settings {
  int masks = 300;
  std::string log;
  int context = 512;
  int samples = 1;
  int window = 64;
  int sinks = 0;
  std::uint64_t seed = 1;
  int threads = 0;
  cpu::Precision precision = cpu::Precision::bf16;
  std::string out;
};

std::filesystem::path model_path() {
  if (const char* env = std::getenv("BOSCH_MODEL")) return env;
  const char* cache = std::getenv("BOSCH_CACHE");
  const char* home = std::getenv("HOME");
  const std::filesystem::path base = cache ? std::filesystem::path(cache)
                                           : std::filesystem::path(home ? home : "/tmp") / ".cache" / "bosch";
  return base / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf";
}

/// A mask with `count` SWA heads drawn uniformly (partial Fisher-Yates).
HeadMask random_mask(const HeadLayout& layout, std::size_t count, boost::random::mt19937_64& rng) {
  HeadMask m(layout);
  std::vector<std::size_t> idx(m.size());
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  for (std::size_t i = 0; i < count; ++i) {
    boost::random::uniform_int_distribution<std::size_t> pick(i, idx.size() - 1);
    std::swap(idx[i], idx[pick(rng)]);
    m.set_flat(idx[i], true);
  }
  return m;
}

/// Masks and, for the swaps, the mask they were derived from (for the
/// evaluator's residual-cache hint; the scores do not depend on it).
struct MaskSet {
  std::vector<HeadMask> masks;
  std::vector<int> reference;  ///< index into masks of the reference, or -1
  std::vector<std::string> kind;
};

MaskSet generated_masks(const HeadLayout& layout, int count, std::uint64_t seed) {
  MaskSet s;
  boost::random::mt19937_64 rng(seed);
  const std::size_t n = static_cast<std::size_t>(layout.num_layers) * static_cast<std::size_t>(layout.num_kv_heads);
  const int random_count = count / 2;
  boost::random::uniform_int_distribution<std::size_t> swa_count(static_cast<std::size_t>(std::ceil(0.25 * n)),
                                                                 static_cast<std::size_t>(std::floor(0.75 * n)));
  for (int i = 0; i < random_count; ++i) {
    s.masks.push_back(random_mask(layout, swa_count(rng), rng));
    s.reference.push_back(-1);
    s.kind.push_back("random");
  }
  // The base of the swaps, then its single swaps (distinct ones).
  const HeadMask base = random_mask(layout, n / 2, rng);
  const int base_index = static_cast<int>(s.masks.size());
  s.masks.push_back(base);
  s.reference.push_back(-1);
  s.kind.push_back("swap base");
  std::set<std::pair<std::size_t, std::size_t>> seen;
  std::vector<std::size_t> on, off;
  for (std::size_t i = 0; i < n; ++i) (base[i] ? on : off).push_back(i);
  const std::size_t swaps = std::min<std::size_t>(static_cast<std::size_t>(count - random_count - 1), on.size() * off.size());
  boost::random::uniform_int_distribution<std::size_t> pick_on(0, on.size() - 1), pick_off(0, off.size() - 1);
  while (seen.size() < swaps) {
    const std::size_t a = on[pick_on(rng)], b = off[pick_off(rng)];
    if (!seen.insert({a, b}).second) continue;
    HeadMask m = base;
    m.set_flat(a, false);
    m.set_flat(b, true);
    s.masks.push_back(m);
    s.reference.push_back(base_index);
    s.kind.push_back("swap");
  }
  return s;
}

MaskSet logged_masks(const HeadLayout& layout, const std::string& path, int count) {
  std::ifstream in(path);
  if (!in) throw file_error("cannot open the evaluation log", path);
  std::vector<HeadMask> all;
  std::set<std::string> seen;
  std::string line;
  std::size_t line_no = 0;
  const std::size_t n = static_cast<std::size_t>(layout.num_layers) * static_cast<std::size_t>(layout.num_kv_heads);
  while (std::getline(in, line)) {
    ++line_no;
    if (line.empty()) continue;
    const auto j = nlohmann::json::parse(line, nullptr, false);
    const std::string where = path + ":" + std::to_string(line_no);
    if (j.is_discarded() || !j.is_object() || !j.contains("mask") || !j["mask"].is_string())
      throw format_error("not an evaluation record with a \"mask\" bit string", where);
    const std::string bits = j["mask"].get<std::string>();
    if (bits.size() != n || bits.find_first_not_of("01") != std::string::npos)
      throw format_error("mask of " + std::to_string(bits.size()) + " bits, the model has " + std::to_string(n) +
                             " KV heads (" + to_string(layout) + ")",
                         where);
    if (!seen.insert(bits).second) continue;
    HeadMask m(layout);
    for (std::size_t i = 0; i < n; ++i) m.set_flat(i, bits[i] == '1');
    all.push_back(m);
  }
  if (all.empty()) throw format_error("no masks in the evaluation log", path);
  MaskSet s;
  const std::size_t take = std::min(all.size(), static_cast<std::size_t>(count));
  for (std::size_t i = 0; i < take; ++i) {
    s.masks.push_back(all[i * all.size() / take]);
    s.reference.push_back(-1);
    s.kind.push_back("logged");
  }
  return s;
}

/// Ranks 1..n with ties given their mean rank.
std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<std::size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (std::size_t i = 0; i < idx.size();) {
    std::size_t j = i;
    while (j + 1 < idx.size() && v[idx[j + 1]] == v[idx[i]]) ++j;
    for (std::size_t k = i; k <= j; ++k) r[idx[k]] = 0.5 * static_cast<double>(i + j) + 1.0;
    i = j + 1;
  }
  return r;
}

/// Spearman's rho: the Pearson correlation of the ranks.
double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const auto ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n, mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double sab = 0, saa = 0, sbb = 0;
  for (std::size_t i = 0; i < ra.size(); ++i) {
    sab += (ra[i] - ma) * (rb[i] - mb);
    saa += (ra[i] - ma) * (ra[i] - ma);
    sbb += (rb[i] - mb) * (rb[i] - mb);
  }
  return saa > 0 && sbb > 0 ? sab / std::sqrt(saa * sbb) : std::nan("");
}

/// Share of mask pairs that both precisions order the same way (pairs tied
/// in either count as half).
double pair_agreement(const std::vector<double>& a, const std::vector<double>& b) {
  double agree = 0, pairs = 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    for (std::size_t j = i + 1; j < a.size(); ++j) {
      const double x = a[i] - a[j], y = b[i] - b[j];
      agree += (x == 0 || y == 0) ? 0.5 : (x > 0) == (y > 0) ? 1.0 : 0.0;
      pairs += 1;
    }
  return pairs > 0 ? agree / pairs : std::nan("");
}

void report(const char* what, const std::vector<double>& a, const std::vector<double>& b) {
  if (a.size() < 3) return;
  double max_diff = 0, mean_diff = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    max_diff = std::max(max_diff, std::abs(a[i] - b[i]));
    mean_diff += b[i] - a[i];
  }
  mean_diff /= static_cast<double>(a.size());
  const auto [lo, hi] = std::minmax_element(a.begin(), a.end());
  std::printf("  %-22s %4zu masks: Spearman %.4f, pairs ordered alike %.4f, max |bf16 - fp32| %.5f, mean bf16 - "
              "fp32 %+.5f, fp32 score range %.5f\n",
              what, a.size(), spearman(a, b), pair_agreement(a, b), max_diff, mean_diff, *hi - *lo);
}

bool parse(Settings& s, int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&](const char* name) -> const char* {
      const std::size_t n = std::strlen(name);
      return a.compare(0, n, name) == 0 ? argv[i] + n : nullptr;
    };
    if (const char* v = value("--masks=")) s.masks = std::atoi(v);
    else if (const char* v2 = value("--log=")) s.log = v2;
    else if (const char* v3 = value("--context=")) s.context = std::atoi(v3);
    else if (const char* v4 = value("--samples=")) s.samples = std::atoi(v4);
    else if (const char* v5 = value("--window=")) s.window = std::atoi(v5);
    else if (const char* v6 = value("--sinks=")) s.sinks = std::atoi(v6);
    else if (const char* v7 = value("--seed=")) s.seed = std::strtoull(v7, nullptr, 10);
    else if (const char* v8 = value("--threads=")) s.threads = std::atoi(v8);
    else if (const char* v9 = value("--precision=")) s.precision = cpu::parse_precision(v9, "--precision");
    else if (const char* v10 = value("--out=")) s.out = v10;
    else {
      std::fprintf(stderr, "bench_precision_check: unknown argument '%s' (see the comment at the top of "
                           "bench/precision_check.cpp)\n", a.c_str());
      return false;
    }
  }
  if (s.masks < 3 || s.context < 32 || s.samples < 1 || s.window < 1 || s.sinks < 0 || s.threads < 0) {
    std::fprintf(stderr, "bench_precision_check: need --masks >= 3, --context >= 32, --samples >= 1, "
                         "--window >= 1, --sinks >= 0, --threads >= 0\n");
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // results and progress interleave in a log
  Settings set;
  try {
    if (!parse(set, argc, argv)) return 2;
    if (set.threads > 0) omp_set_num_threads(set.threads);
    const auto path = model_path();
    if (!std::filesystem::exists(path)) {
      std::fprintf(stderr, "bench_precision_check: model not found at %s (run scripts/fetch-model)\n",
                   path.string().c_str());
      return 1;
    }
    const model::Model model = model::load(path);
    const cpu::Backend fp32(model);
    const cpu::Backend low(model, {.precision = set.precision});
    std::printf("model %s (%s); precision %s -> %s: %s\n", path.string().c_str(), to_string(model.config.layout()).c_str(),
                std::string(cpu::to_string(set.precision)).c_str(), low.precision().name().c_str(),
                low.precision().reason.c_str());
    if (low.precision().precision == cpu::Precision::fp32)
      std::printf("note: the reduced precision runs fp32 on this CPU, so both columns are the same forward\n");
    TaskSuiteOptions suite;
    suite.context_length = set.context;
    suite.calibration_samples = set.samples;
    suite.held_out_samples = 0;
    const TaskSuite tasks = make_task_suite(suite, model.tokenizer, false);
    TransformerEvaluatorOptions eo;
    eo.window = set.window;
    eo.sinks = set.sinks;
    TransformerEvaluator<cpu::Backend> e32(fp32, tasks.calibration, eo), e16(low, tasks.calibration, eo);
    const HeadLayout layout = model.config.layout();
    const MaskSet ms = set.log.empty() ? generated_masks(layout, set.masks, set.seed)
                                       : logged_masks(layout, set.log, set.masks);
    std::printf("%zu masks (%s), %zu calibration samples of %d tokens, window %d, sinks %d, %d threads\n",
                ms.masks.size(), set.log.empty() ? "generated" : set.log.c_str(), tasks.calibration.samples.size(),
                set.context, set.window, set.sinks, omp_get_max_threads());

    std::vector<double> s32, s16;
    double t32 = 0, t16 = 0;
    for (std::size_t i = 0; i < ms.masks.size(); ++i) {
      const HeadMask& m = ms.masks[i];
      EvaluationHint hint;
      if (ms.reference[i] >= 0) {
        hint.reference = &ms.masks[static_cast<std::size_t>(ms.reference[i])];
        hint.first_changed_layer = first_changed_layer(m, *hint.reference);
      } else if (i + 1 < ms.masks.size() && ms.reference[i + 1] == static_cast<int>(i)) {
        hint.reference = &m;  // the base of the swaps: cache its streams for them
        hint.first_changed_layer = layout.num_layers - 1;
      }
      // Alternate the order so that drifting load favours neither.
      for (int k = 0; k < 2; ++k) {
        const bool first32 = (i % 2 == 0) == (k == 0);
        auto t0 = clock_type::now();
        const double score = first32 ? e32.evaluate(m, hint) : e16.evaluate(m, hint);
        (first32 ? t32 : t16) += std::chrono::duration<double>(clock_type::now() - t0).count();
        (first32 ? s32 : s16).push_back(score);
      }
      if ((i + 1) % 25 == 0 || i + 1 == ms.masks.size())
        std::fprintf(stderr, "bench_precision_check: %zu / %zu masks\n", i + 1, ms.masks.size());
    }
    if (!set.out.empty()) {
      std::ofstream out(set.out);
      out << "# kind\tswa\tfp32\t" << low.precision().name() << "\tmask\n";
      out.precision(17);
      for (std::size_t i = 0; i < ms.masks.size(); ++i) {
        std::string bits(ms.masks[i].size(), '0');
        for (std::size_t b = 0; b < bits.size(); ++b)
          if (ms.masks[i][b]) bits[b] = '1';
        out << ms.kind[i] << '\t' << ms.masks[i].count() << '\t' << s32[i] << '\t' << s16[i] << '\t' << bits << '\n';
      }
      if (!out) throw file_error("cannot write", set.out);
    }

    std::printf("\nscores (mean answer log-prob) in fp32 and %s:\n", low.precision().name().c_str());
    report("all", s32, s16);
    for (const char* kind : {"random", "swap", "logged"}) {
      std::vector<double> a, b;
      for (std::size_t i = 0; i < ms.masks.size(); ++i)
        if (ms.kind[i] == kind || (std::strcmp(kind, "swap") == 0 && ms.kind[i] == "swap base")) {
          a.push_back(s32[i]);
          b.push_back(s16[i]);
        }
      if (a.size() != s32.size()) report(kind, a, b);
    }
    const auto best32 = std::max_element(s32.begin(), s32.end()) - s32.begin();
    const auto best16 = std::max_element(s16.begin(), s16.end()) - s16.begin();
    std::printf("  best mask: the same in both: %s (fp32 rank of the bf16 best: %.0f of %zu)\n",
                best32 == best16 ? "yes" : "no", static_cast<double>(s32.size()) + 1 - ranks(s32)[static_cast<std::size_t>(best16)],
                s32.size());
    std::printf("  evaluation time: fp32 %.1f s, %s %.1f s (%.2fx); %zu evaluations each (the swaps reuse cached "
                "layers)\n",
                t32, low.precision().name().c_str(), t16, t16 > 0 ? t32 / t16 : 0.0, ms.masks.size());
    std::printf("target: Spearman >= 0.99 over all masks (docs/precision.md)\n");
  } catch (const std::exception& ex) {
    std::fprintf(stderr, "bench_precision_check: %s\n", ex.what());
    return 1;
  }
  return 0;
}
