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
/// Every mask is scored on one or more held-out sets (HeldOutSet; the first is
/// the primary one, e.g. the held-out split at the calibration context, the
/// others e.g. the same tasks at other context lengths). Every figure carries
/// its sample count and a percentile bootstrap interval over the samples
/// (eval/bootstrap.hpp, stratified by task); the per-sample scores are stored,
/// so resumed cells keep their intervals. A stored cell that lacks a set
/// requested now is scored on it from its stored mask (no new selection).
///
/// Ratios run in ComparisonOptions::ratio_order for every method, and each
/// cell's select is handed the method's cell of the previous ratio in that
/// order (computed or read back), so a search can start from its
/// neighbour's solution (standard_methods: StandardMethodsOptions::warm_start).
///
/// Outputs, all in the output directory:
///  - results.json (kept by run_comparison): everything (settings, references,
///    set-ups, cells with masks as text grids, per-task scores, per-sample
///    scores and intervals), including cells of methods or ratios outside the
///    current grid;
/// and from write_comparison_outputs:
///  - table.md: per held-out set, accuracy and log-probability per method and
///    ratio with their 95% intervals and the cost columns, the reference
///    method (BOSCH) minus the best method of another family with a paired
///    bootstrap interval, the layer-granular variant (B-layer) minus BOSCH and
///    minus the best layer heuristic (layer_comparisons), per-task accuracy;
///    BOSCH's head-set turnover across ratios, Jaccard distances to BOSCH;
///  - results.csv: one row per cell and held-out set (sample count, means,
///    interval bounds);
///  - paired.csv: the paired comparisons of table.md (both kinds);
///  - turnover.csv: turnover T(S(rho_i), S(rho_i+1)) of every method between
///    consecutive ratios (mask.hpp's geometrically normalized turnover);
///  - jaccard.csv: Jaccard distance between the SWA-head sets of every pair of
///    methods at every ratio;
///  - heads/<method>.svg: the head map (layers x KV heads) of every ratio side
///    by side;
///  - accuracy_vs_ratio.svg and logprob_vs_ratio.svg: score-versus-ratio plots
///    with 95% interval bars and the all-full and all-SWA references (for a
///    held-out set other than the primary one: accuracy_vs_ratio-KEY.svg, KEY
///    sanitized).
/// When the scorer computed no greedy accuracy (ReportOptions::accuracy =
/// false: decoding past the first wrong token costs a forward per token, the
/// bulk of a CPU run), the accuracy table and plot show the greedy exact match
/// instead (the greedy answer equals the gold tokens; free with the
/// teacher-forced pass), and say so.

#include <bosch/callback_list.hpp>
#include <bosch/baselines/layer.hpp>
#include <bosch/baselines/ranking.hpp>
#include <bosch/cpu/backend.hpp>
#include <bosch/eval/bootstrap.hpp>
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
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bosch::eval {

/// What a method's one-time set-up produced (e.g. a ranking's scores).
struct MethodSetup {
  nlohmann::json state;         ///< handed to every select call; stored for resuming
  std::size_t evaluations = 0;  ///< calibration-set scorings it used
  double forwards = 0;          ///< forward-pass equivalents it used
  std::string note;
  /// Wall seconds of the work, when the set-up knows them better than the
  /// runner's clock (it reused results another method computed, and reports
  /// their cost as its own); < 0 (default): the runner measures the call.
  double seconds = -1;
};

/// One method's mask for one ratio.
struct MethodCell {
  HeadMask mask;                ///< must have the run's layout
  std::size_t evaluations = 0;  ///< calibration-set scorings this cell used (BOSCH's search)
  double forwards = 0;          ///< forward-pass equivalents this cell used
  nlohmann::json details;       ///< anything worth keeping (search score, layer counts, ...)
};

struct CellResult;

/// A method of the comparison.
struct ComparisonMethod {
  std::string name;    ///< unique row label (also the head-map file name, sanitized)
  std::string family;  ///< "BOSCH", "ranking" or "layer" (free text, shown in the CSV)
  /// Optional: run once before the method's first cell (skipped when the
  /// results file holds its set-up). Its wall time is measured by the runner.
  std::function<MethodSetup()> setup;
  /// The mask for ratio `rho`, given the set-up's state (null when no set-up)
  /// and the method's cell at the previous ratio in run order
  /// (ComparisonOptions::ratio_order; nullptr for the first ratio).
  std::function<MethodCell(double rho, const nlohmann::json& state, const CellResult* previous)> select;
  /// Optional: told every set-up state of this method that becomes known,
  /// whether computed or read back from results.json; the read-back ones
  /// before any set-up or cell of any method runs (so methods can share work,
  /// e.g. ranking scores that BOSCH's warm-start candidates reuse).
  std::function<void(const nlohmann::json& state)> on_setup;
};

/// Scores a mask on the held-out tasks.
using MaskScorer = std::function<HeldOutReport(const HeadMask&)>;

/// A held-out set every mask is scored on.
struct HeldOutSet {
  /// Unique, non-empty, file-name friendly key (e.g. "context=1024"); the
  /// key of results.json entries, of CSV rows and of the plots' file names.
  std::string key;
  std::string label;  ///< heading in table.md (e.g. "held-out, context 1024")
  MaskScorer score;
};

/// The order in which each method's ratios run.
enum class RatioOrder {
  ascending,   ///< lowest ratio first (default)
  descending,  ///< highest first
};
const char* to_string(RatioOrder order) noexcept;
/// "up" or "ascending", "down" or "descending"; bosch::invalid_argument otherwise.
RatioOrder parse_ratio_order(std::string_view text);

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
  /// The layer-granular method (BOSCH's layer variant: the mask for engines
  /// that window whole layers, docs/deployment.md) that layer_comparisons sets
  /// against the head-level reference method at the same ratio and against
  /// the best layer heuristic; empty: none.
  std::string layer_method = "B-layer";
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
  /// The order of each method's ratios (the previous cell handed to select).
  /// Not part of `run`: a caller whose cells depend on it (warm starts) puts
  /// it there.
  RatioOrder ratio_order = RatioOrder::ascending;
  /// Intervals of reports read back and of the paired comparisons.
  BootstrapOptions bootstrap{};
};

