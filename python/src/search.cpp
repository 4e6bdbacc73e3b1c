// SPDX-License-Identifier: Apache-2.0
// bosch.select and the search types (see search.hpp).

#include "search.hpp"

#include <bosch/io/atomic_file.hpp>

#include "options.hpp"
#include "transformer.hpp"

#include <bosch/io/search_metadata.hpp>
#include <bosch/run/selection.hpp>

#include <array>
#include <cmath>
#include <cstdio>
#include <limits>

using namespace nb::literals;

namespace bosch::python {

// ---- progress and the callback hub ---------------------------------------------------------

void PyProgress::flush() {
  if (buffer_.tellp() <= 0) return;
  nb::gil_scoped_acquire gil;
  const std::string text = buffer_.str();
  buffer_.str(std::string());
  nb::object file = file_.is_none() ? nb::module_::import_("sys").attr("stderr") : file_;
  if (file.is_none()) return;  // no stderr (pythonw)
  file.attr("write")(nb::str(text.c_str()));
  if (nb::hasattr(file, "flush")) file.attr("flush")();
}

Hub::Hub(SearchState& state, const SearchSetup& setup, bool check_signals)
    : state_(state),
      files_({.checkpoint = setup.checkpoint.value_or(""),
              .checkpoint_every = setup.checkpoint_every,
              .resume = setup.resume,
              .log = setup.log.value_or(""),
              .log_every = setup.checkpoint_every}),
      check_signals_(check_signals) {
  static const char* names[hook_count] = {"begin_search", "end_search",    "begin_stage",
                                          "end_stage",    "on_evaluation", "on_improvement"};
  for (nb::handle c : setup.callbacks) {
    Item item;
    if (nb::isinstance<EarlyStop>(c)) {
      item.early = nb::cast<EarlyStop*>(c);
    } else if (nb::isinstance<PyProgress>(c)) {
      item.progress = nb::cast<PyProgress*>(c);
    } else {
      bool any = false;
      for (int h = 0; h < hook_count; ++h)
        if (nb::hasattr(c, names[h])) {
          item.hooks[h] = c.attr(names[h]);
          any = true;
        }
      if (!any)
        throw nb::type_error(("callbacks: " + nb::cast<std::string>(nb::repr(c)) +
                              " has none of the hooks begin_search, end_search, begin_stage, "
                              "end_stage, on_evaluation, on_improvement")
                                 .c_str());
    }
    items_.push_back(std::move(item));
  }
}

/// Calls `native(early_stop_or_reporter)` for native callbacks and
/// `py(bound_method)` (with the GIL) for Python ones that have hook `h`; ORs
/// their stop requests. A Python exception is stored and python_raised thrown.
template <class Native, class Py>
bool Hub::dispatch(Hook h, Native&& native, Py&& py) {
  bool stop = false;
  for (Item& item : items_) {
    if (item.early) {
      stop |= native(*item.early);
    } else if (item.progress) {
      native(item.progress->reporter());
      item.progress->flush();
    } else if (item.hooks[h].is_valid()) {
      nb::gil_scoped_acquire gil;
      try {
        nb::object r = py(item.hooks[h]);
        stop |= !r.is_none() && nb::cast<bool>(nb::bool_(r));
      } catch (nb::python_error& e) {
        state_.error.emplace(std::move(e));
        throw python_raised{};
      }
    }
  }
  return stop;
}

std::vector<EvaluationRecord> Hub::replay_log(const SearchView& v) { return files_.replay_log(v); }

bool Hub::begin_search(const SearchView& v) {
  return dispatch(
      h_begin_search, [&](auto& c) { return detail::call_begin_search(c, v); },
      [&](nb::handle f) { return f(PyView(v)); });
}

void Hub::end_search(const SearchView& v, const Result& r) {
  files_.end_search(v, r);
  dispatch(
      h_end_search,
      [&](auto& c) {
        detail::call_end_search(c, v, r);
        return false;
      },
      [&](nb::handle f) { return f(PyView(v), PyResult{r, *v.options, std::nullopt}); });
}

bool Hub::begin_stage(const SearchView& v, Stage s) {
  return dispatch(
      h_begin_stage, [&](auto& c) { return detail::call_begin_stage(c, v, s); },
      [&](nb::handle f) { return f(PyView(v), nb::str(to_string(s))); });
}

bool Hub::end_stage(const SearchView& v, Stage s) {
  return dispatch(
      h_end_stage, [&](auto& c) { return detail::call_end_stage(c, v, s); },
      [&](nb::handle f) { return f(PyView(v), nb::str(to_string(s))); });
}

bool Hub::on_evaluation(const SearchView& v, const EvaluationRecord& r) {
  log_size_ = v.evaluations;
  files_.on_evaluation(v, r);
  bool stop = dispatch(
      h_on_evaluation, [&](auto& c) { return detail::call_on_evaluation(c, v, r); },
      [&](nb::handle f) { return f(PyView(v), r); });
  if (check_signals_) {
    nb::gil_scoped_acquire gil;
    state_.check_signals();
  }
  return stop || state_.stop;
}

bool Hub::on_improvement(const SearchView& v, const EvaluationRecord& r) {
  return dispatch(
      h_on_improvement, [&](auto& c) { return detail::call_on_improvement(c, v, r); },
      [&](nb::handle f) { return f(PyView(v), r); });
}

void add_note(nb::python_error& e, const std::string& note) {
  nb::handle exc = e.value();
  if (exc.is_valid() && nb::hasattr(exc, "add_note")) {
    try {
      exc.attr("add_note")(nb::str(note.c_str()));
    } catch (nb::python_error&) {
    }
  }
}

nb::object finish_select(SearchSetup& setup, SearchState& state, Hub& hub, std::optional<PyResult>& result,
                         std::exception_ptr failure, bool saved) {
  const std::string where =
      !setup.checkpoint ? std::string()
      : saved || !failure
          ? "; checkpoint '" + *setup.checkpoint + "' holds them (select(..., resume=True) continues)"
          : "; checkpoint '" + *setup.checkpoint + "' was not rewritten";
  if (failure) {
    if (state.error) {
      nb::python_error e = std::move(*state.error);
      state.error.reset();
      add_note(e, "bosch.select: stopped after " + std::to_string(hub.evaluations()) + " evaluations" + where);
      throw e;
    }
    std::rethrow_exception(failure);
  }
  nb::object out = nb::cast(std::move(*result));
  if (state.interrupt) {
    nb::python_error e = std::move(*state.interrupt);
    state.interrupt.reset();
    add_note(e, "bosch.select: interrupted after " + std::to_string(hub.evaluations()) + " evaluations" + where);
    if (e.value().is_valid()) {
      try {
        nb::setattr(e.value(), "bosch_result", out);
      } catch (nb::python_error&) {
      }
    }
    throw e;
  }
  return out;
}

// ---- the Python evaluator ------------------------------------------------------------------------

namespace {

/// A Python function and whether it takes the keyword `hint`.
struct PyFunction {
  nb::object fn;
  bool takes_hint = false;
  explicit operator bool() const noexcept { return fn.is_valid() && !fn.is_none(); }
};

bool accepts_hint(nb::handle fn) {
  try {
    nb::object inspect = nb::module_::import_("inspect");
    nb::dict params = nb::cast<nb::dict>(
        nb::module_::import_("builtins").attr("dict")(inspect.attr("signature")(fn).attr("parameters")));
    nb::object kinds = inspect.attr("Parameter");
    if (params.contains("hint")) {
      nb::object kind = params["hint"].attr("kind");
      return !kind.equal(kinds.attr("POSITIONAL_ONLY")) && !kind.equal(kinds.attr("VAR_POSITIONAL"));
    }
    for (nb::handle p : params.attr("values")())
      if (p.attr("kind").equal(kinds.attr("VAR_KEYWORD"))) return true;
  } catch (nb::python_error&) {  // builtins without a signature
  }
  return false;
}

double score_from(nb::handle r, const char* who) {
  if (PyFloat_CheckExact(r.ptr())) return PyFloat_AS_DOUBLE(r.ptr());
  if (!PyUnicode_Check(r.ptr()) && !PyBytes_Check(r.ptr())) {
    const double v = PyFloat_AsDouble(r.ptr());
    if (!(v == -1.0 && PyErr_Occurred())) return v;
    PyErr_Clear();
  }
  throw nb::type_error((std::string(who) + " must return a float (higher is better), got " +
                        nb::type_name(r.type()).c_str())
                           .c_str());
}

/// The optional capabilities of a Python evaluator object, found by name:
/// racing (bosch::PerSampleEvaluator: `sample_count()`, `race_order()`,
/// `score_samples(mask, samples)`, `reduce(scores)`, all four or none;
/// optional `race_block()`) and its cost (`cost()`, in full-model sample
/// forwards: bosch::CostedEvaluator).
struct PyCapabilities {
  nb::object sample_count, race_order, reduce, race_block, cost;
  PyFunction score_samples;
  bool sampled() const noexcept { return static_cast<bool>(score_samples); }
};

PyCapabilities capabilities_of(nb::handle obj) {
  PyCapabilities c;
  if (!obj.is_valid() || obj.is_none()) return c;
  static const char* names[] = {"sample_count", "race_order", "score_samples", "reduce"};
  // A capability is a method: an attribute that is not callable (a user's
  // `cost` array, say) is no capability.
  auto method = [&](const char* n) { return nb::hasattr(obj, n) && PyCallable_Check(obj.attr(n).ptr()); };
  std::string have, lack;
  for (const char* n : names) {
    std::string& list = method(n) ? have : lack;
    list += (list.empty() ? "" : ", ") + std::string(n);
  }
  if (!have.empty() && !lack.empty())
    throw nb::type_error(("the evaluator has " + have + " but not " + lack +
                          " (racing needs sample_count(), race_order(), score_samples(mask, samples) and "
                          "reduce(scores): give all four or none)")
                             .c_str());
  if (lack.empty()) {
    c.sample_count = obj.attr("sample_count");
    c.race_order = obj.attr("race_order");
    c.score_samples.fn = obj.attr("score_samples");
    c.score_samples.takes_hint = accepts_hint(c.score_samples.fn);
    c.reduce = obj.attr("reduce");
    if (method("race_block")) c.race_block = obj.attr("race_block");
  }
  if (method("cost")) c.cost = obj.attr("cost");
  return c;
}

/// A NumPy float64 vector from a Python result, with `n` elements (n < 0: any).
std::vector<double> doubles_from(nb::handle r, std::ptrdiff_t n, const char* who) {
  nb::object v;
  try {
    v = numpy().attr("asarray")(r, "dtype"_a = "float64").attr("ravel")();
  } catch (nb::python_error&) {
    throw nb::type_error((std::string(who) + " must return a sequence of floats, got " +
                          nb::type_name(r.type()).c_str())
                             .c_str());
  }
  const auto view = nb::cast<nb::ndarray<const double, nb::ndim<1>>>(v);
  if (n >= 0 && view.shape(0) != static_cast<std::size_t>(n))
    throw nb::value_error((std::string(who) + " returned " + std::to_string(view.shape(0)) + " scores for " +
                           std::to_string(n) + " samples")
                              .c_str());
  std::vector<double> out(view.shape(0));
  for (std::size_t i = 0; i < out.size(); ++i) out[i] = view(i);
  return out;
}

/// bosch::Evaluator over Python functions; with Batch, also BatchEvaluator;
/// with Sampled, also PerSampleEvaluator (racing). Always CostedEvaluator:
/// cost() is NaN without a Python `cost`, as for an evaluator without one.
/// Every member function is called by the search without the GIL.
template <bool Batch, bool Sampled>
class PyEvaluator {
 public:
  PyEvaluator(HeadLayout layout, PyFunction one, PyFunction batch, PyCapabilities caps, SearchState& state)
      : layout_(layout), one_(std::move(one)), batch_(std::move(batch)), caps_(std::move(caps)), state_(state) {}

