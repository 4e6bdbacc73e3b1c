// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file eval/compare.hpp
/// The comparison run (docs/baselines.md §Comparison): every method (BOSCH and
/// its ablation variants, the static head rankings, the layer heuristics) at
/// every SWA ratio, each mask scored on held-out tasks, with the cost of
/// getting it (evaluations, forward passes, wall time) beside its quality.
///
/// A run is a grid of cells (method, ratio). It is resumable: the results file
/// `results.json` in the output directory is rewritten atomically after every
/// reference score, method set-up and cell, and a cell found there is not
/// recomputed (nor a method's set-up, e.g. a ranking's scores). The file
/// records the run's settings (ComparisonOptions::run); resuming with other
/// settings is refused.
///
/// Outputs, all in the output directory:
///  - results.json (kept by run_comparison): everything (settings, references,
///    set-ups, cells with masks as text grids, per-task scores), including
///    cells of methods or ratios outside the current grid;
/// and from write_comparison_outputs:
///  - table.md: accuracy and log-probability per method and ratio with the
///    cost columns, BOSCH's head-set turnover across ratios, Jaccard distances
///    to BOSCH;
///  - results.csv: one row per cell;
///  - turnover.csv: turnover T(S(rho_i), S(rho_i+1)) of every method between
///    consecutive ratios (mask.hpp's geometrically normalized turnover);
///  - jaccard.csv: Jaccard distance between the SWA-head sets of every pair of
///    methods at every ratio;
///  - heads/<method>.svg: the head map (layers x KV heads) of every ratio side
///    by side;
///  - accuracy_vs_ratio.svg and logprob_vs_ratio.svg: score-versus-ratio plots
///    with the all-full and all-SWA references.
/// When the scorer computed no greedy accuracy (ReportOptions::accuracy =
/// false: decoding past the first wrong token costs a forward per token, the
/// bulk of a CPU run), the accuracy table and plot show the greedy exact match
/// instead (the greedy answer equals the gold tokens; free with the
/// teacher-forced pass), and say so.

#include <bosch/baselines/layer.hpp>
#include <bosch/baselines/ranking.hpp>
#include <bosch/cpu/backend.hpp>
#include <bosch/eval/head_scores.hpp>
#include <bosch/eval/report.hpp>
#include <bosch/eval/transformer_evaluator.hpp>
#include <bosch/mask.hpp>
#include <bosch/model/tokenizer.hpp>
#include <bosch/options.hpp>
#include <bosch/tasks/task.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

namespace bosch::eval {

/// What a method's one-time set-up produced (e.g. a ranking's scores).
struct MethodSetup {
  nlohmann::json state;         ///< handed to every select call; stored for resuming
  std::size_t evaluations = 0;  ///< calibration-set scorings it used
  double forwards = 0;          ///< forward-pass equivalents it used
  std::string note;
};

/// One method's mask for one ratio.
struct MethodCell {
  HeadMask mask;                ///< must have the run's layout
  std::size_t evaluations = 0;  ///< calibration-set scorings this cell used (BOSCH's search)
  double forwards = 0;          ///< forward-pass equivalents this cell used
  nlohmann::json details;       ///< anything worth keeping (search score, layer counts, ...)
};

/// A method of the comparison.
struct ComparisonMethod {
  std::string name;    ///< unique row label (also the head-map file name, sanitized)
  std::string family;  ///< "BOSCH", "ranking" or "layer" (free text, shown in the CSV)
  /// Optional: run once before the method's first cell (skipped when the
  /// results file holds its set-up). Its wall time is measured by the runner.
  std::function<MethodSetup()> setup;
  /// The mask for ratio `rho`, given the set-up's state (null when no set-up).
  std::function<MethodCell(double rho, const nlohmann::json& state)> select;
};

/// Scores a mask on the held-out tasks.
using MaskScorer = std::function<HeldOutReport(const HeadMask&)>;

/// Settings of a comparison run.
struct ComparisonOptions {
  /// SWA ratios, each in (0, 1) (the paper's four by default).
  std::vector<double> ratios{0.25, 0.5, 0.75, 0.875};
  /// Output directory (created when missing).
  std::filesystem::path output_dir;
  /// The settings that identify the run (model, window, tasks, seeds, budgets):
  /// stored in results.json; a resumed run must pass an equal object.
  nlohmann::json run = nlohmann::json::object();
  /// Title prefix of the figures (e.g. the model's name).
  std::string title;
  /// The method turnover and Jaccard distances are reported against in
  /// table.md (default "BOSCH"; the first method when absent).
  std::string reference_method = "BOSCH";
  /// false: compute nothing; report what results.json holds for this grid
  /// (missing cells are left out, missing references are NaN). Regenerates the
  /// outputs, e.g. after filling parts of the grid in separate runs.
  bool compute_missing = true;
  /// false: read results.json (to resume) but never lock or write it: the
  /// processes other than rank 0 of an MPI run, which compute the same cells.
  bool write_results = true;
  /// Called once results.json has been read and before anything is written
  /// (an MPI run passes a barrier, so every process resumes from the same file).
  std::function<void()> after_load;
};

/// One finished cell.
struct CellResult {
  std::string method;
  double ratio = 0;
  HeadMask mask;
  HeldOutReport quality;
  std::size_t evaluations = 0;
  double forwards = 0;
  double select_seconds = 0;  ///< wall time of select (not of the held-out scoring)
  double score_seconds = 0;   ///< wall time of the held-out scoring
  nlohmann::json details;
  bool resumed = false;       ///< read from results.json instead of computed
};

/// One method's set-up as run (or read back).
struct MethodSummary {
  std::string name;
  std::string family;
  bool has_setup = false;
  MethodSetup setup;
  double setup_seconds = 0;
  bool resumed = false;
};

/// Everything a run produced.
struct ComparisonResult {
  HeadLayout layout{};
  std::vector<double> ratios;
  nlohmann::json run;
  HeldOutReport all_full;  ///< reference: every head full
  HeldOutReport all_swa;   ///< reference: every head SWA
  std::vector<MethodSummary> methods;  ///< in the order given
  std::vector<CellResult> cells;       ///< method-major, ratios in order
  std::size_t computed = 0;            ///< cells computed by this call
  std::size_t resumed = 0;             ///< cells read back

