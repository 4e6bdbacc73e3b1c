// SPDX-License-Identifier: Apache-2.0
// The model and its backend (see model_options.hpp).

#include "model_options.hpp"

#include <bosch/model/loader.hpp>

namespace bosch::cli {

model::Config read_model_config(const std::string& path) {
  try {
    return model::read_config(path);
  } catch (const bosch::invalid_argument& e) {
    throw runtime_failure(e.what());  // a model the library cannot use is a runtime error
  }
}

model::Model load_model(const RunSettings& s, const OutputOptions& out) {
  try {
    return open_model(s, [&out](const std::string& line) { out.info() << line; });
  } catch (const bosch::invalid_argument& e) {
    throw runtime_failure(e.what());
  }
}

ModelRun make_model_run(const RunSettings& s, const OutputOptions& out) {
  try {
    return ModelRun(s, [&out](const std::string& line) { out.info() << line; });
  } catch (const bosch::invalid_argument& e) {
    // The settings were checked before (RunOptions::resolve, check_model):
    // what is left is a model the library cannot run.
    throw runtime_failure(e.what());
  }
}

}  // namespace bosch::cli
