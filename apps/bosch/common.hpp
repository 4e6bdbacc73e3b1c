// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/common.hpp
/// What every `bosch` subcommand shares: option groups, command-line and
/// config-file parsing, exit codes and error reporting, model and backend
/// set-up, signal handling, progress and evaluation-log callbacks, mask files
/// in any of the three forms.
///
/// A subcommand is `int run_NAME(int argc, char** argv)` where argv[0] is the
/// subcommand's name (main strips "bosch"). The usual shape:
///
/// @code
/// int run_thing(int argc, char** argv) {
///   return cli::run_command("thing", [&] {
///     cli::ModelOptions model;
///     cli::OutputOptions out;
///     cli::CommandLine cl("thing", "bosch thing [options] MODEL", "What it does.");
///     cl.options.add(model.describe()).add(out.describe());
///     cl.positional.add("model", 1);
///     po::variables_map vm;
///     if (!cl.parse(argc, argv, vm)) return cli::exit_success;  // --help printed
///     model.validate();
///     ...
///     return cli::exit_success;
///   });
/// }
/// @endcode
///
/// Exit codes: 0 success; 1 runtime error (unreadable model, corrupt file,
/// mismatched mask, device failure); 2 usage error (unknown or missing
/// option, value outside its domain, unknown task or variant); 130 / 143
/// interrupted by SIGINT / SIGTERM (after writing the checkpoint). Every
/// error is one line on stderr: "bosch <cmd>: <message>".

#include <bosch/bosch.hpp>
#include <bosch/io/checkpoint.hpp>
#include <bosch/cpu/backend.hpp>
#include <bosch/eval/report.hpp>
#include <bosch/eval/suite.hpp>
#include <bosch/eval/transformer_evaluator.hpp>
#include <bosch/model/model.hpp>
#ifdef BOSCH_HAVE_CUDA
#include <bosch/cuda/backend.hpp>
#endif

#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bosch::cli {

namespace po = boost::program_options;

// ---- exit codes and errors ------------------------------------------------------------

inline constexpr int exit_success = 0;
inline constexpr int exit_failure = 1;  ///< runtime error
inline constexpr int exit_usage = 2;    ///< bad command line
inline constexpr int exit_sigint = 130; ///< 128 + SIGINT
inline constexpr int exit_sigterm = 143;///< 128 + SIGTERM

/// A bad command line (exit 2): message only, the command name is added.
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// A runtime failure (exit 1) that is not a bosch::error, or a
/// bosch::invalid_argument from the library that is not the user's option
/// value (e.g. a mask whose layout differs from the model's).
class runtime_failure : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// Runs `body` and turns exceptions into one line on stderr, "bosch <name>:
/// <message>", and an exit code: usage_error, boost::program_options errors
/// and bosch::invalid_argument -> 2; every other bosch::error,
/// runtime_failure, std::exception -> 1. Returns body's result otherwise.
int run_command(const char* name, const std::function<int()>& body);

// ---- command-line parsing -------------------------------------------------------------

/// The command line of one subcommand.
class CommandLine {
 public:
  /// @param name        subcommand name ("select")
  /// @param usage       synopsis line ("bosch select [options] --model MODEL")
  /// @param description a paragraph printed by --help under the synopsis
  CommandLine(std::string name, std::string usage, std::string description);

  /// Visible options, shown by --help (add groups with options.add(...)).
  po::options_description options;
  /// Hidden options (positional targets, test-only switches); not in --help.
  po::options_description hidden;
  /// Positional arguments, mapped to options (e.g. positional.add("model", 1)).
  po::positional_options_description positional;
  /// Extra text printed after the options by --help (examples), may be empty.
  std::string epilog;

  /// Parses argv (argv[0] = the subcommand name) and then, when given,
  /// `--config FILE` (INI-style "name = value" lines, '#' comments, long
  /// option names without dashes; the command line wins over the file).
  /// Prints help to stdout and returns false on --help/-h. Throws
  /// boost::program_options errors (exit 2) and usage_error (exit 2).
  bool parse(int argc, char** argv, po::variables_map& vm);

  /// The --help text.
  std::string help() const;

  const std::string& name() const noexcept { return name_; }

 private:
  std::string name_, usage_, description_;
  po::options_description general_;  // --help, --config
  std::string config_file_;
};

/// True when option `name` was given on the command line or in the config
/// file (not merely defaulted).
bool given(const po::variables_map& vm, const char* name);

// ---- option groups ----------------------------------------------------------------------

