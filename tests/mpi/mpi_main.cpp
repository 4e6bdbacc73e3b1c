// The doctest main of the MPI suite (test_mpi), run by CTest under mpirun with
// 1, 2 and 3 processes: initializes MPI, runs the test cases on every process
// and fails when any process failed. Only rank 0 prints its report; a failing
// process prints its own failures too. Test cases are collective: every
// process runs the same ones in the same order (doctest's order is fixed).
#define DOCTEST_CONFIG_IMPLEMENT
#include <doctest/doctest.h>

#include <bosch/mpi/environment.hpp>

#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>

#include "mpi_support.hpp"
#include "test_support.hpp"

namespace bosch::test {
std::uint64_t seed_value = 20260407;
}

namespace bosch::test::mpi {
const bosch::mpi::Environment* environment = nullptr;
}

int main(int argc, char** argv) {
  bosch::mpi::Environment env(argc, argv);
  bosch::test::mpi::environment = &env;
  const auto& world = env.world();
  if (const char* s = std::getenv("BOSCH_TEST_SEED")) bosch::test::seed_value = std::stoull(s);
  for (int i = 1; i < argc; ++i)
    if (std::strncmp(argv[i], "--seed=", 7) == 0) bosch::test::seed_value = std::stoull(argv[i] + 7);
  if (world.root())
    std::cout << "bosch MPI tests: " << world.size() << " processes, base seed " << bosch::test::seed_value << "\n";
  std::ostringstream report;
  doctest::Context context;
  context.applyCommandLine(argc, argv);
  if (!world.root()) context.setCout(&report);
  const int rc = context.run();
  const bool failed = world.any(rc != 0);
  if (rc != 0 && !world.root()) std::cout << "rank " << world.rank() << ":\n" << report.str() << std::flush;
  return failed ? 1 : 0;
}
