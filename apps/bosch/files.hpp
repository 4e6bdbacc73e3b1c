// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/files.hpp
/// Input and output files of the commands: "-" for stdin/stdout, and the
/// check that an output can be written before any work starts.

#include <bosch/io/atomic_file.hpp>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace bosch {
struct RunSettings;
}

namespace bosch::cli {

/// Throws bosch::file_error naming `option` and the path unless `path` can
/// be written (io::check_output_file: not a directory, socket or block
/// device; its directory exists and is writable; its name fits). "-"
/// (stdout) and an empty path (no such output) pass. Call it for every output
/// before a long computation, so that a typo fails at once and not after the
/// search.
void check_output_path(const std::filesystem::path& path, const std::string& option);

/// One output of a command: the option that names it and its path (empty: not
/// requested).
struct OutputPath {
  std::string option;
  std::filesystem::path path;
};

/// One input of a command: the option that names it ("--model", "--config",
/// "IN") and its path (empty or "-": none, or stdin).
using InputPath = OutputPath;

/// check_output_path for each output, then refuses two outputs that name the
/// same file (after following symbolic links; "-" counts as one file, stdout):
/// bosch::usage_error "--out and --log name the same file 's.json'", and an
/// output that names an input (io::same_file: after links and "./", or a hard
/// link): bosch::usage_error "--out names the same file as --model
/// 'model.gguf'", so that no command ever replaces what it reads. Call it with
/// every output and every input of the command before any work.
void check_outputs(const std::vector<OutputPath>& outputs, const std::vector<InputPath>& inputs);

/// Only the last check of check_outputs: the usage_error of an output that
/// names an input (for outputs that are not checked as files, e.g. those in
/// an output directory that does not exist yet).
void check_not_inputs(const std::vector<OutputPath>& outputs, const std::vector<InputPath>& inputs);

/// The inputs of a command that runs a model: --config `config_file` (when
/// given), the model (a GGUF file, or a Hugging Face directory and every file
/// in it) and the text files of `settings`.
std::vector<InputPath> run_inputs(const std::string& config_file, const RunSettings& settings);

/// Throws bosch::file_error naming `option` unless `dir` is an existing
/// directory or can be created (each existing ancestor is a directory); the
/// check of an output directory before any work.
void check_output_dir(const std::filesystem::path& dir, const std::string& option);

/// The whole text of `path`, or of stdin for "-", at most `max_bytes`
/// (io::read_file: a regular file, checked before opening; `what` names the
/// kind of input in the message of one over the limit, "a mask file").
/// bosch::file_error naming the file on a failure.
std::string read_input(const std::filesystem::path& path, std::uintmax_t max_bytes, std::string_view what);

/// Writes `text` to `path` atomically (io::write_file_atomic), or to stdout
/// for "-".
void write_output(const std::filesystem::path& path, const std::string& text);

/// Routes std::cout straight to file descriptor 1 (unbuffered, as with
/// stdio-synchronised streams), remembering the errno of the first failed
/// write. main() calls it first (before MPI ranks other than 0 silence
/// std::cout); idempotent. Every
/// command writes its standard output through std::cout (never stdio), so
/// that check_stdout sees every failed write.
void install_stdout();

/// Flushes std::cout and throws bosch::file_error "<stdout>: write failed: No
/// space left on device" (io::write_failure with the errno of the first
/// failed write) when any write to it failed. run_command calls it after
/// every command, so that no command exits 0 with its output lost.
void check_stdout();

/// "<stdin>" for "-", else the path.
std::string input_name(const std::filesystem::path& path);

}  // namespace bosch::cli
