// select_heads: BOSCH end to end on a real model, the forward passes on the
// CPU or, in a build with the CUDA backend, on a GPU (--device cuda).
//
//   select_heads --model SmolLM2-135M-Instruct.Q4_1.gguf --ratio 0.5 --out mask.json
//   select_heads --model SmolLM2-135M-Instruct.Q4_1.gguf --device cuda --compare-cpu
//
// 1. load the model (GGUF file or Hugging Face directory) and make the
//    backend (CUDA: weights uploaded in bf16, or --dtype fp16);
// 2. generate long-context calibration tasks and a disjoint held-out set;
// 3. run bosch::select with the transformer evaluator (progress on stderr);
// 4. print the mask as a layers x KV-heads grid and the held-out scores of
//    all-full, all-SWA and the chosen mask;
// 5. write the mask file (JSON, atomically);
// 6. on a GPU with --compare-cpu, score all-full and the chosen mask on the
//    calibration set with the CPU backend (fp32) too: the scores differ from
//    the GPU's by the 16-bit rounding only.
//
// The defaults use twice the calibration samples of scripts/select-heads (the
// same job through the `bosch` program, about 5 minutes on 2 cores) and the
// full Stage-3 budget, so they take several times longer. --small is the
// device check's setting: copy task (natural text: give --text-files when the
// setup script's are absent), 512-token prompts, 4 samples, window 32,
// budgets 4/8, and --compare-cpu on a GPU. The paper's setting is window
// 1024, 32k-token context and 64 NIAH samples (16 per task):
//   --window 1024 --context 32768 --samples 16 --device cuda.
// Exit status: 0 success, 1 error, 2 usage error -- including --device cuda
// in a build without CUDA -- or no usable CUDA device (then the line
// "SKIPPED: no CUDA device: <reason>" on stdout).
#include <bosch/bosch.hpp>
#include <bosch/io/mask_io.hpp>
#include <bosch/cpu/backend.hpp>
#include <bosch/eval/report.hpp>
#include <bosch/eval/suite.hpp>
#include <bosch/eval/transformer_evaluator.hpp>
#include <bosch/io/checkpoint.hpp>
#include <bosch/model/model.hpp>
#include <bosch/tasks/tasks.hpp>
#ifdef BOSCH_HAVE_CUDA
#include <bosch/cuda/backend.hpp>
#endif

#include <boost/program_options.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <utility>
#include <vector>

namespace po = boost::program_options;

namespace {

/// Everything the command line sets.
struct Settings {
  std::string model_path, out_path, checkpoint, device = "cpu", dtype = "bf16";
  bosch::Options options;
  bosch::TransformerEvaluatorOptions eval_options;
  bosch::TaskSuiteOptions suite;
  int threads = 0, gpu = 0;
  bool resume = false, compare_cpu = false;
};

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

/// Steps 2 to 5 on `backend` (any backend with the forward-pass interface).
/// Returns the search's result.
template <class Backend>
bosch::Result select_and_report(const Backend& backend, const bosch::model::Model& model, const Settings& s,
                                const bosch::TaskSuite& tasks, Clock::time_point t0) {
  // 3. The search.
  bosch::TransformerEvaluator evaluator(backend, tasks.calibration, s.eval_options);
  const double setup_seconds = seconds_since(t0);
  bosch::Result result;
  bosch::ProgressReporter progress;
  if (s.checkpoint.empty()) {
    result = bosch::select(evaluator, s.options, progress);
  } else {
    result = bosch::select(evaluator, s.options, progress,
                           bosch::Checkpoint(s.checkpoint, 5,
                                             s.resume ? bosch::Checkpoint::resume : bosch::Checkpoint::start));
  }
  const double search_seconds = seconds_since(t0) - setup_seconds;

  // 4. The mask and the held-out comparison.
  std::cout << "SWA heads (S) per layer, layer 0 first; " << result.mask.count() << " of "
            << result.mask.size() << " KV heads:\n"
            << bosch::to_grid(result.mask);
  std::printf("search: %zu evaluations in %.2f s on the %s (%.2f evaluations/s), %zu layer runs saved by the "
              "residual cache\n",
              result.evaluations, search_seconds, s.device == "cuda" ? "GPU" : "CPU",
              search_seconds > 0 ? static_cast<double>(result.evaluator_calls) / search_seconds : 0.0,
              evaluator.stats().layers_saved);
  const auto layout = evaluator.layout();
  const auto all_full = bosch::HeadMask(layout);
  const auto all_swa = bosch::HeadMask::filled(layout, true);
  std::cout << "\nheld-out (" << tasks.held_out.samples.size()
            << " samples): mean answer log-prob, its exponent, greedy accuracy\n"
            << "  mask        heads   log-prob      prob  accuracy\n";
  bosch::ReportOptions report_options;
  report_options.extra_new_tokens = 4;  // greedy budget: answer + 4 tokens
  const std::pair<const char*, const bosch::HeadMask*> rows[] = {
      {"all-full", &all_full}, {"all-SWA", &all_swa}, {"BOSCH", &result.mask}};
  for (const auto& [name, mask] : rows) {
    const auto r = bosch::evaluate_held_out(backend, model.tokenizer, tasks.held_out, evaluator.windows(*mask),
                                            report_options);
    std::printf("  %-10s %5zu  %9.4f  %8.4f  %8.3f\n", name, mask->count(), r.all.mean_logprob,
                r.all.probability, r.all.accuracy);
  }

  // 5. The mask file.
  nlohmann::json meta = bosch::mask_metadata(model, s.options, result, s.eval_options, s.suite);
  meta["search_seconds"] = search_seconds;
  meta["backend"] = s.device;
  if (s.device == "cuda") meta["dtype"] = s.dtype;
  bosch::io::write_mask_json(s.out_path, result.mask, meta);
  std::cout << "\nwrote " << s.out_path << " (" << result.evaluations << " evaluations, search " << search_seconds
            << " s, total " << seconds_since(t0) << " s)\n";
  return result;
}

}  // namespace

