// SPDX-License-Identifier: Apache-2.0
// Input and output files (see files.hpp).

#include "files.hpp"

#include <bosch/error.hpp>
#include <bosch/io/atomic_file.hpp>
#include <bosch/run/settings.hpp>

#include "errors.hpp"

#include <iostream>
#include <iterator>
#include <system_error>

namespace bosch::cli {

void check_output_path(const std::filesystem::path& path, const std::string& option) {
  if (path.empty() || path == "-") return;
  io::check_output_file(path, option);
}

void check_outputs(const std::vector<OutputPath>& outputs, const std::vector<InputPath>& inputs) {
  std::vector<std::pair<std::filesystem::path, const OutputPath*>> seen;
  for (const auto& o : outputs) {
    if (o.path.empty()) continue;
    check_output_path(o.path, o.option);
    std::filesystem::path key = o.path;
    if (o.path != "-") {
      std::error_code ec;
      key = std::filesystem::weakly_canonical(std::filesystem::absolute(io::write_target(o.path)), ec);
      if (ec) key = std::filesystem::absolute(o.path).lexically_normal();
    }
    for (const auto& [k, other] : seen)
      if (k == key)
        throw usage_error(other->option + " and " + o.option + " name the same file '" + o.path.string() +
                          "': give each output its own path");
    seen.emplace_back(key, &o);
  }
  check_not_inputs(outputs, inputs);
}

void check_not_inputs(const std::vector<OutputPath>& outputs, const std::vector<InputPath>& inputs) {
  for (const auto& o : outputs)
    for (const auto& i : inputs)
      if (io::same_file(o.path, i.path))
        throw usage_error(o.option + " names the same file as " + i.option + " '" + i.path.string() +
                          "': an output never replaces an input; give it another path");
}

std::vector<InputPath> run_inputs(const std::string& config_file, const RunSettings& settings) {
  std::vector<InputPath> in{{"--config", config_file}, {"--model", settings.model}};
  for (const auto& t : settings.text_files) in.push_back({"--text-files", t});
  return in;
}

void check_output_dir(const std::filesystem::path& dir, const std::string& option) {
  if (dir.empty()) throw file_error("empty path", option);
  std::filesystem::path p = std::filesystem::absolute(dir).lexically_normal();
  while (!p.empty()) {
    std::error_code ec;
    const auto st = std::filesystem::status(p, ec);
    if (st.type() == std::filesystem::file_type::directory) return;
    if (st.type() != std::filesystem::file_type::not_found)
      throw file_error("'" + p.string() + "' is not a directory", option);
    if (p == p.parent_path()) break;
    p = p.parent_path();
  }
}

std::string read_input(const std::filesystem::path& path) {
  if (path != "-") return io::read_file(path);
  std::string text(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>{});
  if (std::cin.bad()) throw file_error("read failed", "<stdin>");
  return text;
}

void write_output(const std::filesystem::path& path, const std::string& text) {
  if (path != "-") {
    io::write_file_atomic(path, text);
    return;
  }
  std::cout << text;
  std::cout.flush();
  if (!std::cout) throw file_error("write failed", "<stdout>");
}

std::string input_name(const std::filesystem::path& path) {
  return path == "-" ? std::string("<stdin>") : path.string();
}

}  // namespace bosch::cli
