// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/files.hpp
/// Input and output files of the commands: "-" for stdin/stdout, and the
/// check that an output can be written before any work starts.

#include <filesystem>
#include <string>

namespace bosch::cli {

/// Throws bosch::file_error naming `option` and the directory ("--out:
/// directory '/missing/dir' does not exist") unless the directory `path`
/// would be written in exists. "-" (stdout) and an empty path (no such
/// output) pass. Call it for every output before a long computation, so that
/// a typo fails at once and not after the search.
void check_output_path(const std::filesystem::path& path, const std::string& option);

/// The whole text of `path`, or of stdin for "-" (bosch::file_error naming
/// the file on a read failure).
std::string read_input(const std::filesystem::path& path);

/// Writes `text` to `path` atomically (io::write_file_atomic), or to stdout
/// for "-".
void write_output(const std::filesystem::path& path, const std::string& text);

/// "<stdin>" for "-", else the path.
std::string input_name(const std::filesystem::path& path);

}  // namespace bosch::cli
