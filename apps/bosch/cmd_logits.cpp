// SPDX-License-Identifier: Apache-2.0
// bosch logits MODEL TOKEN_ID...: the logits of a model for given token ids,
// one line per position ("POSITION LOGIT LOGIT ..."), under full attention, a
// window in every head, or the SWA heads of a mask. Logits are printed in the
// shortest form that reads back to the same fp32 value, so that two builds or
// two implementations can be compared bit for bit.

#include "attention_options.hpp"
#include "commands.hpp"
#include "files.hpp"
#include "model_options.hpp"
#include "run_options.hpp"

#include <charconv>
#include <iostream>
#include <cstdio>
#include <string>
#include <vector>

namespace bosch::cli {

int run_logits(int argc, char** argv) {
  return run_command("logits", [&]() -> int {
    RunOptions model_options({SettingGroup::model});
    AttentionOptions ao;
    OutputOptions oo;
    std::vector<std::string> token_text;
    bool allow_long_context = false;
    CommandLine cl("logits", "bosch logits [options] MODEL TOKEN_ID...",
                   "Print the logits of MODEL for the token ids, one line per position:\n"
                   "\"POSITION LOGIT LOGIT ...\" (the whole vocabulary), each logit in the\n"
                   "shortest text that reads back to the same fp32 value. Attention is full\n"
                   "(causal) unless --window or --mask say otherwise. The model and attention\n"
                   "set-up are summarized on stderr (not with --quiet).");
    po::options_description what("Tokens");
    what.add_options()("allow-long-context", flag(&allow_long_context),
                       "allow more tokens than the model's trained context (length extrapolation)");
    cl.options.add(model_options.describe()).add(what).add(ao.describe()).add(oo.describe());
    cl.hidden.add_options()("tokens", po::value(&token_text)->value_name("TOKEN_ID..."));
    cl.positional.add("model", 1).add("tokens", -1);
    cl.negative_numbers_to = "tokens";  // "-1" is a token id out of range, not an option
    cl.epilog = "Example:\n  bosch logits stories260K.gguf 1 403 407 261 --window 2 > logits.txt\n";
    po::variables_map vm;
    if (!cl.parse(argc, argv, vm)) return exit_success;

    const RunSettings settings = model_options.resolve(vm);
    ao.validate(vm);
    if (token_text.empty()) throw usage_error("no token ids given (TOKEN_ID...)");
    if (token_text.size() > static_cast<std::size_t>(max_context))
      throw usage_error("at most " + std::to_string(max_context) + " token ids");
    std::vector<int> tokens;
    for (const auto& t : token_text) tokens.push_back(parse_number<int>(t, "TOKEN_ID"));
    const model::Config config = read_model_config(settings.model);
    for (int t : tokens)
      if (t < 0 || t >= config.vocab_size)
        throw invalid_argument("token id " + std::to_string(t) + " outside the vocabulary [0, " +
                                   std::to_string(config.vocab_size) + ")",
                               "TOKEN_ID");
    check_context_for_model(static_cast<long long>(tokens.size()), config, allow_long_context, "TOKEN_ID...");
    std::string attention;
    const AttentionWindows windows = ao.resolve(vm, config.layout(), attention);

    const model::Model model = load_model(settings, oo);
    oo.info() << "attention: " << attention << "\n";
    return with_backend(model, settings, [&](const auto& backend) -> int {
      std::vector<int> positions(tokens.size());
      for (std::size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<int>(i);
      const auto logits = backend.forward(tokens, windows, positions);
      const std::size_t vocab = static_cast<std::size_t>(model.config.vocab_size);
      std::string line;
      char buf[64];
      for (std::size_t p = 0; p < positions.size(); ++p) {
        line = std::to_string(p);
        for (std::size_t v = 0; v < vocab; ++v) {
          const auto r = std::to_chars(buf, buf + sizeof(buf), logits[p * vocab + v]);
          line += ' ';
          line.append(buf, r.ptr);
        }
        line += '\n';
        std::cout << line;
      }
      check_stdout();
      return exit_success;
    });
  });
}

}  // namespace bosch::cli
