// A user's program: its own evaluator run through bosch::select.
#include <bosch/bosch.hpp>
#ifdef CONSUMER_WITH_TRANSFORMER
#include <bosch/model/windows.hpp>
#endif
#ifdef CONSUMER_WITH_MPI
#include <bosch/mpi/environment.hpp>
#include <bosch/mpi/evaluator.hpp>
#endif

#include <iostream>

struct PreferHighLayers {
  bosch::HeadLayout layout() const { return {4, 4, 2}; }
  double evaluate(const bosch::HeadMask& m) const {
    double s = 0;
    for (int l = 0; l < 4; ++l)
      for (int g = 0; g < 2; ++g) s -= m.swa(l, g) ? (4 - l) + 0.1 * g : 0.0;
    return s;
  }
};

int main() {
  PreferHighLayers e;
  bosch::Options options;
  options.target_ratio = 0.5;
  options.seed = 1;
  bosch::Result r = bosch::select(e, options);
  if (r.mask.count() != 4) return 1;
  std::cout << "consumer: " << r.mask.count() << " SWA heads, score " << r.score << "\n";
#ifdef CONSUMER_WITH_MPI
  // bosch::mpi links and its headers are installed (not run: no launcher here).
  if (bosch::mpi::share(5, 2, 1).first != 3) return 1;
  std::cout << "consumer: bosch::mpi " << (bosch::mpi::launched() ? "launched" : "available") << "\n";
#endif
  return 0;
}
