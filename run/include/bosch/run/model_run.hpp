// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file run/model_run.hpp
/// ModelRun: the bundled evaluator set up from RunSettings, once for every
/// front end. It loads the model, generates the calibration tasks, makes the
/// backend the settings ask for (CPU, or CUDA in builds with nvcc) and the
/// TransformerEvaluator on it, and says what a mask file records of the run.
/// The `bosch` program, the Python package (bosch.TransformerEvaluator) and
/// the MPI path all build their evaluator here; bosch/run/selection.hpp runs
/// the search on it.
///
/// A ModelRun is a bosch::Evaluator with every optional capability of
/// TransformerEvaluator (hints, batches, a share of the samples for
/// bosch::mpi::ParallelEvaluator, per-sample scores for racing, its cost),
/// whatever the device.
///
/// @code
/// bosch::RunSettings s;
/// s.model = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// s.context = {1024};
/// bosch::ModelRun run(s);
/// double score = run.evaluate(bosch::HeadMask(run.layout()));
/// @endcode

#include <bosch/eval/head_scores.hpp>
#include <bosch/eval/report.hpp>
#include <bosch/eval/transformer_evaluator.hpp>
#include <bosch/evaluator.hpp>
#include <bosch/model/model.hpp>
#include <bosch/options.hpp>
#include <bosch/run/open_model.hpp>
#include <bosch/run/settings.hpp>
#include <bosch/tasks/scoring.hpp>
#include <bosch/tasks/task.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace bosch {

class ModelRun {
 public:
  /// Validates `settings` (validate(), then validate_for_model() against the
  /// model's configuration, before the weights are read), loads the model,
  /// generates the calibration tasks and makes the backend and evaluator.
  /// Throws bosch::invalid_argument for settings outside their domain
  /// (naming the setting) and for a model the library cannot run,
  /// bosch::file_error / format_error for unreadable files, and
  /// bosch::invalid_argument naming "device" for CUDA in a build without it.
  explicit ModelRun(RunSettings settings, const InfoSink& info = {});
  ~ModelRun();
  ModelRun(ModelRun&&) noexcept;
  ModelRun& operator=(ModelRun&&) noexcept;

  const RunSettings& settings() const noexcept;
  const model::Model& model() const noexcept;
  HeadLayout layout() const;
  /// The calibration tasks the score is computed on.
  const tasks::TaskSet& calibration() const noexcept;
  /// The held-out tasks (settings().held_out_samples per task and length),
  /// generated on first use. Throws bosch::invalid_argument naming
  /// "held_out_samples" when it is 0.
  const tasks::TaskSet& held_out();
  /// The attention windows a mask stands for under the settings' w and s.
  AttentionWindows windows(const HeadMask& mask) const;

  // --- the evaluator (bosch::Evaluator and its capabilities) -------------------------
  double evaluate(const HeadMask& mask);
  double evaluate(const HeadMask& mask, const EvaluationHint& hint);
  std::vector<double> evaluate_batch(std::span<const HeadMask> masks);
  std::vector<double> evaluate_batch(std::span<const HeadMask> masks, const EvaluationHint& hint);
  /// For bosch::mpi::ParallelEvaluator (TransformerEvaluator's members of the same names).
  std::size_t sample_count() const;
  void set_sample_range(std::size_t begin, std::size_t end);
  std::vector<tasks::AnswerScore> sample_scores(const HeadMask& mask, const EvaluationHint& hint = {});
  static double reduce(std::span<const double> per_sample);
  TransformerEvaluatorStats stats() const;
  /// Full-model sample forwards the evaluator ran so far (layer applications
  /// divided by the layer count): the machine-independent cost of a search.
  double forwards() const;
  /// forwards() (bosch::CostedEvaluator: Result::forwards).
  double cost() const { return forwards(); }
  /// For racing (bosch::PerSampleEvaluator, Options::race): TransformerEvaluator's
  /// race order (the tasks interleaved) and per-sample scores of any samples.
  std::vector<std::size_t> race_order() const;
  std::vector<double> score_samples(const HeadMask& mask, const EvaluationHint& hint,
                                    std::span<const std::size_t> samples);

  // --- reports ------------------------------------------------------------------------
  /// Scores `mask` on `tasks` (default: held_out()) as `bosch evaluate` does,
  /// in fp32 on the CPU whatever the search's precision.
  HeldOutReport held_out_report(const HeadMask& mask, const ReportOptions& options,
                                const tasks::TaskSet* tasks = nullptr);

  /// A static ranking of the KV heads on the calibration tasks (warm-start
  /// candidates, docs/baselines.md): PROXY through this evaluator, the
  /// others on the CPU backend (a CPU backend is made for them on CUDA: the
  /// rankings read attention there). Computed once per method and seed.
  const eval::HeadScores& ranking(eval::Method method, std::uint64_t seed, const InfoSink& info = {});

  // --- what a mask file records ---------------------------------------------------------
  /// What must be equal for a checkpoint to be resumed: everything the
  /// calibration scores depend on (model fingerprint and the identity
  /// settings); the checkpoint itself checks the search options.
  nlohmann::json identity() const;
  /// The metadata of a mask this run selected: mask_metadata()
  /// (bosch/eval/suite.hpp): the search fields, the model (model, model_file,
  /// model_fingerprint, architecture, layout), the windows and the task suite,
  /// whose keys are the settings' names, plus what ran: `precision` and
  /// `shared_prefix` (false on CUDA, whose backend runs every row).
  nlohmann::json metadata(const Options& options, const Result& result) const;

  /// What the calibration forwards compute in: "fp32", "bf16 (amx-bf16)",
  /// "bf16 (avx512-bf16)", "bf16 (emulated)" or "bf16 (cuda)" (the settings'
  /// precision resolved on this machine; recorded in the identity and metadata).
  std::string precision() const;

  /// The CPU backend and its evaluator when the device is the CPU, else nullptr.
  const cpu::Backend* cpu_backend() const noexcept;
  /// The fp32 CPU backend of held-out reports (the search's own when it runs
  /// fp32; else one made on first use on the same weights), nullptr on CUDA.
  const cpu::Backend* cpu_report_backend() const;
  TransformerEvaluator<cpu::Backend>* cpu_evaluator() noexcept;

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace bosch
