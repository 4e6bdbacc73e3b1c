// SPDX-License-Identifier: Apache-2.0
// bosch.TransformerEvaluator (see transformer.hpp).

#include "transformer.hpp"

#include "field_traits.hpp"
#include "processes.hpp"

#include <bosch/eval/compare.hpp>
#include <bosch/run/selection.hpp>

#include <filesystem>
#include <limits>
#include <type_traits>
#include <utility>

using namespace nb::literals;

namespace bosch::python {

bool has_cuda() {
#ifdef BOSCH_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

// ---- the settings keywords, generated from bosch::for_each_setting ----------------------------

namespace {

/// The settings of the keywords in `kw` (each popped), the rest at their defaults.
RunSettings settings_from(const std::string& model_path, nb::dict& kw) {
  RunSettings s;
  s.model = model_path;
  const bool context_given = kw.contains("context");
  for_each_setting([&](const auto& f) {
    using T = typename std::decay_t<decltype(f)>::value_type;
    if constexpr (!std::is_same_v<T, std::string>) {
      const nb::str key(std::string(f.name).c_str());
      if (!kw.contains(key)) return;
      nb::object v = kw[key];
      PyDict_DelItem(kw.ptr(), key.ptr());
      set_field(s, f, v);
    }
  });
  if (kw.size() > 0)
    throw nb::type_error(("TransformerEvaluator() got an unexpected keyword argument " +
                          nb::cast<std::string>(nb::repr(nb::list(kw.keys())[0])))
                             .c_str());
  apply_deploy_context(s, context_given);  // deploy_context without context: the recipe's lengths
  return s;
}

std::string settings_signature() {
  std::string sig = "def __init__(self, model_path: str | os.PathLike[str], *";
  const RunSettings defaults;
  for_each_setting([&](const auto& f) {
    using T = typename std::decay_t<decltype(f)>::value_type;
    if constexpr (!std::is_same_v<T, std::string>)
      sig += ", " + std::string(f.name) + ": " + field_traits<T>::py_type() + " = " + py_repr(defaults.*f.member);
  });
  return sig + ") -> None";
}

std::string settings_docstring() {
  std::string doc;
  const RunSettings defaults;
  for_each_setting([&](const auto& f) {
    using T = typename std::decay_t<decltype(f)>::value_type;
    if constexpr (!std::is_same_v<T, std::string>)
      doc += std::string(f.name) + ": " + std::string(f.help) + " (default " +
             py_repr(defaults.*f.member) + ").\n";
  });
  return doc;
}

}  // namespace

// ---- the evaluator ---------------------------------------------------------------------------

PyTransformerEvaluator::PyTransformerEvaluator(const RunSettings& settings) : run_(settings) {}

double PyTransformerEvaluator::evaluate(const HeadMask& mask) {
  std::lock_guard lock(mutex_);
  return run_.evaluate(mask);
}

std::vector<double> PyTransformerEvaluator::evaluate_batch(std::span<const HeadMask> masks) {
  std::lock_guard lock(mutex_);
  return run_.evaluate_batch(masks);
}

TransformerEvaluatorStats PyTransformerEvaluator::stats() const {
  std::lock_guard lock(mutex_);
  return run_.stats();
}

nb::object PyTransformerEvaluator::select(SearchSetup& setup) {
  std::unique_lock lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock())
    throw invalid_argument("this TransformerEvaluator is already in use by another thread", "select");
  // The files are the run function's (checkpoint with the run identity beside
  // it, log); the Python callbacks go through the hub.
  SelectionRequest request;
  request.options = setup.options;
  request.checkpoint = setup.checkpoint.value_or("");
  request.checkpoint_every = setup.checkpoint_every;
  request.resume = setup.resume;
  request.log = setup.log.value_or("");
  request.log_every = setup.checkpoint_every;
  SearchSetup hub_setup;
  hub_setup.callbacks = setup.callbacks;
  SearchState state;
  std::optional<PyResult> result;
  std::exception_ptr failure;
  Hub hub(state, hub_setup, true);
  {
    nb::gil_scoped_release release;
    try {
      CallbackList callbacks;
      callbacks.add(hub);
      const auto executor = process_executor({});  // several processes under mpirun
      Selection s = select_heads(run_, request, callbacks, executor.get());
      result = PyResult{std::move(s.result), std::move(s.options), std::move(s.metadata), {}};
      result->inputs.emplace_back("the evaluator's model_path", run_.settings().model);
      for (const auto& t : run_.settings().text_files) result->inputs.emplace_back("the evaluator's text_files", t);
    } catch (...) {
      failure = std::current_exception();
    }
  }
  // select_heads saved every finished evaluation before it rethrew.
  const bool saved = failure && setup.checkpoint && std::filesystem::exists(*setup.checkpoint);
  return finish_select(setup, state, hub, result, failure, saved);
}

nlohmann::json PyTransformerEvaluator::held_out(const HeadMask& mask, const ReportOptions& options) {
  std::lock_guard lock(mutex_);
  return bosch::to_json(run_.held_out_report(mask, options));
}

nlohmann::json PyTransformerEvaluator::samples(const std::string& split) {
  std::lock_guard lock(mutex_);
  if (split != "calibration" && split != "held_out")
    throw invalid_argument("must be 'calibration' or 'held_out', got '" + split + "'", "split");
  const tasks::TaskSet& set = split == "calibration" ? run_.calibration() : run_.held_out();
  nlohmann::json out = nlohmann::json::array();
  for (const auto& s : set.samples)
    out.push_back({{"task", s.task},
                   {"context_length", s.context_length},
                   {"prompt", s.prompt},
                   {"answer", s.answer},
                   {"answer_text", s.answer_text},
                   {"references", s.references}});
  return out;
}

nlohmann::json PyTransformerEvaluator::metadata(const PyResult& r) const {
  if (r.metadata) return *r.metadata;
  nlohmann::json meta = run_.metadata(r.options, r.result);
  nlohmann::json warm{{"init_files", nlohmann::json::array()},
                      {"candidates", nlohmann::json::array()},
                      {"previous_ratio", nullptr},
                      {"initial_masks", r.options.initial_masks.size()}};
  warm.update(eval::warm_start_summary(r.result));
  meta["warm_start"] = std::move(warm);
  return meta;
}

void bind_transformer(nb::module_& m) {
  static const std::string init_sig = settings_signature();
  static const std::string init_doc =
      "model_path: a GGUF file or Hugging Face model directory. The keywords are the run\n"
      "settings of `bosch select` (one table: docs/python.md), with the same defaults:\n" +
      settings_docstring();
  nb::class_<PyTransformerEvaluator>(
      m, "TransformerEvaluator",
      "The bundled evaluator: a real model (GGUF file or Hugging Face directory) run with each\n"
      "mask's per-head sliding windows on generated long-context calibration tasks; the score is\n"
      "the mean teacher-forced log-probability of the answer tokens (higher is better), exactly\n"
      "as `bosch select` computes it. Pass it to bosch.select as the evaluator: the search then\n"
      "runs the C++ run function of `bosch select` (same mask, log and metadata), and reuses\n"
      "cached residual streams across masks that share their lower layers. One search or\n"
      "evaluation at a time per object.")
      .def(
          "__init__",
          [](PyTransformerEvaluator* self, nb::handle model_path, nb::kwargs kwargs) {
            nb::dict kw;
            for (auto [k, v] : kwargs) kw[k] = v;
            const RunSettings s = settings_from(path_from(model_path, "model_path"), kw);
            nb::gil_scoped_release release;  // loading and task generation take a while
            new (self) PyTransformerEvaluator(s);
          },
          "model_path"_a, "kwargs"_a, nb::sig(init_sig.c_str()), init_doc.c_str())
      .def_prop_ro("layout", &PyTransformerEvaluator::layout, "the model's head layout")
      .def(
          "evaluate",
          [](PyTransformerEvaluator& self, nb::handle mask) {
            const HeadMask m = mask_from(mask, self.layout());
            nb::gil_scoped_release release;
            return self.evaluate(m);
          },
          "mask"_a, nb::sig("def evaluate(self, mask: numpy.typing.ArrayLike) -> float"),
          "The calibration score of a mask (bool array (layers, kv_heads), True = SWA).")
      .def(
          "__call__",
          [](PyTransformerEvaluator& self, nb::handle mask) {
            const HeadMask m = mask_from(mask, self.layout());
            nb::gil_scoped_release release;
            return self.evaluate(m);
          },
          "mask"_a, nb::sig("def __call__(self, mask: numpy.typing.ArrayLike) -> float"))
      .def(
          "evaluate_batch",
          [](PyTransformerEvaluator& self, nb::handle masks) {
            std::vector<HeadMask> ms;
            for (nb::handle x : nb::iter(masks)) ms.push_back(mask_from(x, self.layout()));
            std::vector<double> scores;
            {
              nb::gil_scoped_release release;
              scores = self.evaluate_batch(ms);
            }
            return doubles_to_numpy(scores);
          },
          "masks"_a,
          nb::sig("def evaluate_batch(self, masks: numpy.typing.ArrayLike) -> "
                  "numpy.typing.NDArray[numpy.float64]"),
          "The scores of masks (batch, layers, kv_heads).")
      .def(
          "held_out",
          [](PyTransformerEvaluator& self, nb::handle mask, bool accuracy, int extra_tokens) {
            if (extra_tokens < 0)
              throw invalid_argument("must be >= 0, got " + std::to_string(extra_tokens), "extra_tokens");
            const HeadMask m = mask_from(mask, self.layout());
            ReportOptions ro;
            ro.accuracy = accuracy;
            ro.extra_new_tokens = extra_tokens;
            nlohmann::json j;
            {
              nb::gil_scoped_release release;
              j = self.held_out(m, ro);
            }
            return json_to_python(j);
          },
          "mask"_a, nb::kw_only(), "accuracy"_a = true, "extra_tokens"_a = 4,
          nb::sig("def held_out(self, mask: numpy.typing.ArrayLike, *, accuracy: bool = True, "
                  "extra_tokens: int = 4) -> dict[str, typing.Any]"),
          "Scores a mask on the held-out split, as `bosch evaluate --json` reports it: {'all': "
          "{task, samples, mean_logprob, probability, accuracy, exact (and match with file tasks)}, "
          "'per_task': [...]}. "
          "accuracy=False skips greedy decoding; extra_tokens: greedy budget past the answer.")
      .def(
          "samples",
          [](PyTransformerEvaluator& self, const std::string& split) {
            nlohmann::json j;
            {
              nb::gil_scoped_release release;  // the held-out set is generated on first use
              j = self.samples(split);
            }
            return json_to_python(j);
          },
          "split"_a = "calibration",
          nb::sig("def samples(self, split: str = 'calibration') -> list[dict[str, typing.Any]]"),
          "The samples this evaluator scores, as token ids: split 'calibration' (what evaluate()\n"
          "scores) or 'held_out' (what held_out() scores); each a dict of task, context_length,\n"
          "prompt (token ids, BOS first where the tokenizer adds one), answer (the teacher-forced\n"
          "target ids), answer_text and references. Another runtime (bosch.hf) can score exactly\n"
          "these: the score is the mean over samples of the mean log-probability of the answer ids.")
      .def(
          "race_order", [](const PyTransformerEvaluator& self) { return self.run().race_order(); },
          "The order in which a race (Options.race) scores the calibration samples: the tasks\n"
          "interleaved, so that a race's first looks see every task (and every length).")
      .def(
          "metadata",
          [](const PyTransformerEvaluator& self, const PyResult& r) { return json_to_python(self.metadata(r)); },
          "result"_a, nb::sig("def metadata(self, result: Result) -> dict[str, typing.Any]"),
          "The metadata `bosch select` writes with a mask: model, model_file, model_fingerprint,\n"
          "architecture, the run settings, warm starts, cost and the search fields of\n"
          "result.metadata().")
      .def_prop_ro(
          "settings", [](const PyTransformerEvaluator& s) { return json_to_python(to_json(s.run().settings())); },
          nb::sig("def settings(self, /) -> dict[str, typing.Any]"),
          "every run setting (the keywords of the constructor; text files by name)")
      .def_prop_ro("window", [](const PyTransformerEvaluator& s) { return s.run().settings().window; })
      .def_prop_ro("sinks", [](const PyTransformerEvaluator& s) { return s.run().settings().sinks; })
      .def_prop_ro("device", [](const PyTransformerEvaluator& s) { return to_string(s.run().settings().device); })
      .def_prop_ro("model_name", [](const PyTransformerEvaluator& s) { return s.run().model().config.name; })
      .def_prop_ro("model_fingerprint", [](const PyTransformerEvaluator& s) { return s.run().model().fingerprint; })
      .def_prop_ro(
          "calibration_samples",
          [](const PyTransformerEvaluator& s) { return s.run().calibration().samples.size(); },
          "calibration samples in all (samples per task x tasks x context lengths)")
      .def_prop_ro(
          "suite", [](const PyTransformerEvaluator& s) { return json_to_python(to_json(s.run().settings().suite())); },
          nb::sig("def suite(self, /) -> dict[str, typing.Any]"),
          "tasks, context, samples, held_out_samples, chat, task_seed (and task_files, with their sha256, "
          "for file tasks)")
      .def_prop_ro(
          "stats",
          [](const PyTransformerEvaluator& s) {
            const auto st = s.stats();
            nb::dict d;
            d["evaluations"] = st.evaluations;
            d["layers_run"] = st.layers_run;
            d["layers_saved"] = st.layers_saved;
            d["prefix_layers"] = st.prefix_layers;
            d["forwards"] = static_cast<double>(st.layer_applications()) / s.layout().num_layers;
            d["row_layers"] = st.row_layers;
            d["forward_tokens"] = static_cast<double>(st.row_layers) / s.layout().num_layers;
            return d;
          },
          nb::sig("def stats(self, /) -> dict[str, int | float]"),
          "masks scored, layer applications run and skipped thanks to the residual cache, the\n"
          "shared-prefix passes in layer applications (prefix_layers: once per sample, on its first\n"
          "use), full-model sample forwards ((layers run + prefix layers) / layers), and the same in\n"
          "tokens (row_layers: token rows times layers run; forward_tokens: row_layers / layers)");
  m.attr("has_cuda") = has_cuda();
}

}  // namespace bosch::python
