// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file mpi/run_executor.hpp
/// A search of the bundled evaluator (bosch::ModelRun) spread over the
/// processes of an MPI job, for every front end: the `bosch` program under
/// mpirun (apps/bosch/mpi_session.hpp adds its options, output handling and
/// signals) and the Python package (bosch.TransformerEvaluator under
/// mpirun). Target bosch::mpi_run; docs/mpi.md.
///
/// @code
/// bosch::mpi::Environment env(argc, argv);
/// bosch::ModelRun run(settings);
/// bosch::mpi::RunExecutor executor(env.world(), {});  // --mpi-mode auto
/// bosch::Selection s = bosch::select_heads(run, request, callbacks, &executor);
/// @endcode

#include <bosch/eval/compare.hpp>
#include <bosch/mpi/communicator.hpp>
#include <bosch/mpi/evaluator.hpp>
#include <bosch/run/selection.hpp>

#include <cstddef>
#include <memory>
#include <string>

namespace bosch::mpi {

/// How the processes share the work: `mode` "samples", "masks" or "auto"
/// (bosch::mpi::automatic_group_size), and the processes per group (0: the
/// mode's default), with the names errors give them (the command line's by
/// default; Python's are "mpi_mode" and "mpi_group_size").
struct Plan {
  std::string mode = "auto";
  int group_size = 0;
  std::string mode_option = "--mpi-mode";
  std::string group_size_option = "--mpi-group-size";
};

/// The ParallelOptions of `plan` for `processes` processes and `samples`
/// calibration samples. Throws bosch::invalid_argument naming the option
/// (mode, group-size) for an unknown mode, a negative group size or one that
/// does not divide the processes.
ParallelOptions parallel_options(const Plan& plan, int processes, std::size_t samples);

/// "4 processes, samples mode: 1 group of 4 ranks, 2 of 8 samples per rank".
std::string describe(const Plan& plan, int processes, std::size_t samples);

/// bosch::select on a ModelRun over the processes of `world`: every process
/// runs the same search on a ParallelEvaluator around the run (the mode of
/// `plan`); the callbacks passed to select() run on rank 0 (bosch::mpi::Spmd:
/// stop votes and replayed logs are shared), `every_process` on every process
/// unwrapped; every process returns the same Result. Says the parallelism to
/// `info` (rank 0) at each search. On one process, bosch::select itself.
class RunExecutor final : public SearchExecutor {
 public:
  RunExecutor(const Communicator& world, Plan plan, InfoSink info = {})
      : world_(&world), plan_(std::move(plan)), info_(std::move(info)) {}
  Result select(ModelRun& run, const Options& options, CallbackList& callbacks) override;
  bool root() const override { return world_->root(); }
  /// Summed over the processes (collective).
  std::size_t layers_run(const ModelRun& run) override;

  /// Callbacks every process runs (signal agreement, test hooks).
  CallbackList every_process;

 private:
  const Communicator* world_;
  Plan plan_;
  InfoSink info_;
};

/// PROXY's scoring in bosch compare over the processes of `world` (the BOSCH
/// cells search through RunExecutor): empty on one process; otherwise a
/// ParallelEvaluator around `evaluator`, kept alive by `holder`, which must
/// outlive the methods that use the result.
eval::SharedScoring shared_scoring(TransformerEvaluator<cpu::Backend>& evaluator, const Communicator& world,
                                   const Plan& plan, const InfoSink& info, std::shared_ptr<void>& holder);

}  // namespace bosch::mpi