/// How much goes to stderr.
enum class Verbosity { quiet, normal, verbose };

/// --quiet / --verbose.
struct OutputOptions {
  bool quiet = false;
  bool verbose = false;

  po::options_description describe();
  /// quiet beats verbose when both are given.
  Verbosity verbosity() const noexcept;
  /// stderr at normal and verbose level, a discarding stream when quiet.
  std::ostream& info() const;
  /// stderr at verbose level only.
  std::ostream& detail() const;
};

/// The model and where to run it: --model/-m, --device cpu|cuda, --gpu N, --threads N.
struct ModelOptions {
  std::string model;        ///< GGUF file or Hugging Face directory
  std::string device = "cpu";
  int gpu = 0;              ///< CUDA device index
  int threads = 0;          ///< CPU threads, 0 = all

  /// With `with_device` false, only --model (commands that run no forward pass).
  po::options_description describe(bool with_device = true);
  /// Throws usage_error when --model is missing; bosch::invalid_argument for
  /// an unknown device or a negative thread count or GPU index; usage_error
  /// "this build has no CUDA support" for --device cuda without CUDA.
  void validate() const;
  bool cuda() const noexcept { return device == "cuda"; }
};

/// The task suite and the windows of the evaluator: --tasks, --context,
/// --samples, --held-out-samples, --chat, --task-seed, --window, --sinks,
/// --text-files.
struct TaskOptions {
  std::string tasks = "niah_single_1,niah_single_2,niah_multikey_1,passkey";
  int context = 512;
  int samples = 2;
  int held_out_samples = 4;
  bool chat = false;
  std::uint64_t task_seed = 0;
  int window = 64;
  int sinks = 0;
  std::vector<std::string> text_files;

  po::options_description describe();
  /// The suite (parsed and validated: bosch::invalid_argument on a bad value).
  TaskSuiteOptions suite() const;
  /// Window and sinks (validated: window >= 1, sinks >= 0).
  TransformerEvaluatorOptions evaluator() const;
};

// ---- model and backend ------------------------------------------------------------------

/// Loads the model of `o` and prints one summary line to out.info().
model::Model load_model(const ModelOptions& o, const OutputOptions& out);


namespace detail {
/// Constructs a backend B(model, options); a model it cannot run
/// (bosch::invalid_argument) becomes a runtime_failure (exit 1), not a usage
/// error. (Inside bosch::cli, write bosch::detail:: for the core's details.)
template <class B, class O>
B make_backend(const model::Model& model, const O& options) {
  try {
    return B(model, options);
  } catch (const bosch::invalid_argument& e) {
    throw runtime_failure(e.what());
  }
}
}  // namespace detail

/// Calls f(backend) with a const cpu::Backend or (CUDA builds) cuda::Backend
/// for `model`, as o.device says, and returns its result.
template <class F>
decltype(auto) with_backend(const model::Model& model, const ModelOptions& o, F&& f) {
#ifdef BOSCH_HAVE_CUDA
  if (o.cuda()) {
    cuda::Options co;
    co.device = o.gpu;
    const auto backend = detail::make_backend<cuda::Backend>(model, co);
    return f(backend);
  }
#endif
  if (o.cuda()) throw usage_error("this build has no CUDA support (use --device cpu)");
  cpu::Options co;
  co.threads = o.threads;
  const auto backend = detail::make_backend<cpu::Backend>(model, co);
  return f(backend);
}

// ---- signals ------------------------------------------------------------------------------

/// Installs SIGINT and SIGTERM handlers for its lifetime: the first signal
/// sets a flag (the search stops after the current evaluation); a second one
/// of the same kind ends the program at once (default action).
class SignalGuard {
 public:
  SignalGuard();
  ~SignalGuard();
  SignalGuard(const SignalGuard&) = delete;
  SignalGuard& operator=(const SignalGuard&) = delete;
  /// The signal received (SIGINT or SIGTERM), 0 when none.
  static int received() noexcept;
  /// 130 for SIGINT, 143 for SIGTERM, 0 when none was received.
  static int exit_code() noexcept;
  /// Forget a received signal (tests and repeated runs).
  static void reset() noexcept;
};

/// A select() callback that asks the search to stop once a signal arrived.
/// Test hooks for an interruption at a known point: with `raise_after` > 0,
/// once that many evaluations are logged it raises `raise_signal` itself or,
/// with `wait_for_signal`, blocks (up to 120 s) until a signal arrives from
/// outside.
struct StopOnSignal {
  std::size_t raise_after = 0;
  int raise_signal = 0;
  bool wait_for_signal = false;
  bool on_evaluation(const SearchView& v, const EvaluationRecord& r);
};

