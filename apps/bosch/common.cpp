// SPDX-License-Identifier: Apache-2.0
// Shared parts of the bosch subcommands (see common.hpp).

#include "common.hpp"

#include <bosch/io/atomic_file.hpp>
#include <bosch/io/mask_io.hpp>

#include <atomic>
#include <chrono>
#include <thread>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

namespace bosch::cli {

// ---- errors ------------------------------------------------------------------------------

int run_command(const char* name, const std::function<int()>& body) {
  auto line = [name](const std::string& msg) {
    std::cerr << "bosch " << name << ": " << msg << "\n";
    std::cerr.flush();
  };
  try {
    return body();
  } catch (const po::error& e) {
    line(std::string(e.what()) + " (see 'bosch " + name + " --help')");
    return exit_usage;
  } catch (const usage_error& e) {
    line(e.what());
    return exit_usage;
  } catch (const bosch::invalid_argument& e) {
    line(e.what());
    return exit_usage;
  } catch (const bosch::error& e) {
    line(e.what());
    return exit_failure;
  } catch (const std::bad_alloc&) {
    line("out of memory");
    return exit_failure;
  } catch (const std::exception& e) {
    line(e.what());
    return exit_failure;
  }
}

// ---- command line --------------------------------------------------------------------------

CommandLine::CommandLine(std::string name, std::string usage, std::string description)
    : options("Options"),
      hidden("Hidden"),
      name_(std::move(name)),
      usage_(std::move(usage)),
      description_(std::move(description)),
      general_("General") {
  general_.add_options()("help,h", "show this help and exit")(
      "config", po::value(&config_file_)->value_name("FILE"),
      "read further options from FILE (lines 'name = value', long names without dashes; "
      "the command line takes precedence)");
}

std::string CommandLine::help() const {
  std::ostringstream s;
  s << "Usage: " << usage_ << "\n\n" << description_ << "\n\n" << options << "\n" << general_;
  if (!epilog.empty()) s << "\n" << epilog;
  return s.str();
}

bool CommandLine::parse(int argc, char** argv, po::variables_map& vm) {
  po::options_description all;
  all.add(options).add(hidden).add(general_);
  po::store(po::command_line_parser(argc, argv).options(all).positional(positional).run(), vm);
  if (vm.count("help")) {
    std::cout << help();
    std::cout.flush();
    return false;
  }
  if (vm.count("config")) {
    const std::string file = vm["config"].as<std::string>();
    std::ifstream in(file);
    if (!in) throw usage_error("--config: cannot read '" + file + "'");
    po::options_description from_file;
    from_file.add(options).add(hidden);
    try {
      po::store(po::parse_config_file(in, from_file, false), vm);
    } catch (const po::error& e) {
      throw usage_error("--config " + file + ": " + e.what());
    }
  }
  po::notify(vm);
  return true;
}

bool given(const po::variables_map& vm, const char* name) {
  return vm.count(name) > 0 && !vm[name].defaulted();
}

// ---- option groups -------------------------------------------------------------------------

namespace {
class NullBuffer : public std::streambuf {
 protected:
  int overflow(int c) override { return c; }
  std::streamsize xsputn(const char*, std::streamsize n) override { return n; }
};
std::ostream& null_stream() {
  static NullBuffer buffer;
  static std::ostream stream(&buffer);
  return stream;
}
}  // namespace

po::options_description OutputOptions::describe() {
  po::options_description d("Output");
  d.add_options()("quiet,q", po::bool_switch(&quiet), "print nothing on stderr but errors")(
      "verbose,v", po::bool_switch(&verbose),
      "also print per-stage summaries and one line per evaluation");
  return d;
}

Verbosity OutputOptions::verbosity() const noexcept {
  if (quiet) return Verbosity::quiet;
  return verbose ? Verbosity::verbose : Verbosity::normal;
}
std::ostream& OutputOptions::info() const {
  return verbosity() == Verbosity::quiet ? null_stream() : std::cerr;
}
std::ostream& OutputOptions::detail() const {
  return verbosity() == Verbosity::verbose ? std::cerr : null_stream();
}

po::options_description ModelOptions::describe(bool with_device) {
  po::options_description d("Model");
  d.add_options()("model,m", po::value(&model)->value_name("PATH"),
                  "GGUF file or Hugging Face model directory (also the first positional argument)");
  if (with_device)
    d.add_options()("device", po::value(&device)->default_value(device)->value_name("cpu|cuda"),
                    "where forward passes run")(
        "gpu", po::value(&gpu)->default_value(gpu)->value_name("N"), "CUDA device index")(
        "threads", po::value(&threads)->default_value(threads)->value_name("N"),
        "CPU threads (0 = all cores)");
  return d;
}

void ModelOptions::validate() const {
  if (model.empty()) throw usage_error("no model given (--model PATH or a positional MODEL)");
  if (device != "cpu" && device != "cuda")
    throw invalid_argument("unknown device '" + device + "' (expected cpu or cuda)", "--device");
  if (threads < 0)
    throw invalid_argument("must be >= 0 (0 = all cores), got " + std::to_string(threads),
                           "--threads");
  if (gpu < 0) throw invalid_argument("must be >= 0, got " + std::to_string(gpu), "--gpu");
#ifndef BOSCH_HAVE_CUDA
  if (device == "cuda") throw usage_error("this build has no CUDA support (use --device cpu)");
#endif
}

po::options_description TaskOptions::describe() {
  po::options_description d("Tasks and windows");
  d.add_options()("tasks,t", po::value(&tasks)->default_value(tasks)->value_name("LIST"),
                  "comma-separated task kinds: niah_single_1..3, niah_multikey_1..3, "
                  "niah_multivalue, niah_multiquery, passkey, copy")(
      "context,c", po::value(&context)->default_value(context)->value_name("TOKENS"),
      "tokens per task sample (prompt + answer)")(
      "samples,n", po::value(&samples)->default_value(samples)->value_name("N"),
      "calibration samples per task (the search's objective)")(
      "held-out-samples", po::value(&held_out_samples)->default_value(held_out_samples)->value_name("N"),
      "held-out samples per task (for reports)")(
      "chat", po::bool_switch(&chat), "wrap prompts in the ChatML template (instruct models)")(
      "task-seed", po::value(&task_seed)->default_value(task_seed)->value_name("N"),
      "seed of the task generator")(
      "window,w", po::value(&window)->default_value(window)->value_name("TOKENS"),
      "sliding window w of SWA heads (a query sees the last w keys)")(
      "sinks,s", po::value(&sinks)->default_value(sinks)->value_name("TOKENS"),
      "sink tokens at the start that SWA heads also see")(
      "text-files", po::value(&text_files)->multitoken()->value_name("FILE..."),
      "natural-text files for haystacks (default: $BOSCH_CACHE/text/*.txt)");
  return d;
}

TaskSuiteOptions TaskOptions::suite() const {
  TaskSuiteOptions s;
  s.kinds = parse_task_list(tasks);
  s.context_length = context;
  s.calibration_samples = samples;
  s.held_out_samples = held_out_samples;
  s.chat = chat;
  s.seed = task_seed;
  for (const auto& f : text_files) s.text_files.emplace_back(f);
  validate(s);
  return s;
}

TransformerEvaluatorOptions TaskOptions::evaluator() const {
  if (window <= 0)
    throw invalid_argument("window must be at least 1 token, got " + std::to_string(window),
                           "--window");
  if (sinks < 0)
    throw invalid_argument("sinks must be at least 0, got " + std::to_string(sinks), "--sinks");
  TransformerEvaluatorOptions e;
  e.window = window;
  e.sinks = sinks;
  return e;
}

// ---- model -------------------------------------------------------------------------------------

model::Model load_model(const ModelOptions& o, const OutputOptions& out) {
  model::Model m;
  try {
    m = model::load(o.model);
  } catch (const bosch::invalid_argument& e) {
    throw runtime_failure(e.what());  // a model the library cannot use is a runtime error
  }
  const auto& c = m.config;
  char params[32];
  const double n = static_cast<double>(m.parameter_count());
  std::snprintf(params, sizeof params, n < 1e9 ? "%.3gM" : "%.3gB", n < 1e9 ? n / 1e6 : n / 1e9);
  out.info() << "model: " << (c.name.empty() ? m.source.filename().string() : c.name) << " ("
             << model::to_string(c.arch) << ", " << to_string(c.layout()) << " heads, "
             << params << " parameters)\n";
  return m;
}

// ---- signals ------------------------------------------------------------------------------------

namespace {
volatile std::sig_atomic_t g_signal = 0;
extern "C" void bosch_cli_on_signal(int sig) {
  g_signal = sig;
  std::signal(sig, SIG_DFL);  // a second signal of the same kind ends the program
}
struct SavedHandlers {
  void (*sigint)(int) = SIG_DFL;
  void (*sigterm)(int) = SIG_DFL;
};
SavedHandlers g_saved;
}  // namespace

SignalGuard::SignalGuard() {
  g_signal = 0;
  g_saved.sigint = std::signal(SIGINT, bosch_cli_on_signal);
  g_saved.sigterm = std::signal(SIGTERM, bosch_cli_on_signal);
}
SignalGuard::~SignalGuard() {
  std::signal(SIGINT, g_saved.sigint == SIG_ERR ? SIG_DFL : g_saved.sigint);
  std::signal(SIGTERM, g_saved.sigterm == SIG_ERR ? SIG_DFL : g_saved.sigterm);
}
int SignalGuard::received() noexcept { return g_signal; }
int SignalGuard::exit_code() noexcept {
  if (g_signal == SIGINT) return exit_sigint;
  if (g_signal == SIGTERM) return exit_sigterm;
  return g_signal ? 128 + g_signal : 0;
}
void SignalGuard::reset() noexcept { g_signal = 0; }

bool StopOnSignal::on_evaluation(const SearchView& v, const EvaluationRecord&) {
  if (raise_after > 0 && v.evaluations == raise_after && g_signal == 0) {
    if (wait_for_signal) {
      for (int i = 0; i < 12000 && g_signal == 0; ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } else {
      std::raise(raise_signal ? raise_signal : SIGINT);
    }
  }
  return g_signal != 0;
}

// ---- progress and logs ---------------------------------------------------------------------------

CliProgress::CliProgress(Verbosity verbosity, std::size_t every)
    : verbosity_(verbosity), reporter_(std::cerr, every) {}

void CliProgress::begin_stage(const SearchView& v, Stage s) {
  stage_start_ = v.evaluations;
  if (verbosity_ != Verbosity::quiet) reporter_.begin_stage(v, s);
}

void CliProgress::end_stage(const SearchView& v, Stage s) {
  if (verbosity_ != Verbosity::verbose) return;
  char buf[96];
  std::string best = "-";
  if (v.best_mask) {
    std::snprintf(buf, sizeof buf, "%.6g", v.best_score);
    best = buf;
  }
  std::cerr << "bosch: end of stage " << to_string(s) << ": " << (v.evaluations - stage_start_)
            << " evaluations, " << v.evaluations << " in all, best " << best << ", "
            << bosch::detail::format_duration(v.elapsed_seconds) << " elapsed\n";
}

void CliProgress::on_evaluation(const SearchView& v, const EvaluationRecord& r) {
  if (verbosity_ == Verbosity::quiet) return;
  reporter_.on_evaluation(v, r);
  if (verbosity_ == Verbosity::verbose) std::cerr << "bosch: eval " << evaluation_json(r).dump() << "\n";
}

void CliProgress::end_search(const SearchView& v, const Result& r) {
  // A stopped search is reported by the command (how to resume), not as "done".
  if (verbosity_ != Verbosity::quiet && !r.stopped) reporter_.end_search(v, r);
}

nlohmann::json evaluation_json(const EvaluationRecord& r) {
  std::string bits(r.mask.size(), '0');
  for (std::size_t i = 0; i < r.mask.size(); ++i)
    if (r.mask[i]) bits[i] = '1';
  return nlohmann::json{{"index", r.index},
                        {"stage", to_string(r.stage)},
                        {"score", std::isfinite(r.score) ? nlohmann::json(r.score) : nlohmann::json()},
                        {"swa", r.mask.count()},
                        {"seconds", r.seconds},
                        {"mask", bits}};
}

EvaluationLogWriter::EvaluationLogWriter(std::filesystem::path path, std::size_t every)
    : path_(std::move(path)), every_(every) {}

void EvaluationLogWriter::on_evaluation(const SearchView& v, const EvaluationRecord& r) {
  if (every_ > 0 && (r.index + 1) % every_ == 0 && v.log) write(*v.log);
}
void EvaluationLogWriter::end_search(const SearchView&, const Result& r) { write(r.log); }

void EvaluationLogWriter::write(const std::vector<EvaluationRecord>& records) const {
  std::string text;
  for (const auto& r : records) {
    text += evaluation_json(r).dump();
    text += '\n';
  }
  io::write_file_atomic(path_, text);
}

// ---- mask files ------------------------------------------------------------------------------------

const char* to_string(MaskFormat f) noexcept {
  switch (f) {
    case MaskFormat::json: return "json";
    case MaskFormat::tsv: return "tsv";
    case MaskFormat::grid: return "grid";
  }
  return "?";
}

MaskFormat parse_mask_format(std::string_view name, const char* option) {
  if (name == "json") return MaskFormat::json;
  if (name == "tsv") return MaskFormat::tsv;
  if (name == "grid" || name == "txt") return MaskFormat::grid;
  throw invalid_argument("unknown mask format '" + std::string(name) + "' (expected json, tsv or grid)",
                         option);
}

MaskFormat mask_format(const std::filesystem::path& path, const std::string& explicit_format,
                       const char* option) {
  if (!explicit_format.empty()) return parse_mask_format(explicit_format, option);
  const auto ext = path.extension().string();
  if (ext == ".json") return MaskFormat::json;
  if (ext == ".tsv") return MaskFormat::tsv;
  return MaskFormat::grid;
}

io::MaskFile read_mask_file(const std::filesystem::path& path, MaskFormat format,
                            const std::optional<HeadLayout>& layout, double tsv_threshold) {
  const bool is_stdin = path == "-";
  const std::string where = is_stdin ? std::string("<stdin>") : path.string();
  std::string text;
  if (is_stdin) {
    text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  } else {
    text = io::read_file(path);
  }
  io::MaskFile f;
  if (format == MaskFormat::json) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::parse_error& e) {
      throw format_error(std::string("not valid JSON: ") + e.what(), where);
    }
    f = io::mask_from_json(j, where);
    if (layout) require_model_layout(f.mask, *layout, where);
    return f;
  }
  const int hq = layout ? layout->num_query_heads : 0;
  HeadMask m = format == MaskFormat::tsv ? io::mask_from_tsv(text, 0, tsv_threshold, where)
                                         : mask_from_grid(text, 0, where);
  if (layout) {
    const HeadLayout got = m.layout();
    if (got.num_layers != layout->num_layers || got.num_kv_heads != layout->num_kv_heads)
      throw runtime_failure(where + ": mask has " + std::to_string(got.num_layers) + " layers x " +
                            std::to_string(got.num_kv_heads) + " KV heads, expected " +
                            std::to_string(layout->num_layers) + " x " +
                            std::to_string(layout->num_kv_heads));
    HeadMask out(HeadLayout{got.num_layers, hq, got.num_kv_heads});
    for (std::size_t i = 0; i < m.size(); ++i) out.set_flat(i, m[i]);
    m = out;
  }
  f.mask = std::move(m);
  return f;
}

