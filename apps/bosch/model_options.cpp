// SPDX-License-Identifier: Apache-2.0
// The model and its backend (see model_options.hpp).

#include "model_options.hpp"

#include <thread>

#include <bosch/model/loader.hpp>

#include <cstdio>

namespace bosch::cli {

po::options_description ModelOptions::describe(bool with_device) {
  po::options_description d("Model");
  d.add_options()("model,m", po::value(&model)->value_name("PATH"),
                  "GGUF file or Hugging Face model directory (also the first positional argument)");
  if (with_device)
    d.add_options()("device", po::value(&device)->default_value(device)->value_name("cpu|cuda"),
                    "where forward passes run")(
        "gpu", po::value(&gpu)->default_value(gpu)->value_name("N"), "CUDA device index")(
        "threads", po::value(&threads)->default_value(threads)->value_name("N"),
        "CPU threads (0 = all cores)");
  return d;
}

void ModelOptions::validate() const {
  if (model.empty()) throw usage_error("no model given (--model PATH or a positional MODEL)");
  if (device != "cpu" && device != "cuda")
    throw invalid_argument("unknown device '" + device + "' (expected cpu or cuda)", "--device");
  if (threads < 0)
    throw invalid_argument("must be >= 0 (0 = all cores), got " + std::to_string(threads),
                           "--threads");
  if (gpu < 0) throw invalid_argument("must be >= 0, got " + std::to_string(gpu), "--gpu");
#ifndef BOSCH_HAVE_CUDA
  if (device == "cuda") throw usage_error("this build has no CUDA support (use --device cpu)");
#endif
}

model::Config read_model_config(const ModelOptions& o) {
  try {
    return model::read_config(o.model);
  } catch (const bosch::invalid_argument& e) {
    throw runtime_failure(e.what());  // a model the library cannot use is a runtime error
  }
}

model::Model load_model(const ModelOptions& o, const OutputOptions& out) {
  model::Model m;
  try {
    m = model::load(o.model);
  } catch (const bosch::invalid_argument& e) {
    throw runtime_failure(e.what());
  }
  out.info() << model_summary(m);
  const int cores = usable_threads(o.threads);
  if (cores < o.threads)
    out.info() << "bosch: warning: --threads " << o.threads << " exceeds the " << cores
               << " hardware threads; using " << cores << "\n";
  return m;
}

int usable_threads(int requested) {
  const unsigned hw = std::thread::hardware_concurrency();
  if (hw == 0 || requested <= static_cast<int>(hw)) return requested;
  return static_cast<int>(hw);  // more threads than cores only oversubscribe (80x slower at 10000)
}

std::string model_summary(const model::Model& m) {
  const auto& c = m.config;
  char params[32];
  const double n = static_cast<double>(m.parameter_count());
  std::snprintf(params, sizeof params, n < 1e9 ? "%.3gM" : "%.3gB", n < 1e9 ? n / 1e6 : n / 1e9);
  return "model: " + (c.name.empty() ? m.source.filename().string() : c.name) + " (" + model::to_string(c.arch) +
         ", " + to_string(c.layout()) + " heads, " + params + " parameters)\n";
}

cpu::Backend make_cpu_backend(const model::Model& model, const ModelOptions& o) {
  cpu::Options co;
  co.threads = usable_threads(o.threads);
  return make_backend<cpu::Backend>(model, co);
}

}  // namespace bosch::cli
