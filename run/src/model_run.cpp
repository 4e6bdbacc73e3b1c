// SPDX-License-Identifier: Apache-2.0
// ModelRun: the bundled evaluator set up from RunSettings (see bosch/run/model_run.hpp).

#include <bosch/run/model_run.hpp>
#include <bosch/run/open_model.hpp>

#include <bosch/cpu/backend.hpp>
#include <bosch/model/loader.hpp>
#include <bosch/tasks/generate.hpp>
#ifdef BOSCH_HAVE_CUDA
#include <bosch/cuda/backend.hpp>
#endif

#include <cstdio>
#include <map>
#include <optional>
#include <utility>

namespace bosch {

/// What differs between the devices: the backend and its evaluator.
struct ModelRun::Impl {
  RunSettings settings;
  tasks::TaskSet calibration;
  std::optional<tasks::TaskSet> held_out;
  std::map<std::pair<eval::Method, std::uint64_t>, eval::HeadScores> rankings;

  virtual ~Impl() = default;
  virtual const model::Model& model() const = 0;
  virtual double evaluate(const HeadMask& mask, const EvaluationHint& hint) = 0;
  virtual std::vector<double> evaluate_batch(std::span<const HeadMask> masks, const EvaluationHint& hint) = 0;
  virtual std::size_t sample_count() const = 0;
  virtual void set_sample_range(std::size_t begin, std::size_t end) = 0;
  virtual std::vector<tasks::AnswerScore> sample_scores(const HeadMask& mask, const EvaluationHint& hint) = 0;
  virtual std::vector<std::size_t> race_order() const = 0;
  virtual std::vector<double> score_samples(const HeadMask& mask, const EvaluationHint& hint,
                                            std::span<const std::size_t> samples) = 0;
  virtual TransformerEvaluatorStats stats() const = 0;
  virtual HeldOutReport held_out_report(const HeadMask& mask, const ReportOptions& options,
                                        const tasks::TaskSet& tasks) = 0;
  virtual const cpu::Backend* cpu_backend() const { return nullptr; }
  virtual const cpu::Backend* cpu_report_backend() const { return nullptr; }
  /// What the calibration forwards compute in ("fp32", "bf16 (amx-bf16)", "bf16 (cuda)").
  virtual std::string precision() const = 0;
  virtual TransformerEvaluator<cpu::Backend>* cpu_evaluator() { return nullptr; }
};

namespace {

template <class B>
struct BackendImpl final : ModelRun::Impl {
  template <class BO>
  BackendImpl(RunSettings s, model::Model m, tasks::TaskSet calib, const BO& backend_options)
      : backend_holder(std::move(m), backend_options, std::move(calib), s.evaluator()) {
    settings = std::move(s);
  }
  // The model must outlive the backend, which keeps references into it:
  // the holder owns both, in that order.
  struct Holder {
    model::Model model;
    B backend;
    TransformerEvaluator<B> evaluator;
    template <class BO>
    Holder(model::Model m, const BO& bo, tasks::TaskSet calib, const TransformerEvaluatorOptions& eo)
        : model(std::move(m)), backend(model, bo), evaluator(backend, std::move(calib), eo) {}
  } backend_holder;