void write_mask_file(const std::filesystem::path& path, MaskFormat format, const HeadMask& mask,
                     const nlohmann::json& metadata) {
  std::string text;
  switch (format) {
    case MaskFormat::json: text = io::mask_to_json(mask, metadata).dump(2) + "\n"; break;
    case MaskFormat::tsv: text = io::mask_to_tsv(mask); break;
    case MaskFormat::grid: text = to_grid(mask); break;
  }
  if (path == "-") {
    std::cout << text;
    std::cout.flush();
    if (!std::cout) throw file_error("write failed", "<stdout>");
    return;
  }
  io::write_file_atomic(path, text);
}

void require_model_layout(const HeadMask& mask, const HeadLayout& model_layout,
                          const std::string& file) {
  if (!(mask.layout() == model_layout))
    throw runtime_failure(file + ": mask layout " + to_string(mask.layout()) +
                          " (layers x query heads x KV heads) does not match the model's " +
                          to_string(model_layout));
}

nlohmann::json to_json(const TaskScore& t) {
  auto num = [](double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(); };
  return nlohmann::json{{"task", t.task},
                        {"samples", t.samples},
                        {"mean_logprob", num(t.mean_logprob)},
                        {"probability", num(t.probability)},
                        {"accuracy", num(t.accuracy)},
                        {"exact", num(t.exact)}};
}