  /// The cell of (method, ratio), or nullptr.
  const CellResult* find(const std::string& method, double ratio) const;
  /// Total evaluations / forwards / wall seconds of a method: set-up plus its cells.
  std::size_t method_evaluations(const std::string& method) const;
  double method_forwards(const std::string& method) const;
  double method_seconds(const std::string& method) const;
};

/// Progress messages of a run (one line each, no newline).
using ComparisonProgress = std::function<void(const std::string& message)>;

/// Runs (or resumes) the comparison: the two references, then for each method
/// its set-up and its cells, scoring each mask with `score`; results.json is
/// rewritten atomically after each step. Methods run in the given order, each
/// over every ratio. Throws bosch::invalid_argument for duplicate or empty
/// method names, a ratio outside (0, 1), a mask of the wrong layout or a
/// results file written for other settings (bosch::format_error for a
/// malformed one).
ComparisonResult run_comparison(std::span<const ComparisonMethod> methods, const MaskScorer& score,
                                const HeadLayout& layout, const ComparisonOptions& options,
                                const ComparisonProgress& progress = {});

/// Writes table.md, results.csv, turnover.csv, jaccard.csv, the head maps and
/// the plots (see the file comment) for the grid of `result` into
/// options.output_dir, atomically (results.json is run_comparison's).
void write_comparison_outputs(const ComparisonResult& result, const ComparisonOptions& options);

/// The Markdown report (table.md's content).
std::string comparison_markdown(const ComparisonResult& result, const ComparisonOptions& options);

/// The JSON document of results.json.
nlohmann::json comparison_to_json(const ComparisonResult& result);

/// File-name-safe form of a method name: letters, digits, '-' and '_' kept,
/// everything else '_'.
std::string sanitize_name(const std::string& name);

// --- the standard method set on the CPU transformer ------------------------------------

/// How BOSCH's searches and PROXY score masks when not with the evaluator
/// itself (StandardMethodsOptions::scoring), e.g. spread over MPI processes
/// (bosch/mpi/evaluator.hpp, the `bosch` program's MPI mode). Both functions
/// are called in the same order on every process running the comparison.
struct SharedScoring {
  /// One score per mask, in order, equal to the evaluator's evaluate() (the
  /// hint as in evaluate_batch). Empty: the evaluator scores.
  std::function<std::vector<double>(std::span<const HeadMask>, const EvaluationHint&)> score_batch;
  /// Layer applications run so far by all processes together (the forward
  /// counts of the cost columns). Empty: the evaluator's stats().
  std::function<std::size_t()> layers_run;
};

/// Which methods standard_methods() builds, and their settings.
struct StandardMethodsOptions {
  /// BOSCH variants, named "BOSCH" (full), "B-single", "B-multi", "B-layer".
  std::vector<Variant> variants{Variant::full, Variant::single, Variant::multi, Variant::layer};
  /// Search settings (seed, budgets, solvers); target_ratio and variant are set per cell.
  Options search;
  /// Static head rankings, named as eval::to_string(Method).
  std::vector<Method> rankings = all_methods();
  /// Settings of the rankings; window and sinks are taken from the evaluator.
  HeadScoreOptions scores;
  /// Where a ranking's SWA quota applies (global, as DuoAttention and RazorAttention).
  baselines::Quota quota = baselines::Quota::global;
  /// Layer heuristics RAND, BME, INTR (RAND seeded with search.seed).
  bool layer_heuristics = true;
  baselines::LayerCount layer_count = baselines::LayerCount::exact;
  /// Called with a line every `progress_every` evaluations of a BOSCH search
  /// (0 or no function: silent).
  std::function<void(const std::string&)> search_progress;
  std::size_t progress_every = 0;
  /// Where BOSCH and PROXY get their scores (default: the evaluator).
  SharedScoring scoring;
};

/// "BOSCH", "B-single", "B-multi", "B-layer".
std::string variant_method_name(Variant variant);

/// The comparison's methods on `backend` with `evaluator` (the calibration
/// objective of BOSCH and PROXY; its tasks are the rankings' calibration data).
/// Order: BOSCH variants, rankings, layer heuristics. Costs: a BOSCH cell
/// counts its search's evaluator calls and the forward equivalents the
/// evaluator ran (layer applications / L); a ranking counts its scores' cost
/// once, in its set-up. Both objects must outlive the methods.
std::vector<ComparisonMethod> standard_methods(const cpu::Backend& backend,
                                               TransformerEvaluator<cpu::Backend>& evaluator,
                                               const StandardMethodsOptions& options);

/// A MaskScorer running evaluate_held_out on `held_out` with SWA window and
/// sinks as given. All references must outlive the scorer.
MaskScorer held_out_scorer(const cpu::Backend& backend, const model::Tokenizer& tokenizer,
                           const tasks::TaskSet& held_out, int window, int sinks,
                           ReportOptions report = {});

}  // namespace bosch::eval