  const model::Model& model() const override { return backend_holder.model; }
  double evaluate(const HeadMask& mask, const EvaluationHint& hint) override {
    return backend_holder.evaluator.evaluate(mask, hint);
  }
  std::vector<double> evaluate_batch(std::span<const HeadMask> masks, const EvaluationHint& hint) override {
    return backend_holder.evaluator.evaluate_batch(masks, hint);
  }
  std::size_t sample_count() const override { return backend_holder.evaluator.sample_count(); }
  void set_sample_range(std::size_t begin, std::size_t end) override {
    backend_holder.evaluator.set_sample_range(begin, end);
  }
  std::vector<tasks::AnswerScore> sample_scores(const HeadMask& mask, const EvaluationHint& hint) override {
    return backend_holder.evaluator.sample_scores(mask, hint);
  }
  std::vector<std::size_t> race_order() const override { return backend_holder.evaluator.race_order(); }
  std::vector<double> score_samples(const HeadMask& mask, const EvaluationHint& hint,
                                    std::span<const std::size_t> samples) override {
    return backend_holder.evaluator.score_samples(mask, hint, samples);
  }
  TransformerEvaluatorStats stats() const override { return backend_holder.evaluator.stats(); }
  HeldOutReport held_out_report(const HeadMask& mask, const ReportOptions& options,
                                const tasks::TaskSet& tasks) override {
    const AttentionWindows windows = backend_holder.evaluator.windows(mask);
    if constexpr (std::is_same_v<B, cpu::Backend>)
      return evaluate_held_out(*cpu_report_backend(), backend_holder.model.tokenizer, tasks, windows, options);
    else
      return evaluate_held_out(backend_holder.backend, backend_holder.model.tokenizer, tasks, windows, options);
  }
  const cpu::Backend* cpu_backend() const override {
    if constexpr (std::is_same_v<B, cpu::Backend>) return &backend_holder.backend;
    return nullptr;
  }
  /// Held-out reports run in fp32 whatever the search's precision: a second
  /// backend on the same weights when the search's is not fp32.
  const cpu::Backend* cpu_report_backend() const override {
    if constexpr (std::is_same_v<B, cpu::Backend>) {
      if (backend_holder.backend.precision().precision == cpu::Precision::fp32) return &backend_holder.backend;
      if (!report_backend) report_backend.emplace(backend_holder.model, cpu_options(settings));
      return &*report_backend;
    }
    return nullptr;
  }
  std::string precision() const override {
    if constexpr (std::is_same_v<B, cpu::Backend>)
      return backend_holder.backend.precision().name();
    else
      return "bf16 (cuda)";
  }
  mutable std::optional<cpu::Backend> report_backend;
  TransformerEvaluator<cpu::Backend>* cpu_evaluator() override {
    if constexpr (std::is_same_v<B, cpu::Backend>) return &backend_holder.evaluator;
    return nullptr;
  }
};

void emit(const InfoSink& info, const std::string& line) {
  if (info) info(line);
}

}  // namespace

ModelRun::ModelRun(RunSettings settings, const InfoSink& info) {
  validate(settings);
  check_device(settings);
  validate_for_model(settings, model::read_config(settings.model));
  model::Model m = open_model(settings, info);
  const TaskSuiteOptions suite = settings.suite();
  tasks::TaskSet calibration = make_task_suite(suite, m.tokenizer, false).calibration;
  emit(info, "tasks: " + std::to_string(calibration.samples.size()) + " calibration samples (" +
                 task_list_string(suite.kinds) + ") of <= " + std::to_string(settings.longest_context()) +
                 " tokens\n");
  emit(info, file_task_summary(calibration));
  tasks::TaskSet calib_copy = calibration;
  if (settings.device == Device::cpu) {
    cpu::Options co = cpu_options(settings);
    co.precision = settings.precision;
    impl_ = std::make_unique<BackendImpl<cpu::Backend>>(settings, std::move(m), std::move(calib_copy), co);
  } else {
#ifdef BOSCH_HAVE_CUDA
    if (settings.precision == cpu::Precision::fp32)
      throw invalid_argument("the CUDA backend computes in bf16: use bf16 or automatic (held-out reports too)",
                             "precision");
    cuda::Options co;
    co.device = settings.gpu;
    impl_ = std::make_unique<BackendImpl<cuda::Backend>>(settings, std::move(m), std::move(calib_copy), co);
#endif
  }
  impl_->calibration = std::move(calibration);
  if (settings.precision != cpu::Precision::fp32) {
    const std::string reason =
        settings.device == Device::cpu ? cpu::choose_precision(settings.precision).reason : "the CUDA backend";
    emit(info, "precision: " + impl_->precision() + " for the search (" + reason + "); held-out reports in " +
                   (settings.device == Device::cpu ? "fp32" : "bf16") + "\n");
  }
}

ModelRun::~ModelRun() = default;
ModelRun::ModelRun(ModelRun&&) noexcept = default;
ModelRun& ModelRun::operator=(ModelRun&&) noexcept = default;

const RunSettings& ModelRun::settings() const noexcept { return impl_->settings; }
const model::Model& ModelRun::model() const noexcept { return impl_->model(); }
HeadLayout ModelRun::layout() const { return model().config.layout(); }
const tasks::TaskSet& ModelRun::calibration() const noexcept { return impl_->calibration; }

const tasks::TaskSet& ModelRun::held_out() {
  check_held_out(impl_->settings);
  if (!impl_->held_out)
    impl_->held_out = tasks::generate(suite_specs(impl_->settings.suite(), tasks::Split::held_out), model().tokenizer);
  return *impl_->held_out;
}

AttentionWindows ModelRun::windows(const HeadMask& mask) const {
  return AttentionWindows::from_mask(mask, impl_->settings.window, impl_->settings.sinks);
}

double ModelRun::evaluate(const HeadMask& mask) { return impl_->evaluate(mask, EvaluationHint{}); }
double ModelRun::evaluate(const HeadMask& mask, const EvaluationHint& hint) { return impl_->evaluate(mask, hint); }
std::vector<double> ModelRun::evaluate_batch(std::span<const HeadMask> masks) {
  return impl_->evaluate_batch(masks, EvaluationHint{});
}
std::vector<double> ModelRun::evaluate_batch(std::span<const HeadMask> masks, const EvaluationHint& hint) {
  return impl_->evaluate_batch(masks, hint);
}
std::size_t ModelRun::sample_count() const { return impl_->sample_count(); }
void ModelRun::set_sample_range(std::size_t begin, std::size_t end) { impl_->set_sample_range(begin, end); }
std::vector<tasks::AnswerScore> ModelRun::sample_scores(const HeadMask& mask, const EvaluationHint& hint) {
  return impl_->sample_scores(mask, hint);
}
static_assert(PerSampleEvaluator<ModelRun> && CostedEvaluator<ModelRun>,
              "a ModelRun races and counts its cost as TransformerEvaluator does");

std::vector<std::size_t> ModelRun::race_order() const { return impl_->race_order(); }
std::vector<double> ModelRun::score_samples(const HeadMask& mask, const EvaluationHint& hint,
                                            std::span<const std::size_t> samples) {
  return impl_->score_samples(mask, hint, samples);
}
double ModelRun::reduce(std::span<const double> per_sample) {
  return TransformerEvaluator<cpu::Backend>::reduce(per_sample);
}
TransformerEvaluatorStats ModelRun::stats() const { return impl_->stats(); }
double ModelRun::forwards() const {
  return static_cast<double>(stats().layer_applications()) / static_cast<double>(layout().num_layers);
}

HeldOutReport ModelRun::held_out_report(const HeadMask& mask, const ReportOptions& options,
                                        const tasks::TaskSet* tasks) {
  return impl_->held_out_report(mask, options, tasks ? *tasks : held_out());
}

const eval::HeadScores& ModelRun::ranking(eval::Method method, std::uint64_t seed, const InfoSink& info) {
  const auto key = std::make_pair(method, seed);
  if (auto it = impl_->rankings.find(key); it != impl_->rankings.end()) return it->second;
  emit(info, "warm-start candidate " + std::string(eval::to_string(method)) + ": computing\n");
  eval::HeadScores s;
  if (method == eval::Method::proxy) {
    s = eval::proxy_scores(*this, static_cast<double>(impl_->calibration.samples.size()));
  } else {
    eval::HeadScoreOptions o;
    o.window = impl_->settings.window;
    o.sinks = impl_->settings.sinks;
    o.seed = seed;
    if (const cpu::Backend* b = impl_->cpu_report_backend()) {
      s = eval::compute_head_scores(method, *b, impl_->calibration, o);
    } else {
      const cpu::Backend cpu(model(), cpu_options(impl_->settings));
      s = eval::compute_head_scores(method, cpu, impl_->calibration, o);
    }
  }
  char line[200];
  std::snprintf(line, sizeof line, "warm-start candidate %s: %zu evaluations, %g forwards, %g s\n",
                std::string(eval::to_string(method)).c_str(), s.evaluations, s.forwards, s.seconds);
  emit(info, line);
  return impl_->rankings.emplace(key, std::move(s)).first->second;
}

nlohmann::json ModelRun::identity() const {
  nlohmann::json j{{"format", "bosch.select_run"}, {"model_fingerprint", model().fingerprint}};
  j.update(to_json(impl_->settings, {FieldRole::identity}));
  // What ran, not what was asked: automatic resolves by CPU, and AMX sums in
  // its own order (docs/precision.md).
  j["precision"] = impl_->precision();
  return j;
}

std::string ModelRun::precision() const { return impl_->precision(); }

nlohmann::json ModelRun::metadata(const Options& options, const Result& result) const {
  nlohmann::json meta =
      mask_metadata(model(), options, result, impl_->settings.evaluator(), impl_->settings.suite());
  meta["precision"] = impl_->precision();
  if (impl_->settings.deploy_context > 0) meta["deploy_context"] = impl_->settings.deploy_context;
  // What ran: the CUDA backend has no shared prefix and runs every row.
  meta["shared_prefix"] = impl_->settings.shared_prefix && impl_->settings.device == Device::cpu;
  return meta;
}

const cpu::Backend* ModelRun::cpu_backend() const noexcept { return impl_->cpu_backend(); }
const cpu::Backend* ModelRun::cpu_report_backend() const { return impl_->cpu_report_backend(); }
TransformerEvaluator<cpu::Backend>* ModelRun::cpu_evaluator() noexcept { return impl_->cpu_evaluator(); }

}  // namespace bosch
