// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/warm_start_options.hpp
/// Where BOSCH searches start besides their own plan (Options::initial_masks),
/// shared by `bosch select` and `bosch compare`: --init FILE... (select),
/// --candidates LIST (cheap built-in rankings computed before the search),
/// and for multi-ratio runs --ratio-order up|down and --warm-start (each
/// ratio also starts from its neighbour's mask).

#include "command_line.hpp"
#include "model_options.hpp"

#include <bosch/eval/compare.hpp>
#include <bosch/eval/head_scores.hpp>
#include <bosch/eval/transformer_evaluator.hpp>
#include <bosch/mask.hpp>

#include <nlohmann/json.hpp>

#include <string>
#include <type_traits>
#include <vector>

namespace bosch::cli {

/// A user's warm-start mask (--init) as read.
struct InitMask {
  std::string file;  ///< as given ("-" = stdin)
  HeadMask mask;
};

/// A computed warm-start candidate (--candidates): a ranking's scores and its cost.
struct Candidate {
  eval::Method method;
  eval::HeadScores scores;
};

/// The warm-start options.
struct WarmStartOptions {
  std::vector<std::string> init_files;
  std::string candidates = "none";
  std::string ratio_order = "up";
  bool warm_start = true;

  /// The options: with `with_init` also --init (select), with `ratio_help`
  /// the help of --ratio-order and --warm-start (they apply to select's
  /// --ratios and to compare's grid).
  po::options_description describe(bool with_init, const std::string& ratio_help);

  /// --candidates as rankings (usage error naming it for an unknown name).
  std::vector<eval::Method> resolved_candidates() const;
  /// --ratio-order (usage error naming it otherwise).
  eval::RatioOrder resolved_order() const;

  /// Reads every --init file (JSON, TSV or grid by extension) and checks its
  /// layout against `layout`: a missing or malformed file or another layout is
  /// a runtime failure naming the file (exit 1).
  std::vector<InitMask> read_init(const HeadLayout& layout) const;
};

/// The help text of --candidates (shared by select and compare).
extern const char* const candidates_help;

/// The candidates' masks for ratio `rho` (global quota), in order.
std::vector<HeadMask> candidate_masks(const std::vector<Candidate>& candidates, double rho);

/// What a mask file's metadata records of its warm starts: {"init_files": [...],
/// "candidates": [{"name", "evaluations", "forwards", "seconds"}, ...],
/// "previous_ratio": r or null, "initial_masks": n}, plus
/// eval::warm_start_summary(result).
nlohmann::json warm_start_metadata(const std::vector<InitMask>& init, const std::vector<Candidate>& candidates,
                                   const HeadMask* previous, double previous_ratio, const Result& result);

/// Computes the candidates' scores on the evaluator's calibration tasks:
/// PROXY through `evaluator`, the others on `backend` when it is the CPU
/// backend, else on a CPU backend of `model` made for them (the static
/// rankings read attention on the CPU). Progress on out.info().
template <class Backend, class E>
std::vector<Candidate> compute_candidates(const std::vector<eval::Method>& methods, const Backend& backend,
                                          E& evaluator, const model::Model& model, const ModelOptions& mo,
                                          const eval::HeadScoreOptions& options, const OutputOptions& out) {
  std::vector<Candidate> result;
  if (methods.empty()) return result;
  auto run = [&](const cpu::Backend& cpu) {
    for (eval::Method m : methods) {
      out.info() << "warm-start candidate " << eval::to_string(m) << ": computing\n";
      Candidate c{m, m == eval::Method::proxy
                         ? eval::proxy_scores(evaluator, static_cast<double>(evaluator.tasks().samples.size()))
                         : eval::compute_head_scores(m, cpu, evaluator.tasks(), options)};
      out.info() << "warm-start candidate " << eval::to_string(m) << ": " << c.scores.evaluations
                 << " evaluations, " << c.scores.forwards << " forwards, " << c.scores.seconds << " s\n";
      result.push_back(std::move(c));
    }
  };
  if constexpr (std::is_same_v<Backend, cpu::Backend>) {
    run(backend);
  } else {
    const cpu::Backend cpu = make_cpu_backend(model, mo);
    run(cpu);
  }
  return result;
}

}  // namespace bosch::cli
