// cuda_select_heads: BOSCH end to end on a real model, the forward pass on a
// CUDA GPU (TransformerEvaluator<cuda::Backend>). The same steps and options
// as examples/select_heads.cpp (the CPU version), plus the GPU's:
//
//   cuda_select_heads --model SmolLM2-135M-Instruct.Q4_1.gguf --ratio 0.5 --out mask.json
//
// 1. load the model and upload its weights to the GPU (bf16, or --dtype fp16);
// 2. generate long-context calibration tasks and a disjoint held-out set;
// 3. run bosch::select with the transformer evaluator (progress on stderr);
// 4. print the mask as a layers x KV-heads grid and the held-out scores of
//    all-full, all-SWA and the chosen mask;
// 5. write the mask file (JSON, atomically);
// 6. with --compare-cpu, score all-full and the chosen mask on the calibration
//    set with the CPU backend (fp32) too: the scores differ from the GPU's by
//    the 16-bit rounding only.
//
// --small is the device check's setting: copy task (natural text: give --text
// files when the setup script's are absent), 512-token prompts, 4 samples,
// window 32, budgets 4/8, 4 held-out samples, --compare-cpu. The paper's
// setting is window 1024, 32k-token context and 64 NIAH samples:
//   --window 1024 --context 32768 --samples 64.
// Exit status: 0 on success, 1 on an error, 2 on a usage error or when no CUDA
// device is usable (with "SKIPPED: no CUDA device: <reason>").
#include <bosch/bosch.hpp>
#include <bosch/cpu/backend.hpp>
#include <bosch/cuda/backend.hpp>
#include <bosch/eval/report.hpp>
#include <bosch/eval/transformer_evaluator.hpp>
#include <bosch/model/model.hpp>
#include <bosch/tasks/tasks.hpp>

#include <boost/program_options.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace po = boost::program_options;

namespace {

std::vector<bosch::tasks::TaskKind> parse_kinds(const std::string& list) {
  std::vector<bosch::tasks::TaskKind> kinds;
  std::stringstream in(list);
  for (std::string name; std::getline(in, name, ',');)
    if (!name.empty()) kinds.push_back(bosch::tasks::parse_task_kind(name));
  if (kinds.empty()) throw bosch::invalid_argument("no task given", "--tasks");
  return kinds;
}

void print_row(const char* name, const bosch::HeldOutReport& r, std::size_t heads) {
  std::printf("  %-10s %5zu  %9.4f  %8.4f  %8.3f\n", name, heads, r.all.mean_logprob,
              r.all.probability, r.all.accuracy);
}

}  // namespace

