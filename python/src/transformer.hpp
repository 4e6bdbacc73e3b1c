// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file python/src/transformer.hpp
/// bosch.TransformerEvaluator: the bundled C++ evaluator (a real model, its
/// per-head windows, the calibration tasks) as a Python object. Passed to
/// bosch.select, the search calls it directly (no Python between
/// evaluations; hints reach its residual cache); its evaluate/evaluate_batch
/// also work from Python, with the GIL released.

#include "search.hpp"

#include <bosch/eval/report.hpp>
#include <bosch/eval/suite.hpp>
#include <bosch/eval/transformer_evaluator.hpp>
#include <bosch/model/model.hpp>

#include <memory>
#include <span>
#include <string>
#include <vector>

namespace bosch::python {

class PyTransformerEvaluator {
 public:
  /// Loads the model (GGUF or Hugging Face directory), builds the backend on
  /// `device` ("cpu" or "cuda"), and generates the calibration tasks of
  /// `suite`. Errors: bosch.FileError / FormatError for the model,
  /// InvalidArgument naming the setting, DeviceError for CUDA.
  PyTransformerEvaluator(const std::string& model_path, const TaskSuiteOptions& suite,
                         const TransformerEvaluatorOptions& options, const std::string& device,
                         int threads, int gpu);
  ~PyTransformerEvaluator();

  HeadLayout layout() const;
  /// The calibration score of `mask` (no GIL needed).
  double evaluate(const HeadMask& mask, int hint_layer);
  std::vector<double> evaluate_batch(std::span<const HeadMask> masks);
  /// bosch.select with this evaluator (GIL held on entry).
  nb::object select(SearchSetup& setup);
  /// The held-out report of `mask` (as `bosch evaluate --json` prints it).
  nlohmann::json held_out(const HeadMask& mask, const ReportOptions& options);
  /// The metadata `bosch select` writes with a mask (model, windows, tasks, search).
  nlohmann::json metadata(const Options& options, const Result& result) const;

  const model::Model& model() const noexcept { return model_; }
  const TaskSuiteOptions& suite() const noexcept { return suite_; }
  const TransformerEvaluatorOptions& options() const noexcept { return options_; }
  const std::string& device() const noexcept { return device_; }
  std::size_t calibration_samples() const;
  TransformerEvaluatorStats stats() const;

  struct Impl;

 private:
  model::Model model_;
  TaskSuiteOptions suite_;
  TransformerEvaluatorOptions options_;
  std::string device_;
  std::unique_ptr<Impl> impl_;
};

/// True when this build has the CUDA backend.
bool has_cuda();

/// Binds bosch.TransformerEvaluator.
void bind_transformer(nb::module_& m);

}  // namespace bosch::python
