// SPDX-License-Identifier: Apache-2.0
// The search that tests/crash/crash_test.cpp kills with SIGKILL and resumes.
//
//   bosch_search_child --checkpoint FILE --out FILE [--resume] [--sleep-us N]
//                      [--seed S] [--variant NAME]
//
// Runs bosch::select over a cheap deterministic evaluator (6 layers x 8 query
// heads x 4 KV heads; a seeded separable cost plus pairwise interactions of
// neighbouring heads), sleeping N microseconds per evaluation (default 500),
// with a bosch::Checkpoint callback writing after EVERY evaluation. After each
// evaluation's checkpoint is in place it prints "E <index>" on stdout
// (flushed), so the parent knows which evaluations the file must hold. With
// --resume it resumes from the checkpoint (Checkpoint::resume). At the end it
// writes the result atomically to --out as JSON: mask bits, score, counts and
// the evaluation log (index, stage, mask bits, score). Exit status 0, or 1
// with a message on stderr.

#include <bosch/bosch.hpp>
#include <bosch/io/mask_io.hpp>
#include <bosch/io/atomic_file.hpp>
#include <bosch/io/checkpoint.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_real_distribution.hpp>
#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <thread>
#include <vector>

namespace {

/// Deterministic and cheap: the same mask gives the same double in every
/// process (same operations in the same order).
struct SlowEvaluator {
  bosch::HeadLayout lay{6, 8, 4};
  std::vector<double> cost, pair;
  long sleep_us = 500;

  explicit SlowEvaluator(long us) : cost(lay.size()), pair(lay.size()), sleep_us(us) {
    boost::random::mt19937_64 g(20260611);
    boost::random::uniform_real_distribution<double> c(0.1, 1.0), p(-0.3, 0.3);
    for (auto& x : cost) x = c(g);
    for (auto& x : pair) x = p(g);
  }
  bosch::HeadLayout layout() const { return lay; }
  double evaluate(const bosch::HeadMask& m) const {
    if (sleep_us > 0) std::this_thread::sleep_for(std::chrono::microseconds(sleep_us));
    const std::size_t H = static_cast<std::size_t>(lay.num_kv_heads);
    double s = 0.0;
    for (std::size_t i = 0; i < m.size(); ++i) {
      if (!m[i]) continue;
      s -= cost[i];
      if ((i + 1) % H != 0 && m[i + 1]) s -= pair[i];  // neighbour in the same layer
    }
    return s;
  }
};

/// Prints "E <index>" once the evaluation's checkpoint has been written
/// (callbacks run in order: the Checkpoint callback comes first).
struct Announce {
  void on_evaluation(const bosch::SearchView&, const bosch::EvaluationRecord& r) {
    std::printf("E %zu\n", r.index);
    std::fflush(stdout);
  }
};

std::string bits(const bosch::HeadMask& m) {
  std::string s(m.size(), '0');
  for (std::size_t i = 0; i < m.size(); ++i) s[i] = m[i] ? '1' : '0';
  return s;
}

[[noreturn]] void usage(const char* why) {
  std::fprintf(stderr, "bosch_search_child: %s\n", why);
  std::exit(1);
}

}  // namespace

int main(int argc, char** argv) {
  std::string checkpoint, out, variant = "full";
  bool resume = false;
  long sleep_us = 500;
  std::uint64_t seed = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value of " + a).c_str());
      return argv[++i];
    };
    if (a == "--checkpoint")
      checkpoint = value();
    else if (a == "--out")
      out = value();
    else if (a == "--resume")
      resume = true;
    else if (a == "--sleep-us")
      sleep_us = std::stol(value());
    else if (a == "--seed")
      seed = std::stoull(value());
    else if (a == "--variant")
      variant = value();
    else
      usage(("unknown argument " + a).c_str());
  }
  if (checkpoint.empty() || out.empty()) usage("--checkpoint and --out are required");
  try {
    SlowEvaluator e(sleep_us);
    bosch::Options o;
    o.target_ratio = 0.5;
    o.seed = seed;
    o.variant = bosch::parse_variant(variant);
    o.probe_budget = 10;
    o.chunk_budget = 24;
    const bosch::Result r = bosch::select(
        e, o,
        bosch::Checkpoint(checkpoint, 1,
                          resume ? bosch::Checkpoint::resume : bosch::Checkpoint::start),
        Announce{});
    nlohmann::json log = nlohmann::json::array();
    for (const auto& rec : r.log)
      log.push_back({{"index", rec.index},
                     {"stage", bosch::to_string(rec.stage)},
                     {"mask", bits(rec.mask)},
                     {"score", rec.score}});
    const nlohmann::json j = {{"mask", bits(r.mask)},
                              {"score", r.score},
                              {"evaluations", r.evaluations},
                              {"replayed", r.replayed},
                              {"evaluator_calls", r.evaluator_calls},
                              {"log", log}};
    bosch::io::write_file_atomic(out, j.dump(1) + "\n");
  } catch (const std::exception& x) {
    std::fprintf(stderr, "bosch_search_child: %s\n", x.what());
    return 1;
  }
  return 0;
}
