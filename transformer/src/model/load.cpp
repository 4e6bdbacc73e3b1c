// SPDX-License-Identifier: Apache-2.0
// bosch::model::load and the source dispatch (see bosch/model/model.hpp, loader.hpp).

#include "weight_plan.hpp"

#include <bosch/error.hpp>
#include <bosch/model/loader.hpp>
#include <bosch/model/model.hpp>
#include <bosch/model/validate.hpp>

namespace bosch::model {

namespace {
void require_exists(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw file_error("no such file or directory", path.string());
}
}  // namespace

Checkpoint read_checkpoint(const std::filesystem::path& path) {
  require_exists(path);
  if (std::filesystem::is_directory(path)) return read_hf(path);
  return read_gguf(path);
}

Config read_config(const std::filesystem::path& path) {
  require_exists(path);
  if (std::filesystem::is_directory(path)) return detail::read_hf_config_only(path);
  return config_from_gguf(gguf::File(path));
}

Model load(const std::filesystem::path& path) {
  Checkpoint ck = read_checkpoint(path);
  Model m;
  m.config = std::move(ck.config);
  m.weights = std::move(ck.weights);
  try {
    m.tokenizer = Tokenizer(std::move(ck.tokenizer));
  } catch (const error& e) {
    // The spec came from the model's files (a GGUF file's tokenizer.ggml.* keys
    // that do not make a tokenizer): name the source (fuzzing found errors
    // that named only "tokenizer: bos").
    throw format_error(e.message(), path.string() + ": " + e.where());
  }
  m.source = std::move(ck.source);
  m.fingerprint = std::move(ck.fingerprint);
  try {
    validate(m);  // what the readers filled, against the one model check
  } catch (const invalid_argument& e) {
    throw format_error(e.message(), e.where());
  }
  return m;
}

}  // namespace bosch::model
