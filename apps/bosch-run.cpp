// bosch-run: shows that a model is alive. Prints its configuration, head
// layout, parameter count and memory, then greedily continues a prompt on the
// CPU backend (optionally with sliding-window heads).
//
//   bosch-run MODEL [--prompt TEXT] [--tokens N] [--window W [--sinks S] [--mask FILE]] [--threads T]
//
// Greedy decoding here recomputes the whole forward pass for each new token,
// with logits at the last position only: a plain check of the full forward.
// (The backend also decodes incrementally with a KV cache, Backend::prefill +
// decode_step, as the held-out reports do.)
// Exit status: 0 success, 2 usage error, 1 runtime error.

#include <bosch/cpu/backend.hpp>
#include <bosch/error.hpp>
#include <bosch/io/mask_io.hpp>
#include <bosch/model/model.hpp>

#include <boost/program_options.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

namespace po = boost::program_options;

namespace {

constexpr const char* usage =
    "usage: bosch-run MODEL [--prompt TEXT] [--tokens N] [--window W [--sinks S] [--mask FILE]] [--threads T]";

const char* style_name(bosch::model::RopeStyle s) {
  return s == bosch::model::RopeStyle::interleaved ? "interleaved pairs" : "neox halves";
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, prompt, mask_path;
  int new_tokens = 32, window = 0, sinks = 0, threads = 0;
  try {
    po::options_description opts("options");
    opts.add_options()("help,h", "print this help")(
        "prompt", po::value<std::string>(&prompt)->default_value("Once upon a time, there was a"),
        "text to continue")("tokens", po::value<int>(&new_tokens)->default_value(32), "tokens to generate")(
        "window", po::value<int>(&window), "sliding window W (all heads, or the --mask heads)")(
        "sinks", po::value<int>(&sinks), "sink tokens for window heads")(
        "mask", po::value<std::string>(&mask_path), "head mask file (JSON, TSV or grid)")(
        "threads", po::value<int>(&threads), "OpenMP threads (default: all)");
    po::options_description hidden;
    hidden.add_options()("model", po::value<std::string>(&model_path));
    po::options_description all;
    all.add(opts).add(hidden);
    po::positional_options_description pos;
    pos.add("model", 1);
    po::variables_map vm;
    po::store(po::command_line_parser(argc, argv).options(all).positional(pos).run(), vm);
    po::notify(vm);
    if (vm.count("help")) {
      std::cout << usage << "\n\n" << opts << "\n";
      return 0;
    }
    if (model_path.empty()) throw po::error("missing MODEL");
    if (new_tokens < 0) throw po::error("--tokens must be >= 0");
    if (vm.count("window") && window < 1) throw po::error("--window must be >= 1");
    if (sinks < 0) throw po::error("--sinks must be >= 0");
    if (threads < 0) throw po::error("--threads must be >= 0");
    if (!mask_path.empty() && !vm.count("window")) throw po::error("--mask needs --window");
  } catch (const po::error& e) {
    std::cerr << "bosch-run: " << e.what() << "\n" << usage << "\n";
    return 2;
  }

  try {
    const auto t0 = std::chrono::steady_clock::now();
    const bosch::model::Model model = bosch::model::load(model_path);
    const double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const auto& c = model.config;
    std::printf("model      %s\n", model.source.string().c_str());
    std::printf("name       %s (arch %s), fingerprint %s\n", c.name.c_str(), bosch::model::to_string(c.arch),
                model.fingerprint.c_str());
    std::printf("layers     %d, hidden %d, FFN %d, vocab %d, context %d\n", c.num_layers, c.hidden_size,
                c.intermediate_size, c.vocab_size, c.max_position);
    std::printf("heads      %d query / %d KV per layer (GQA group %d), head dim %d\n", c.num_heads,
                c.num_kv_heads, c.num_heads / c.num_kv_heads, c.head_dim);
    std::printf("layout     %d x %d KV heads = %zu decision bits\n", c.num_layers, c.num_kv_heads,
                c.layout().size());
    std::printf("rope       theta %g, %s, scaling %s", c.rope_theta, style_name(c.rope_style),
                c.rope_scaling.type.c_str());
    if (c.rope_scaling.type != "none") std::printf(" (factor %g)", c.rope_scaling.factor);
    std::printf("\nnorms      RMSNorm eps %g%s%s%s\n", c.rms_eps, c.qkv_bias ? ", QKV biases" : "",
                c.qk_norm ? ", Q/K norms" : "", c.tie_embeddings ? ", output tied to embedding" : "");
    std::printf("parameters %llu (%.1f M), %.1f MiB as fp32; loaded in %.2f s\n",
                static_cast<unsigned long long>(model.parameter_count()), model.parameter_count() / 1e6,
                model.weights.bytes() / 1048576.0, load_s);

    bosch::AttentionWindows windows = bosch::AttentionWindows::full();
    if (window > 0) {
      bosch::HeadMask mask = mask_path.empty() ? bosch::HeadMask::filled(c.layout(), true)
                                               : bosch::io::read_mask(mask_path, c.layout());
      std::printf("attention  %zu of %zu KV heads sliding-window, w = %d, sinks = %d\n", mask.count(),
                  mask.size(), window, sinks);
      windows = bosch::AttentionWindows::from_mask(std::move(mask), window, sinks);
    } else {
      std::printf("attention  full (causal) in every head\n");
    }

    bosch::cpu::Options options;
    options.threads = threads;
    const bosch::cpu::Backend backend(model, options);
    std::vector<int> ids = model.tokenizer.encode(prompt, true);
    if (ids.empty()) throw bosch::invalid_argument("the prompt encodes to no tokens", "--prompt");
    std::printf("prompt     \"%s\" -> %zu tokens:", prompt.c_str(), ids.size());
    for (int id : ids) std::printf(" %d", id);
    std::printf("\n\n%s", model.tokenizer.decode(ids).c_str());
    std::fflush(stdout);
    const std::size_t prompt_len = ids.size();
    const int vocab = c.vocab_size;
    const auto t1 = std::chrono::steady_clock::now();
    for (int step = 0; step < new_tokens; ++step) {
      const int last = static_cast<int>(ids.size()) - 1;
      const auto logits = backend.forward(ids, windows, std::span<const int>(&last, 1));
      const int next = static_cast<int>(std::max_element(logits.begin(), logits.begin() + vocab) - logits.begin());
      ids.push_back(next);
      if (next == model.tokenizer.eos()) break;
      std::printf("%s", model.tokenizer.piece(next).c_str());
      std::fflush(stdout);
    }
    const double gen_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t1).count();
    std::printf("\n\ngenerated  %zu tokens in %.2f s (%.1f tokens/s, full recompute per token):",
                ids.size() - prompt_len, gen_s, (ids.size() - prompt_len) / std::max(gen_s, 1e-9));
    for (std::size_t i = prompt_len; i < ids.size(); ++i) std::printf(" %d", ids[i]);
    std::printf("\n");
  } catch (const std::exception& e) {
    std::cerr << "bosch-run: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
