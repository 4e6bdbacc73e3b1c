// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file callbacks.hpp
/// Callbacks of bosch::select, in the ensmallen style: a callback is any
/// class that implements only the hooks it wants; each hook is detected at
/// compile time. A hook may return void or something convertible to bool;
/// returning true asks the search to stop (it then finishes cleanly and
/// returns the best exact-count mask found so far). Every callback's hook is
/// called even when an earlier one asked to stop.
///
/// Hooks (all optional):
///
///     begin_search  (const SearchView&)
///     end_search    (const SearchView&, const Result&)       // return value ignored
///     begin_stage   (const SearchView&, Stage)
///     end_stage     (const SearchView&, Stage)
///     on_evaluation (const SearchView&, const EvaluationRecord&)  // every new evaluation
///     on_improvement(const SearchView&, const EvaluationRecord&)  // new best exact-count mask
///     replay_log    (const SearchView&) -> std::vector<EvaluationRecord>
///                   // once, before the first evaluation: evaluations already made
///                   // by an earlier run of this search (resume); they are answered
///                   // from the list instead of the evaluator
///
/// Built-ins: ProgressReporter (progress lines to a stream) and EarlyStop
/// (patience, target score, wall-clock and evaluation limits). Checkpoint
/// files and resume are io/checkpoint.hpp's Checkpoint callback (outside the
/// search core, which knows no file format).

#include <bosch/error.hpp>
#include <bosch/mask.hpp>
#include <bosch/options.hpp>

#include <cmath>
#include <cstddef>
#include <cstdio>
#include <limits>
#include <ostream>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace bosch {

/// A read-only snapshot of the search, passed to every hook.
struct SearchView {
  HeadLayout layout;                    ///< the evaluator's layout
  const Options* options = nullptr;     ///< the options of this search
  std::size_t target_count = 0;         ///< SWA heads of the final mask
  Stage stage = Stage::anchors;         ///< the current stage
  std::size_t evaluations = 0;          ///< evaluations so far (log size)
  std::size_t replayed = 0;             ///< of which replayed from a checkpoint
  std::size_t cache_hits = 0;           ///< memo hits so far
  std::size_t planned_evaluations = 0;  ///< the search's estimate of its total
  double best_score = std::numeric_limits<double>::quiet_NaN();  ///< best exact-count score
  const HeadMask* best_mask = nullptr;                 ///< its mask (nullptr when none yet)
  Anchors anchors;                                     ///< NaN until evaluated
  double elapsed_seconds = 0.0;                        ///< wall clock since select() began
  const std::vector<EvaluationRecord>* log = nullptr;  ///< every evaluation so far
};

namespace detail {

template <class F>
bool as_stop(F&& f) {
  if constexpr (std::is_void_v<decltype(f())>) {
    f();
    return false;
  } else {
    return static_cast<bool>(f());
  }
}

// One dispatcher per hook: calls the hook when the callback has it.
template <class C>
bool call_begin_search(C& c, const SearchView& v) {
  if constexpr (requires { c.begin_search(v); })
    return as_stop([&] { return c.begin_search(v); });
  else
    return false;
}
template <class C>
void call_end_search(C& c, const SearchView& v, const Result& r) {
  if constexpr (requires { c.end_search(v, r); }) c.end_search(v, r);
}
template <class C>
bool call_begin_stage(C& c, const SearchView& v, Stage s) {
  if constexpr (requires { c.begin_stage(v, s); })
    return as_stop([&] { return c.begin_stage(v, s); });
  else
    return false;
}
template <class C>
bool call_end_stage(C& c, const SearchView& v, Stage s) {
  if constexpr (requires { c.end_stage(v, s); })
    return as_stop([&] { return c.end_stage(v, s); });
  else
    return false;
}
template <class C>
bool call_on_evaluation(C& c, const SearchView& v, const EvaluationRecord& r) {
  if constexpr (requires { c.on_evaluation(v, r); })
    return as_stop([&] { return c.on_evaluation(v, r); });
  else
    return false;
}
template <class C>
std::vector<EvaluationRecord> call_replay_log(C& c, const SearchView& v) {
  if constexpr (requires { c.replay_log(v); })
    return c.replay_log(v);
  else
    return {};
}
template <class C>
bool call_on_improvement(C& c, const SearchView& v, const EvaluationRecord& r) {
  if constexpr (requires { c.on_improvement(v, r); })
    return as_stop([&] { return c.on_improvement(v, r); });
  else
    return false;
}

inline std::string format_duration(double s) {
  char buf[32];
  if (!std::isfinite(s) || s < 0) return "?";
  if (s < 120)
    std::snprintf(buf, sizeof buf, "%.1f s", s);
  else if (s < 7200)
    std::snprintf(buf, sizeof buf, "%.1f min", s / 60);
  else
    std::snprintf(buf, sizeof buf, "%.1f h", s / 3600);
  return buf;
}

}  // namespace detail

