// SPDX-License-Identifier: Apache-2.0
// bench_batch_profile: the parallel structure of a BOSCH search, the input of
// the cost model (scripts/cost-model; docs/mpi.md).
//
// It runs bosch::select on the real TransformerEvaluator (its residual cache,
// hints and memory bound) over a counting backend: layer applications are
// counted, not computed, and the scores come from a fixed synthetic landscape
// (per-head costs with same-layer interactions), so a search of the paper's
// size (Qwen3-8B: 36 layers, 8 KV heads, 64 samples of 32k tokens) takes
// seconds. For every requested process count it simulates the schedule of
// bosch::mpi::ParallelEvaluator: G groups of g = P/G processes, the masks of
// each evaluate_batch call split into G contiguous blocks, each group's
// busiest process scoring ceil(S/g) samples with its own residual cache (whose
// entries then hold ceil(S/g) samples' streams). The critical path of a call
// is the largest layer x sample count of a group; its sum over calls, times the
// seconds of one layer on one sample, is the wall time of the evaluations.
//
// Usage:
//   bench_batch_profile [--layout 36x32x8] [--hidden 4096] [--tokens 32768]
//       [--samples 64] [--ranks 1,8,64] [--cache-bytes 2147483648]
//       [--ratio 0.5] [--probe-budget 16] [--chunk-budget 64] [--lambda 4]
//       [--batch-size 16] [--seed 0] [--max-evaluations 0]
// prints one JSON object (configs: ranks, mode, group_size, critical and total
// layer-sample applications, calls by batch width; the search's evaluations).

#include <bosch/bosch.hpp>
#include <bosch/eval/transformer_evaluator.hpp>
#include <bosch/io/options_json.hpp>
#include <bosch/model/config.hpp>
#include <bosch/tasks/task.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

namespace {

/// A Backend that runs nothing: residuals are empty, logits are zeros.
struct CountingBackend {
  struct Residual {};
  bosch::model::Config cfg;
  const bosch::model::Config& config() const { return cfg; }
  Residual embed(std::span<const int>) const { return {}; }
  void run_layers(Residual&, int, int, const bosch::AttentionWindows&) const {}
  std::vector<float> logits(const Residual&, std::span<const int> positions) const {
    return std::vector<float>(positions.size() * static_cast<std::size_t>(cfg.vocab_size), 0.0f);
  }
  std::vector<float> forward(std::span<const int>, const bosch::AttentionWindows&, std::span<const int> p) const {
    return logits({}, p);
  }
};

/// The synthetic landscape: each KV head has a cost (heavy-tailed), heads of
/// one layer interact (a second SWA head in a layer costs more), and the score
/// is minus the total.
double landscape(const bosch::HeadMask& m) {
  const auto& lay = m.layout();
  double s = 0;
  for (int l = 0; l < lay.num_layers; ++l) {
    int in_layer = 0;
    for (int k = 0; k < lay.num_kv_heads; ++k) {
      if (!m.swa(l, k)) continue;
      std::uint64_t h = 0x9e3779b97f4a7c15ull * static_cast<std::uint64_t>(l * 131 + k + 1);
      h ^= h >> 31;
      h *= 0xbf58476d1ce4e5b9ull;
      h ^= h >> 27;
      const double u = static_cast<double>(h % 1000003) / 1000003.0;
      s += std::exp(3.0 * u) / (1.0 + 0.05 * l);
      ++in_layer;
    }
    s += 0.3 * in_layer * in_layer;
  }
  return -s;
}

using Evaluator = bosch::TransformerEvaluator<CountingBackend>;

/// The schedule of ParallelEvaluator with `groups` groups, each represented by
/// its busiest process (samples [0, per_rank)).
class SimulatedParallel {
 public:
  SimulatedParallel(const CountingBackend& backend, const bosch::tasks::TaskSet& tasks, int groups,
                    std::size_t per_rank, std::size_t cache_bytes) {
    bosch::TransformerEvaluatorOptions eo;
    eo.window = 1;
    eo.cache_bytes = cache_bytes;
    for (int g = 0; g < groups; ++g) {
      evaluators_.push_back(std::make_unique<Evaluator>(backend, tasks, eo));
      evaluators_.back()->set_sample_range(0, per_rank);
    }
  }
  bosch::HeadLayout layout() const { return evaluators_.front()->layout(); }
  double evaluate(const bosch::HeadMask& m) { return evaluate(m, {}); }
  double evaluate(const bosch::HeadMask& m, const bosch::EvaluationHint& h) {
    return evaluate_batch(std::span<const bosch::HeadMask>(&m, 1), h).front();
  }
  std::vector<double> evaluate_batch(std::span<const bosch::HeadMask> ms) { return evaluate_batch(ms, {}); }
  std::vector<double> evaluate_batch(std::span<const bosch::HeadMask> ms, const bosch::EvaluationHint& hint) {
    const std::size_t G = evaluators_.size();
    std::size_t slowest = 0;
    for (std::size_t g = 0; g < G; ++g) {
      const std::size_t q = ms.size() / G, r = ms.size() % G;
      const std::size_t b = g * q + std::min(g, r), e = b + q + (g < r ? 1 : 0);
      const std::size_t before = evaluators_[g]->stats().layers_run;
      for (std::size_t i = b; i < e; ++i) {
        bosch::EvaluationHint h = hint;
        if (hint.reference) h.first_changed_layer = bosch::first_changed_layer(ms[i], *hint.reference);
        evaluators_[g]->sample_scores(ms[i], h);
      }
      slowest = std::max(slowest, evaluators_[g]->stats().layers_run - before);
      total_ += evaluators_[g]->stats().layers_run - before;
    }
    critical_ += slowest;
    ++widths_[ms.size()];
    std::vector<double> out;
    for (const auto& m : ms) out.push_back(landscape(m));
    return out;
  }
  std::size_t critical() const { return critical_; }
  std::size_t total() const { return total_; }
  const std::map<std::size_t, std::size_t>& widths() const { return widths_; }