/// One finished cell.
struct CellResult {
  std::string method;
  double ratio = 0;
  HeadMask mask;
  HeldOutReport quality;  ///< on the primary held-out set
  /// On the other held-out sets, by HeldOutSet::key.
  std::map<std::string, HeldOutReport> quality_at;
  std::size_t evaluations = 0;
  double forwards = 0;
  double select_seconds = 0;  ///< wall time of select (not of the held-out scoring)
  double score_seconds = 0;   ///< wall time of the held-out scoring
  nlohmann::json details;
  bool resumed = false;       ///< read from results.json instead of computed

  /// The report on held-out set `key` (the primary one's key or ""), or nullptr.
  const HeldOutReport* report(const std::string& key, const std::string& primary_key) const;
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
  /// The held-out sets' keys and labels, the primary first.
  std::vector<std::pair<std::string, std::string>> held_out_sets;
  HeldOutReport all_full;  ///< reference on the primary set: every head full
  HeldOutReport all_swa;   ///< reference on the primary set: every head SWA
  /// The references on the other sets, by key.
  std::map<std::string, HeldOutReport> all_full_at, all_swa_at;
  std::vector<MethodSummary> methods;  ///< in the order given
  std::vector<CellResult> cells;       ///< method-major, ratios in run order
  std::size_t computed = 0;            ///< cells computed by this call
  std::size_t resumed = 0;             ///< cells read back
  std::size_t rescored = 0;            ///< stored cells scored on a held-out set they lacked

  /// The cell of (method, ratio), or nullptr.
  const CellResult* find(const std::string& method, double ratio) const;
  /// Total evaluations / forwards / wall seconds of a method: set-up plus its cells.
  std::size_t method_evaluations(const std::string& method) const;
  double method_forwards(const std::string& method) const;
  double method_seconds(const std::string& method) const;
  /// The family of a method ("" when unknown).
  std::string family(const std::string& method) const;
  /// A reference's report on held-out set `key` (all full or all SWA), or nullptr.
  const HeldOutReport* reference(bool full, const std::string& key) const;
};

/// Progress messages of a run (one line each, no newline).
using ComparisonProgress = std::function<void(const std::string& message)>;

/// Runs (or resumes) the comparison: the two references, then every method's
/// set-up (stored ones read back first), then for each method its cells,
/// scoring each mask on every held-out set; results.json is rewritten
/// atomically after each step. Methods run in the given order, each over every
/// ratio in options.ratio_order. `held_out[0]` is the primary set. Throws
/// bosch::invalid_argument for duplicate or empty method names or set keys,
/// no held-out set, a ratio outside (0, 1), a mask of the wrong layout or a
/// results file written for other settings (bosch::format_error for a
/// malformed one).
ComparisonResult run_comparison(std::span<const ComparisonMethod> methods, std::span<const HeldOutSet> held_out,
                                const HeadLayout& layout, const ComparisonOptions& options,
                                const ComparisonProgress& progress = {});