  HeadLayout layout() const { return layout_; }
  double evaluate(const HeadMask& m) { return call_one(m, 0); }
  double evaluate(const HeadMask& m, const EvaluationHint& h) { return call_one(m, h.first_changed_layer); }
  std::vector<double> evaluate_batch(std::span<const HeadMask> ms)
    requires Batch
  {
    return call_batch(ms, 0);
  }
  std::vector<double> evaluate_batch(std::span<const HeadMask> ms, const EvaluationHint& h)
    requires Batch
  {
    return call_batch(ms, h.first_changed_layer);
  }

  std::size_t sample_count() const
    requires Sampled
  {
    return guarded([&] {
      const long long n = nb::cast<long long>(caps_.sample_count());
      if (n < 1) throw nb::value_error(("sample_count() must be >= 1, got " + std::to_string(n)).c_str());
      return static_cast<std::size_t>(n);
    });
  }
  std::vector<std::size_t> race_order() const
    requires Sampled
  {
    return guarded([&] {
      std::vector<std::size_t> out;
      for (nb::handle i : nb::iter(caps_.race_order())) {
        const long long v = nb::cast<long long>(i);
        if (v < 0) throw nb::value_error("race_order() holds a negative sample index");
        out.push_back(static_cast<std::size_t>(v));
      }
      return out;
    });
  }
  std::vector<double> score_samples(const HeadMask& m, const EvaluationHint& h, std::span<const std::size_t> idx)
    requires Sampled
  {
    return guarded([&] {
      nb::list samples;
      for (std::size_t i : idx) samples.append(i);
      nb::object arr = mask_to_numpy(m);
      nb::object r = caps_.score_samples.takes_hint
                         ? caps_.score_samples.fn(arr, samples, "hint"_a = h.first_changed_layer)
                         : caps_.score_samples.fn(arr, samples);
      auto out = doubles_from(r, static_cast<std::ptrdiff_t>(idx.size()), "score_samples");
      state_.check_signals();
      return out;
    });
  }
  double reduce(std::span<const double> v) const
    requires Sampled
  {
    return guarded([&] {
      nb::list scores;
      for (double x : v) scores.append(x);
      return score_from(caps_.reduce(scores), "reduce");
    });
  }
  std::size_t race_block() const
    requires Sampled
  {
    if (!caps_.race_block.is_valid()) return 1;
    return guarded([&] { return static_cast<std::size_t>(std::max(1LL, nb::cast<long long>(caps_.race_block()))); });
  }
  double cost() const {
    if (!caps_.cost.is_valid()) return std::numeric_limits<double>::quiet_NaN();
    return guarded([&] { return score_from(caps_.cost(), "cost"); });
  }