 private:
  std::vector<std::unique_ptr<Evaluator>> evaluators_;
  std::size_t critical_ = 0, total_ = 0;
  std::map<std::size_t, std::size_t> widths_;
};

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(std::stoi(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  std::map<std::string, std::string> a{{"layout", "36x32x8"}, {"hidden", "4096"},     {"tokens", "32768"},
                                       {"samples", "64"},     {"ranks", "1,8,64"},    {"cache-bytes", "2147483648"},
                                       {"ratio", "0.5"},      {"probe-budget", "16"}, {"chunk-budget", "64"},
                                       {"lambda", "4"},       {"batch-size", "16"},   {"seed", "0"},
                                       {"max-evaluations", "0"}};
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string k = argv[i];
    if (k.rfind("--", 0) != 0 || !a.count(k.substr(2))) {
      std::cerr << "bench_batch_profile: unknown option " << k << " (see the file comment)\n";
      return 2;
    }
    a[k.substr(2)] = argv[i + 1];
  }
  try {
    const bosch::HeadLayout layout = bosch::parse_layout(a["layout"]);
    CountingBackend backend;
    backend.cfg.num_layers = layout.num_layers;
    backend.cfg.num_heads = layout.num_query_heads;
    backend.cfg.num_kv_heads = layout.num_kv_heads;
    backend.cfg.hidden_size = std::stoi(a["hidden"]);
    backend.cfg.head_dim = backend.cfg.hidden_size / layout.num_query_heads;
    backend.cfg.vocab_size = 2;
    const int tokens = std::stoi(a["tokens"]);
    const std::size_t samples = std::stoul(a["samples"]);
    bosch::tasks::TaskSet tasks;
    for (std::size_t s = 0; s < samples; ++s) {
      bosch::tasks::Sample x;
      x.prompt.assign(static_cast<std::size_t>(tokens - 1), 1);
      x.answer = {0};
      tasks.samples.push_back(std::move(x));
    }
    bosch::Options o;
    o.target_ratio = std::stod(a["ratio"]);
    o.probe_budget = std::stoul(a["probe-budget"]);
    o.chunk_budget = std::stoul(a["chunk-budget"]);
    o.lambda = std::stoi(a["lambda"]);
    o.batch_size = std::stoul(a["batch-size"]);
    o.seed = std::stoull(a["seed"]);
    o.max_evaluations = std::stoul(a["max-evaluations"]);
    const std::size_t cache = std::stoull(a["cache-bytes"]);

    nlohmann::json out{{"layout", a["layout"]},   {"hidden", backend.cfg.hidden_size}, {"tokens", tokens},
                       {"samples", samples},      {"cache_bytes", cache},              {"options", bosch::options_to_json(o)},
                       {"configs", nlohmann::json::array()}};
    for (int p : parse_list(a["ranks"])) {
      // Every group size g dividing P: g = P is sample-parallel, g = 1 pure mask-parallel.
      for (int g = p; g >= 1; --g) {
        if (p % g != 0) continue;
        const std::size_t per_rank = (samples + static_cast<std::size_t>(g) - 1) / static_cast<std::size_t>(g);
        SimulatedParallel sim(backend, tasks, p / g, per_rank, cache);
        const bosch::Result r = bosch::select(sim, o);
        nlohmann::json widths = nlohmann::json::object();
        for (const auto& [w, n] : sim.widths()) widths[std::to_string(w)] = n;
        out["configs"].push_back({{"ranks", p},
                                  {"mode", g == p ? "samples" : "masks"},
                                  {"group_size", g},
                                  {"samples_per_rank", per_rank},
                                  {"evaluations", r.evaluations},
                                  {"critical_layer_samples", sim.critical()},
                                  {"total_layer_samples", sim.total()},
                                  {"calls_by_width", widths}});
        out["full_layer_samples_per_evaluation"] = static_cast<std::size_t>(layout.num_layers) * samples;
      }
    }
    std::cout << out.dump(1) << "\n";
  } catch (const std::exception& e) {
    std::cerr << "bench_batch_profile: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
