// SPDX-License-Identifier: Apache-2.0
// bosch.TransformerEvaluator (see transformer.hpp).

#include "transformer.hpp"

#include <bosch/cpu/backend.hpp>
#include <bosch/eval/compare.hpp>
#include <bosch/io/search_metadata.hpp>
#include <bosch/model/loader.hpp>
#include <bosch/tasks/generate.hpp>
#ifdef BOSCH_HAVE_CUDA
#include <bosch/cuda/backend.hpp>
#endif

#include <mutex>
#include <optional>

using namespace nb::literals;

namespace bosch::python {

struct PyTransformerEvaluator::Impl {
  virtual ~Impl() = default;
  virtual double evaluate(const HeadMask& mask) = 0;
  virtual std::vector<double> evaluate_batch(std::span<const HeadMask> masks) = 0;
  virtual nb::object select(SearchSetup& setup) = 0;
  virtual HeldOutReport held_out(const model::Model& model, const tasks::TaskSet& tasks, const HeadMask& mask,
                                 const ReportOptions& options) = 0;  // caller holds mutex
  virtual TransformerEvaluatorStats stats() const = 0;
  virtual std::size_t samples() const = 0;
  std::mutex mutex;  // one search or evaluation at a time (the residual cache is not thread-safe)
  std::optional<tasks::TaskSet> held_out_tasks;  // generated on first use
};

namespace {

template <class B>
struct BackendImpl final : PyTransformerEvaluator::Impl {
  template <class BO>
  BackendImpl(const model::Model& model, const BO& backend_options, tasks::TaskSet calibration,
              const TransformerEvaluatorOptions& options)
      : backend(model, backend_options), evaluator(backend, std::move(calibration), options) {}

  double evaluate(const HeadMask& mask) override {
    std::lock_guard lock(mutex);
    return evaluator.evaluate(mask);
  }
  std::vector<double> evaluate_batch(std::span<const HeadMask> masks) override {
    std::lock_guard lock(mutex);
    return evaluator.evaluate_batch(masks);
  }
  nb::object select(SearchSetup& setup) override {
    std::unique_lock lock(mutex, std::try_to_lock);
    if (!lock.owns_lock())
      throw invalid_argument("this TransformerEvaluator is already in use by another thread", "select");
    SearchState state;
    return run_select(evaluator, setup, state, true);
  }
  HeldOutReport held_out(const model::Model& model, const tasks::TaskSet& tasks, const HeadMask& mask,
                         const ReportOptions& options) override {
    return evaluate_held_out(backend, model.tokenizer, tasks, evaluator.windows(mask), options);
  }
  TransformerEvaluatorStats stats() const override { return evaluator.stats(); }
  std::size_t samples() const override { return evaluator.tasks().samples.size(); }

