// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file python/src/search.hpp
/// bosch.select: the C++ search (bosch::select) driven from Python.
///
/// The search runs with the GIL released. Whatever calls Python (the user's
/// evaluate / evaluate_batch, Python callbacks, progress output) takes the GIL
/// for the call and gives it back. A Python exception raised there is stored
/// (SearchState::error), a python_raised is thrown through the search (which
/// unwinds: it holds no resources that need Python), and once the GIL is held
/// again the stored exception is raised in Python with its traceback. Before
/// that, the checkpoint (when one is kept) is written with every evaluation
/// that finished. Signals (Ctrl-C) are checked after every evaluation
/// (PyErr_CheckSignals); a KeyboardInterrupt then stops the search cleanly
/// (the Checkpoint callback writes the file at the end of the search) and is
/// raised once select() has returned.

#include "convert.hpp"

#include <bosch/io/search_files.hpp>

#include <cstddef>
#include <exception>
#include <optional>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace bosch::python {

/// What bosch.select returns: the C++ result and the options it ran with;
/// with a bosch.TransformerEvaluator also the metadata a mask file records
/// (bosch::select_heads), which bosch.write_mask then writes.
struct PyResult {
  Result result;
  Options options;
  std::optional<nlohmann::json> metadata;
  /// The files the search read ((what, path): a TransformerEvaluator's model
  /// and texts), which bosch.write_mask never replaces.
  std::vector<std::pair<std::string, std::string>> inputs = {};
};

/// State shared by the adapters and callbacks of one select() call. Touched
/// only with the GIL held.
struct SearchState {
  std::optional<nb::python_error> error;      ///< raised by Python code the search called
  std::optional<nb::python_error> interrupt;  ///< raised by a signal handler (Ctrl-C)
  bool stop = false;                          ///< stop after the current evaluation

  /// Runs pending signal handlers; an exception they raise (KeyboardInterrupt)
  /// is kept in `interrupt` and stops the search.
  void check_signals() {
    if (!interrupt && PyErr_CheckSignals() != 0) {
      interrupt.emplace();
      stop = true;
    }
  }
};

/// Thrown through the C++ search after a Python exception was stored in
/// SearchState::error.
struct python_raised {};

/// bosch.ProgressReporter: bosch::ProgressReporter whose lines go to a Python
/// file object (sys.stderr by default).
class PyProgress {
 public:
  PyProgress(std::size_t every, nb::object file) : reporter_(buffer_, every), file_(std::move(file)) {}
  PyProgress(const PyProgress&) = delete;
  PyProgress& operator=(const PyProgress&) = delete;
  ProgressReporter& reporter() noexcept { return reporter_; }
  /// Writes what the reporter printed since the last call (takes the GIL when
  /// there is something to write).
  void flush();

 private:
  std::ostringstream buffer_;
  ProgressReporter reporter_;
  nb::object file_;
};

/// What bosch.select needs besides the evaluator.
struct SearchSetup {
  Options options;
  nb::list callbacks;                     ///< Python objects, bosch.EarlyStop, bosch.ProgressReporter
  std::optional<std::string> checkpoint;  ///< checkpoint file
  std::size_t checkpoint_every = 1;
  bool resume = false;
  std::optional<std::string> log;         ///< JSON-lines evaluation log (io/evaluation_log.hpp)
};

/// The one callback select() gets: the checkpoint first, then every callback
/// of SearchSetup::callbacks in order (native ones without the GIL, Python
/// ones with it). Built and destroyed with the GIL held.
class Hub {
 public:
  /// @param check_signals check signals after every evaluation here (for
  ///        evaluators that run no Python code of their own).
  Hub(SearchState& state, const SearchSetup& setup, bool check_signals);

  std::vector<EvaluationRecord> replay_log(const SearchView& v);
  bool begin_search(const SearchView& v);
  void end_search(const SearchView& v, const Result& r);
  bool begin_stage(const SearchView& v, Stage s);
  bool end_stage(const SearchView& v, Stage s);
  bool on_evaluation(const SearchView& v, const EvaluationRecord& r);
  bool on_improvement(const SearchView& v, const EvaluationRecord& r);

  /// After the search threw: io::SearchFiles::save_after_error. Needs no GIL.
  bool save_after_error(const HeadLayout& layout, const Options& options) noexcept {
    return files_.save_after_error(layout, options);
  }
  /// Evaluations logged so far.
  std::size_t evaluations() const noexcept { return log_size_; }

 private:
  enum Hook { h_begin_search, h_end_search, h_begin_stage, h_end_stage, h_on_evaluation,
              h_on_improvement, hook_count };
  struct Item {
    EarlyStop* early = nullptr;
    PyProgress* progress = nullptr;
    nb::object hooks[hook_count];  ///< bound methods of a Python callback (null when absent)
  };
  template <class Native, class Py>
  bool dispatch(Hook h, Native&& native, Py&& py);

  SearchState& state_;
  io::SearchFiles files_;  // checkpoint and log (bosch/io/search_files.hpp)
  std::vector<Item> items_;
  bool check_signals_;
  std::size_t log_size_ = 0;
};

/// A SearchView as a Python object (a copy: valid after the hook returns).
struct PyView {
  SearchView view;                 // pointers cleared
  std::optional<HeadMask> best_mask;
  explicit PyView(const SearchView& v) : view(v) {
    if (v.best_mask) best_mask = *v.best_mask;
    view.best_mask = nullptr;
    view.log = nullptr;
    view.options = nullptr;
  }
};

/// Runs bosch::select(evaluator, setup.options, hub) with the GIL released
/// and turns its outcome into Python: a bosch.Result, or the exception (a
/// Python error from the evaluator or a callback, re-raised with its
/// traceback; a C++ error, translated), after writing the checkpoint.
/// `state` is the one the evaluator's adapter reports to; `check_signals`: see
/// Hub. Called with the GIL held.
template <class E>
nb::object run_select(E& evaluator, SearchSetup& setup, SearchState& state, bool check_signals);

/// Adds a note to the Python exception `e` (Python >= 3.11; ignored before).
void add_note(nb::python_error& e, const std::string& note);

/// Binds HeadLayout-independent search types: EvaluationRecord, SearchView,
/// Anchors, Result, EarlyStop, ProgressReporter, and bosch.select.
void bind_search(nb::module_& m);

// ---- implementation of the template ------------------------------------------------------

nb::object finish_select(SearchSetup& setup, SearchState& state, Hub& hub, std::optional<PyResult>& result,
                         std::exception_ptr failure, bool saved);

template <class E>
nb::object run_select(E& evaluator, SearchSetup& setup, SearchState& state, bool check_signals) {
  std::optional<PyResult> result;
  std::exception_ptr failure;
  bool saved = false;
  {
    Hub hub(state, setup, check_signals);
    {
      nb::gil_scoped_release release;
      try {
        result = PyResult{bosch::select(evaluator, setup.options, hub), setup.options, std::nullopt};
      } catch (...) {
        failure = std::current_exception();
      }
      if (failure) saved = hub.save_after_error(static_cast<HeadLayout>(evaluator.layout()), setup.options);
    }
    return finish_select(setup, state, hub, result, failure, saved);
  }
}

}  // namespace bosch::python