nlohmann::json to_json(const HeldOutReport& r) {
  nlohmann::json per = nlohmann::json::array();
  for (const auto& t : r.per_task) per.push_back(to_json(t));
  return nlohmann::json{{"all", to_json(r.all)}, {"per_task", per}};
}

void print_report(std::ostream& out, const std::vector<ReportRow>& rows, bool per_task) {
  char buf[200];
  auto line = [&](const std::string& name, std::size_t heads, const TaskScore& t) {
    std::snprintf(buf, sizeof buf, "  %-18s %5zu %7d %10.4f %8.4f %8.3f %8.3f\n", name.c_str(), heads,
                  t.samples, t.mean_logprob, t.probability, t.accuracy, t.exact);
    out << buf;
  };
  std::snprintf(buf, sizeof buf, "  %-18s %5s %7s %10s %8s %8s %8s\n", "mask", "SWA", "samples",
                "log-prob", "prob", "accuracy", "exact");
  out << buf;
  for (const auto& r : rows) line(r.name, r.swa_heads, r.report.all);
  if (!per_task || rows.empty()) return;
  for (std::size_t k = 0; k < rows.front().report.per_task.size(); ++k) {
    out << "\n  task " << rows.front().report.per_task[k].task << ":\n";
    for (const auto& r : rows)
      if (k < r.report.per_task.size()) line(r.name, r.swa_heads, r.report.per_task[k]);
  }
}

std::string shell_join(const std::vector<std::string>& args) {
  std::string out;
  for (const auto& a : args) {
    if (!out.empty()) out += ' ';
    const bool plain = !a.empty() && a.find_first_not_of(
                                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789-_./=:,+@%") == std::string::npos;
    if (plain) {
      out += a;
      continue;
    }
    out += '\'';
    for (char c : a) {
      if (c == '\'') out += "'\\''";
      else out += c;
    }
    out += '\'';
  }
  return out;
}

}  // namespace bosch::cli
