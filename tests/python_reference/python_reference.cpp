// SPDX-License-Identifier: Apache-2.0
// The reference run of python/tests/test_search.py: bosch::select in C++ on a
// planted objective, for comparison with the same search driven from Python.
//
//   bosch_python_reference IN.json OUT.json
//
// IN: {"layout": "LxHqxHkv", "costs": [L*Hkv numbers], "pairs": [L*(Hkv-1)
//      numbers], "options": {...Options JSON (io/options_json.hpp)...},
//      "batch": bool (evaluate_batch instead of evaluate), optional
//      "offsets": [N*L*Hkv numbers] (then a per-sample objective for racing:
//      sample s adds offsets[s*L*Hkv + i] to the cost of SWA head i; the
//      score is the mean over the N samples, race order 0 .. N-1)}
// The objective: score = -(sum of costs[i] over SWA heads i) - (sum of
// pairs[l*(Hkv-1)+k] over layers l and k where heads k and k+1 of layer l
// are both SWA). With costs and pairs that are small multiples of a power of
// two every partial sum is exact, so any summation order (NumPy's included)
// gives the same double.
// OUT: {"mask": bits, "score", "normalized_score", "evaluations",
//       "layer_counts", "planned_counts", "anchors": [full, swa], "options"
//       (as read), "eliminated", "forwards", "log": [{"index", "stage", "mask",
//       "score", "eliminated", "samples", "forwards"}...]}; exit 1 with a
//       message on stderr on error.

#include <bosch/bosch.hpp>
#include <bosch/io/mask_io.hpp>
#include <bosch/io/atomic_file.hpp>
#include <bosch/io/options_json.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <exception>
#include <span>
#include <string>
#include <vector>

namespace {

struct Planted {
  bosch::HeadLayout lay;
  std::vector<double> costs, pairs;
  bosch::HeadLayout layout() const { return lay; }
  double evaluate(const bosch::HeadMask& m) const {
    const std::size_t H = static_cast<std::size_t>(lay.num_kv_heads);
    double s = 0.0;
    for (std::size_t i = 0; i < m.size(); ++i) {
      if (!m[i]) continue;
      s -= costs[i];
      const std::size_t l = i / H, k = i % H;
      if (k + 1 < H && m[i + 1]) s -= pairs[l * (H - 1) + k];
    }
    return s;
  }
};

struct BatchPlanted : Planted {
  std::vector<double> evaluate_batch(std::span<const bosch::HeadMask> ms) const {
    std::vector<double> out;
    for (const auto& m : ms) out.push_back(evaluate(m));
    return out;
  }
};

/// Planted with N samples (bosch::PerSampleEvaluator, CostedEvaluator):
/// sample s's score is Planted's with offsets[s] added to the costs; cost()
/// counts the per-sample scores computed.
struct SampledPlanted : Planted {
  std::vector<std::vector<double>> offsets;
  double scored = 0;
  double sample_score(const bosch::HeadMask& m, std::size_t s) const {
    double v = Planted::evaluate(m);
    for (std::size_t i = 0; i < m.size(); ++i)
      if (m[i]) v -= offsets[s][i];
    return v;
  }
  std::size_t sample_count() const { return offsets.size(); }
  std::vector<std::size_t> race_order() const {
    std::vector<std::size_t> o(offsets.size());
    for (std::size_t i = 0; i < o.size(); ++i) o[i] = i;
    return o;
  }
  std::vector<double> score_samples(const bosch::HeadMask& m, const bosch::EvaluationHint&,
                                    std::span<const std::size_t> idx) {
    std::vector<double> out;
    for (std::size_t s : idx) out.push_back(sample_score(m, s));
    scored += static_cast<double>(idx.size());
    return out;
  }
  static double reduce(std::span<const double> v) {
    double sum = 0;
    for (double x : v) sum += x;
    return v.empty() ? 0.0 : sum / static_cast<double>(v.size());
  }
  double evaluate(const bosch::HeadMask& m) {
    std::vector<double> v;
    for (std::size_t s = 0; s < offsets.size(); ++s) v.push_back(sample_score(m, s));
    scored += static_cast<double>(offsets.size());
    return reduce(v);
  }
  double cost() const { return scored; }
};
static_assert(bosch::PerSampleEvaluator<SampledPlanted> && bosch::CostedEvaluator<SampledPlanted>);

std::string bits(const bosch::HeadMask& m) {
  std::string s(m.size(), '0');
  for (std::size_t i = 0; i < m.size(); ++i) s[i] = m[i] ? '1' : '0';
  return s;
}

nlohmann::json number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); }

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::fprintf(stderr, "usage: bosch_python_reference IN.json OUT.json\n");
    return 2;
  }
  try {
    const nlohmann::json in = nlohmann::json::parse(bosch::io::read_file(argv[1]));
    Planted p;
    p.lay = bosch::parse_layout(in.at("layout").get<std::string>());
    p.costs = in.at("costs").get<std::vector<double>>();
    p.pairs = in.at("pairs").get<std::vector<double>>();
    const std::size_t H = static_cast<std::size_t>(p.lay.num_kv_heads);
    if (p.costs.size() != p.lay.size() || p.pairs.size() != p.lay.size() - p.lay.size() / H)
      throw bosch::invalid_argument("costs or pairs of the wrong size", argv[1]);
    const bosch::Options options = bosch::options_from_json(in.at("options"), "options");
    bosch::Result r;
    if (in.contains("offsets")) {
      SampledPlanted sp{p, {}, 0.0};
      const auto flat = in.at("offsets").get<std::vector<double>>();
      if (flat.empty() || flat.size() % p.lay.size() != 0)
        throw bosch::invalid_argument("offsets: not a whole number of samples", argv[1]);
      for (std::size_t s = 0; s < flat.size(); s += p.lay.size())
        sp.offsets.emplace_back(flat.begin() + static_cast<std::ptrdiff_t>(s),
                                flat.begin() + static_cast<std::ptrdiff_t>(s + p.lay.size()));
      r = bosch::select(sp, options);
    } else if (in.value("batch", false)) {
      BatchPlanted b{p};
      r = bosch::select(b, options);
    } else {
      r = bosch::select(p, options);
    }
    nlohmann::json log = nlohmann::json::array();
    for (const auto& e : r.log)
      log.push_back({{"index", e.index}, {"stage", bosch::to_string(e.stage)}, {"mask", bits(e.mask)},
                     {"score", e.score}, {"eliminated", e.eliminated}, {"samples", e.samples},
                     {"forwards", number(e.forwards)}});
    const nlohmann::json out{{"mask", bits(r.mask)},
                             {"score", number(r.score)},
                             {"normalized_score", number(r.normalized_score)},
                             {"evaluations", r.evaluations},
                             {"layer_counts", r.layer_counts},
                             {"planned_counts", r.planned_counts},
                             {"anchors", {number(r.anchors.full), number(r.anchors.swa)}},
                             {"options", bosch::options_to_json(options)},
                             {"eliminated", r.eliminated},
                             {"forwards", number(r.forwards)},
                             {"log", log}};
    bosch::io::write_file_atomic(argv[2], out.dump() + "\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bosch_python_reference: %s\n", e.what());
    return 1;
  }
}
