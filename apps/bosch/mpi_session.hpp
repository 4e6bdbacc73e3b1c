// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/mpi_session.hpp
/// Everything MPI-specific of the `bosch` program (docs/mpi.md),
/// kept out of the commands, which call only:
///
///  - MpiSession (main.cpp): initializes MPI when an MPI launcher started the
///    program (mpirun, srun; a program started directly never touches MPI),
///    silences ranks other than 0 (their stdout is dropped, their stderr kept
///    for a failure message), and at the end turns a failure on any rank into
///    one line "bosch: rank N failed: ..." and MPI_Abort, so the launcher
///    ends the whole job instead of leaving the others waiting;
///  - mpi_session().describe(): the --mpi-mode / --mpi-group-size options;
///  - mpi_session().root(): rank 0 alone locks and writes files;
///  - mpi_session().gpu(): --device cuda uses the GPU of the node-local rank;
///  - MpiExecutor: bosch::select of a ModelRun, spread over the processes
///    when there are several (the library's bosch::mpi::RunExecutor, with
///    signals agreed on by all ranks and the test hook);
///  - shared_scoring(): PROXY's scoring in `bosch compare`
///    (bosch::mpi::shared_scoring).
///
/// A build without MPI (BOSCH_HAVE_MPI undefined) has the same interface: one
/// process, and a clear error when a launcher started several.

#include "command_line.hpp"
#include "errors.hpp"
#include "signals.hpp"

#include <bosch/bosch.hpp>
#include <bosch/cpu/backend.hpp>
#include <bosch/eval/transformer_evaluator.hpp>

#include <bosch/eval/compare.hpp>
#include <bosch/run/selection.hpp>

#ifdef BOSCH_HAVE_MPI
#include <bosch/mpi/environment.hpp>
#include <bosch/mpi/run_executor.hpp>
#endif

#include <cstddef>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>

namespace bosch::cli {

/// The program's MPI state (one per process, created by main).
class MpiSession {
 public:
  /// Initializes MPI when launched by an MPI launcher (MPI builds). Exits
  /// with "bosch: <message>" when MPI cannot start, or (a build without MPI)
  /// when a launcher started several processes, which would each run the
  /// whole search and write the same files.
  MpiSession(int& argc, char**& argv);
  ~MpiSession();
  MpiSession(const MpiSession&) = delete;
  MpiSession& operator=(const MpiSession&) = delete;

  /// True when several processes run this command together.
  bool parallel() const noexcept { return size_ > 1; }
  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  /// Rank 0 (or the only process): the one that prints, locks and writes.
  bool root() const noexcept { return rank_ == 0; }

  /// --mpi-mode samples|masks|auto, --mpi-group-size N.
  po::options_description describe();
  /// Hidden: the test hook --mpi-test-fail RANK:N.
  po::options_description describe_hidden();

  /// The CUDA device of this process: `requested` when --gpu was given,
  /// else the node-local rank modulo the devices it sees (one GPU per rank
  /// with mpirun -n GPUS, or Slurm's per-task device binding).
  int gpu(int requested, bool given) const;

  /// Whether this process runs `command`: select and compare run on every
  /// rank (they spread their work); the others (inspect, evaluate, convert,
  /// baseline) only on rank 0, the other ranks just wait for the end.
  bool runs(std::string_view command) const noexcept {
    return root() || command == "select" || command == "compare";
  }

  /// Waits for every process (MPI_Barrier); nothing on one process.
  void barrier() const;

  /// The command's exit status, or (several processes, a failure on this one)
  /// "bosch: rank N failed: <its error line>" and MPI_Abort with that status.
  int finish(int status);

#ifdef BOSCH_HAVE_MPI
  /// --mpi-mode and --mpi-group-size.
  bosch::mpi::Plan plan() const {
    bosch::mpi::Plan p;
    p.mode = mode_;
    p.group_size = group_size_;
    return p;
  }
  const bosch::mpi::Communicator& world() const { return env_->world(); }
#endif

  /// The test hook --mpi-test-fail RANK:N: this rank throws after N evaluations (0 = never).
  std::size_t fail_after() const noexcept { return fail_rank_ == rank_ ? fail_after_ : 0; }

 private:
  friend MpiSession& mpi_session();
  MpiSession() = default;  // one process, no MPI
  int rank_ = 0, size_ = 1, local_rank_ = 0;
  std::string mode_ = "auto";
  int group_size_ = 0;
  std::string test_fail_;
  int fail_rank_ = -1;
  std::size_t fail_after_ = 0;
  struct Streams;
  std::unique_ptr<Streams> streams_;
#ifdef BOSCH_HAVE_MPI
  std::optional<bosch::mpi::Environment> env_;
#endif
};

/// The session main() created (a single-process one when none was).
MpiSession& mpi_session();

namespace detail {
/// Throws bosch::error on the rank --mpi-test-fail names, after N evaluations.
struct TestFailure {
  std::size_t after = 0;
  void on_evaluation(const SearchView& v, const EvaluationRecord&) const;
};
#ifdef BOSCH_HAVE_MPI
/// A stop vote every process takes part in: the largest signal number any
/// process received (SignalGuard); a process that did not receive it raises
/// it itself, so every process takes the same exit path (130/143).
struct SignalAgreement {
  const bosch::mpi::Communicator* comm;
  bool on_evaluation(const SearchView& v, const EvaluationRecord& r) const;
};
#endif
}  // namespace detail

/// The executor of the commands' searches (bosch/run/selection.hpp): on one
/// process bosch::select itself; on several, bosch::mpi::RunExecutor (mode
/// from --mpi-mode) with signals agreed on by every rank. Prints the
/// parallelism to `info` (rank 0) at each search. Also runs the test hook
/// --mpi-test-fail.
class MpiExecutor final : public SearchExecutor {
 public:
  explicit MpiExecutor(std::ostream& info) : info_(&info) {}
  Result select(ModelRun& run, const Options& options, CallbackList& callbacks) override;
  bool root() const override { return mpi_session().root(); }
  std::size_t layers_run(const ModelRun& run) override;
  std::size_t row_layers(const ModelRun& run) override;

 private:
  std::ostream* info_;
};

/// The scoring of `bosch compare`'s PROXY ranking and the cost of its cells:
/// empty (the evaluator itself) on one process; on several, a
/// ParallelEvaluator around `evaluator`, kept alive by the returned holder.
/// `holder` must outlive the methods that use the result. (The BOSCH cells
/// search through MpiExecutor.)
eval::SharedScoring shared_scoring(TransformerEvaluator<cpu::Backend>& evaluator, std::ostream& info,
                                   std::shared_ptr<void>& holder);

}  // namespace bosch::cli
