// SPDX-License-Identifier: Apache-2.0
// Input and output files (see files.hpp).

#include "files.hpp"

#include <bosch/error.hpp>
#include <bosch/io/atomic_file.hpp>

#include <iostream>
#include <iterator>
#include <system_error>

namespace bosch::cli {

void check_output_path(const std::filesystem::path& path, const std::string& option) {
  if (path.empty() || path == "-") return;
  const std::filesystem::path dir = path.parent_path();
  if (dir.empty()) return;  // the working directory
  std::error_code ec;
  if (!std::filesystem::exists(dir, ec))
    throw file_error("directory '" + dir.string() + "' does not exist", option);
  if (!std::filesystem::is_directory(dir, ec))
    throw file_error("'" + dir.string() + "' is not a directory", option);
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
