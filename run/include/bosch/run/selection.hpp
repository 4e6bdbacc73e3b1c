// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file run/selection.hpp
/// The one run function of a head selection on the bundled evaluator:
/// select_heads(run, request, callbacks) assembles the warm starts, keeps
/// the run's identity beside the checkpoint, runs bosch::select (in this
/// process, or over MPI processes through a SearchExecutor), and returns the
/// result with the metadata a mask file records. `bosch select` (every ratio
/// of --ratios, one process or mpirun), `bosch compare`'s BOSCH cells
/// (run_search) and bosch.select(bosch.TransformerEvaluator(...)) are thin
/// doors over it, so the same inputs give the same mask, log and metadata
/// through each of them.

#include <bosch/callback_list.hpp>
#include <bosch/eval/head_scores.hpp>
#include <bosch/options.hpp>
#include <bosch/run/model_run.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <limits>
#include <string>
#include <vector>

namespace bosch {

/// How bosch::select runs on a ModelRun: in this process (the default) or
/// spread over the processes of an MPI job (the `bosch` program's executor,
/// apps/bosch/mpi_session.hpp, on bosch::mpi::ParallelEvaluator). Every
/// executor returns the same Result for the same inputs.
class SearchExecutor {
 public:
  virtual ~SearchExecutor() = default;
  /// bosch::select(run, options, callbacks.observers(), callbacks.voters()),
  /// or its parallel equivalent.
  virtual Result select(ModelRun& run, const Options& options, CallbackList& callbacks) = 0;
  /// True on the process that reads and writes files (rank 0).
  virtual bool root() const { return true; }
  /// Layer applications the run's evaluator ran so far, summed over the
  /// processes (collective under MPI: every process calls it).
  virtual std::size_t layers_run(const ModelRun& run) { return run.stats().layer_applications(); }
  /// TransformerEvaluatorStats::row_layers so far, summed likewise (collective).
  virtual std::size_t row_layers(const ModelRun& run) { return run.stats().row_layers; }
};

/// The executor of one process.
class LocalExecutor final : public SearchExecutor {
 public:
  Result select(ModelRun& run, const Options& options, CallbackList& callbacks) override;
};

/// A warm-start mask with a name for the metadata (a mask file's path).
struct WarmStart {
  std::string name;
  HeadMask mask;
};

/// What to select, from where, and the files kept on the way.
struct SelectionRequest {
  /// The search's options (ratio, seed, variant, budgets); initial_masks are
  /// warm starts without a name (the caller's own masks).
  Options options;
  /// Named warm starts (`bosch select --init FILE`).
  std::vector<WarmStart> init;
  /// Static rankings computed on the calibration tasks (ModelRun::ranking,
  /// seeded with options.seed) whose masks at the target ratio are warm
  /// starts (`--candidates`).
  std::vector<eval::Method> candidates;
  /// A neighbouring ratio's mask as one more warm start (`--ratios`), and its ratio.
  const HeadMask* previous = nullptr;
  double previous_ratio = 0.0;

  /// Checkpoint file ("" = none), written every checkpoint_every evaluations
  /// and when the search stops. The run's identity (ModelRun::identity plus
  /// identity_extra) is kept beside it in identity_path(checkpoint): written
  /// when starting, compared when resuming (bosch::invalid_argument naming
  /// "resume" and listing the differences).
  std::string checkpoint;
  std::size_t checkpoint_every = 1;
  bool resume = false;
  nlohmann::json identity_extra = nlohmann::json::object();
  /// JSON-lines evaluation log ("" = none; bosch/io/evaluation_log.hpp),
  /// written every log_every evaluations and at the end.
  std::string log;
  std::size_t log_every = 1;
};

/// What select_heads returns.
struct Selection {
  Options options;          ///< the options the search ran with (warm starts included)
  Result result;
  /// ModelRun::metadata plus "warm_start" (init_files, candidates with their
  /// cost, previous_ratio, initial_masks, and eval::warm_start_summary) and
  /// "forwards" (full-model sample forwards of the search, candidates
  /// excluded: Result::forwards, what the evaluator computed plus, after a
  /// resume, what the checkpoint recorded; a measurement of work, like
  /// search_seconds: the residual caches' hits, which depend on their bounds,
  /// on a resume and on how MPI spreads the samples, are not counted).
  /// and "forward_tokens" (forwards times the mean tokens per layer
  /// application this process group ran: the search's cost in tokens through
  /// the whole model; null when this run ran nothing, e.g. a finished resume).
  nlohmann::json metadata;
  double forwards = 0.0;    ///< full-model sample forwards of the search (Result::forwards)
  double forward_tokens = std::numeric_limits<double>::quiet_NaN();  ///< the same in tokens
};

/// The file beside a checkpoint that holds its run's identity.
std::string identity_path(const std::string& checkpoint);

/// bosch::select on `run` with `options` through `executor` (nullptr: this
/// process), with `callbacks`: the one place a search of the bundled
/// evaluator is started.
Result run_search(ModelRun& run, const Options& options, CallbackList& callbacks, SearchExecutor* executor = nullptr);

/// The head selection of `request` on `run` (see the file comment). Lines
/// about the search ("search: full variant, ratio 0.5 -> 45 of 90 KV heads,
/// ...") go to `info`. Files are written by the root process only. A search
/// stopped by a callback returns with result.stopped set (its checkpoint
/// written); an exception from the search propagates after the checkpoint
/// has been written with every finished evaluation.
Selection select_heads(ModelRun& run, const SelectionRequest& request, CallbackList& callbacks,
                       SearchExecutor* executor = nullptr, const InfoSink& info = {});

}  // namespace bosch