/// Prints one progress line per `every` evaluations and at each stage start:
///
///     bosch [probes] 42/700 evaluations, best 0.8123 (S^ 0.951), 12.3 s elapsed, ETA 3.2 min
///
/// "best" is the best score among masks with the target count ("-" before
/// any). The ETA extrapolates the mean wall time of the evaluations made in
/// this process (replays excluded) over the planned remainder.
class ProgressReporter {
 public:
  /// Lines to standard error (through std::fputs: this header needs no <iostream>).
  /// @param every print after every `every`-th evaluation (>= 1), default 1.
  explicit ProgressReporter(std::size_t every = 1) : every_(every == 0 ? 1 : every) {}
  /// Lines to `out` (kept by reference; must outlive the search), e.g. std::cerr.
  explicit ProgressReporter(std::ostream& out, std::size_t every = 1)
      : out_(&out), every_(every == 0 ? 1 : every) {}

  void begin_stage(const SearchView& v, Stage s) {
    write("bosch: stage " + std::string(to_string(s)) + " (" + std::to_string(v.evaluations) + "/" +
          std::to_string(v.planned_evaluations) + " evaluations)\n");
  }
  void on_evaluation(const SearchView& v, const EvaluationRecord& r) {
    if ((r.index + 1) % every_ == 0) line(v);
  }
  void end_search(const SearchView& v, const Result& r) {
    write("bosch: done, " + std::to_string(r.evaluations) + " evaluations (" + std::to_string(r.cache_hits) +
          " cache hits), score " + number(r.score) + " (S^ " + number(r.normalized_score) + "), " +
          detail::format_duration(v.elapsed_seconds) + "\n");
  }

 private:
  /// As `std::ostream << double` with the default precision (6 significant digits).
  static std::string number(double x) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%g", x);
    return buf;
  }
  void write(const std::string& text) {
    if (out_ != nullptr) {
      out_->write(text.data(), static_cast<std::streamsize>(text.size()));
    } else {
      std::fputs(text.c_str(), stderr);
    }
  }
  void line(const SearchView& v) {
    char buf[256];
    const std::size_t fresh = v.evaluations - v.replayed;
    const std::size_t left =
        v.planned_evaluations > v.evaluations ? v.planned_evaluations - v.evaluations : 0;
    const double eta =
        fresh > 0 ? v.elapsed_seconds / static_cast<double>(fresh) * static_cast<double>(left)
                  : std::numeric_limits<double>::quiet_NaN();
    std::string best = "-";
    if (v.best_mask) {
      std::snprintf(buf, sizeof buf, "%.6g", v.best_score);
      best = buf;
      if (std::isfinite(v.anchors.full) && std::isfinite(v.anchors.swa) &&
          v.anchors.full != v.anchors.swa) {
        std::snprintf(buf, sizeof buf, " (S^ %.4f)",
                      (v.best_score - v.anchors.swa) / std::abs(v.anchors.full - v.anchors.swa));
        best += buf;
      }
    }
    write("bosch [" + std::string(to_string(v.stage)) + "] " + std::to_string(v.evaluations) + "/" +
          std::to_string(v.planned_evaluations) + " evaluations, best " + best + ", " +
          detail::format_duration(v.elapsed_seconds) + " elapsed, ETA " + detail::format_duration(eta) + "\n");
  }
  std::ostream* out_ = nullptr;
  std::size_t every_;
};

/// Stops the search when any enabled criterion is met (each is off by default):
struct EarlyStop {
  /// Stop after this many consecutive evaluations without a new best
  /// exact-count score, counted from the first exact-count evaluation (0 = off).
  std::size_t patience = 0;
  /// Stop once the best exact-count score reaches this value (default +inf = off).
  double target_score = std::numeric_limits<double>::infinity();
  /// Stop once this much wall-clock time has passed (seconds; 0 = off).
  double max_seconds = 0.0;
  /// Stop once this many evaluations are logged (0 = off). Unlike
  /// Options::max_evaluations this is an interruption: no evaluation is
  /// reserved for the final mask.
  std::size_t max_evaluations = 0;

  bool on_evaluation(const SearchView& v, const EvaluationRecord&) {
    if (v.best_mask && since_best_ != static_cast<std::size_t>(-1)) ++since_best_;
    if (max_evaluations > 0 && v.evaluations >= max_evaluations) return true;
    if (max_seconds > 0 && v.elapsed_seconds >= max_seconds) return true;
    if (v.best_mask && v.best_score >= target_score) return true;
    if (patience > 0 && v.best_mask && since_best_ >= patience) return true;
    return false;
  }
  void on_improvement(const SearchView&, const EvaluationRecord&) { since_best_ = 0; }

  /// Internal state (public only so that EarlyStop stays an aggregate and can
  /// be built with designated initializers: EarlyStop{.patience = 50}).
  std::size_t since_best_ = static_cast<std::size_t>(-1);
};

}  // namespace bosch