int main(int argc, char** argv) try {
  Settings s;
  std::string task_list, variant;
  std::vector<std::string> text_files;
  bool small = false;

  po::options_description desc("select_heads: choose sliding-window heads with BOSCH");
  desc.add_options()
    ("help,h", "show this help")
    ("model,m", po::value(&s.model_path)->required(), "GGUF file or Hugging Face directory")
    ("device", po::value(&s.device)->default_value(s.device), "where forward passes run: cpu | cuda")
    ("gpu", po::value(&s.gpu)->default_value(0), "CUDA device index (--device cuda)")
    ("dtype", po::value(&s.dtype)->default_value(s.dtype), "GPU weights and activations: bf16 | fp16")
    ("threads", po::value(&s.threads)->default_value(0), "CPU threads (0 = all)")
    ("ratio,r", po::value(&s.options.target_ratio)->default_value(0.5), "fraction of KV heads made SWA, in (0, 1)")
    ("window,w", po::value(&s.eval_options.window)->default_value(64), "sliding window w in tokens")
    ("sinks,s", po::value(&s.eval_options.sinks)->default_value(0), "sink tokens s kept by SWA heads")
    ("context,c", po::value(&s.suite.context_length)->default_value(512), "task context length in tokens")
    ("samples,n", po::value(&s.suite.calibration_samples)->default_value(2), "calibration samples per task")
    ("held-out", po::value(&s.suite.held_out_samples)->default_value(4), "held-out samples per task")
    ("tasks,t", po::value(&task_list)->default_value(bosch::task_list_string(s.suite.kinds)),
     "comma-separated task kinds")
    ("text-files", po::value(&text_files)->multitoken(),
     "natural-text files for the haystacks (default: the setup script's)")
    ("chat", po::bool_switch(&s.suite.chat), "wrap prompts in the ChatML template")
    ("seed", po::value(&s.options.seed)->default_value(0), "random seed")
    ("variant", po::value(&variant)->default_value("full"), "full | single | multi | layer")
    ("probe-budget", po::value(&s.options.probe_budget)->default_value(s.options.probe_budget),
     "Stage 1 evaluations per layer")
    ("chunk-budget", po::value(&s.options.chunk_budget)->default_value(s.options.chunk_budget),
     "Stage 3 evaluations per chunk")
    ("max-evaluations", po::value(&s.options.max_evaluations)->default_value(0), "total budget (0 = none)")
    ("checkpoint", po::value(&s.checkpoint), "checkpoint file, written every 5 evaluations")
    ("resume", po::bool_switch(&s.resume), "continue from --checkpoint")
    ("compare-cpu", po::bool_switch(&s.compare_cpu), "on a GPU, also score all-full and the mask on the CPU")
    ("small", po::bool_switch(&small), "the device check's small setting (see the file comment)")
    ("out,o", po::value(&s.out_path)->default_value("mask.json"), "mask file to write");
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, desc), vm);
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  po::notify(vm);
  if (small) {
    if (vm["tasks"].defaulted()) task_list = "copy";
    if (vm["context"].defaulted()) s.suite.context_length = 512;
    if (vm["samples"].defaulted()) s.suite.calibration_samples = 4;
    if (vm["window"].defaulted()) s.eval_options.window = 32;
    if (vm["probe-budget"].defaulted()) s.options.probe_budget = 4;
    if (vm["chunk-budget"].defaulted()) s.options.chunk_budget = 8;
    s.compare_cpu = true;
  }
  if (s.device != "cpu" && s.device != "cuda")
    throw bosch::invalid_argument("expected cpu or cuda, got '" + s.device + "'", "--device");
  if (s.dtype != "bf16" && s.dtype != "fp16")
    throw bosch::invalid_argument("expected bf16 or fp16, got '" + s.dtype + "'", "--dtype");
  s.options.variant = bosch::parse_variant(variant);
  s.suite.kinds = bosch::parse_task_list(task_list);
  s.suite.seed = s.options.seed;
  for (const auto& f : text_files) s.suite.text_files.emplace_back(f);
  if (s.resume && s.checkpoint.empty())
    throw bosch::invalid_argument("--resume needs --checkpoint", "--resume");
