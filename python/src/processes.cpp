// SPDX-License-Identifier: Apache-2.0
// The MPI processes of a Python search (see processes.hpp).

#include "processes.hpp"

#include <cstdlib>
#include <string>

#ifdef BOSCH_HAVE_MPI
#include <bosch/mpi/environment.hpp>
#include <bosch/mpi/run_executor.hpp>
#endif

namespace bosch::python {

namespace {

#ifdef BOSCH_HAVE_MPI
/// MPI_COMM_WORLD when an MPI launcher started this process (initialized at
/// the first call, finalized when the module is unloaded at exit).
const bosch::mpi::Communicator* world() {
  if (!bosch::mpi::launched()) return nullptr;
  static std::unique_ptr<bosch::mpi::Environment> env = [] {
    static char name[] = "python";
    static char* args[] = {name, nullptr};
    int argc = 1;
    char** argv = args;
    return std::make_unique<bosch::mpi::Environment>(argc, argv);
  }();
  return &env->world();
}
#else
/// The processes a launcher says it started (a build without MPI cannot join them).
int launched_size() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_STEP_NUM_TASKS"})
    if (const char* s = std::getenv(v)) return std::atoi(s);
  return 1;
}
#endif

}  // namespace

std::unique_ptr<SearchExecutor> process_executor(const InfoSink& info) {
#ifdef BOSCH_HAVE_MPI
  const bosch::mpi::Communicator* w = world();
  if (!w || w->size() == 1) return nullptr;
  bosch::mpi::Plan plan;  // automatic: samples mode when there are enough samples
  plan.mode_option = "mpi_mode";
  plan.group_size_option = "mpi_group_size";
  return std::make_unique<bosch::mpi::RunExecutor>(*w, plan, info);
#else
  (void)info;
  if (launched_size() > 1)
    throw error("an MPI launcher started " + std::to_string(launched_size()) +
                " processes, but this bosch package was built without MPI: each would run the whole "
                "search (install libopenmpi-dev and reinstall bosch, or run one process)");
  return nullptr;
#endif
}

void bind_processes(nb::module_& m) {
  m.def(
      "mpi_rank",
      [] {
#ifdef BOSCH_HAVE_MPI
        if (const auto* w = world()) return w->rank();
#endif
        return 0;
      },
      "This process's rank in the MPI job that spreads bosch.select of a TransformerEvaluator\n"
      "(0 without an MPI launcher): let rank 0 alone write files.");
  m.def(
      "mpi_size",
      [] {
#ifdef BOSCH_HAVE_MPI
        if (const auto* w = world()) return w->size();
#endif
        return 1;
      },
      "The number of processes of that MPI job (1 without an MPI launcher, or in a build\n"
      "without MPI).");
}

}  // namespace bosch::python
