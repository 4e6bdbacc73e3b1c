// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file options.hpp
/// Options, Result and the evaluation record of bosch::select.
///
/// The paper leaves many choices open; docs/algorithm.md §Open choices numbers
/// them ("paper 7 item N" below is item N there), and each one is an Options
/// field below with a documented default. Defaults marked
/// [I] are this library's reconstruction, not values read in the paper.
/// Two open points belong to the evaluator, not to the search: the score S
/// (accuracy or a continuous proxy, paper section 7 item 5) and whether SWA
/// heads keep sink tokens (item 6).

#include <bosch/error.hpp>
#include <bosch/field.hpp>
#include <bosch/mask.hpp>

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace bosch {

/// Which pipeline select() runs (paper ablations, docs/algorithm.md §Variants).
enum class Variant {
  full,    ///< Stage 1 probes, Stage 2 adaptive ratios, Stage 3 grouped selection (BOSCH)
  single,  ///< Stage 1 probes only, then per-layer counts fixed to the exact target (B-single)
  multi,   ///< Stage 1, uniform per-layer counts, Stage 3 over one bucket (B-multi)
  layer,   ///< whole layers as the decision unit (B-layer)
};

/// The inner black-box solver used for every sub-problem (paper section 7 item 1).
enum class InnerSolver {
  swap,       ///< count-preserving swap local search, (1+lambda) [I], default
  penalized,  ///< free bit flips scored with L = -S^ + alpha * penalty, then repair [I]
  surrogate,  ///< count-preserving swaps ranked by a model fitted to the log (BOCS-like) [I]
};

/// How Stage 1 turns cascaded probe scores into per-layer drops (paper 7 item 3).
enum class DropMode {
  marginal,    ///< drop[l] = score before probing l - best probe score of l (default) [I]
  cumulative,  ///< drop[l] = S_full - best probe score of l (grows down the cascade)
};

/// Stage 2 initial mapping of layer drops to ratio levels (paper 7 item 3).
enum class RatioInit {
  relative,  ///< level nearest to rho*Hkv + spread * clamp(1 - d / mean(d), -1, 1) for the
             ///< drop d (clamped at 0) of each layer: a layer with the mean drop stays at
             ///< rho*Hkv, a free layer gets `spread` more heads, a layer with twice the
             ///< mean drop `spread` fewer; scale-aware, so near-equal drops stay uniform
             ///< (default) [I]
  linear,    ///< level nearest to max - w * (max - min) for the min-max weight w in [0,1]
  quantile,  ///< layers sorted by weight split into equal-size bins, easiest bin at
             ///< the highest level
  uniform,   ///< every layer at the level nearest rho*Hkv; shifting alone adapts
};

/// Stage 3 initial incumbent (paper 7 item 4).
enum class GroupInit {
  stage1,  ///< Stage-1 masks resized to the assigned counts (default) [I]
  random,  ///< seeded random heads with the assigned counts
  full,    ///< layers of unprocessed buckets stay full attention until their turn;
           ///< a bucket's start point is its Stage-1 masks resized
};

/// Scope of the ratio penalty of the penalized solver (paper 7 item 2).
enum class PenaltyScope {
  per_layer,  ///< alpha * sum_l ((c_l - k_l) / n_l)^2 over the sub-problem's layers [I]
  global,     ///< alpha * (rho(z) - rho)^2 on the whole mask, the paper's literal form
              ///< (default): mild per head, so infeasible steps can be crossed
};

/// The stage that requested an evaluation (logged with each record).
enum class Stage {
  anchors,  ///< the two anchor evaluations (all full, all SWA)
  seeds,    ///< the warm-start candidates (Options::initial_masks)
  probes,   ///< Stage 1: top-down layer probes
  ratios,   ///< Stage 2: adaptive ratio assignment (no evaluations)
  groups,   ///< Stage 3: grouped head selection
  layers,   ///< the layer variant's search over whole layers
  refine,   ///< the global refinement after Stage 3 (moves heads between layers)
  repair,   ///< count fix-ups (single and layer variants) and the final evaluation
};
inline constexpr std::size_t stage_count = 8;

inline const char* to_string(Stage s) noexcept {
  switch (s) {
    case Stage::anchors: return "anchors";
    case Stage::seeds: return "seeds";
    case Stage::probes: return "probes";
    case Stage::ratios: return "ratios";
    case Stage::groups: return "groups";
    case Stage::layers: return "layers";
    case Stage::refine: return "refine";
    case Stage::repair: return "repair";
  }
  return "?";
}
inline const char* to_string(Variant v) noexcept {
  switch (v) {
    case Variant::full: return "full";
    case Variant::single: return "single";
    case Variant::multi: return "multi";
    case Variant::layer: return "layer";
  }
  return "?";
}
inline const char* to_string(InnerSolver v) noexcept {
  switch (v) {
    case InnerSolver::swap: return "swap";
    case InnerSolver::penalized: return "penalized";
    case InnerSolver::surrogate: return "surrogate";
  }
  return "?";
}
inline const char* to_string(DropMode v) noexcept {
  return v == DropMode::marginal ? "marginal" : "cumulative";
}
inline const char* to_string(RatioInit v) noexcept {
  switch (v) {
    case RatioInit::relative: return "relative";
    case RatioInit::linear: return "linear";
    case RatioInit::quantile: return "quantile";
    case RatioInit::uniform: return "uniform";
  }
  return "?";
}
inline const char* to_string(GroupInit v) noexcept {
  switch (v) {
    case GroupInit::stage1: return "stage1";
    case GroupInit::random: return "random";
    case GroupInit::full: return "full";
  }
  return "?";
}
inline const char* to_string(PenaltyScope v) noexcept {
  return v == PenaltyScope::per_layer ? "per_layer" : "global";
}

/// The values of each option enum, in declaration order (for parsing,
/// listing in messages and bindings). A specialization may add
/// `static T parse(std::string_view text, const std::string& where)`, its
/// own parser (aliases, its own message), which parse_enum then uses.
template <class T>
struct enum_values;
template <>
struct enum_values<Variant> {
  static constexpr std::array values{Variant::full, Variant::single, Variant::multi,
                                     Variant::layer};
};
template <>
struct enum_values<InnerSolver> {
  static constexpr std::array values{InnerSolver::swap, InnerSolver::penalized,
                                     InnerSolver::surrogate};
};
template <>
struct enum_values<DropMode> {
  static constexpr std::array values{DropMode::marginal, DropMode::cumulative};
};
template <>
struct enum_values<RatioInit> {
  static constexpr std::array values{RatioInit::relative, RatioInit::linear, RatioInit::quantile,
                                     RatioInit::uniform};
};
template <>
struct enum_values<GroupInit> {
  static constexpr std::array values{GroupInit::stage1, GroupInit::random, GroupInit::full};
};
template <>
struct enum_values<PenaltyScope> {
  static constexpr std::array values{PenaltyScope::per_layer, PenaltyScope::global};
};
template <>
struct enum_values<Stage> {
  static constexpr std::array values{Stage::anchors, Stage::seeds,  Stage::probes,
                                     Stage::ratios,  Stage::groups, Stage::layers,
                                     Stage::refine,  Stage::repair};
};

/// The names of an option enum's values, comma-separated ("swap, penalized").
template <class T>
std::string enum_names() {
  std::string names;
  for (T v : enum_values<T>::values) {
    names += names.empty() ? "" : ", ";
    names += to_string(v);
  }
  return names;
}

/// Parses a name printed by to_string(); throws bosch::invalid_argument naming
/// `option` and the accepted values otherwise (used by the CLI, checkpoints
/// and the Python binding for every enum of both tables).
template <class T>
T parse_enum(std::string_view text, const char* option) {
  if constexpr (requires { enum_values<T>::parse(text, std::string(option)); })
    return enum_values<T>::parse(text, std::string(option));
  for (T v : enum_values<T>::values)
    if (text == to_string(v)) return v;
  throw invalid_argument(
      "unknown value '" + std::string(text) + "' (expected one of: " + enum_names<T>() + ")",
      option);
}

inline Variant parse_variant(std::string_view s) { return parse_enum<Variant>(s, "variant"); }
inline InnerSolver parse_inner_solver(std::string_view s) {
  return parse_enum<InnerSolver>(s, "inner_solver");
}
inline Stage parse_stage(std::string_view s) { return parse_enum<Stage>(s, "stage"); }

/// Every knob of bosch::select. All fields have defaults; only target_ratio
/// and seed normally need setting. Budgets count evaluator calls on distinct
/// masks (memoized re-visits are free).
struct Options {
  // --- the problem --------------------------------------------------------------
  /// rho in (0, 1): fraction of KV heads made SWA. The result has exactly
  /// target_count(layout, rho) = round(rho * L * Hkv) SWA heads.
  double target_ratio = 0.5;
  /// Master seed; every random choice derives from it through fixed child
  /// streams (Boost.Random mt19937_64), so the same seed gives the same mask and
  /// log on every platform.
  std::uint64_t seed = 0;
  /// Which pipeline to run (see Variant).
  Variant variant = Variant::full;
  /// Total evaluation budget, anchors (and, on resume, replayed evaluations)
  /// included; 0 = unlimited (each stage then uses its own budget). When set
  /// (>= 3), one evaluation is reserved for the final mask, and the search
  /// stops early when the rest is spent (Result::budget_exhausted).
  std::size_t max_evaluations = 0;

  // --- warm starts ------------------------------------------------------------------
  /// Candidate masks to start from (the user's own, cheap static rankings, a
  /// neighbouring ratio's solution). Each is scored on the calibration set
  /// like any other mask, right after the anchors (a candidate whose SWA count
  /// differs from the target is first resized with the Stage-1 head values);
  /// the best one competes with Stage 2's plan as Stage 3's start, and the
  /// result is never worse than the best candidate. Layouts must match the
  /// evaluator's. Default none.
  std::vector<HeadMask> initial_masks{};

  // --- Stage 1: layer probes (paper 7 item 1) -------------------------------------
  /// Evaluations per layer probe ("small-budget"); a probe is exhaustive when
  /// C(Hkv, k) <= probe_budget for the probe width k. Default 16 [I].
  std::size_t probe_budget = 16;
  /// SWA heads per layer in a Stage-1 probe; 0 (default) = automatic:
  /// ceil(rho*Hkv), except that a probe never makes a whole layer SWA when
  /// Hkv > 1 (at most Hkv - 1), so that Stage 1 always says which heads of a
  /// layer matter. (At rho >= 0.75 on Hkv = 3, or rho = 0.875 on Hkv = 4,
  /// ceil(rho*Hkv) = Hkv and a whole-layer probe carries no head-level
  /// information.) [I]
  int probe_heads = 0;
  /// How probe scores become per-layer drops. Default marginal [I].
  DropMode drop_mode = DropMode::marginal;
  /// Screen the Stage-1 probes on the first probe_samples calibration
  /// samples of the evaluator's race order (evaluators with per-sample
  /// scores only, bosch::PerSampleEvaluator; ignored otherwise): each probe
  /// is scored as a paired estimate against the all-full mask, S(full) plus
  /// the mean per-sample difference on those samples, logged as not scored
  /// in full (EvaluationRecord::eliminated in Stage::probes), never chosen,
  /// and completed when a later stage asks for it in full. The probes rank
  /// the heads of one layer at a time, so they tolerate noisier scores than
  /// Stage 3's decisions; on the bundled evaluator they are about 60% of a
  /// search's forwards. 0 (default) or at least the sample count = every
  /// sample (docs/algorithm.md §Racing).
  std::size_t probe_samples = 0;
  /// With screened probes (probe_samples): score each layer's chosen probe
  /// and every completion probe on all calibration samples before Stage 1
  /// records its drop. The screen still chooses among a layer's probes; the
  /// drops that set the per-layer ratios, and the completion drops that
  /// decide which layers lose their last full head, come from every sample
  /// (docs/algorithm.md §Racing; at rho 0.75 the screened drops missed a
  /// critical layer in 2 of 4 calibration draws, docs/results/draws-0.75).
  /// No effect without screening.
  bool confirm_probes = false;

  // --- Stage 2: adaptive ratios (paper 7 item 3) ------------------------------------
  /// Explicit per-layer ratio levels in [0, 1]; each becomes the count
  /// ceil(r * Hkv) (deduplicated). Empty (default) = automatic: every count c
  /// in [0, Hkv] with |c - rho*Hkv| <= level_spread [I].
  std::vector<double> ratio_levels{};
  /// Half-width, in heads, of the automatic level set and of the relative
  /// initial mapping (>= 0). 0 (default) = automatic: max(1, round(Hkv / 4)),
  /// i.e. 2 heads for Hkv = 8 (the paper's models), 1 for Hkv <= 5. A fixed
  /// spread of 2 on Hkv = 3 (SmolLM2) allows counts 0..3, and the mapping then
  /// sends every layer to all-full or all-SWA, leaving Stage 3 no choice [I].
  int level_spread = 0;
  /// Initial mapping of drops to levels before shifting. Default relative [I].
  RatioInit ratio_init = RatioInit::relative;

  // --- Stage 3: grouped head selection ----------------------------------------------
  /// Evaluations per chunk (sub-problem) of Stage 3. Default 32 [I]: with the
  /// surrogate solver and the refinement, a search of SmolLM2's 30 x 3 KV
  /// heads stays within the ~220 evaluations the former default (swap, 64 per
  /// chunk) spent at rho = 0.5 (docs/algorithm.md §Budgets).
  std::size_t chunk_budget = 32;
  /// Most decision variables (KV heads) per chunk; a bucket is split into
  /// chunks of consecutive (by layer index) bucket layers, at least one layer
  /// each. Default 50 (the paper's remark that direct search degrades above
  /// about 50 variables) [I].
  int max_vars = 50;
  /// Passes over all buckets (the paper describes one pass). Default 1 [I].
  int group_rounds = 1;
  /// Stage 3 initial incumbent. Default stage1 [I].
  GroupInit group_init = GroupInit::stage1;

  // --- global refinement ---------------------------------------------------------------
  /// Evaluations of the refinement after Stage 3 (full variant only): one
  /// sub-problem over every head with only the total count fixed, so heads
  /// move between layers and buckets, which Stage 3 (per-layer counts fixed)
  /// cannot do. Solved by Options::inner_solver from the best exact-count
  /// mask so far. 0 = off. Default 32 [I].
  std::size_t refine_budget = 32;
  /// Evaluations of the refinement's budget spent, after its local search,
  /// on the surrogate's own optimum under the exact count: the model of
  /// search/surrogate.hpp fitted to the whole log, maximized by a sort of its
  /// linear part and swaps for its pairwise part (search/surrogate_optimum.hpp),
  /// evaluated and kept when it wins; a proposal already evaluated ends them.
  /// The local fits of the inner solvers see only the evaluations near their
  /// parent and miss what the whole log knows, e.g. every head's weight on a
  /// separable objective (docs/algorithm.md §Stage 3). 0 = off; at most
  /// refine_budget are used. Default 1 [I].
  std::size_t surrogate_proposals = 1;
  /// Layer restoration before the refinement (full variant; docs/algorithm.md
  /// §Restoration): from the best exact-count mask, every layer with SWA
  /// heads is scored once restored whole (L evaluations, each re-running
  /// only its layer and those above), and up to this many layers with the
  /// largest gains are tried restored, paid for by the SWA heads Stage 1
  /// found cheapest elsewhere (each try raced against the best mask). Stage
  /// 1's probes measure a layer near all-full, where other layers still
  /// carry what it does; at high ratios a layer's worth shows only once the
  /// rest is windowed (on SmolLM2 at rho 0.75, one layer's three heads were
  /// worth 0.95 nats held out given the others, and the search found that in
  /// 2 of 4 calibration draws). On a planted problem of that kind it finds
  /// the layer on every seed; on SmolLM2's own draws it lifted the worst
  /// draw (+0.39 nats at 512 tokens) and cost a good one 0.11 at 1024, since
  /// 8 calibration samples do not value the layer as held-out samples do
  /// (docs/results/restore-0.75). 0 = off (default).
  std::size_t restore_layers = 0;
  /// The refinement's flip sweep [I] (docs/algorithm.md §Flip sweep): before
  /// its local search, score every single-head flip of its start mask (one
  /// off-count mask per head, each re-running only its layer and those above,
  /// screened on probe_samples paired against the start), so that the
  /// surrogate that ranks the refinement's swaps knows every head's effect
  /// where the refinement begins instead of guessing it from masks far away;
  /// then the swaps those effects predict are tried. On planted problems
  /// whose heads cost most at high ratios it ends at the optimum on every
  /// seed; on SmolLM2 at rho 0.75 (16 samples, four draws) +0.15 nats held
  /// out on average at 1024 tokens, but -0.09 nats and -19 accuracy points
  /// on the good draw and the spread between draws unchanged, for
  /// 1.32-1.53x the sample forwards (docs/results/flips-0.75). Default off.
  bool refine_flips = false;
  /// Two climbs [I] (docs/algorithm.md §Two climbs): the refinement runs
  /// twice from Stage 3's result, first as without this option, then with
  /// the flip sweep, each climb racing its steps against its own best mask;
  /// the search returns the better end by calibration score (as always, the
  /// best exact-count mask seen). On SmolLM2 at rho 0.75 each change to the
  /// climb lifted some calibration draws and lowered others, and in six
  /// pairs of arms measured the arm with the higher calibration score held
  /// out better (docs/results/flips-0.75, plans-0.75). Costs the sweep and
  /// a second refinement budget. On two SmolLM2 draws it returned the plain
  /// climb's mask both times, at 1.64-1.78x the forwards. The second
  /// climb's surrogate also fits the first climb's records, so it does not
  /// repeat a separate flip-sweep search (docs/results/both-0.75). Default
  /// off.
  bool refine_both = false;
  /// Jackknife plans [I] (docs/algorithm.md §Jackknife plans): Stage 2's plan
  /// is recomputed with each of Stage 1's samples left out in turn (the
  /// first probe_samples of the race order, one per task: a plan that no
  /// single task's sample decides); up to this many distinct plans other
  /// than Stage 2's have their Stage 3 start masks raced against the plan's
  /// on every sample, and Stage 3 starts from the best. At high ratios the
  /// plan, not Stage 3 or the refinement, decides where a search lands (on
  /// SmolLM2 at rho 0.75 the start's score ordered four calibration draws as
  /// held-out does), and Stage 1 reads it from a few samples. Needs racing
  /// and screened probes (per-sample scores) and group_init stage1 or full.
  /// On SmolLM2 at rho 0.75 it lifted the worst draw by 0.16 nats held out
  /// and lowered the good one by 0.15; over three draws +0.04 [-0.03, +0.10]
  /// (docs/results/plans-0.75). 0 = off
  /// (default).
  std::size_t plan_candidates = 0;

  // --- layer variant -------------------------------------------------------------------
  /// Evaluations of the whole-layer search; 0 (default) = the number the full
  /// variant would plan for Stage 1 plus Stage 3 (a like-for-like ablation).
  std::size_t layer_budget = 0;

  // --- inner solvers (paper 7 items 1-2) -------------------------------------------------
  /// The solver of every sub-problem. Default surrogate [I]: on planted
  /// entangled problems it reaches the optimum's neighbourhood on every seed
  /// where swap misses it (docs/algorithm.md §Inner solvers).
  InnerSolver inner_solver = InnerSolver::surrogate;
  /// Enumerate a sub-problem exhaustively when its feasible set (product of
  /// C(n_l, k_l)) is no larger than its budget. Default true [I].
  bool exhaustive_when_fits = true;
  /// Proposals per generation of the (1+lambda) solvers (>= 1). They are
  /// evaluated together (one evaluate_batch call per batch_size). Default 4 [I].
  int lambda = 4;
  /// Largest number of swaps in one proposal of the swap solver (>= 1); the
  /// adaptive m cycles 1 .. max_swaps. Default 3 [I].
  int max_swaps = 3;
  /// Generations without a strict improvement before a restart (>= 1): the
  /// parent restarts from the sub-problem's best, perturbed by the largest
  /// useful number of moves. Default 8 [I].
  int restart_after = 8;
  /// Accept a proposal that ties the parent (plateau moves; memoization keeps
  /// them from cycling). Default true [I].
  bool accept_equal = true;
  /// Ratio-penalty weight alpha of L = -S^ + alpha * penalty (penalized
  /// solver only; >= 0). With the global scope one extra or missing head
  /// among N costs alpha/N^2 on the normalized scale (the repair step restores
  /// exact counts at the end); with the per-layer scope, alpha/Hkv^2.
  /// Default 10 [I].
  double alpha = 10.0;
  /// Scope of the penalty. Default global (the paper's form) [I].
  PenaltyScope penalty_scope = PenaltyScope::global;
  /// Per-variable flip probability of the penalized solver in [0, 1]; 0
  /// (default) = 1/n for n free variables (at least one flip per proposal).
  double mutation_rate = 0.0;
  /// Exploration weight kappa of the surrogate solver's acquisition, mean +
  /// kappa * sd of the predicted score (>= 0; 0 = pure exploitation).
  /// Default 1 [I].
  double surrogate_explore = 1.0;
  /// Most logged evaluations (the nearest to the parent) one surrogate fit
  /// uses (>= 2); bounds the O(n^3) fit. Default 300 [I].
  std::size_t surrogate_points = 300;

  // --- racing evaluations (docs/algorithm.md §Racing) ------------------------------------
  /// Race the candidates of Stage 3 and of the refinement: score a candidate
  /// sample by sample (evaluators with per-sample scores only,
  /// bosch::PerSampleEvaluator; ignored otherwise) and stop it as soon as a
  /// paired sequential test says, at confidence race_confidence, that it
  /// cannot reach its parent's score. A stopped candidate is logged as
  /// eliminated (EvaluationRecord::eliminated), is never counted as a full
  /// evaluation (Result::evaluations) nor chosen, and feeds the surrogate only
  /// as the noisy estimate it is. Budgets count it as one request, so the
  /// search makes the decisions it makes without racing, on fewer samples
  /// (Result::forwards). Default false (every candidate scored on every
  /// sample, as before).
  bool race = false;
  /// 1 - alpha: a candidate whose full score would reach its parent's is
  /// stopped with probability at most alpha per decision (under the test's
  /// sampling model; Bonferroni over the looks). In (0, 1). Default 0.95 [I].
  double race_confidence = 0.95;
  /// Samples scored before the first look of the test (>= 2; the race order
  /// interleaves the tasks, so the first samples cover every task). Default 4 [I].
  std::size_t race_min_samples = 4;

  // --- evaluation and output -------------------------------------------------------------
  /// Most masks per evaluate_batch call (>= 1; batch evaluators only). Does
  /// not change results. Default 16.
  std::size_t batch_size = 16;
  /// Return the best-scoring evaluated mask with exactly the target count
  /// when it beats the variant's final incumbent. Default true [I].
  bool return_best_seen = true;
};

/// One Options field (bosch/field.hpp), for code that treats every field
/// alike: validation, JSON (checkpoints, mask metadata, comparison identity),
/// the command line and the Python binding. for_each_option() lists them all.
template <class T>
using OptionField = Field<Options, T>;

namespace detail {
template <class T>
std::string at_least_one(const T& v) {
  return v >= 1 ? std::string() : "must be at least 1, got " + std::to_string(v);
}
inline std::string unit_interval(const double& v) {
  return v >= 0.0 && v <= 1.0 ? std::string() : "must lie in [0, 1], got " + std::to_string(v);
}
}  // namespace detail

/// Calls `f(OptionField<T>{...})` for every field of Options, in declaration
/// order. This is the single list of the fields: validate(), the JSON form
/// (io/options_json.hpp), the `bosch` command line and the Python binding are
/// all generated from it, so a new field is added here and nowhere else.
template <class F>
void for_each_option(F&& f) {
  using O = Options;
  // clang-format off
  f(OptionField<double>{"target_ratio", &O::target_ratio,
      "fraction of KV heads made SWA, in (0, 1)",
      [](const double& v) { return v > 0.0 && v < 1.0 ? std::string()
          : "SWA ratio must lie in (0, 1), got " + std::to_string(v); },
      FieldRole::identity, "ratio,r"});
  f(OptionField<std::uint64_t>{"seed", &O::seed, "search seed"});
  f(OptionField<Variant>{"variant", &O::variant,
      "pipeline: full | single | multi | layer (the paper's ablations)"});
  f(OptionField<std::size_t>{"max_evaluations", &O::max_evaluations,
      "total evaluation budget (0 = none; else >= 3)",
      [](const std::size_t& v) { return v == 0 || v >= 3 ? std::string()
          : "must be 0 (unlimited) or at least 3 (two anchors and the final mask), got " +
            std::to_string(v); },
      FieldRole::run});
  f(OptionField<std::vector<HeadMask>>{"initial_masks", &O::initial_masks,
      "warm-start candidate masks, scored after the anchors"});
  f(OptionField<std::size_t>{"probe_budget", &O::probe_budget,
      "Stage 1 evaluations per layer probe", detail::at_least_one<std::size_t>});
  f(OptionField<int>{"probe_heads", &O::probe_heads,
      "Stage 1: SWA heads per layer probe (0 = ceil(rho*Hkv), at most Hkv-1)",
      [](const int& v) { return v >= 0 ? std::string()
          : "must be >= 0 (0 = automatic), got " + std::to_string(v); }});
  f(OptionField<DropMode>{"drop_mode", &O::drop_mode,
      "Stage 1 drops: marginal | cumulative"});
  f(OptionField<std::size_t>{"probe_samples", &O::probe_samples,
      "Stage 1: score probes on this many samples, paired against all-full (0 = all)"});
  f(OptionField<bool>{"confirm_probes", &O::confirm_probes,
      "Stage 1 with probe_samples: score each layer's chosen probe and the completion probes "
      "on every sample, so the drops that set the ratios are not screened"});
  f(OptionField<std::vector<double>>{"ratio_levels", &O::ratio_levels,
      "Stage 2: explicit per-layer ratio levels in [0, 1] (empty = automatic)",
      [](const std::vector<double>& v) {
        for (double r : v)
          if (!(r >= 0.0 && r <= 1.0)) return "every level must lie in [0, 1], got " + std::to_string(r);
        return std::string(); }});
  f(OptionField<int>{"level_spread", &O::level_spread,
      "Stage 2: allowed per-layer SWA counts lie within N heads of rho*Hkv "
      "(0 = automatic, max(1, round(Hkv/4)))",
      [](const int& v) { return v >= 0 ? std::string()
          : "must be >= 0 (0 = automatic), got " + std::to_string(v); }});
  f(OptionField<RatioInit>{"ratio_init", &O::ratio_init,
      "Stage 2 initial mapping: relative | linear | quantile | uniform"});
  f(OptionField<std::size_t>{"chunk_budget", &O::chunk_budget,
      "Stage 3 evaluations per chunk", detail::at_least_one<std::size_t>});
  f(OptionField<int>{"max_vars", &O::max_vars, "most KV heads per Stage 3 chunk",
      detail::at_least_one<int>});
  f(OptionField<int>{"group_rounds", &O::group_rounds, "passes of Stage 3 over all buckets",
      detail::at_least_one<int>});
  f(OptionField<GroupInit>{"group_init", &O::group_init,
      "Stage 3 start: stage1 | random | full"});
  f(OptionField<std::size_t>{"refine_budget", &O::refine_budget,
      "evaluations of the global refinement after Stage 3 (0 = off)"});
  f(OptionField<std::size_t>{"surrogate_proposals", &O::surrogate_proposals,
      "evaluations of the refinement spent on the surrogate's own optimum, fitted to the whole log (0 = off)"});
  f(OptionField<std::size_t>{"restore_layers", &O::restore_layers,
      "before the refinement, score every layer restored whole and try the N with the largest gains, "
      "paid for by the cheapest SWA heads elsewhere (0 = off)"});
  f(OptionField<bool>{"refine_flips", &O::refine_flips,
      "before the refinement, score every single-head flip of its start (screened on probe_samples, "
      "paired against it), so the surrogate ranks the refinement's swaps from each head's measured effect"});
  f(OptionField<bool>{"refine_both", &O::refine_both,
      "run the refinement twice from Stage 3's result, without and with the flip sweep, and keep the better "
      "end by calibration score"});
  f(OptionField<std::size_t>{"plan_candidates", &O::plan_candidates,
      "Stage 2's plan recomputed with each Stage 1 sample left out; up to N distinct such plans race "
      "their Stage 3 starts against the plan's on every sample, the best one is searched (0 = off)"});
  f(OptionField<std::size_t>{"layer_budget", &O::layer_budget,
      "layer variant: evaluations of the whole-layer search (0 = like-for-like)"});
  f(OptionField<InnerSolver>{"inner_solver", &O::inner_solver,
      "solver of every sub-problem: swap | penalized | surrogate"});
  f(OptionField<bool>{"exhaustive_when_fits", &O::exhaustive_when_fits,
      "enumerate a sub-problem whose feasible set fits its budget"});
  f(OptionField<int>{"lambda", &O::lambda, "proposals per generation of the inner solvers",
      detail::at_least_one<int>});
  f(OptionField<int>{"max_swaps", &O::max_swaps, "most swaps in one proposal of the swap solver",
      detail::at_least_one<int>});
  f(OptionField<int>{"restart_after", &O::restart_after,
      "failed generations before the swap solver restarts", detail::at_least_one<int>});
  f(OptionField<bool>{"accept_equal", &O::accept_equal,
      "accept proposals that tie the parent (plateau moves)"});
  f(OptionField<double>{"alpha", &O::alpha, "ratio-penalty weight of the penalized solver",
      [](const double& v) { return v >= 0.0 && std::isfinite(v) ? std::string()
          : "must be finite and >= 0, got " + std::to_string(v); }});
  f(OptionField<PenaltyScope>{"penalty_scope", &O::penalty_scope,
      "penalized solver's penalty: per_layer | global"});
  f(OptionField<double>{"mutation_rate", &O::mutation_rate,
      "penalized solver's flip probability per variable (0 = 1/n)", detail::unit_interval});
  f(OptionField<double>{"surrogate_explore", &O::surrogate_explore,
      "surrogate solver's exploration weight kappa (mean + kappa * sd)",
      [](const double& v) { return v >= 0.0 && std::isfinite(v) ? std::string()
          : "must be finite and >= 0, got " + std::to_string(v); }});
  f(OptionField<std::size_t>{"surrogate_points", &O::surrogate_points,
      "most logged evaluations one surrogate fit uses",
      [](const std::size_t& v) { return v >= 2 ? std::string()
          : "must be at least 2, got " + std::to_string(v); }});
  f(OptionField<bool>{"race", &O::race,
      "race Stage 3 and refinement candidates sample by sample and stop those that cannot beat their parent"});
  f(OptionField<double>{"race_confidence", &O::race_confidence,
      "racing: 1 - alpha, alpha the chance per decision of stopping a candidate that would reach its parent",
      [](const double& v) { return v > 0.0 && v < 1.0 ? std::string()
          : "must lie in (0, 1), got " + std::to_string(v); }});
  f(OptionField<std::size_t>{"race_min_samples", &O::race_min_samples,
      "racing: samples scored before the first look of the test",
      [](const std::size_t& v) { return v >= 2 ? std::string()
          : "must be at least 2, got " + std::to_string(v); }});
  f(OptionField<std::size_t>{"batch_size", &O::batch_size,
      "most masks per evaluate_batch call (does not change results)",
      detail::at_least_one<std::size_t>, FieldRole::run});
  f(OptionField<bool>{"return_best_seen", &O::return_best_seen,
      "return the best evaluated exact-count mask when it beats the final incumbent"});
  // clang-format on
}

/// Throws bosch::invalid_argument (where = the field's name) unless every
/// field of `o` is in its domain (the checks of for_each_option).
inline void validate(const Options& o) {
  for_each_option([&](const auto& field) {
    if (field.check == nullptr) return;
    const std::string msg = field.check(o.*field.member);
    if (!msg.empty()) throw invalid_argument(msg, std::string(field.name));
  });
}

/// One evaluation of the black box, as logged by the objective.
struct EvaluationRecord {
  std::size_t index = 0;         ///< 0-based position in the log (= evaluation number)
  HeadMask mask;                 ///< the mask evaluated
  double score = 0.0;            ///< the evaluator's score (higher is better)
  Stage stage = Stage::anchors;  ///< the stage that requested it
  double seconds = 0.0;          ///< wall-clock seconds of the evaluator call (a batch's
                                 ///< time is split evenly over its masks)
  /// The evaluator's work for this record in full-model sample forwards
  /// (CostedEvaluator; a batch's cost is split evenly over its masks); NaN
  /// when the evaluator does not count its cost. A replayed record keeps the
  /// cost it had when it was first evaluated.
  double forwards = std::numeric_limits<double>::quiet_NaN();
  /// True when the race stopped this candidate after `samples` samples
  /// (Options::race): it cannot reach its parent's score at the race's
  /// confidence. `score` is then an estimate, the parent's score plus the
  /// mean per-sample difference so far, with standard error `score_sd`; it is
  /// never chosen and never counted as a full evaluation (budgets count it as
  /// one request).
  bool eliminated = false;
  /// Samples scored for this record when scores are per sample (racing on):
  /// all N for a full evaluation, fewer when eliminated; 0 otherwise.
  std::size_t samples = 0;
  /// The per-sample scores, in the evaluator's race order (the first
  /// `samples`), when racing is on: a candidate races against its parent's,
  /// and a resumed search reads them back from the checkpoint.
  std::vector<double> sample_scores;
  /// The standard error of `score` as an estimate of the full score (0 for a
  /// full evaluation).
  double score_sd = 0.0;
};

/// The two reference scores that normalize S.
struct Anchors {
  double full = std::numeric_limits<double>::quiet_NaN();  ///< score of the all-full mask
  double swa = std::numeric_limits<double>::quiet_NaN();   ///< score of the all-SWA mask
};

/// What bosch::select returns.
struct Result {
  /// The selected mask: exactly target_count(layout, rho) SWA heads.
  HeadMask mask;
  /// The evaluator's score of `mask`; NaN only when a callback stopped the
  /// search before any mask with the target count was evaluated.
  double score = std::numeric_limits<double>::quiet_NaN();
  /// (score - S_swa) / (S_full - S_swa), see Objective::normalized.
  double normalized_score = std::numeric_limits<double>::quiet_NaN();
  /// Masks scored in full (replayed ones included): the size of `log` less
  /// the eliminated records.
  std::size_t evaluations = 0;
  /// Masks scored on only part of the samples (EvaluationRecord::eliminated):
  /// candidates the race stopped and Stage-1 probes screened on
  /// Options::probe_samples; 0 without race and probe_samples.
  std::size_t eliminated = 0;
  /// Records the evaluator scored in this process (evaluations and
  /// eliminated candidates, less the ones replayed from a checkpoint).
  std::size_t evaluator_calls = 0;
  /// Evaluations taken from the resumed checkpoint instead of the evaluator.
  std::size_t replayed = 0;
  /// Requests answered by the memo (a mask asked for again).
  std::size_t cache_hits = 0;
  /// The search's cost in full-model sample forwards (see CostedEvaluator),
  /// the replayed evaluations' recorded cost included: the cost of the whole
  /// search, however many times it was resumed. NaN when the evaluator does
  /// not count its cost (or a replayed record did not record it).
  double forwards = std::numeric_limits<double>::quiet_NaN();
  /// Full evaluations per stage, indexed by static_cast<std::size_t>(Stage).
  std::array<std::size_t, stage_count> stage_evaluations{};
  Anchors anchors;
  /// Stage 1 best probe score per layer (NaN for layers not probed).
  std::vector<double> layer_scores;
  /// Stage 1 drop per layer (see DropMode; NaN for layers not probed).
  std::vector<double> layer_drops;
  /// Stage 2 weight per layer in [0, 1] (0 = easiest); empty when Stage 2 did not run.
  std::vector<double> layer_weights;
  /// Per-layer SWA counts the variant planned (Stage 2 for full, uniform for
  /// multi, ...); sums to the target count. Empty when the search stopped first.
  std::vector<int> planned_counts;
  /// Per-layer SWA counts of `mask`, and the same divided by Hkv.
  std::vector<int> layer_counts;
  std::vector<double> layer_ratios;
  /// Every evaluation in order (replayed and eliminated ones included).
  std::vector<EvaluationRecord> log;
  Variant variant = Variant::full;
  std::uint64_t seed = 0;
  double target_ratio = 0.0;
  std::size_t target_count = 0;
  /// True when a callback asked to stop; the result is then the best
  /// exact-count mask found so far (or the current plan completed to the
  /// exact count, unevaluated, when none was evaluated yet).
  bool stopped = false;
  /// True when Options::max_evaluations cut the search short.
  bool budget_exhausted = false;
  /// Wall-clock seconds of the whole select() call.
  double seconds = 0.0;
};

}  // namespace bosch
