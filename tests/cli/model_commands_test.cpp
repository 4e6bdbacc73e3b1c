// bosch generate and bosch logits: a model run directly, with full attention,
// a window in every head or the SWA heads of a mask.
#include "cli_support.hpp"

#include <bosch/bosch.hpp>
#include <bosch/io/mask_io.hpp>
#include <bosch/cpu/backend.hpp>
#include <bosch/cpu/kv_cache.hpp>
#include <bosch/model/model.hpp>

#include <charconv>
#include <map>
#include <sstream>

using namespace bosch::test::cli;

namespace {

/// The text `bosch logits` prints for the logits of `tokens` under `windows`.
std::string expected_logits(const bosch::model::Model& model, const std::vector<int>& tokens,
                            const bosch::AttentionWindows& windows) {
  bosch::cpu::Options o;
  o.threads = 1;
  const bosch::cpu::Backend backend(model, o);
  std::vector<int> positions(tokens.size());
  for (std::size_t i = 0; i < positions.size(); ++i) positions[i] = static_cast<int>(i);
  const auto logits = backend.forward(tokens, windows, positions);
  const std::size_t vocab = static_cast<std::size_t>(model.config.vocab_size);
  std::string out;
  char buf[64];
  for (std::size_t p = 0; p < positions.size(); ++p) {
    out += std::to_string(p);
    for (std::size_t v = 0; v < vocab; ++v) {
      const auto r = std::to_chars(buf, buf + sizeof buf, logits[p * vocab + v]);
      out += ' ';
      out.append(buf, r.ptr);
    }
    out += '\n';
  }
  return out;
}

}  // namespace

TEST_CASE("logits: bit-exact text of the backend's logits, full, windowed and masked") {
  const std::string m = model();
  if (m.empty()) return;
  TempDir dir;
  const bosch::model::Model loaded = bosch::model::load(m);
  const std::vector<int> tokens{1, 403, 407, 261, 378, 432, 383, 286, 261, 376};
  const std::vector<std::string> ids{"1", "403", "407", "261", "378", "432", "383", "286", "261", "376"};
  const auto layout = loaded.config.layout();

  Run r = run(std::vector<std::string>{"logits", m, "--threads", "1", "-q"} + ids, dir);
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  CHECK(r.out == expected_logits(loaded, tokens, bosch::AttentionWindows::full()));

  r = run(std::vector<std::string>{"logits", m, "--threads", "1", "--window", "3", "--sinks", "1"} + ids, dir);
  REQUIRE(r.status == 0);
  CHECK(r.err.find("20 of 20 KV heads sliding-window, w = 3, sinks = 1") != std::string::npos);
  CHECK(r.out ==
        expected_logits(loaded, tokens, bosch::AttentionWindows::from_mask(bosch::HeadMask::filled(layout, true), 3, 1)));

  // A mask: its heads use the window recorded in its metadata.
  bosch::HeadMask mask(layout);
  for (int l = 0; l < layout.num_layers; ++l) mask.set(l, l % layout.num_kv_heads, true);
  bosch::io::write_mask_json(dir / "mask.json", mask, {{"window", 2}, {"sinks", 0}});
  bosch::io::write_mask_tsv(dir / "mask.tsv", mask);
  const std::string masked = expected_logits(loaded, tokens, bosch::AttentionWindows::from_mask(mask, 2, 0));
  r = run(std::vector<std::string>{"logits", m, "--threads", "1", "-q", "--mask", dir / "mask.json"} + ids, dir);
  REQUIRE(r.status == 0);
  CHECK(r.out == masked);
  CHECK(r.out != expected_logits(loaded, tokens, bosch::AttentionWindows::full()));
  // A TSV records no window: --window gives it.
  r = run(std::vector<std::string>{"logits", m, "--threads", "1", "-q", "--mask", dir / "mask.tsv", "--window", "2"} +
              ids,
          dir);
  REQUIRE(r.status == 0);
  CHECK(r.out == masked);
}

TEST_CASE("logits and generate: errors and limits") {
  const std::string m = model();
  if (m.empty()) return;
  TempDir dir;
  auto check = [&](const Run& r, int status, const std::string& cmd, const std::string& needle) {
    INFO(r.err);
    CHECK(r.status == status);
    CHECK(one_line(r.err));
    CHECK(r.err.rfind("bosch " + cmd + ": ", 0) == 0);
    CHECK(r.err.find(needle) != std::string::npos);
    CHECK(r.out.empty());
  };
  check(run({"logits", m}, dir), 2, "logits", "no token ids given");
  check(run({"logits", m, "1", "x"}, dir), 2, "logits", "TOKEN_ID: expected an integer, got 'x'");
  check(run({"logits", m, "1", "512"}, dir), 2, "logits", "token id 512 outside the vocabulary [0, 512)");
  check(run({"logits", m, "--window", "0", "1"}, dir), 2, "logits", "--window: must be at least 1");
  check(run({"logits", m, "--sinks", "2", "1"}, dir), 2, "logits", "--sinks needs --window or --mask");
  check(run({"logits", dir / "missing.gguf", "1"}, dir), 1, "logits", "missing.gguf");
  std::vector<std::string> many{"logits", m};
  for (int i = 0; i < 129; ++i) many.push_back("1");
  check(run(many, dir), 2, "logits", "129 tokens exceed the model's trained context of 128 tokens");
  bosch::io::write_mask_json(dir / "swa.json", bosch::HeadMask::filled({5, 8, 4}, true));
  check(run({"logits", m, "--mask", dir / "swa.json", "1"}, dir), 2, "logits", "no window size is recorded");
  bosch::io::write_mask_json(dir / "other.json", bosch::HeadMask::filled({6, 8, 4}, true), {{"window", 2}});
  check(run({"logits", m, "--mask", dir / "other.json", "1"}, dir), 1, "logits",
        "does not match the expected layout (5x8x4)");

  check(run({"generate", m, "--tokens", "-1"}, dir), 2, "generate", "--tokens: must be at least 0");
  check(run({"generate", m, "--tokens", "500"}, dir), 2, "generate",
        "--tokens: 509 tokens exceed the model's trained context of 128 tokens");
  check(run({"generate", dir / "missing.gguf"}, dir), 1, "generate", "missing.gguf");
  check(run({"generate", m, "--tokens", "0", "--stats"}, dir), 2, "generate", "--stats: needs --tokens of at least 1");
  check(run({"generate", m, "--mask", dir / "other.json", "--stats"}, dir), 1, "generate",
        "does not match the expected layout (5x8x4)");
}

