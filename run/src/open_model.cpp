// SPDX-License-Identifier: Apache-2.0
// Opening a model and choosing its backend (see bosch/run/open_model.hpp).

#include <bosch/run/open_model.hpp>

#include <bosch/error.hpp>
#include <bosch/model/loader.hpp>

#include <cstdio>
#include <thread>

namespace bosch {

int usable_threads(int requested) {
  const unsigned hw = std::thread::hardware_concurrency();
  if (hw == 0 || requested <= static_cast<int>(hw)) return requested;
  return static_cast<int>(hw);
}

std::string model_summary(const model::Model& m) {
  const auto& c = m.config;
  char params[32];
  const double n = static_cast<double>(m.parameter_count());
  std::snprintf(params, sizeof params, n < 1e9 ? "%.3gM" : "%.3gB", n < 1e9 ? n / 1e6 : n / 1e9);
  return "model: " + (c.name.empty() ? m.source.filename().string() : c.name) + " (" + model::to_string(c.arch) +
         ", " + to_string(c.layout()) + " heads, " + params + " parameters)\n";
}

cpu::Options cpu_options(const RunSettings& s) {
  cpu::Options co;
  co.threads = usable_threads(s.threads);
  return co;
}

bool have_cuda() noexcept {
#ifdef BOSCH_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

void check_device(const RunSettings& s) {
  if (s.device == Device::cuda && !have_cuda())
    throw invalid_argument(
        "this build has no CUDA backend (build bosch where nvcc is found, with BOSCH_WITH_CUDA=ON)", "device");
}

model::Model open_model(const RunSettings& s, const InfoSink& info) {
  model::Model m = model::load(s.model);
  if (!info) return m;
  info(model_summary(m));
  const int threads = usable_threads(s.threads);
  if (threads < s.threads)
    info("bosch: warning: " + std::to_string(s.threads) + " threads asked for; using the " + std::to_string(threads) +
         " hardware threads this machine has\n");
  return m;
}

}  // namespace bosch