  B backend;
  TransformerEvaluator<B> evaluator;
};

}  // namespace

bool has_cuda() {
#ifdef BOSCH_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

PyTransformerEvaluator::PyTransformerEvaluator(const std::string& model_path, const TaskSuiteOptions& suite,
                                               const TransformerEvaluatorOptions& options,
                                               const std::string& device, int threads, int gpu)
    : suite_(suite), options_(options), device_(device) {
  validate(suite_);
  if (options_.window < 1)
    throw invalid_argument("must be at least 1 token, got " + std::to_string(options_.window), "window");
  if (options_.sinks < 0)
    throw invalid_argument("must be at least 0, got " + std::to_string(options_.sinks), "sinks");
  if (threads < 0) throw invalid_argument("must be >= 0 (0 = all), got " + std::to_string(threads), "threads");
  if (gpu < 0) throw invalid_argument("must be >= 0, got " + std::to_string(gpu), "gpu");
  if (device != "cpu" && device != "cuda")
    throw invalid_argument("unknown device '" + device + "' (expected cpu or cuda)", "device");
  if (device == "cuda" && !has_cuda())
    throw invalid_argument(
        "this build of the bosch package has no CUDA backend (build it where nvcc is found, with "
        "BOSCH_WITH_CUDA=ON)",
        "device");
  model_ = model::load(model_path);
  tasks::TaskSet calibration = make_task_suite(suite_, model_.tokenizer, false).calibration;
  if (device == "cpu") {
    cpu::Options co;
    co.threads = threads;
    impl_ = std::make_unique<BackendImpl<cpu::Backend>>(model_, co, std::move(calibration), options_);
  } else {
#ifdef BOSCH_HAVE_CUDA
    cuda::Options co;
    co.device = gpu;
    impl_ = std::make_unique<BackendImpl<cuda::Backend>>(model_, co, std::move(calibration), options_);
#endif
  }
}

PyTransformerEvaluator::~PyTransformerEvaluator() = default;

HeadLayout PyTransformerEvaluator::layout() const { return model_.config.layout(); }

double PyTransformerEvaluator::evaluate(const HeadMask& mask, int) { return impl_->evaluate(mask); }

std::vector<double> PyTransformerEvaluator::evaluate_batch(std::span<const HeadMask> masks) {
  return impl_->evaluate_batch(masks);
}

nb::object PyTransformerEvaluator::select(SearchSetup& setup) { return impl_->select(setup); }

nlohmann::json PyTransformerEvaluator::held_out(const HeadMask& mask, const ReportOptions& options) {
  if (suite_.held_out_samples < 1)
    throw invalid_argument("must be at least 1 for a held-out report", "held_out_samples");
  std::lock_guard lock(impl_->mutex);
  if (!impl_->held_out_tasks)
    impl_->held_out_tasks = tasks::generate(suite_specs(suite_, tasks::Split::held_out), model_.tokenizer);
  return bosch::to_json(impl_->held_out(model_, *impl_->held_out_tasks, mask, options));
}

nlohmann::json PyTransformerEvaluator::metadata(const Options& options, const Result& result) const {
  nlohmann::json meta = mask_metadata(model_, options, result, options_, suite_);
  // As `bosch select` records its warm starts (no --init files or ranking
  // candidates here: Options::initial_masks are the caller's own masks).
  nlohmann::json warm{{"init_files", nlohmann::json::array()},
                      {"candidates", nlohmann::json::array()},
                      {"previous_ratio", nullptr},
                      {"initial_masks", options.initial_masks.size()}};
  warm.update(eval::warm_start_summary(result));
  meta["warm_start"] = std::move(warm);
  return meta;
}

std::size_t PyTransformerEvaluator::calibration_samples() const { return impl_->samples(); }
TransformerEvaluatorStats PyTransformerEvaluator::stats() const { return impl_->stats(); }

void bind_transformer(nb::module_& m) {
  nb::class_<PyTransformerEvaluator>(
      m, "TransformerEvaluator",
      "The bundled evaluator: a real model (GGUF file or Hugging Face directory) run with each\n"
      "mask's per-head sliding windows on generated long-context calibration tasks; the score is\n"
      "the mean teacher-forced log-probability of the answer tokens (higher is better), exactly\n"
      "as `bosch select` computes it. Pass it to bosch.select as the evaluator: the search then\n"
      "calls the C++ evaluator directly, and reuses cached residual streams across masks that\n"
      "share their lower layers. Task and window settings have the `bosch` program's defaults.\n"
      "One search or evaluation at a time per object.")
      .def(
          "__init__",
          [](PyTransformerEvaluator* self, nb::handle model_path, nb::handle task_list, int context, int window,
             int sinks, int samples, int held_out_samples, bool chat, std::uint64_t task_seed,
             nb::handle text_files, const std::string& device, int threads, int gpu, std::size_t cache_bytes) {
            TaskSuiteOptions s;
            std::string names;
            if (nb::isinstance<nb::str>(task_list)) {
              names = nb::cast<std::string>(task_list);
            } else {
              for (nb::handle t : nb::iter(task_list))
                names += (names.empty() ? "" : ",") + nb::cast<std::string>(nb::str(t));
            }
            s.kinds = parse_task_list(names);
            s.context_length = context;
            s.calibration_samples = samples;
            s.held_out_samples = held_out_samples;
            s.chat = chat;
            s.seed = task_seed;
            if (!text_files.is_none())
              for (nb::handle f : nb::iter(text_files)) s.text_files.emplace_back(path_from(f, "text_files"));
            TransformerEvaluatorOptions o;
            o.window = window;
            o.sinks = sinks;
            o.cache_bytes = cache_bytes;
            const std::string path = path_from(model_path, "model_path");
            nb::gil_scoped_release release;  // loading and task generation take a while
            new (self) PyTransformerEvaluator(path, s, o, device, threads, gpu);
          },
          "model_path"_a, nb::kw_only(), "tasks"_a = "niah_single_1,niah_single_2,niah_multikey_1,passkey",
          "context"_a = 512, "window"_a = 64, "sinks"_a = 0, "samples"_a = 2, "held_out_samples"_a = 16,
          "chat"_a = false, "task_seed"_a = 0, "text_files"_a.none() = nb::none(), "device"_a = "cpu",
          "threads"_a = 0, "gpu"_a = 0, "cache_bytes"_a = std::size_t{2} << 30,
          nb::sig("def __init__(self, model_path: str | os.PathLike[str], *, "
                  "tasks: str | collections.abc.Sequence[str] = "
                  "'niah_single_1,niah_single_2,niah_multikey_1,passkey', context: int = 512, "
                  "window: int = 64, sinks: int = 0, samples: int = 2, held_out_samples: int = 16, "
                  "chat: bool = False, task_seed: int = 0, "
                  "text_files: collections.abc.Sequence[str | os.PathLike[str]] | None = None, "
                  "device: typing.Literal['cpu', 'cuda'] = 'cpu', threads: int = 0, gpu: int = 0, "
                  "cache_bytes: int = 2147483648) -> None"),
          "tasks: task names (comma-separated or a list); context: tokens per sample; window,\n"
          "sinks: an SWA head sees the last `window` keys plus the first `sinks`; samples:\n"
          "calibration samples per task; held_out_samples: per task, for held_out(); chat: wrap\n"
          "prompts in the ChatML template; task_seed: the task generator's seed; text_files:\n"
          "natural-text haystacks (default $BOSCH_CACHE/text/*.txt); device: 'cpu' or 'cuda';\n"
          "threads: CPU threads (0 = all); gpu: CUDA device index; cache_bytes: bound of the\n"
          "residual-stream cache.")
      .def_prop_ro("layout", &PyTransformerEvaluator::layout, "the model's head layout")
      .def(
          "evaluate",
          [](PyTransformerEvaluator& self, nb::handle mask) {
            const HeadMask m = mask_from(mask, self.layout());
            nb::gil_scoped_release release;
            return self.evaluate(m, 0);
          },
          "mask"_a, nb::sig("def evaluate(self, mask: numpy.typing.ArrayLike) -> float"),
          "The calibration score of a mask (bool array (layers, kv_heads), True = SWA).")
      .def(
          "__call__",
          [](PyTransformerEvaluator& self, nb::handle mask) {
            const HeadMask m = mask_from(mask, self.layout());
            nb::gil_scoped_release release;
            return self.evaluate(m, 0);
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
          "{task, samples, mean_logprob, probability, accuracy, exact}, 'per_task': [...]}. "
          "accuracy=False skips greedy decoding; extra_tokens: greedy budget past the answer.")
      .def(
          "metadata",
          [](const PyTransformerEvaluator& self, const PyResult& r) {
            return json_to_python(self.metadata(r.options, r.result));
          },
          "result"_a, nb::sig("def metadata(self, result: Result) -> dict[str, typing.Any]"),
          "The metadata `bosch select` writes with a mask: model, model_file, model_fingerprint,\n"
          "architecture, window, sinks, the task suite and the search fields of result.metadata().")
      .def_prop_ro("window", [](const PyTransformerEvaluator& s) { return s.options().window; })
      .def_prop_ro("sinks", [](const PyTransformerEvaluator& s) { return s.options().sinks; })
      .def_prop_ro("device", [](const PyTransformerEvaluator& s) { return s.device(); })
      .def_prop_ro("model_name", [](const PyTransformerEvaluator& s) { return s.model().config.name; })
      .def_prop_ro("model_fingerprint", [](const PyTransformerEvaluator& s) { return s.model().fingerprint; })
      .def_prop_ro("calibration_samples", &PyTransformerEvaluator::calibration_samples,
                   "calibration samples in all (samples per task x tasks)")
      .def_prop_ro(
          "suite", [](const PyTransformerEvaluator& s) { return json_to_python(to_json(s.suite())); },
          nb::sig("def suite(self, /) -> dict[str, typing.Any]"),
          "tasks, context, samples, held_out_samples, chat, task_seed")
      .def_prop_ro(
          "stats",
          [](const PyTransformerEvaluator& s) {
            const auto st = s.stats();
            nb::dict d;
            d["evaluations"] = st.evaluations;
            d["layers_run"] = st.layers_run;
            d["layers_saved"] = st.layers_saved;
            return d;
          },
          nb::sig("def stats(self, /) -> dict[str, int]"),
          "masks scored, layer applications run and skipped thanks to the residual cache");
  m.attr("has_cuda") = has_cuda();
}

}  // namespace bosch::python
