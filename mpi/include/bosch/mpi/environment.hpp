// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file mpi/environment.hpp
/// MPI start-up and shut-down for a program that may or may not run under an
/// MPI launcher (mpirun/mpiexec, Slurm's srun with PMI/PMIx).
///
/// A program started directly (`bosch select ...`) does not initialize MPI at
/// all, so it behaves exactly as a build without MPI; launched() tells the two
/// cases apart from the environment the launcher sets.

#include <bosch/mpi/communicator.hpp>

#include <optional>
#include <string>

namespace bosch::mpi {

/// True when an MPI launcher started this process: Open MPI's mpirun
/// (OMPI_COMM_WORLD_SIZE), a PMIx or PMI launcher such as srun --mpi=pmix or
/// MPICH's mpiexec (PMIX_RANK, PMI_RANK, PMI_SIZE), or a Slurm job step of
/// more than one task (SLURM_STEP_NUM_TASKS > 1; when MPI then sees a single
/// process, the step was started without PMI and Environment reports it).
bool launched();

/// The number of processes the launcher says it started, from the same
/// variables as launched() (0 when none says).
int launched_size();

/// Initializes MPI for its lifetime (MPI_THREAD_FUNNELED: only the thread that
/// made it calls MPI; OpenMP threads inside an evaluation do not) unless it is
/// already initialized, sets MPI_ERRORS_RETURN on MPI_COMM_WORLD, and
/// finalizes MPI at destruction if it initialized it.
class Environment {
 public:
  /// Throws bosch::mpi::error when MPI_Init_thread fails, and when a launcher
  /// started several processes (launched_size() > 1) but MPI sees only one,
  /// e.g. srun without PMI support ("srun --mpi=pmix").
  Environment(int& argc, char**& argv);
  ~Environment();
  Environment(const Environment&) = delete;
  Environment& operator=(const Environment&) = delete;

  /// MPI_COMM_WORLD.
  const Communicator& world() const noexcept { return *world_; }
  /// This process's rank among the processes of its node
  /// (MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)), and their number.
  int local_rank() const noexcept { return local_rank_; }
  int local_size() const noexcept { return local_size_; }

  /// Ends the whole job: prints "bosch: rank R failed: MESSAGE" on stderr
  /// (C stdio, unbuffered) and calls MPI_Abort(MPI_COMM_WORLD, code), which
  /// makes the launcher stop every other process. Never returns.
  [[noreturn]] static void abort(int code, const std::string& message);

 private:
  bool initialized_here_ = false;
  std::optional<Communicator> world_;
  int local_rank_ = 0, local_size_ = 1;
};

}  // namespace bosch::mpi
