// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/model_options.hpp
/// The model for the commands: reading its configuration, loading it
/// (open_model) or opening a ModelRun, with the command line's exit status for
/// a model the library cannot use. The backend the run settings (--device,
/// --gpu, --threads) name comes from bosch::with_backend (run/open_model.hpp).

#include "errors.hpp"
#include "output_options.hpp"

#include <bosch/model/model.hpp>
#include <bosch/run/model_run.hpp>
#include <bosch/run/open_model.hpp>
#include <bosch/run/settings.hpp>

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

}  // namespace bosch::cli
