// SPDX-License-Identifier: Apache-2.0
// bosch generate MODEL: greedy continuation of a prompt, with full attention,
// a window in every head, or the SWA heads of a mask. Shows that a model runs
// and what a mask does to its output.

#include "attention_options.hpp"
#include "commands.hpp"
#include "files.hpp"
#include "model_options.hpp"
#include "run_options.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <span>
#include <string>
#include <vector>

namespace bosch::cli {

namespace {

/// The id of the largest of the first `vocab` logits.
int argmax(const std::vector<float>& logits, int vocab) {
  return static_cast<int>(std::max_element(logits.begin(), logits.begin() + vocab) - logits.begin());
}

/// What --stats reports of one greedy run (incremental decoding only).
struct DecodeStats {
  bool measured = false;        ///< the backend decoded incrementally
  std::size_t kv_bytes = 0;     ///< the KV cache's allocated bytes
  int capacity = 0;             ///< positions the cache was allocated for
  int prefill_tokens = 0;
  double prefill_seconds = 0;
  int decode_tokens = 0;        ///< decode_step calls
  double decode_seconds = 0;
};

/// Appends up to `count` greedy tokens to `ids` (stopping at EOS, which is
/// not appended), calling emit(id) for each. With incremental decoding
/// (prefill + decode_step: the CPU and CUDA backends) each token costs one
/// cached step against the hybrid KV cache, allocated once for the prompt
/// plus count - 1 positions (the last generated token is never fed back);
/// otherwise one forward over the whole sequence with logits at its end.
template <class Backend, class Emit>
DecodeStats greedy(const Backend& backend, std::vector<int>& ids, int count, int eos,
                   const AttentionWindows& windows, Emit&& emit) {
  DecodeStats stats;
  if (count <= 0) return stats;
  const int vocab = backend.config().vocab_size;
  using clock = std::chrono::steady_clock;
  auto seconds_since = [](clock::time_point t) { return std::chrono::duration<double>(clock::now() - t).count(); };
  if constexpr (requires(std::vector<float>* l) { backend.prefill(std::span<const int>(ids), windows, l, 1); }) {
    std::vector<float> logits;
    const int capacity = static_cast<int>(ids.size()) + count - 1;
    auto t = clock::now();
    auto state = backend.prefill(ids, windows, &logits, capacity);
    stats.measured = true;
    stats.prefill_seconds = seconds_since(t);
    stats.prefill_tokens = static_cast<int>(ids.size());
    for (int step = 0; step < count; ++step) {
      const int next = argmax(logits, vocab);
      if (next == eos) break;
      ids.push_back(next);
      emit(next);
      if (step + 1 < count) {
        t = clock::now();
        logits = backend.decode_step(state, next, windows);
        stats.decode_seconds += seconds_since(t);
        ++stats.decode_tokens;
      }
    }
    stats.kv_bytes = state.bytes();
    stats.capacity = state.capacity();
  } else {
    for (int step = 0; step < count; ++step) {
      const int last = static_cast<int>(ids.size()) - 1;
      const int next = argmax(backend.forward(ids, windows, std::span<const int>(&last, 1)), vocab);
      if (next == eos) break;
      ids.push_back(next);
      emit(next);
    }
  }
  return stats;
}

/// Peak resident set size of this process in bytes (getrusage ru_maxrss,
/// which Linux reports in KiB).
long long peak_rss_bytes() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return -1;
  return static_cast<long long>(usage.ru_maxrss) * 1024;
}

}  // namespace

