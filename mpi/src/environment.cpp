// SPDX-License-Identifier: Apache-2.0
// bosch::mpi::Environment (include/bosch/mpi/environment.hpp).

#include <bosch/mpi/environment.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

namespace bosch::mpi {

namespace {
int env_int(const char* name) {
  const char* v = std::getenv(name);
  if (v == nullptr || *v == '\0') return -1;
  char* end = nullptr;
  const long n = std::strtol(v, &end, 10);
  return end != v && n >= 0 && n < 1 << 30 ? static_cast<int>(n) : -1;
}
bool env_set(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0';
}
}  // namespace

int launched_size() {
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_SIZE", "SLURM_STEP_NUM_TASKS"})
    if (const int n = env_int(name); n > 0) return n;
  return 0;
}

bool launched() {
  return env_set("OMPI_COMM_WORLD_SIZE") || env_set("PMIX_RANK") || env_set("PMI_RANK") ||
         env_set("PMI_SIZE") || env_int("SLURM_STEP_NUM_TASKS") > 1;
}

Environment::Environment(int& argc, char**& argv) {
  int done = 0;
  check(MPI_Initialized(&done), "MPI_Initialized");
  if (!done) {
    int provided = 0;
    check(MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided), "MPI_Init_thread");
    initialized_here_ = true;
  }
  try {
    world_.emplace(Communicator::world());
    const int expected = launched_size();
    if (expected > 1 && world_->size() == 1)
      throw error("the launcher started " + std::to_string(expected) +
                      " processes but MPI sees one: each would run the whole search alone (with Slurm, "
                      "use srun --mpi=pmix, or set MpiDefault=pmix)",
                  "MPI_Init");
    const Communicator node = world_->split_shared();
    local_rank_ = node.rank();
    local_size_ = node.size();
  } catch (...) {
    world_.reset();
    if (initialized_here_) MPI_Finalize();
    throw;
  }
}

Environment::~Environment() {
  world_.reset();
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (initialized_here_ && !finalized) MPI_Finalize();
}

void Environment::abort(int code, const std::string& message) {
  int rank = -1, up = 0, down = 0;
  MPI_Initialized(&up);
  MPI_Finalized(&down);
  if (up && !down) MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::fprintf(stderr, "bosch: rank %d failed: %s\n", rank, message.c_str());
  std::fflush(stderr);
  if (up && !down) MPI_Abort(MPI_COMM_WORLD, code);
  std::_Exit(code);
}

}  // namespace bosch::mpi
