// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file run/open_model.hpp
/// Opening a model and making its backend from RunSettings, said once for
/// every front end: ModelRun (the search, `bosch select` and `compare`, the
/// Python package) and the commands that run forward passes without a search
/// (`bosch evaluate`, `baseline`, `generate`, `logits`). The device check,
/// the thread cap and their messages live here, worded for the command line
/// and Python alike.
///
/// @code
/// bosch::RunSettings s;
/// s.model = "SmolLM2-135M-Instruct.Q4_1.gguf";
/// bosch::model::Model m = bosch::open_model(s);  // summary and thread cap to `info`
/// double nll = bosch::with_backend(m, s, [&](const auto& backend) {  // s.device's backend
///   return score(backend);
/// });
/// @endcode

#include <bosch/cpu/backend.hpp>
#include <bosch/error.hpp>
#include <bosch/model/model.hpp>
#include <bosch/run/settings.hpp>
#ifdef BOSCH_HAVE_CUDA
#include <bosch/cuda/backend.hpp>
#endif

#include <functional>
#include <string>

namespace bosch {

/// Receives the informational lines of a run ("model: ...\n"), each ending
/// in a newline. Empty: the lines are dropped.
using InfoSink = std::function<void(const std::string&)>;

/// The CPU threads a run uses for `requested` (0 = all stays 0): capped at
/// the hardware's thread count (more only oversubscribe: 80x slower at 10000).
int usable_threads(int requested);

/// "model: NAME (ARCH, LxHqxHkv heads, 135M parameters)\n".
std::string model_summary(const model::Model& m);

/// The CPU backend options of `s`: its threads (capped, usable_threads) and
/// fp32, the precision of held-out reports, rankings and the commands
/// without a search; a search's backend sets `precision = s.precision`.
cpu::Options cpu_options(const RunSettings& s);

/// Whether this build has the CUDA backend (nvcc was found, BOSCH_WITH_CUDA=ON).
bool have_cuda() noexcept;

/// Throws bosch::invalid_argument naming "device" when `s` asks for CUDA in a
/// build without the CUDA backend (saying how to get one).
void check_device(const RunSettings& s);

/// Loads the model of `s.model` and tells `info` model_summary() and, when
/// s.threads exceeds the hardware's threads, that it is capped. Throws
/// bosch::file_error / format_error for unreadable files and
/// bosch::invalid_argument for a model the library cannot run.
model::Model open_model(const RunSettings& s, const InfoSink& info = {});

/// B(model, options); a model the backend cannot run (its
/// bosch::invalid_argument) is rethrown as bosch::error: the settings were
/// valid, the model is not one this backend runs (exit 1 on the command
/// line, RuntimeError in Python).
template <class B, class O>
B make_backend(const model::Model& model, const O& options) {
  try {
    return B(model, options);
  } catch (const invalid_argument& e) {
    throw error(e.what());
  }
}

/// Calls f(backend) with a const cpu::Backend (cpu_options(s)) or, in a
/// build with CUDA and s.device cuda, a const cuda::Backend on GPU s.gpu,
/// and returns its result; check_device(s) first.
template <class F>
decltype(auto) with_backend(const model::Model& model, const RunSettings& s, F&& f) {
  check_device(s);
#ifdef BOSCH_HAVE_CUDA
  if (s.device == Device::cuda) {
    cuda::Options co;
    co.device = s.gpu;
    const auto backend = make_backend<cuda::Backend>(model, co);
    return f(backend);
  }
#endif
  const auto backend = make_backend<cpu::Backend>(model, cpu_options(s));
  return f(backend);
}

}  // namespace bosch
