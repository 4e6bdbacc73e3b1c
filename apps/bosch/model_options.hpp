// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/model_options.hpp
/// The model and where it runs, for commands that run forward passes outside
/// a ModelRun (evaluate, generate, logits, inspect): reading the model's
/// configuration, loading it and making the backend the run settings
/// (--model, --device, --gpu, --threads: run_options.hpp) name.

#include "errors.hpp"
#include "output_options.hpp"

#include <bosch/cpu/backend.hpp>
#include <bosch/model/model.hpp>
#include <bosch/run/model_run.hpp>
#include <bosch/run/open_model.hpp>
#include <bosch/run/settings.hpp>
#ifdef BOSCH_HAVE_CUDA
#include <bosch/cuda/backend.hpp>
#endif

#include <string>

namespace bosch::cli {

/// The configuration of the model `path` (fast: no weights are read), for
/// checks against the model's limits before it is loaded. A model the library
/// cannot use is a runtime failure (exit 1).
model::Config read_model_config(const std::string& path);

/// open_model(s) (bosch/run/open_model.hpp) with its lines on out.info(). A
/// model the library cannot use is a runtime failure (exit 1).
model::Model load_model(const RunSettings& s, const OutputOptions& out);

/// The ModelRun of `s` (bosch/run/model_run.hpp), its lines on out.info(); a
/// model the library cannot use is a runtime failure (exit 1).
ModelRun make_model_run(const RunSettings& s, const OutputOptions& out);

/// Constructs a backend B(model, options); a model it cannot run
/// (bosch::invalid_argument) becomes a runtime_failure (exit 1), not a usage
/// error.
template <class B, class O>
B make_backend(const model::Model& model, const O& options) {
  try {
    return B(model, options);
  } catch (const bosch::invalid_argument& e) {
    throw runtime_failure(e.what());
  }
}

/// The CPU backend of `model` with the threads of `s` (capped at the hardware's).
cpu::Backend make_cpu_backend(const model::Model& model, const RunSettings& s);

/// Calls f(backend) with a const cpu::Backend or (CUDA builds) cuda::Backend
/// for `model`, as s.device says, and returns its result.
template <class F>
decltype(auto) with_backend(const model::Model& model, const RunSettings& s, F&& f) {
#ifdef BOSCH_HAVE_CUDA
  if (s.device == Device::cuda) {
    cuda::Options co;
    co.device = s.gpu;
    const auto backend = make_backend<cuda::Backend>(model, co);
    return f(backend);
  }
#endif
  check_device(s);
  const auto backend = make_cpu_backend(model, s);
  return f(backend);
}

}  // namespace bosch::cli