int main(int argc, char** argv) try {
  std::string model_path, out_path, task_list, variant, dtype;
  std::vector<std::string> text_files;
  bosch::Options options;
  bosch::TransformerEvaluatorOptions eval_options;
  int context = 0, samples = 0, held_out_samples = 0, device = 0;
  bool chat = false, compare_cpu = false, small = false;

  po::options_description desc("cuda_select_heads: BOSCH head selection, forward pass on a CUDA GPU");
  desc.add_options()
    ("help,h", "show this help")
    ("model,m", po::value(&model_path)->required(), "GGUF file or Hugging Face directory")
    ("ratio,r", po::value(&options.target_ratio)->default_value(0.5), "fraction of KV heads made SWA, in (0, 1)")
    ("window,w", po::value(&eval_options.window)->default_value(128), "sliding window w in tokens")
    ("sinks,s", po::value(&eval_options.sinks)->default_value(0), "sink tokens s kept by SWA heads")
    ("context,c", po::value(&context)->default_value(1024), "task context length in tokens")
    ("samples,n", po::value(&samples)->default_value(2), "calibration samples per task")
    ("held-out", po::value(&held_out_samples)->default_value(4), "held-out samples per task")
    ("tasks,t", po::value(&task_list)->default_value("niah_single_1,niah_single_2,niah_multikey_1,passkey"),
     "comma-separated task kinds")
    ("text", po::value(&text_files)->multitoken(), "natural-text files for the haystacks (default: the setup script's)")
    ("chat", po::bool_switch(&chat), "wrap prompts in the ChatML template")
    ("seed", po::value(&options.seed)->default_value(0), "random seed")
    ("variant", po::value(&variant)->default_value("full"), "full | single | multi | layer")
    ("probe-budget", po::value(&options.probe_budget)->default_value(options.probe_budget),
     "Stage 1 evaluations per layer")
    ("chunk-budget", po::value(&options.chunk_budget)->default_value(options.chunk_budget),
     "Stage 3 evaluations per chunk")
    ("max-evaluations", po::value(&options.max_evaluations)->default_value(0), "total budget (0 = none)")
    ("dtype", po::value(&dtype)->default_value("bf16"), "weights and activations on the GPU: bf16 | fp16")
    ("device", po::value(&device)->default_value(0), "CUDA device index")
    ("compare-cpu", po::bool_switch(&compare_cpu), "also score all-full and the chosen mask on the CPU")
    ("small", po::bool_switch(&small), "the device check's small setting (see the file comment)")
    ("out,o", po::value(&out_path)->default_value("mask.json"), "mask file to write");
  po::variables_map vm;
  po::store(po::parse_command_line(argc, argv, desc), vm);
  if (vm.count("help")) {
    std::cout << desc << "\n";
    return 0;
  }
  po::notify(vm);
  if (small) {
    if (vm["tasks"].defaulted()) task_list = "copy";
    if (vm["context"].defaulted()) context = 512;
    if (vm["samples"].defaulted()) samples = 4;
    if (vm["window"].defaulted()) eval_options.window = 32;
    if (vm["probe-budget"].defaulted()) options.probe_budget = 4;
    if (vm["chunk-budget"].defaulted()) options.chunk_budget = 8;
    compare_cpu = true;
  }
  options.variant = bosch::parse_variant(variant);
  if (dtype != "bf16" && dtype != "fp16")
    throw bosch::invalid_argument("expected bf16 or fp16, got " + dtype, "--dtype");
  std::string why;
  if (!bosch::cuda::device_available(&why, device)) {
    std::printf("SKIPPED: no CUDA device: %s\n", why.c_str());
    return 2;
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto seconds = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };

  // 1. The model, on the GPU.
  const bosch::model::Model model = bosch::model::load(model_path);
  const auto& cfg = model.config;
  std::cerr << "model: " << cfg.name << " (" << bosch::model::to_string(cfg.arch) << "), "
            << cfg.num_layers << " layers, " << cfg.num_heads << " query / " << cfg.num_kv_heads
            << " KV heads, " << model.parameter_count() / 1e6 << "M parameters\n";
  bosch::cuda::Options gpu_options;
  gpu_options.device = device;
  gpu_options.dtype = dtype == "bf16" ? bosch::cuda::DType::bf16 : bosch::cuda::DType::fp16;
  const bosch::cuda::Backend backend(model, gpu_options);
  std::cerr << "device: " << bosch::cuda::device_description(device) << "; weights "
            << backend.weight_bytes() / (1024.0 * 1024.0) << " MiB in " << dtype << "\n";

  // 2. Tasks: calibration for the search, held-out for the report.
  std::vector<bosch::tasks::TaskSpec> calibration, held_out;
  for (auto kind : parse_kinds(task_list)) {
    bosch::tasks::TaskSpec spec;
    spec.kind = kind;
    spec.context_length = context;
    spec.seed = options.seed;
    for (const auto& f : text_files) spec.text_files.emplace_back(f);
    if (chat) spec.format = bosch::tasks::chatml();
    auto split = bosch::tasks::calibration_and_held_out(spec);
    split.calibration.num_samples = samples;
    split.held_out.num_samples = held_out_samples;
    calibration.push_back(split.calibration);
    held_out.push_back(split.held_out);
  }
  const auto calibration_set = bosch::tasks::generate(calibration, model.tokenizer);
  const auto held_out_set = bosch::tasks::generate(held_out, model.tokenizer);
  std::cerr << "tasks: " << calibration_set.samples.size() << " calibration and "
            << held_out_set.samples.size() << " held-out samples of <= " << context << " tokens\n";

  // 3. The search, every forward pass on the GPU.
  bosch::TransformerEvaluator evaluator(backend, calibration_set, eval_options);
  const double setup_seconds = seconds();
  const bosch::Result result = bosch::select(evaluator, options, bosch::ProgressReporter{});
  const double search_seconds = seconds() - setup_seconds;

  // 4. The mask and the held-out comparison.
  std::cout << "SWA heads (S) per layer, layer 0 first; " << result.mask.count() << " of "
            << result.mask.size() << " KV heads:\n"
            << bosch::to_grid(result.mask);
  std::printf("search: %zu evaluations in %.2f s on the GPU (%.2f evaluations/s), %zu layer runs "
              "saved by the residual cache\n",
              result.evaluations, search_seconds,
              search_seconds > 0 ? static_cast<double>(result.evaluator_calls) / search_seconds : 0.0,
              evaluator.stats().layers_saved);
  const auto layout = evaluator.layout();
  const auto all_full = bosch::HeadMask(layout);
  const auto all_swa = bosch::HeadMask::filled(layout, true);
  std::cout << "\nheld-out (" << held_out_set.samples.size()
            << " samples): mean answer log-prob, its exponent, greedy accuracy\n"
            << "  mask        heads   log-prob      prob  accuracy\n";
  bosch::ReportOptions report_options;
  report_options.extra_new_tokens = 4;  // greedy budget: answer + 4 tokens
  const std::pair<const char*, const bosch::HeadMask*> rows[] = {
      {"all-full", &all_full}, {"all-SWA", &all_swa}, {"BOSCH", &result.mask}};
  for (const auto& [name, mask] : rows) {
    const auto report = bosch::evaluate_held_out(backend, model.tokenizer, held_out_set,
                                                 evaluator.windows(*mask), report_options);
    print_row(name, report, mask->count());
  }

  // 5. The mask file.
  nlohmann::json meta{{"model", cfg.name},
                      {"model_file", model.source.filename().string()},
                      {"model_fingerprint", model.fingerprint},
                      {"target_ratio", options.target_ratio},
                      {"ratio", result.mask.ratio()},
                      {"window", eval_options.window},
                      {"sinks", eval_options.sinks},
                      {"score", result.score},
                      {"normalized_score", result.normalized_score},
                      {"evaluations", result.evaluations},
                      {"seed", options.seed},
                      {"variant", bosch::to_string(options.variant)},
                      {"tasks", task_list},
                      {"context", context},
                      {"backend", "cuda"},
                      {"dtype", dtype},
                      {"search_seconds", search_seconds},
                      {"bosch_version", bosch::version_string}};
  bosch::io::write_mask_json(out_path, result.mask, meta);
  std::cout << "\nwrote " << out_path << " (" << result.evaluations << " evaluations, search "
            << search_seconds << " s, total " << seconds() << " s)\n";

  // 6. The same scores on the CPU (fp32).
  if (compare_cpu) {
    const bosch::cpu::Backend cpu(model);
    bosch::TransformerEvaluator cpu_evaluator(cpu, calibration_set, eval_options);
    const double full_cpu = cpu_evaluator.evaluate(all_full);
    const double chosen_cpu = cpu_evaluator.evaluate(result.mask);
    std::printf("CPU check (calibration score): all-full %.6f (GPU %.6f, |diff| %.2e); "
                "BOSCH %.6f (GPU %.6f, |diff| %.2e)\n",
                full_cpu, result.anchors.full, std::abs(full_cpu - result.anchors.full), chosen_cpu,
                result.score, std::abs(chosen_cpu - result.score));
  }
  return 0;
} catch (const po::error& e) {
  std::cerr << "cuda_select_heads: " << e.what() << " (see --help)\n";
  return 2;
} catch (const bosch::invalid_argument& e) {
  std::cerr << "cuda_select_heads: " << e.what() << "\n";
  return 2;
} catch (const std::exception& e) {
  std::cerr << "cuda_select_heads: " << e.what() << "\n";
  return 1;
}
