// SPDX-License-Identifier: Apache-2.0
// A ModelRun's search over MPI processes (see bosch/mpi/run_executor.hpp).

#include <bosch/mpi/run_executor.hpp>

#include <bosch/bosch.hpp>
#include <bosch/mpi/select.hpp>

#include <sstream>

namespace bosch::mpi {

ParallelOptions parallel_options(const Plan& plan, int processes, std::size_t samples) {
  const std::string& group_option = plan.group_size_option;
  ParallelOptions o;
  if (plan.group_size < 0) throw invalid_argument("must be >= 0", group_option);
  if (plan.mode == "auto") {
    o.group_size = plan.group_size > 0 ? plan.group_size : automatic_group_size(processes, samples);
    o.mode = o.group_size == processes ? Mode::samples : Mode::masks;
  } else {
    o.mode = parse_mode(plan.mode, plan.mode_option.c_str());
    o.group_size = plan.group_size > 0 ? plan.group_size : 1;
  }
  if (o.mode == Mode::masks && processes % o.group_size != 0)
    throw invalid_argument(
        std::to_string(o.group_size) + " does not divide the " + std::to_string(processes) + " processes",
        group_option);
  return o;
}

std::string describe(const Plan& plan, int processes, std::size_t samples) {
  const ParallelOptions o = parallel_options(plan, processes, samples);
  const int g = o.mode == Mode::samples ? processes : o.group_size;
  const auto per = static_cast<std::size_t>(g);
  std::ostringstream s;
  s << processes << " processes, " << to_string(o.mode) << " mode: " << processes / g << " group"
    << (processes / g == 1 ? "" : "s") << " of " << g << " rank" << (g == 1 ? "" : "s") << ", " << samples / per
    << (samples % per ? "-" + std::to_string(samples / per + 1) : "") << " of " << samples << " samples per rank";
  return s.str();
}

Result RunExecutor::select(ModelRun& run, const Options& options, CallbackList& callbacks) {
  auto observers = callbacks.observers();
  auto voters = callbacks.voters();
  auto every_observers = every_process.observers();
  auto every_voters = every_process.voters();
  if (world_->size() == 1) return bosch::select(run, options, observers, voters, every_observers, every_voters);
  ParallelEvaluator parallel(run, *world_, parallel_options(plan_, world_->size(), run.sample_count()));
  if (info_ && world_->root()) info_("mpi: " + describe(plan_, world_->size(), run.sample_count()) + "\n");
  Spmd<CallbackList::Observers> spmd_observers(observers, *world_);
  Spmd<CallbackList::Voters> spmd_voters(voters, *world_);
  return bosch::select(parallel, options, spmd_observers, spmd_voters, every_observers, every_voters);
}

std::size_t RunExecutor::layers_run(const ModelRun& run) {
  return world_->size() == 1 ? run.stats().layer_applications() : world_->sum(run.stats().layer_applications());
}

eval::SharedScoring shared_scoring(TransformerEvaluator<cpu::Backend>& evaluator, const Communicator& world,
                                   const Plan& plan, const InfoSink& info, std::shared_ptr<void>& holder) {
  eval::SharedScoring out;
  if (world.size() == 1) return out;
  using Parallel = ParallelEvaluator<TransformerEvaluator<cpu::Backend>>;
  auto parallel =
      std::make_shared<Parallel>(evaluator, world, parallel_options(plan, world.size(), evaluator.sample_count()));
  if (info && world.root())
    info("mpi: " + describe(plan, world.size(), evaluator.sample_count()) + " (BOSCH and PROXY)\n");
  out.score_batch = [p = parallel.get()](std::span<const HeadMask> masks, const EvaluationHint& hint) {
    return p->evaluate_batch(masks, hint);
  };
  out.layers_run = [p = parallel.get()] {
    return static_cast<std::size_t>(p->communicator().sum(p->inner().stats().layer_applications()));
  };
  holder = parallel;
  return out;
}

}  // namespace bosch::mpi