TEST_CASE("generate: greedy continuation with the KV cache, as the backend decodes it") {
  const std::string m = model();
  if (m.empty()) return;
  TempDir dir;
  const bosch::model::Model loaded = bosch::model::load(m);
  const std::string prompt = "Once upon a time, there was a";
  const int count = 24;

  // The same greedy decoding in-process (prefill, then cached steps).
  auto expected = [&](const bosch::AttentionWindows& windows) {
    const bosch::cpu::Backend backend(loaded);
    std::vector<int> ids = loaded.tokenizer.encode(prompt, true);
    std::vector<float> logits;
    auto state = backend.prefill(ids, windows, &logits);
    std::string text = loaded.tokenizer.decode(ids);
    for (int step = 0; step < count; ++step) {
      const int next = static_cast<int>(
          std::max_element(logits.begin(), logits.begin() + loaded.config.vocab_size) - logits.begin());
      if (next == loaded.tokenizer.eos()) break;
      text += loaded.tokenizer.piece(next);
      logits = backend.decode_step(state, next, windows);
    }
    return text + "\n";
  };

  Run r = run({"generate", m, "--prompt", prompt, "--tokens", std::to_string(count), "--threads", "1"}, dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.rfind(prompt, 0) == 0);
  CHECK(r.out == expected(bosch::AttentionWindows::full()));
  CHECK(r.err.find("attention: full (causal) attention in every head") != std::string::npos);
  CHECK(r.err.find("generated ") != std::string::npos);

  // Every head a 4-token window: another continuation, still the backend's.
  const auto windowed = bosch::AttentionWindows::from_mask(bosch::HeadMask::filled(loaded.config.layout(), true), 4, 0);
  r = run({"generate", m, "--prompt", prompt, "--tokens", std::to_string(count), "--window", "4", "-q"}, dir);
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  CHECK(r.out == expected(windowed));
  CHECK(r.out != expected(bosch::AttentionWindows::full()));
}

TEST_CASE("generate --stats: one line with the KV cache's bytes, the formula's, memory and speed") {
  const std::string m = model();
  if (m.empty()) return;
  TempDir dir;
  const bosch::model::Model loaded = bosch::model::load(m);
  const auto layout = loaded.config.layout();
  bosch::HeadMask mask(layout);
  for (std::size_t i = 0; i < mask.size(); i += 2) mask.set_flat(i, true);
  bosch::io::write_mask_json(dir / "half.json", mask, {{"window", 3}, {"sinks", 1}});
  const std::string prompt = "Once upon a time, there was a";
  const int count = 12;
  Run r = run({"generate", m, "--prompt", prompt, "--tokens", std::to_string(count), "--mask", dir / "half.json",
               "--stats", "-q"},
              dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  REQUIRE(one_line(r.err));
  CHECK(r.err.rfind("stats: ", 0) == 0);
  // key=value fields
  std::map<std::string, double> f;
  std::istringstream in(r.err.substr(7));
  std::string item;
  while (in >> item) {
    const auto eq = item.find('=');
    REQUIRE(eq != std::string::npos);
    f[item.substr(0, eq)] = std::stod(item.substr(eq + 1));
  }
  for (const char* key : {"kv_bytes", "kv_bytes_formula", "kv_bytes_full", "kv_tokens", "peak_rss_bytes",
                          "prefill_tokens", "prefill_tok_s", "decode_tokens", "decode_tok_s"})
    CHECK_MESSAGE(f.count(key) == 1, key);
  const auto prompt_tokens = static_cast<int>(loaded.tokenizer.encode(prompt, true).size());
  CHECK(f["prefill_tokens"] == prompt_tokens);
  CHECK(f["kv_tokens"] == prompt_tokens + count - 1);
  const auto windows = bosch::AttentionWindows::from_mask(mask, 3, 1);
  CHECK(f["kv_bytes"] == static_cast<double>(bosch::cpu::kv_bytes(loaded.config, windows, prompt_tokens + count - 1)));
  CHECK(f["kv_bytes_formula"] == f["kv_bytes"]);
  CHECK(f["kv_bytes"] < f["kv_bytes_full"]);
  CHECK(f["kv_bytes_full"] ==
        static_cast<double>(bosch::cpu::kv_bytes(loaded.config, bosch::AttentionWindows::full(), prompt_tokens + count - 1)));
  CHECK(f["peak_rss_bytes"] > 1e6);
  CHECK(f["prefill_tok_s"] > 0);
  CHECK(f["decode_tokens"] >= 1);
  CHECK(f["decode_tok_s"] > 0);
}