 private:
  /// Runs `f` with the GIL; a Python exception is kept for select() to raise.
  template <class F>
  auto guarded(F&& f) const {
    nb::gil_scoped_acquire gil;
    try {
      return f();
    } catch (nb::python_error& e) {
      state_.error.emplace(std::move(e));
      throw python_raised{};
    }
  }

  double call_one(const HeadMask& m, int hint) {
    if (!one_) return call_batch(std::span<const HeadMask>(&m, 1), hint).at(0);
    return guarded([&] {
      nb::object arr = mask_to_numpy(m);
      nb::object r = one_.takes_hint ? one_.fn(arr, "hint"_a = hint) : one_.fn(arr);
      const double s = score_from(r, "evaluate");
      state_.check_signals();
      return s;
    });
  }

  std::vector<double> call_batch(std::span<const HeadMask> ms, int hint) {
    return guarded([&] {
      nb::object arr = masks_to_numpy(ms, layout_);
      nb::object r = batch_.takes_hint ? batch_.fn(arr, "hint"_a = hint) : batch_.fn(arr);
      auto out = doubles_from(r, -1, "evaluate_batch");
      state_.check_signals();
      return out;
    });
  }

  HeadLayout layout_;
  PyFunction one_, batch_;
  PyCapabilities caps_;
  SearchState& state_;
};

/// The layout an evaluator object declares (attribute or method `layout`).
std::optional<HeadLayout> layout_of(nb::handle obj) {
  if (!nb::hasattr(obj, "layout")) return std::nullopt;
  nb::object l = obj.attr("layout");
  if (PyCallable_Check(l.ptr()) && !nb::isinstance<HeadLayout>(l)) l = l();
  return layout_from(l, "layout");
}

/// bosch.select's own keywords (the rest are option fields).
nb::object pop(nb::dict& kw, const char* key) {
  if (!kw.contains(key)) return nb::object();
  nb::object v = kw[key];
  PyDict_DelItemString(kw.ptr(), key);
  return v;
}

/// The files a select() call reads (keyword, path): its outputs must name none.
using Inputs = std::vector<std::pair<std::string, std::string>>;

/// The inputs of a select() on `evaluate`: a bosch.TransformerEvaluator's
/// model and text files; none for a Python evaluator.
Inputs inputs_of(nb::handle evaluate) {
  Inputs in;
  if (!nb::isinstance<PyTransformerEvaluator>(evaluate)) return in;
  const RunSettings& s = nb::cast<PyTransformerEvaluator&>(evaluate).run().settings();
  in.emplace_back("the evaluator's model_path", s.model);
  for (const auto& t : s.text_files) in.emplace_back("the evaluator's text_files", t);
  return in;
}

/// The options, callbacks and checkpoint settings of a select() call; takes
/// them out of `kw`, which must then be empty. The checkpoint and log must
/// name neither each other nor one of `inputs` (io::same_file: after links
/// and "./"), checked before an earlier checkpoint is discarded:
/// bosch.InvalidArgument naming both.
SearchSetup parse_setup(nb::handle ratio, nb::dict& kw, const Inputs& inputs = {}) {
  SearchSetup setup;
  if (nb::object o = pop(kw, "options"); o.is_valid() && !o.is_none()) {
    if (!nb::isinstance<Options>(o)) throw nb::type_error("options: expected a bosch.Options");
    setup.options = nb::cast<Options>(o);
  }
  if (nb::object c = pop(kw, "callbacks"); c.is_valid() && !c.is_none()) {
    if (nb::hasattr(c, "begin_search") || nb::hasattr(c, "on_evaluation") || nb::isinstance<EarlyStop>(c) ||
        nb::isinstance<PyProgress>(c))
      setup.callbacks.append(c);  // a single callback
    else
      for (nb::handle x : nb::iter(c)) setup.callbacks.append(x);
  }
  if (nb::object c = pop(kw, "checkpoint"); c.is_valid() && !c.is_none())
    setup.checkpoint = path_from(c, "checkpoint");
  if (nb::object e = pop(kw, "checkpoint_every"); e.is_valid()) {
    const long long n = nb::cast<long long>(e);
    if (n < 0) throw invalid_argument("must be >= 0 (0 = only at the end), got " + std::to_string(n),
                                      "checkpoint_every");
    setup.checkpoint_every = static_cast<std::size_t>(n);
  }
  if (nb::object r = pop(kw, "resume"); r.is_valid()) setup.resume = nb::cast<bool>(nb::bool_(r));
  if (nb::object l = pop(kw, "log"); l.is_valid() && !l.is_none()) {
    setup.log = path_from(l, "log");
    io::check_output_file(*setup.log, "log");
  }
  bool fresh = false;
  if (nb::object f = pop(kw, "fresh"); f.is_valid()) fresh = nb::cast<bool>(nb::bool_(f));
  if (setup.resume && !setup.checkpoint)
    throw invalid_argument("resume=True needs checkpoint=PATH (the file of the interrupted run)", "resume");
  // An output never replaces an input, nor another output.
  if (setup.log && setup.checkpoint && io::same_file(*setup.log, *setup.checkpoint))
    throw invalid_argument("log and checkpoint name the same file '" + *setup.log + "': give each its own path",
                           "log");
  for (const auto& [name, out] : {std::pair{"checkpoint", setup.checkpoint}, std::pair{"log", setup.log}})
    for (const auto& [what, in] : inputs)
      if (out && io::same_file(*out, in))
        throw invalid_argument("names the same file as " + what + " '" + in +
                                   "': an output never replaces an input; give it another path",
                               name);
  if (setup.resume && fresh) throw invalid_argument("resume=True and fresh=True exclude each other", "fresh");
  if (setup.checkpoint) {
    // The same rules as `bosch select`: the path must be writable, and an
    // earlier run's checkpoint is never overwritten silently.
    io::check_output_file(*setup.checkpoint, "checkpoint");
    if (!setup.resume)
      refuse_or_discard_checkpoint(*setup.checkpoint, fresh,
                                   "pass resume=True to continue it or fresh=True to discard it and start over",
                                   "checkpoint", {identity_path(*setup.checkpoint)});
  }
  if (!ratio.is_none()) {
    if (kw.contains("target_ratio"))
      throw nb::type_error("select() got both ratio and target_ratio");
    nb::dict r;
    r["target_ratio"] = ratio;
    take_options(setup.options, r);
  }
  take_options(setup.options, kw);
  if (kw.size() > 0)
    throw nb::type_error(("select() got an unexpected keyword argument " +
                          nb::cast<std::string>(nb::repr(nb::list(kw.keys())[0])))
                             .c_str());
  validate(setup.options);
  return setup;
}

nb::object select_entry(nb::handle evaluate, nb::handle layout_arg, nb::handle ratio, nb::kwargs kwargs) {
  nb::dict kw;
  for (auto [k, v] : kwargs) kw[k] = v;
  nb::object batch_arg = pop(kw, "evaluate_batch");
  SearchSetup setup = parse_setup(ratio, kw, inputs_of(evaluate));

  if (nb::isinstance<PyTransformerEvaluator>(evaluate)) {
    auto& te = nb::cast<PyTransformerEvaluator&>(evaluate);
    if (!layout_arg.is_none() && !(layout_from(layout_arg) == te.layout()))
      throw invalid_argument("layout " + to_string(layout_from(layout_arg)) +
                                 " differs from the model's " + to_string(te.layout()),
                             "layout");
    if (!batch_arg.is_none() && batch_arg.is_valid())
      throw nb::type_error("evaluate_batch: not used with a bosch.TransformerEvaluator");
    adopt_layout(setup.options, te.layout());
    return te.select(setup);
  }

  PyFunction one, batch;
  PyCapabilities caps;
  std::optional<HeadLayout> layout;
  if (!layout_arg.is_none()) layout = layout_from(layout_arg);
  if (!evaluate.is_none() && nb::hasattr(evaluate, "evaluate")) {
    one.fn = evaluate.attr("evaluate");
    caps = capabilities_of(evaluate);
    if (nb::hasattr(evaluate, "evaluate_batch")) batch.fn = evaluate.attr("evaluate_batch");
    if (!layout) layout = layout_of(evaluate);
  } else if (!evaluate.is_none()) {
    if (!PyCallable_Check(evaluate.ptr()))
      throw nb::type_error(("evaluate: expected a callable evaluate(mask) -> float or an object with an "
                            "evaluate method, got " +
                            std::string(nb::type_name(evaluate.type()).c_str()))
                               .c_str());
    one.fn = nb::borrow(evaluate);
    caps = capabilities_of(evaluate);
    if (!layout) layout = layout_of(evaluate);
  }
  if (batch_arg.is_valid() && !batch_arg.is_none()) {
    if (!PyCallable_Check(batch_arg.ptr())) throw nb::type_error("evaluate_batch: expected a callable");
    batch.fn = batch_arg;
  }
  if (!one && !batch) throw nb::type_error("select(): give evaluate or evaluate_batch");
  if (!layout)
    throw invalid_argument("the evaluator has no layout: pass layout (e.g. '30x9x3' or (30, 9, 3))", "layout");
  if (one) one.takes_hint = accepts_hint(one.fn);
  if (batch) batch.takes_hint = accepts_hint(batch.fn);
  adopt_layout(setup.options, *layout);
  SearchState state;
  auto run = [&]<bool B, bool S>() {
    PyEvaluator<B, S> e(*layout, std::move(one), std::move(batch), std::move(caps), state);
    return run_select(e, setup, state, false);
  };
  if (caps.sampled()) return batch ? run.template operator()<true, true>() : run.template operator()<false, true>();
  return batch ? run.template operator()<true, false>() : run.template operator()<false, false>();
}

/// A C++ evaluator for bench/python_overhead.py: -(sum of the weights of the
/// SWA heads), summed in flat order (as bench/search_overhead.cpp's).
struct WeightedEvaluator {
  HeadLayout lay;
  std::vector<double> w;
  HeadLayout layout() const { return lay; }
  double evaluate(const HeadMask& m) const {
    double s = 0.0;
    for (std::size_t i = 0; i < m.size(); ++i)
      if (m[i]) s -= w[i];
    return s;
  }
};

/// bosch._bosch._select_weighted(weights, ratio, **options): bosch::select on
/// WeightedEvaluator, in C++ alone (no callback, no Python between
/// evaluations, the GIL released): the baseline of bench/python_overhead.py.
nb::object select_weighted(nb::handle weights, nb::handle ratio, nb::kwargs kwargs) {
  nb::dict kw;
  for (auto [k, v] : kwargs) kw[k] = v;
  SearchSetup setup = parse_setup(ratio, kw);
  if (setup.checkpoint || nb::len(setup.callbacks) > 0)
    throw nb::type_error("_select_weighted takes no callbacks or checkpoint");
  nb::object arr = numpy().attr("ascontiguousarray")(weights, "dtype"_a = "float64");
  const auto view = nb::cast<nb::ndarray<const double, nb::ndim<2>, nb::c_contig>>(arr);
  const int L = static_cast<int>(view.shape(0)), H = static_cast<int>(view.shape(1));
  WeightedEvaluator e{HeadLayout{L, H, H}, std::vector<double>(view.data(), view.data() + view.size())};
  check_layout(e.lay, "weights");
  Result r;
  {
    nb::gil_scoped_release release;
    r = bosch::select(e, setup.options);
  }
  return nb::cast(PyResult{std::move(r), setup.options, std::nullopt});
}

}  // namespace

// ---- bindings ------------------------------------------------------------------------------------

namespace {

nb::dict stage_counts(const std::array<std::size_t, stage_count>& n) {
  nb::dict d;
  for (Stage s : enum_values<Stage>::values) d[to_string(s)] = n[static_cast<std::size_t>(s)];
  return d;
}

std::string fmt(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

}  // namespace

void bind_search(nb::module_& m) {
  nb::class_<Anchors>(m, "Anchors", "The scores of the all-full and all-SWA masks (NaN until evaluated).")
      .def_ro("full", &Anchors::full, "score of the all-full mask")
      .def_ro("swa", &Anchors::swa, "score of the all-SWA mask")
      .def("__repr__", [](const Anchors& a) { return "Anchors(full=" + fmt(a.full) + ", swa=" + fmt(a.swa) + ")"; });

  nb::class_<EvaluationRecord>(m, "EvaluationRecord", "One evaluation of the black box, as logged.")
      .def_ro("index", &EvaluationRecord::index, "0-based position in the log")
      .def_prop_ro("mask", [](const EvaluationRecord& r) { return mask_to_numpy(r.mask); },
                   nb::sig("def mask(self, /) -> numpy.typing.NDArray[numpy.bool_]"),
                   "the mask evaluated: bool array (layers, kv_heads), True = SWA")
      .def_ro("score", &EvaluationRecord::score, "the evaluator's score (higher is better)")
      .def_prop_ro("stage", [](const EvaluationRecord& r) { return std::string(to_string(r.stage)); },
                   "the stage that asked for it: anchors, probes, groups, layers or repair")
      .def_ro("seconds", &EvaluationRecord::seconds,
              "wall-clock seconds of the evaluator call (a batch's time split evenly)")
      .def_ro("forwards", &EvaluationRecord::forwards,
              "the evaluator's work for it in full-model sample forwards (NaN when the evaluator has no cost())")
      .def_ro("eliminated", &EvaluationRecord::eliminated,
              "True when the race (Options.race) stopped it after `samples` samples; score is then an estimate")
      .def_ro("samples", &EvaluationRecord::samples,
              "samples scored for it when racing is on (all for a full evaluation); 0 otherwise")
      .def_ro("score_sd", &EvaluationRecord::score_sd,
              "the standard error of score as an estimate of the full score (0 for a full evaluation)")
      .def("__repr__", [](const EvaluationRecord& r) {
        return "EvaluationRecord(index=" + std::to_string(r.index) + ", stage='" + to_string(r.stage) +
               "', score=" + fmt(r.score) + ", swa_heads=" + std::to_string(r.mask.count()) + ")";
      });

  nb::class_<PyView>(m, "SearchView", "A snapshot of the search, passed to every callback hook.")
      .def_prop_ro("layout", [](const PyView& v) { return v.view.layout; })
      .def_prop_ro("target_count", [](const PyView& v) { return v.view.target_count; },
                   "SWA heads of the final mask")
      .def_prop_ro("stage", [](const PyView& v) { return std::string(to_string(v.view.stage)); })
      .def_prop_ro("evaluations", [](const PyView& v) { return v.view.evaluations; },
                   "evaluations so far (replayed ones included)")
      .def_prop_ro("replayed", [](const PyView& v) { return v.view.replayed; },
                   "evaluations replayed from the checkpoint")
      .def_prop_ro("cache_hits", [](const PyView& v) { return v.view.cache_hits; })
      .def_prop_ro("planned_evaluations", [](const PyView& v) { return v.view.planned_evaluations; },
                   "the search's estimate of its total")
      .def_prop_ro("best_score", [](const PyView& v) { return v.view.best_score; },
                   "best score among masks with the target count (NaN before any)")
      .def_prop_ro(
          "best_mask",
          [](const PyView& v) -> nb::object {
            return v.best_mask ? mask_to_numpy(*v.best_mask) : nb::none();
          },
          nb::sig("def best_mask(self, /) -> numpy.typing.NDArray[numpy.bool_] | None"))
      .def_prop_ro("anchors", [](const PyView& v) { return v.view.anchors; })
      .def_prop_ro("elapsed_seconds", [](const PyView& v) { return v.view.elapsed_seconds; });

  nb::class_<PyResult>(m, "Result", "What bosch.select returns.")
      .def_prop_ro("mask", [](const PyResult& r) { return mask_to_numpy(r.result.mask); },
                   nb::sig("def mask(self, /) -> numpy.typing.NDArray[numpy.bool_]"),
                   "the selected mask, bool array (layers, kv_heads), True = SWA; exactly "
                   "target_count SWA heads")
      .def_prop_ro("layout", [](const PyResult& r) { return r.result.mask.layout(); })
      .def_prop_ro("score", [](const PyResult& r) { return r.result.score; },
                   "the evaluator's score of mask (NaN only when stopped before any evaluation "
                   "with the target count)")
      .def_prop_ro("normalized_score", [](const PyResult& r) { return r.result.normalized_score; },
                   "(score - anchors.swa) / |anchors.full - anchors.swa|")
      .def_prop_ro("evaluations", [](const PyResult& r) { return r.result.evaluations; },
                   "distinct masks scored (= len(log), replayed ones included)")
      .def_prop_ro("evaluator_calls", [](const PyResult& r) { return r.result.evaluator_calls; },
                   "masks the evaluator scored in this call (evaluations - replayed)")
      .def_prop_ro("replayed", [](const PyResult& r) { return r.result.replayed; },
                   "evaluations taken from the checkpoint")
      .def_prop_ro("cache_hits", [](const PyResult& r) { return r.result.cache_hits; },
                   "requests answered by the memo")
      .def_prop_ro("eliminated", [](const PyResult& r) { return r.result.eliminated; },
                   "masks scored on only part of the samples (raced out, or screened Stage-1 probes; "
                   "not in evaluations)")
      .def_prop_ro("forwards", [](const PyResult& r) { return r.result.forwards; },
                   "the search's cost in full-model sample forwards (NaN when the evaluator does not count it)")
      .def_prop_ro("stage_evaluations", [](const PyResult& r) { return stage_counts(r.result.stage_evaluations); },
                   nb::sig("def stage_evaluations(self, /) -> dict[str, int]"), "evaluations per stage")
      .def_prop_ro("anchors", [](const PyResult& r) { return r.result.anchors; })
      .def_prop_ro("layer_scores", [](const PyResult& r) { return doubles_to_numpy(r.result.layer_scores); },
                   nb::sig("def layer_scores(self, /) -> numpy.typing.NDArray[numpy.float64]"),
                   "Stage 1 best probe score per layer (NaN for layers not probed)")
      .def_prop_ro("layer_drops", [](const PyResult& r) { return doubles_to_numpy(r.result.layer_drops); },
                   nb::sig("def layer_drops(self, /) -> numpy.typing.NDArray[numpy.float64]"),
                   "Stage 1 drop per layer (NaN for layers not probed)")
      .def_prop_ro("layer_weights", [](const PyResult& r) { return doubles_to_numpy(r.result.layer_weights); },
                   nb::sig("def layer_weights(self, /) -> numpy.typing.NDArray[numpy.float64]"),
                   "Stage 2 weight per layer in [0, 1] (0 = easiest); empty when Stage 2 did not run")
      .def_prop_ro("planned_counts", [](const PyResult& r) { return ints_to_numpy(r.result.planned_counts); },
                   nb::sig("def planned_counts(self, /) -> numpy.typing.NDArray[numpy.int64]"),
                   "per-layer SWA counts the variant planned; empty when it stopped first")
      .def_prop_ro("layer_counts", [](const PyResult& r) { return ints_to_numpy(r.result.layer_counts); },
                   nb::sig("def layer_counts(self, /) -> numpy.typing.NDArray[numpy.int64]"),
                   "SWA heads of mask per layer")
      .def_prop_ro("layer_ratios", [](const PyResult& r) { return doubles_to_numpy(r.result.layer_ratios); },
                   nb::sig("def layer_ratios(self, /) -> numpy.typing.NDArray[numpy.float64]"),
                   "layer_counts / kv_heads")
      .def_prop_ro("log", [](const PyResult& r) { return r.result.log; },
                   "every evaluation in order (list of EvaluationRecord)")
      .def(
          "log_arrays",
          [](const PyResult& r) {
            const auto& log = r.result.log;
            std::vector<HeadMask> masks;
            std::vector<double> scores, seconds;
            nb::list stages;
            for (const auto& e : log) {
              masks.push_back(e.mask);
              scores.push_back(e.score);
              seconds.push_back(e.seconds);
              stages.append(nb::str(to_string(e.stage)));
            }
            nb::dict d;
            d["masks"] = masks_to_numpy(masks, r.result.mask.layout());
            d["scores"] = doubles_to_numpy(scores);
            d["stages"] = stages;
            d["seconds"] = doubles_to_numpy(seconds);
            return d;
          },
          nb::sig("def log_arrays(self) -> dict[str, typing.Any]"),
          "The log as arrays: masks (n, layers, kv_heads) bool, scores (n,) float64, stages (list "
          "of n names), seconds (n,) float64.")
      .def_prop_ro("variant", [](const PyResult& r) { return std::string(to_string(r.result.variant)); })
      .def_prop_ro("seed", [](const PyResult& r) { return r.result.seed; })
      .def_prop_ro("target_ratio", [](const PyResult& r) { return r.result.target_ratio; })
      .def_prop_ro("target_count", [](const PyResult& r) { return r.result.target_count; },
                   "round(target_ratio * layers * kv_heads)")
      .def_prop_ro("stopped", [](const PyResult& r) { return r.result.stopped; },
                   "a callback (or Ctrl-C) stopped the search; mask is the best exact-count mask so far")
      .def_prop_ro("budget_exhausted", [](const PyResult& r) { return r.result.budget_exhausted; },
                   "max_evaluations cut the search short")
      .def_prop_ro("seconds", [](const PyResult& r) { return r.result.seconds; },
                   "wall-clock seconds of the search")
      .def_prop_ro("options", [](const PyResult& r) { return r.options; }, "the options it ran with")
      .def(
          "metadata", [](const PyResult& r) { return json_to_python(search_metadata(r.options, r.result)); },
          nb::sig("def metadata(self) -> dict[str, typing.Any]"),
          "The search fields of a mask file's metadata, as the C++ side writes them: layout, "
          "target_ratio, ratio, swa_heads, kv_heads, score, normalized_score, anchor_full, "
          "anchor_swa, evaluations, seed, variant, search_options, search_seconds, stopped, "
          "bosch_version.")
      .def("__repr__", [](const PyResult& r) {
        const Result& x = r.result;
        return "Result(score=" + fmt(x.score) + ", normalized_score=" + fmt(x.normalized_score) +
               ", swa_heads=" + std::to_string(x.mask.count()) + "/" + std::to_string(x.mask.size()) +
               ", evaluations=" + std::to_string(x.evaluations) + (x.stopped ? ", stopped=True" : "") +
               (x.budget_exhausted ? ", budget_exhausted=True" : "") + ")";
      });

  nb::class_<EarlyStop>(m, "EarlyStop",
                        "A callback that stops the search when any enabled criterion is met (each "
                        "is off by default); runs without the GIL.")
      .def(
          "__init__",
          [](EarlyStop* self, std::size_t patience, double target_score, double max_seconds,
             std::size_t max_evaluations) {
            new (self) EarlyStop{patience, target_score, max_seconds, max_evaluations};
          },
          nb::kw_only(), "patience"_a = 0, "target_score"_a = std::numeric_limits<double>::infinity(),
          "max_seconds"_a = 0.0, "max_evaluations"_a = 0)
      .def_rw("patience", &EarlyStop::patience,
              "stop after this many evaluations without a new best exact-count score (0 = off)")
      .def_rw("target_score", &EarlyStop::target_score, "stop once the best score reaches this")
      .def_rw("max_seconds", &EarlyStop::max_seconds, "stop after this much wall-clock time (0 = off)")
      .def_rw("max_evaluations", &EarlyStop::max_evaluations,
              "stop once this many evaluations are logged (0 = off; unlike the option "
              "max_evaluations no evaluation is kept for the final mask)");

  nb::class_<PyProgress>(m, "ProgressReporter",
                         "A callback printing one progress line per `every` evaluations and one per "
                         "stage (stage, evaluations, best score, ETA) to `file` (default sys.stderr).")
      .def(nb::init<std::size_t, nb::object>(), "every"_a = 1, "file"_a.none() = nb::none(),
           nb::sig("def __init__(self, every: int = 1, file: typing.TextIO | None = None) -> None"));

  static const std::string select_sig =
      "def select(evaluate: collections.abc.Callable[..., float] | object | None, "
      "layout: HeadLayout | str | tuple[int, ...] | None = None, ratio: float | None = None, *, "
      "evaluate_batch: collections.abc.Callable[..., numpy.typing.ArrayLike] | None = None, "
      "options: Options | None = None, callbacks: collections.abc.Sequence[object] = (), "
      "checkpoint: str | os.PathLike[str] | None = None, checkpoint_every: int = 1, "
      "resume: bool = False, fresh: bool = False, log: str | os.PathLike[str] | None = None, " +
      options_signature() + ") -> Result";
  static const std::string select_doc =
      "Selects which KV heads become sliding-window (SWA) heads with BOSCH (the C++ search).\n\n"
      "evaluate: evaluate(mask) -> float, higher is better; mask is a NumPy bool array\n"
      "    (layers, kv_heads), True = SWA. Or an object with an evaluate method (and optionally\n"
      "    evaluate_batch and layout), or a bosch.TransformerEvaluator (then the search calls\n"
      "    the C++ evaluator directly). When the function takes a keyword `hint`, it gets the\n"
      "    lowest layer in which the mask differs from a mask evaluated before (0 when none):\n"
      "    activations of the layers below can be reused. The score must not depend on it.\n"
      "layout: bosch.HeadLayout, 'LxHqxHkv' or (layers, query_heads, kv_heads); default\n"
      "    the evaluator object's layout.\n"
      "ratio: the fraction of KV heads made SWA (the option target_ratio).\n"
      "evaluate_batch: evaluate_batch(masks) -> scores, masks (batch, layers, kv_heads);\n"
      "    used for up to batch_size masks at a time. Does not change the result.\n"
      "options: a bosch.Options; the keywords below override its fields.\n"
      "callbacks: objects with any of the hooks begin_search(view), end_search(view, result),\n"
      "    begin_stage(view, stage), end_stage(view, stage), on_evaluation(view, record),\n"
      "    on_improvement(view, record); returning True stops the search. bosch.EarlyStop and\n"
      "    bosch.ProgressReporter are built in.\n"
      "checkpoint: a checkpoint file, written every checkpoint_every evaluations (0 = only\n"
      "    at the end), at the end, and when an exception stops the search (with every\n"
      "    evaluation that finished). resume=True replays it (same layout, seed and options)\n"
      "    and continues to the same result as an uninterrupted run. A checkpoint already at\n"
      "    the path is an error unless resume=True or fresh=True (which discards it). With a\n"
      "    bosch.TransformerEvaluator the run's identity (model, tasks, windows) is kept beside\n"
      "    it (PATH.run.json) and a resume with other settings is refused, as `bosch select`.\n"
      "log: a JSON-lines evaluation log (one object per evaluation: index, stage, score, swa,\n"
      "    seconds, mask), as `bosch select --log` writes it.\n\n"
      "Exceptions raised by evaluate or a callback propagate with their traceback. Ctrl-C\n"
      "stops the search after the current evaluation, writes the checkpoint and raises\n"
      "KeyboardInterrupt (its bosch_result attribute holds the result so far). The GIL is\n"
      "released while the C++ search runs.\n\n"
      "Option keywords (bosch.Options fields):\n" +
      options_docstring();
  m.def("_select_weighted", &select_weighted, "weights"_a, "ratio"_a.none() = nb::none(), "kwargs"_a,
        "bosch::select in C++ alone on -(sum of the weights (layers, kv_heads) of the SWA heads): the "
        "baseline of bench/python_overhead.py.");
  m.def("select", &select_entry, "evaluate"_a.none(), "layout"_a.none() = nb::none(),
        "ratio"_a.none() = nb::none(), "kwargs"_a, nb::sig(select_sig.c_str()), select_doc.c_str());
}

}  // namespace bosch::python
