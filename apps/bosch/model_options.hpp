// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/model_options.hpp
/// The model and where it runs: --model, --device, --gpu, --threads; loading
/// the model and making the backend.

#include "errors.hpp"
#include "output_options.hpp"

#include <bosch/cpu/backend.hpp>
#include <bosch/model/model.hpp>
#ifdef BOSCH_HAVE_CUDA
#include <bosch/cuda/backend.hpp>
#endif

#include <string>

namespace bosch::cli {

/// The model and where to run it: --model/-m, --device cpu|cuda, --gpu N, --threads N.
struct ModelOptions {
  std::string model;        ///< GGUF file or Hugging Face directory
  std::string device = "cpu";
  int gpu = 0;              ///< CUDA device index
  int threads = 0;          ///< CPU threads, 0 = all

  /// With `with_device` false, only --model (commands that run no forward pass).
  po::options_description describe(bool with_device = true);
  /// Throws usage_error when --model is missing; bosch::invalid_argument for
  /// an unknown device or a negative thread count or GPU index; usage_error
  /// "this build has no CUDA support" for --device cuda without CUDA.
  void validate() const;
  bool cuda() const noexcept { return device == "cuda"; }
};

/// The configuration of the model of `o` (fast: no weights are read), for
/// checks against the model's limits before it is loaded. Errors as
/// load_model.
model::Config read_model_config(const ModelOptions& o);

/// Loads the model of `o` and prints model_summary() to out.info(). A model
/// the library cannot use is a runtime failure (exit 1).
model::Model load_model(const ModelOptions& o, const OutputOptions& out);

/// "model: NAME (ARCH, LxHqxHkv heads, 135M parameters)\n".
std::string model_summary(const model::Model& m);

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

/// The CPU backend of `model` with the threads of `o`.
/// `requested` threads capped at the hardware's thread count (0 = all stays 0).
int usable_threads(int requested);

cpu::Backend make_cpu_backend(const model::Model& model, const ModelOptions& o);

/// Calls f(backend) with a const cpu::Backend or (CUDA builds) cuda::Backend
/// for `model`, as o.device says, and returns its result.
template <class F>
decltype(auto) with_backend(const model::Model& model, const ModelOptions& o, F&& f) {
#ifdef BOSCH_HAVE_CUDA
  if (o.cuda()) {
    cuda::Options co;
    co.device = o.gpu;
    const auto backend = make_backend<cuda::Backend>(model, co);
    return f(backend);
  }
#endif
  if (o.cuda()) throw usage_error("this build has no CUDA support (use --device cpu)");
  const auto backend = make_cpu_backend(model, o);
  return f(backend);
}

}  // namespace bosch::cli
