// Helpers of the CLI tests: run the bosch program (or its test build with the
// interruption hooks) as a subprocess, temporary directories, the tiny fixture
// model and its natural-text file.
#pragma once

#include "test_support.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace bosch::test::cli {

namespace fs = std::filesystem;

/// What a finished run returned.
struct Run {
  int status = -1;  ///< exit code (128 + signal when killed by one)
  std::string out;  ///< stdout
  std::string err;  ///< stderr
};

inline std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

/// A fresh directory under the system temp dir, removed at destruction.
class TempDir {
 public:
  TempDir() {
    static std::atomic<int> counter{0};
    path_ = fs::temp_directory_path() /
            ("bosch-cli-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const fs::path& path() const { return path_; }
  std::string operator/(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

/// The programs: the shipped `bosch`, and its test build (target
/// bosch_cli_test) with the hidden test hooks (--stop-after, --stop-signal,
/// --mpi-test-fail).
inline const std::string shipped = BOSCH_CLI;
inline const std::string with_test_hooks = BOSCH_CLI_TEST;

/// A started subprocess: `program` (default: the shipped bosch) with `args`,
/// stdout/stderr to files in `dir`, stdin from /dev/null or from `stdin_file`;
/// started by `launcher` (a program and its arguments, e.g. mpirun -n 2) when
/// given.
class Process {
 public:
  Process(const std::vector<std::string>& args, const fs::path& dir, const std::string& stdin_file = {},
          const std::string& program = shipped, const std::vector<std::string>& launcher = {})
      : id_(next_id()),
        out_(dir / ("stdout." + std::to_string(id_))),
        err_(dir / ("stderr." + std::to_string(id_))) {
    std::vector<std::string> all = launcher;
    all.push_back(program);
    all.insert(all.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : all) argv.push_back(a.data());
    argv.push_back(nullptr);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      const int in = ::open(stdin_file.empty() ? "/dev/null" : stdin_file.c_str(), O_RDONLY);
      const int o = ::open(out_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      const int e = ::open(err_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (in < 0 || o < 0 || e < 0) ::_exit(126);
      ::dup2(in, 0);
      ::dup2(o, 1);
      ::dup2(e, 2);
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  pid_t pid() const { return pid_; }
  /// Waits for the end (at most `timeout_s`; then kills it and fails).
  Run wait(double timeout_s = 120) {
    int st = 0;
    const auto t0 = std::chrono::steady_clock::now();
    while (true) {
      const pid_t r = ::waitpid(pid_, &st, WNOHANG);
      if (r == pid_) break;
      REQUIRE(r == 0);
      if (std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() > timeout_s) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &st, 0);
        FAIL("bosch did not finish within " << timeout_s << " s");
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    Run r;
    r.status = WIFEXITED(st) ? WEXITSTATUS(st) : (WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1);
    r.out = slurp(out_);
    r.err = slurp(err_);
    return r;
  }

 private:
  static int next_id() {
    static std::atomic<int> n{0};
    return n++;
  }
  int id_;
  fs::path out_, err_;
  pid_t pid_ = -1;
};

/// Runs bosch to completion.
inline Run run(const std::vector<std::string>& args, const TempDir& dir, const std::string& stdin_file = {}) {
  Process p(args, dir.path(), stdin_file);
  return p.wait();
}

/// Runs bosch to completion with its standard output going to `target`
/// (e.g. /dev/full: every write fails with ENOSPC); Run::out stays empty.
inline Run run_stdout_to(const std::string& target, const std::vector<std::string>& args, const TempDir& dir) {
  std::vector<std::string> sh{"-c", "exec \"$0\" \"$@\" >" + target, shipped};
  sh.insert(sh.end(), args.begin(), args.end());
  Process p(sh, dir.path(), {}, "/bin/sh");
  return p.wait();
}

/// Runs the test build of bosch (with the interruption hooks) to completion.
inline Run run_with_hooks(const std::vector<std::string>& args, const TempDir& dir) {
  Process p(args, dir.path(), {}, with_test_hooks);
  return p.wait();
}

/// The tiny real model (empty when the fixtures are absent: the caller returns).
inline std::string model() { return fixture("models/stories260K.gguf").string(); }
/// Natural text for the copy task (a fixture; no $BOSCH_CACHE needed).
inline std::string text() { return fixture("text/emma.txt").string(); }

/// The options of a small, fast search on the tiny model: the copy task over
/// natural text, 300-token samples (beyond the model's trained context of
/// 128, hence --allow-long-context: the copy span must lie far outside the
/// window), window 32, small budgets, one thread (the tiny model gains
/// nothing from more, and CI cores are shared).
inline std::vector<std::string> small_select(const std::string& model_path, const std::string& text_path) {
  return {"select",          "--model",  model_path, "--tasks",        "copy", "--text-files",
          text_path,         "--context", "300",     "--samples",      "2",    "--window",
          "32",              "--ratio",  "0.5",      "--probe-budget", "4",    "--chunk-budget",
          "8",               "--threads", "1",       "--seed",         "7",    "--allow-long-context"};
}

inline std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

/// `args` without option `name` and its value (`values` words after it: 0 for a flag).
inline std::vector<std::string> without(std::vector<std::string> args, const std::string& name, std::size_t values = 1) {
  for (std::size_t i = 0; i < args.size(); ++i)
    if (args[i] == name) {
      const std::size_t end = std::min(args.size(), i + 1 + values);
      args.erase(args.begin() + static_cast<std::ptrdiff_t>(i), args.begin() + static_cast<std::ptrdiff_t>(end));
      break;
    }
  return args;
}

inline nlohmann::json read_json(const fs::path& p) { return nlohmann::json::parse(slurp(p)); }

/// The JSON lines of a log file.
inline std::vector<nlohmann::json> read_jsonl(const fs::path& p) {
  std::vector<nlohmann::json> out;
  std::istringstream in(slurp(p));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) out.push_back(nlohmann::json::parse(line));
  return out;
}

/// True when `s` holds exactly one line (one clear error line).
inline bool one_line(const std::string& s) {
  return !s.empty() && s.back() == '\n' && s.find('\n') == s.size() - 1;
}

}  // namespace bosch::test::cli
