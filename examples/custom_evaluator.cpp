// A user's own evaluator in a few lines, run through bosch::select.
//
// Any type with layout() and evaluate(mask) -> double (higher is better) is a
// bosch::Evaluator. Here a toy "model" of 12 layers x 4 KV heads: each head
// has a hidden cost of becoming a sliding-window head, and two heads per layer
// are redundant (either may go local, not both). bosch::select finds which 24
// of the 48 KV heads to make SWA.
#include <bosch/bosch.hpp>

#include <cmath>
#include <iostream>

struct ToyEvaluator {
  bosch::HeadLayout layout() const { return {12, 16, 4}; }  // L, query heads, KV heads
  double evaluate(const bosch::HeadMask& m) const {
    double score = 1.0;
    for (int l = 0; l < 12; ++l) {
      for (int k = 0; k < 4; ++k)
        if (m.swa(l, k)) score -= 0.01 * (1 + (l * 7 + k * 3) % 5);  // per-head cost
      if (m.swa(l, 0) && m.swa(l, 1)) score -= 0.2;                  // redundant pair
    }
    return score;
  }
};

int main() {
  ToyEvaluator evaluator;
  bosch::Options options;
  options.target_ratio = 0.5;  // half of the KV heads become sliding-window heads
  options.seed = 42;
  const bosch::Result r = bosch::select(evaluator, options, bosch::ProgressReporter(std::cerr, 25));
  std::cout << bosch::to_grid(r.mask)  // one line per layer: 'S' = SWA, '.' = full
            << "SWA heads " << r.mask.count() << "/" << r.mask.size() << ", score " << r.score
            << " (normalized " << r.normalized_score << "), " << r.evaluations << " evaluations\n";
}