// ---- progress and logs ---------------------------------------------------------------------

/// Progress on stderr by verbosity: nothing when quiet; ProgressReporter lines
/// (stage, evaluations, best score, ETA) at normal level, every `every`
/// evaluations; at verbose level also a summary at the end of each stage and
/// one line per evaluation (index, stage, score, SWA count, seconds).
class CliProgress {
 public:
  CliProgress(Verbosity verbosity, std::size_t every = 1);
  void begin_stage(const SearchView& v, Stage s);
  void end_stage(const SearchView& v, Stage s);
  void on_evaluation(const SearchView& v, const EvaluationRecord& r);
  void end_search(const SearchView& v, const Result& r);

 private:
  Verbosity verbosity_;
  ProgressReporter reporter_;
  std::size_t stage_start_ = 0;
};

/// One JSON object per evaluation, as written to --log files:
/// {"index", "stage", "score", "swa", "seconds", "mask"} ("mask" = layer-major
/// bits, '1' = SWA).
nlohmann::json evaluation_json(const EvaluationRecord& r);

/// Writes the evaluation log as JSON lines (one evaluation_json() per line)
/// to `path`, atomically, every `every` evaluations and at the end of the
/// search (the whole log each time, so an interrupted run leaves a complete
/// file up to its last write; a resumed run rewrites it with the replayed
/// records first).
class EvaluationLogWriter {
 public:
  explicit EvaluationLogWriter(std::filesystem::path path, std::size_t every = 10);
  void on_evaluation(const SearchView& v, const EvaluationRecord& r);
  void end_search(const SearchView& v, const Result& r);
  /// Writes the log of `records` now.
  void write(const std::vector<EvaluationRecord>& records) const;

 private:
  std::filesystem::path path_;
  std::size_t every_;
};

// ---- mask files ------------------------------------------------------------------------------

/// The three mask-file forms (io/mask_io.hpp).
enum class MaskFormat { json, tsv, grid };
const char* to_string(MaskFormat f) noexcept;
/// "json", "tsv", "grid" (also "txt" for grid); bosch::invalid_argument naming
/// `option` otherwise.
MaskFormat parse_mask_format(std::string_view name, const char* option = "format");
/// `explicit_format` when non-empty, else by extension: ".json", ".tsv",
/// anything else the grid.
MaskFormat mask_format(const std::filesystem::path& path, const std::string& explicit_format = {},
                       const char* option = "format");

/// Reads a mask file of the given form. `layout` supplies the query-head
/// count TSV and grid files lack (their layers and KV heads must agree with it;
/// bosch::invalid_argument otherwise); without it those files get as many query
/// heads as KV heads. "-" reads stdin. Errors: bosch::file_error,
/// bosch::format_error (exit 1).
io::MaskFile read_mask_file(const std::filesystem::path& path, MaskFormat format,
                            const std::optional<HeadLayout>& layout = std::nullopt,
                            double tsv_threshold = 0.5);

/// Writes a mask file atomically ("-" writes to stdout); metadata only in JSON.
void write_mask_file(const std::filesystem::path& path, MaskFormat format, const HeadMask& mask,
                     const nlohmann::json& metadata = nlohmann::json::object());

/// Throws runtime_failure ("<file>: mask layout ... does not match the
/// model's ...", exit 1) unless `mask` has layout `model_layout`.
void require_model_layout(const HeadMask& mask, const HeadLayout& model_layout,
                          const std::string& file);

// ---- held-out reports ------------------------------------------------------------------------

/// One named row of a held-out comparison (e.g. "all-full", "BOSCH").
struct ReportRow {
  std::string name;
  std::size_t swa_heads = 0;
  HeldOutReport report;
};

/// {"task", "samples", "mean_logprob", "probability", "accuracy", "exact"} (NaN -> null).
nlohmann::json to_json(const TaskScore& t);
/// {"all": to_json(all), "per_task": [...]}.
nlohmann::json to_json(const HeldOutReport& r);

/// A fixed-width table: one line per row (overall scores), then, with
/// `per_task`, one block per task.
void print_report(std::ostream& out, const std::vector<ReportRow>& rows, bool per_task);

/// A command line as a shell would read it back (single-quoting where needed).
std::string shell_join(const std::vector<std::string>& args);

}  // namespace bosch::cli