int run_generate(int argc, char** argv) {
  return run_command("generate", [&]() -> int {
    RunOptions model_options({SettingGroup::model});
    AttentionOptions ao;
    OutputOptions oo;
    std::string prompt = "Once upon a time, there was a";
    int tokens = 32;
    bool allow_long_context = false;
    bool stats = false;
    CommandLine cl("generate", "bosch generate [options] MODEL [--prompt TEXT] [--mask FILE]",
                   "Greedily continue a prompt with MODEL: full attention in every head, a\n"
                   "sliding window in every head (--window), or in the SWA heads of a mask\n"
                   "(--mask), to see that the model runs and what a mask does to its output.\n"
                   "The prompt and its continuation go to stdout; the model, the attention\n"
                   "set-up and the speed to stderr. Both backends decode with a KV cache\n"
                   "(one cached step per token; a mask's SWA heads keep only their sinks and\n"
                   "a ring of the last --window keys; fp32 on the CPU, 16-bit on CUDA).\n"
                   "--stats adds one line on stderr: the KV cache's bytes and the exact\n"
                   "formula's, peak resident memory, prefill and decode tokens/s.");
    po::options_description what("Generation");
    what.add_options()("prompt", po::value(&prompt)->default_value(prompt)->value_name("TEXT"), "text to continue")(
        "tokens", po::value(&tokens)->default_value(tokens)->value_name("N"),
        "most tokens to generate (stops earlier at end of sequence)")(
        "allow-long-context", flag(&allow_long_context),
        "allow prompt + tokens beyond the model's trained context (length extrapolation)")(
        "stats", flag(&stats),
        "print one line on stderr (even with --quiet): kv_bytes (allocated by the hybrid KV cache), "
        "kv_bytes_formula (the exact formula for the mask), kv_bytes_full (all heads full), peak_rss_bytes "
        "(getrusage), prefill and decode tokens/s");
    cl.options.add(model_options.describe()).add(what).add(ao.describe()).add(oo.describe());
    cl.positional.add("model", 1);
    cl.epilog = "Examples:\n"
                "  bosch generate SmolLM2-135M-Instruct.Q4_1.gguf --prompt 'The capital of France is'\n"
                "  bosch generate SmolLM2-135M-Instruct.Q4_1.gguf --mask mask.json --tokens 64\n"
                "  bosch generate SmolLM2-135M-Instruct.Q4_1.gguf --mask mask.json --stats\n";
    po::variables_map vm;
    if (!cl.parse(argc, argv, vm)) return exit_success;

    const RunSettings settings = model_options.resolve(vm);
    ao.validate(vm);
    if (tokens < 0) throw invalid_argument("must be at least 0, got " + std::to_string(tokens), "--tokens");
    if (tokens > max_context)
      throw invalid_argument("at most " + std::to_string(max_context) + ", got " + std::to_string(tokens), "--tokens");
    if (stats && tokens < 1) throw invalid_argument("needs --tokens of at least 1", "--stats");
    const model::Config config = read_model_config(settings.model);
    std::string attention;
    const AttentionWindows windows = ao.resolve(vm, config.layout(), attention);

    // The prompt's length is known once the tokenizer is loaded: the summary
    // follows the check, so that an error stays one line.
    const model::Model model = load_model(settings, OutputOptions{.quiet = true});
    std::vector<int> ids = model.tokenizer.encode(prompt, true);
    if (ids.empty()) throw invalid_argument("the prompt encodes to no tokens", "--prompt");
    check_context_for_model(static_cast<long long>(ids.size()) + tokens, model.config, allow_long_context,
                          "--prompt (" + std::to_string(ids.size()) + " tokens) + --tokens");
    oo.info() << model_summary(model) << "attention: " << attention << "\n";
    oo.detail() << "prompt: " << ids.size() << " tokens:";
    for (int id : ids) oo.detail() << " " << id;
    oo.detail() << "\n";

    return with_backend(model, settings, [&](const auto& backend) -> int {
      std::cout << model.tokenizer.decode(ids) << std::flush;
      const std::size_t prompt_length = ids.size();
      const auto t0 = std::chrono::steady_clock::now();
      const DecodeStats ds = greedy(backend, ids, tokens, model.tokenizer.eos(), windows,
                                    [&](int id) { std::cout << model.tokenizer.piece(id) << std::flush; });
      const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      std::cout << "\n" << std::flush;
      check_stdout();
      const std::size_t generated = ids.size() - prompt_length;
      oo.info() << "generated " << generated << " tokens in " << seconds << " s ("
                << static_cast<double>(generated) / std::max(seconds, 1e-9) << " tokens/s)\n";
      if (stats && ds.measured) {
        auto rate = [](int n, double s) { return s > 0 ? static_cast<double>(n) / s : 0.0; };
        std::cerr << "stats: kv_bytes=" << ds.kv_bytes
                  << " kv_bytes_formula=" << backend.kv_bytes(windows, ds.capacity)
                  << " kv_bytes_full=" << backend.kv_bytes(AttentionWindows::full(), ds.capacity)
                  << " kv_tokens=" << ds.capacity << " peak_rss_bytes=" << peak_rss_bytes()
                  << " prefill_tokens=" << ds.prefill_tokens
                  << " prefill_tok_s=" << rate(ds.prefill_tokens, ds.prefill_seconds)
                  << " decode_tokens=" << ds.decode_tokens
                  << " decode_tok_s=" << rate(ds.decode_tokens, ds.decode_seconds) << std::endl;
      }
      oo.detail() << "generated ids:";
      for (std::size_t i = prompt_length; i < ids.size(); ++i) oo.detail() << " " << ids[i];
      oo.detail() << "\n";
      return exit_success;
    });
  });
}

}  // namespace bosch::cli