#ifndef BOSCH_HAVE_CUDA
  if (s.device == "cuda")
    throw bosch::invalid_argument(
        "this build has no CUDA support (configure with the CUDA toolkit and -DBOSCH_WITH_CUDA=ON, or use "
        "--device cpu)",
        "--device");
#else
  if (s.device == "cuda") {
    std::string why;
    if (!bosch::cuda::device_available(&why, s.gpu)) {
      std::printf("SKIPPED: no CUDA device: %s\n", why.c_str());
      return 2;
    }
  }
#endif
  const auto t0 = Clock::now();

  // 1. The model.
  const bosch::model::Model model = bosch::model::load(s.model_path);
  const auto& cfg = model.config;
  std::cerr << "model: " << cfg.name << " (" << bosch::model::to_string(cfg.arch) << "), " << cfg.num_layers
            << " layers, " << cfg.num_heads << " query / " << cfg.num_kv_heads << " KV heads, "
            << model.parameter_count() / 1e6 << "M parameters\n";

  // 2. Tasks: calibration for the search, held-out for the report.
  const bosch::TaskSuite tasks = bosch::make_task_suite(s.suite, model.tokenizer);
  std::cerr << "tasks: " << tasks.calibration.samples.size() << " calibration and " << tasks.held_out.samples.size()
            << " held-out samples of <= " << s.suite.context_length << " tokens\n";

  // Steps 3-5 on the chosen backend.
  bosch::cpu::Options cpu_options;
  cpu_options.threads = s.threads;
#ifdef BOSCH_HAVE_CUDA
  if (s.device == "cuda") {
    bosch::cuda::Options gpu_options;
    gpu_options.device = s.gpu;
    gpu_options.dtype = s.dtype == "bf16" ? bosch::cuda::DType::bf16 : bosch::cuda::DType::fp16;
    const bosch::cuda::Backend gpu(model, gpu_options);
    std::cerr << "device: " << bosch::cuda::device_description(s.gpu) << "; weights "
              << gpu.weight_bytes() / (1024.0 * 1024.0) << " MiB in " << s.dtype << "\n";
    const bosch::Result result = select_and_report(gpu, model, s, tasks, t0);

    // 6. The same scores on the CPU (fp32).
    if (s.compare_cpu) {
      const bosch::cpu::Backend cpu(model, cpu_options);
      bosch::TransformerEvaluator cpu_evaluator(cpu, tasks.calibration, s.eval_options);
      const double full_cpu = cpu_evaluator.evaluate(bosch::HeadMask(cpu_evaluator.layout()));
      const double chosen_cpu = cpu_evaluator.evaluate(result.mask);
      std::printf("CPU check (calibration score): all-full %.6f (GPU %.6f, |diff| %.2e); "
                  "BOSCH %.6f (GPU %.6f, |diff| %.2e)\n",
                  full_cpu, result.anchors.full, std::abs(full_cpu - result.anchors.full), chosen_cpu,
                  result.score, std::abs(chosen_cpu - result.score));
    }
    return 0;
  }
#endif
  const bosch::cpu::Backend cpu(model, cpu_options);
  select_and_report(cpu, model, s, tasks, t0);
  return 0;
} catch (const po::error& e) {
  std::cerr << "select_heads: " << e.what() << " (see --help)\n";
  return 2;
} catch (const bosch::invalid_argument& e) {
  std::cerr << "select_heads: " << e.what() << "\n";
  return 2;
} catch (const std::exception& e) {
  std::cerr << "select_heads: " << e.what() << "\n";
  return 1;
}