/// The same with one held-out set, key "held-out".
ComparisonResult run_comparison(std::span<const ComparisonMethod> methods, const MaskScorer& score,
                                const HeadLayout& layout, const ComparisonOptions& options,
                                const ComparisonProgress& progress = {});

/// The paired comparison of one ratio on one held-out set: the reference
/// method minus the best method of another family by `metric`.
struct PairedComparison {
  std::string held_out;  ///< the set's key
  double ratio = 0;
  HeldOutMetric metric = HeldOutMetric::logprob;
  std::string method;    ///< the reference method (BOSCH)
  std::string other;     ///< the best method of another family at this ratio
  PairedDifference difference;  ///< method - other, paired bootstrap over the samples
};

/// The paired comparisons of `result` for the reference method (options.reference_method)
/// at every ratio, held-out set and metric (log-prob; accuracy, or exact match when no
/// accuracy was computed), against the best cell of another family (by the
/// mean of that metric). Ratios where the reference or every other family
/// lacks a cell are left out.
std::vector<PairedComparison> paired_comparisons(const ComparisonResult& result, const ComparisonOptions& options);

/// The deployment comparison of the layer-granular method
/// (options.layer_method, when the run has it): at every ratio, held-out set
/// and metric as in paired_comparisons, the layer method minus the reference
/// method (the head-level mask at the same ratio: what granularity costs), then
/// the layer method minus the best method of family "layer" (RAND, BME, INTR:
/// what the search gains over the layer heuristics). Empty when the run lacks
/// the layer method or it is the reference.
std::vector<PairedComparison> layer_comparisons(const ComparisonResult& result, const ComparisonOptions& options);

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
  /// Runs a BOSCH cell's search: bosch::select with these options and
  /// callbacks on the calibration objective (the `bosch` program: the run
  /// function bosch::run_search, on one process or over MPI). Empty:
  /// bosch::select on the evaluator itself (through score_batch when set).
  std::function<Result(const Options&, CallbackList&)> search;
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
  /// Warm starts of the BOSCH variants: each cell's search also starts from the
  /// variant's mask at the previous ratio in run order (appended to
  /// Options::initial_masks; the search resizes it to the cell's count).
  bool warm_start = false;
  /// Warm-start candidates of the BOSCH variants: these rankings' masks at the
  /// cell's ratio (appended to Options::initial_masks). Their scores are
  /// computed once, in the BOSCH variants' set-up, and shared with the ranking
  /// methods of the same name (whichever runs first computes them); their
  /// cost is counted for both.
  std::vector<Method> candidates;
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
/// once, in its set-up (so does a BOSCH variant for its candidates). Both
/// objects must outlive the methods. A BOSCH cell's details record its
/// warm starts (candidates, previous ratio; eval::warm_start_summary).
std::vector<ComparisonMethod> standard_methods(const cpu::Backend& backend,
                                               TransformerEvaluator<cpu::Backend>& evaluator,
                                               const StandardMethodsOptions& options);

/// The scores of ranking `method` on the evaluator's model and calibration
/// tasks: PROXY through the evaluator, the others with compute_head_scores on
/// `backend` (window and sinks from `options`).
HeadScores compute_ranking(Method method, const cpu::Backend& backend, TransformerEvaluator<cpu::Backend>& evaluator,
                           const HeadScoreOptions& options);

/// Parses a warm-start candidate list: comma-separated ranking names
/// (case-insensitive), "cheap" (DCAM, APL, QADA, RAZOR: at most a forward per
/// calibration sample), or "none" / empty (no candidate). Duplicates are
/// dropped; order kept. bosch::invalid_argument (where = `option`) for an
/// unknown name.
std::vector<Method> parse_candidates(std::string_view list, const std::string& option = "candidates");

/// The rankings that cost at most a few forward passes: DCAM, APL, QADA, RAZOR.
std::vector<Method> cheap_candidates();

/// What a finished search did with its warm starts, for reports: {"seeds": n,
/// "evaluated": [{"swa": count, "score": s}, ...] (the seed-stage records),
/// "best_seed_score": s or null, "result_is_seed": bool (the result's mask is
/// one of them)}.
nlohmann::json warm_start_summary(const Result& result);

/// A MaskScorer running evaluate_held_out on `held_out` with SWA window and
/// sinks as given. All references must outlive the scorer.
MaskScorer held_out_scorer(const cpu::Backend& backend, const model::Tokenizer& tokenizer,
                           const tasks::TaskSet& held_out, int window, int sinks,
                           ReportOptions report = {});

}  // namespace bosch::eval
