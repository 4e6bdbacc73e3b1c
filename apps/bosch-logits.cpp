// bosch-logits: the logits of a model for given token ids, one line per
// position ("POSITION LOGIT LOGIT ..."), under full attention or a window.
//
//   bosch-logits MODEL [--window W] [--sinks S] [--mask FILE] [--threads T] TOKEN_ID...
//
// Without --window and --mask every head is full (causal). --window W alone
// makes every head a sliding window of W keys; with --mask FILE (JSON, TSV or
// text grid, see bosch/io/mask_io.hpp) only the mask's heads are, with W (or
// the mask file's metadata "window") keys and S (or metadata "sinks") sinks.
// Logits are printed in the shortest form that reads back to the same fp32.
// Exit status: 0 success, 2 usage error, 1 runtime error (unreadable model or
// mask, token id outside the vocabulary, ...); errors are one line on stderr.

#include <bosch/cpu/backend.hpp>
#include <bosch/error.hpp>
#include <bosch/io/mask_io.hpp>
#include <bosch/model/model.hpp>

#include <boost/program_options.hpp>

#include <charconv>
#include <cstdio>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

namespace po = boost::program_options;

namespace {

constexpr const char* usage =
    "usage: bosch-logits MODEL [--window W] [--sinks S] [--mask FILE] [--threads T] TOKEN_ID...";

struct Usage {
  std::string message;
};

int parse_int(const std::string& text, const char* what) {
  int v = 0;
  const auto* end = text.data() + text.size();
  const auto r = std::from_chars(text.data(), end, v);
  if (r.ec != std::errc() || r.ptr != end) throw Usage{std::string(what) + " is not an integer: '" + text + "'"};
  return v;
}

}  // namespace

int main(int argc, char** argv) {
  std::string model_path, mask_path;
  std::vector<std::string> token_text;
  std::optional<int> window, sinks;
  int threads = 0;
  try {
    po::options_description opts("options");
    opts.add_options()("help,h", "print this help")(
        "window", po::value<std::string>(), "sliding window W >= 1 (all heads, or the --mask heads)")(
        "sinks", po::value<std::string>(), "sink tokens S >= 0 seen by window heads (default 0)")(
        "mask", po::value<std::string>(&mask_path), "head mask file: which KV heads use the window")(
        "threads", po::value<std::string>(), "OpenMP threads (default: all)");
    po::options_description hidden;
    hidden.add_options()("model", po::value<std::string>(&model_path))("tokens",
                                                                      po::value<std::vector<std::string>>(&token_text));
    po::options_description all;
    all.add(opts).add(hidden);
    po::positional_options_description pos;
    pos.add("model", 1).add("tokens", -1);
    po::variables_map vm;
    po::store(po::command_line_parser(argc, argv).options(all).positional(pos).run(), vm);
    po::notify(vm);
    if (vm.count("help")) {
      std::cout << usage << "\n\n" << opts << "\n";
      return 0;
    }
    if (model_path.empty()) throw Usage{"missing MODEL"};
    if (token_text.empty()) throw Usage{"missing TOKEN_ID..."};
    if (vm.count("window")) {
      window = parse_int(vm["window"].as<std::string>(), "--window");
      if (*window < 1) throw Usage{"--window must be >= 1"};
    }
    if (vm.count("sinks")) {
      sinks = parse_int(vm["sinks"].as<std::string>(), "--sinks");
      if (*sinks < 0) throw Usage{"--sinks must be >= 0"};
    }
    if (vm.count("threads")) {
      threads = parse_int(vm["threads"].as<std::string>(), "--threads");
      if (threads < 0) throw Usage{"--threads must be >= 0"};
    }
    if (sinks && !window && mask_path.empty()) throw Usage{"--sinks needs --window or --mask"};
  } catch (const Usage& u) {
    std::cerr << "bosch-logits: " << u.message << "\n" << usage << "\n";
    return 2;
  } catch (const po::error& e) {
    std::cerr << "bosch-logits: " << e.what() << "\n" << usage << "\n";
    return 2;
  }

  std::vector<int> tokens;
  try {
    for (const auto& t : token_text) tokens.push_back(parse_int(t, "token id"));
  } catch (const Usage& u) {
    std::cerr << "bosch-logits: " << u.message << "\n" << usage << "\n";
    return 2;
  }

  try {
    const bosch::model::Model model = bosch::model::load(model_path);
    const auto layout = model.config.layout();
    bosch::AttentionWindows windows = bosch::AttentionWindows::full();
    if (!mask_path.empty()) {
      bosch::HeadMask mask = bosch::io::read_mask(mask_path, layout);
      if (mask_path.size() >= 5 && mask_path.substr(mask_path.size() - 5) == ".json") {
        const auto meta = bosch::io::read_mask_json(mask_path).metadata;
        if (!window && meta.contains("window") && meta["window"].is_number_integer())
          window = meta["window"].get<int>();
        if (!sinks && meta.contains("sinks") && meta["sinks"].is_number_integer()) sinks = meta["sinks"].get<int>();
      }
      if (!window && mask.count() > 0)
        throw bosch::invalid_argument("the mask has window heads but no window size: pass --window", mask_path);
      if (mask.count() > 0) windows = bosch::AttentionWindows::from_mask(std::move(mask), *window, sinks.value_or(0));
    } else if (window) {
      windows = bosch::AttentionWindows::from_mask(bosch::HeadMask::filled(layout, true), *window, sinks.value_or(0));
    }
    bosch::cpu::Options options;
    options.threads = threads;
    const bosch::cpu::Backend backend(model, options);
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
      std::fwrite(line.data(), 1, line.size(), stdout);
    }
    if (std::fflush(stdout) != 0) throw bosch::file_error("cannot write the output", "stdout");
  } catch (const std::exception& e) {
    std::cerr << "bosch-logits: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
