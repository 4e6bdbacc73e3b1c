// SPDX-License-Identifier: Apache-2.0
// Input and output files (see files.hpp).

#include "files.hpp"

#include <bosch/error.hpp>
#include <bosch/io/atomic_file.hpp>
#include <bosch/run/settings.hpp>

#include "errors.hpp"

#include <iostream>
#include <iterator>
#include <cerrno>
#include <streambuf>
#include <system_error>

#include <unistd.h>

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
  // A Hugging Face model directory: every file in it is read or may be
  // (config.json, tokenizer files, weight shards and their index).
  std::error_code ec;
  if (!settings.model.empty() && std::filesystem::is_directory(settings.model, ec))
    for (std::filesystem::directory_iterator it(settings.model, ec), end; !ec && it != end; it.increment(ec))
      if (it->is_regular_file(ec)) in.push_back({"--model", it->path()});
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

std::string read_input(const std::filesystem::path& path, std::uintmax_t max_bytes, std::string_view what) {
  if (path != "-") return io::read_file(path, max_bytes, what);
  return io::read_bounded(std::cin, max_bytes, what, "<stdin>");
}

void write_output(const std::filesystem::path& path, const std::string& text) {
  if (path != "-") {
    io::write_file_atomic(path, text);
    return;
  }
  std::cout << text;
  check_stdout();
}

namespace {

/// std::cout's buffer after install_stdout: every write goes to fd 1 at once;
/// the first failure's errno is kept.
class StdoutBuffer : public std::streambuf {
 public:
  int error() const noexcept { return error_; }
  bool failed() const noexcept { return failed_; }

 protected:
  std::streamsize xsputn(const char* s, std::streamsize n) override {
    return put(s, static_cast<std::size_t>(n)) ? n : 0;
  }
  int_type overflow(int_type c) override {
    if (traits_type::eq_int_type(c, traits_type::eof())) return traits_type::not_eof(c);
    const char ch = traits_type::to_char_type(c);
    return put(&ch, 1) ? c : traits_type::eof();
  }

 private:
  bool put(const char* s, std::size_t n) {
    if (failed_) return false;
    while (n > 0) {
      const ssize_t w = ::write(1, s, n);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) {
        failed_ = true;
        error_ = w < 0 ? errno : EIO;
        return false;
      }
      s += w;
      n -= static_cast<std::size_t>(w);
    }
    return true;
  }
  bool failed_ = false;
  int error_ = 0;
};

StdoutBuffer& stdout_buffer() {
  static StdoutBuffer b;
  return b;
}

}  // namespace

void install_stdout() {
  std::cout.flush();
  std::cout.rdbuf(&stdout_buffer());
}

void check_stdout() {
  std::cout.flush();
  const StdoutBuffer& b = stdout_buffer();
  if (std::cout.rdbuf() == &b && b.failed()) throw file_error(io::write_failure(b.error()), "<stdout>");
  if (!std::cout) throw file_error(io::write_failure(0), "<stdout>");
}

std::string input_name(const std::filesystem::path& path) {
  return path == "-" ? std::string("<stdin>") : path.string();
}

}  // namespace bosch::cli
