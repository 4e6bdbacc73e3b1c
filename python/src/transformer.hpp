// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file python/src/transformer.hpp
/// bosch.TransformerEvaluator: the bundled C++ evaluator (bosch::ModelRun: a
/// real model, its per-head windows, the calibration tasks) as a Python
/// object. Its keywords are the run settings' table (bosch::for_each_setting,
/// run/include/bosch/run/settings.hpp), with the library's defaults. Passed to
/// bosch.select, the search runs through bosch::select_heads, the run function
/// `bosch select` uses (no Python between evaluations; hints reach the
/// residual cache); evaluate/evaluate_batch also work from Python, with the
/// GIL released.

#include "search.hpp"

#include <bosch/run/model_run.hpp>
#include <bosch/run/settings.hpp>

#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace bosch::python {

class PyTransformerEvaluator {
 public:
  /// Builds the ModelRun of `settings`. Errors: bosch.FileError /
  /// FormatError for the model and text files, InvalidArgument naming the
  /// setting, DeviceError for CUDA.
  explicit PyTransformerEvaluator(const RunSettings& settings);

  HeadLayout layout() const { return run_.layout(); }
  /// The calibration score of `mask` (no GIL needed).
  double evaluate(const HeadMask& mask);
  std::vector<double> evaluate_batch(std::span<const HeadMask> masks);
  /// bosch.select with this evaluator (GIL held on entry).
  nb::object select(SearchSetup& setup);
  /// The held-out report of `mask` (as `bosch evaluate --json` prints it).
  nlohmann::json held_out(const HeadMask& mask, const ReportOptions& options);
  /// The token ids of the calibration or held-out samples ("calibration" or
  /// "held_out"): [{task, context_length, prompt, answer, answer_text,
  /// references}], in the order the evaluator scores them.
  nlohmann::json samples(const std::string& split);
  /// The metadata `bosch select` writes with a mask: `result`'s own when it
  /// came from this evaluator's select, else ModelRun::metadata with the
  /// options' initial masks as unnamed warm starts.
  nlohmann::json metadata(const PyResult& result) const;

  const ModelRun& run() const noexcept { return run_; }
  TransformerEvaluatorStats stats() const;

 private:
  ModelRun run_;
  mutable std::mutex mutex_;  // one search or evaluation at a time (the residual cache is not thread-safe)
};

/// True when this build has the CUDA backend.
bool has_cuda();

/// Binds bosch.TransformerEvaluator.
void bind_transformer(nb::module_& m);

}  // namespace bosch::python
