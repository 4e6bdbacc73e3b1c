// Mask exports (io/mask_export.hpp): the kvpress/DuoAttention pattern and what
// kvpress's argsort makes of it, the Hugging Face patch, the layer windows,
// atomic directories, and the read-backs.
#include <doctest/doctest.h>

#include "test_support.hpp"

#include <bosch/io/mask_export.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <unistd.h>

namespace fs = std::filesystem;
using bosch::HeadLayout;
using bosch::HeadMask;
namespace io = bosch::io;

namespace {

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("bosch_test_export_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

using bosch::test::random_mask;

HeadMask layer_mask(const HeadLayout& lay, const std::vector<int>& swa_layers) {
  HeadMask m(lay);
  for (int l : swa_layers)
    for (int k = 0; k < lay.num_kv_heads; ++k) m.set(l, k, true);
  return m;
}

/// Parses the TSV text as numpy.loadtxt would: rows of tab-separated reals.
std::vector<double> parse_scores(const std::string& tsv) {
  std::vector<double> out;
  std::istringstream in(tsv);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string cell;
    while (std::getline(row, cell, '\t')) out.push_back(std::stod(cell));
  }
  return out;
}

/// Python's round(): halves to even.
long long python_round(double x) {
  const double r = std::nearbyint(x);  // default rounding mode: to nearest, ties to even
  return static_cast<long long>(r);
}

/// kvpress's DuoAttentionPress: the round(n * ratio) lowest scores (argsort)
/// are streaming heads. Scores are distinct here, so the sort's tie order
/// does not matter.
std::vector<bool> kvpress_streaming(const std::vector<double>& scores, double ratio) {
  const auto n_pruned = python_round(static_cast<double>(scores.size()) * ratio);
  std::vector<std::size_t> idx(scores.size());
  for (std::size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  std::sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return scores[a] < scores[b]; });
  std::vector<bool> streaming(scores.size(), false);
  for (long long i = 0; i < n_pruned; ++i) streaming[idx[static_cast<std::size_t>(i)]] = true;
  return streaming;
}

}  // namespace

TEST_CASE("kvpress pattern: argsort at the mask's own ratio gives exactly the mask") {
  for (const HeadLayout lay : {HeadLayout{30, 9, 3}, HeadLayout{1, 1, 1}, HeadLayout{24, 32, 8}, HeadLayout{7, 4, 4}}) {
    for (std::uint64_t s = 0; s < 5; ++s) {
      const HeadMask m = random_mask(lay, bosch::test::seed(s + lay.size()));
      const auto p = io::duo_pattern(m, nlohmann::json::object(), {64, 4});
      const auto scores = parse_scores(p.scores_tsv);
      REQUIRE(scores.size() == m.size());
      // Distinct, in [0, 1], SWA heads below 0.5 and full heads at or above it.
      CHECK(std::set<double>(scores.begin(), scores.end()).size() == scores.size());
      for (std::size_t i = 0; i < m.size(); ++i) {
        CHECK(scores[i] >= 0.0);
        CHECK(scores[i] <= 1.0);
        CHECK((scores[i] < 0.5) == m[i]);
      }
      const double ratio = p.config.at("head_compression_ratio").get<double>();
      CHECK(ratio == doctest::Approx(m.ratio()));
      const auto streaming = kvpress_streaming(scores, ratio);
      for (std::size_t i = 0; i < m.size(); ++i) CHECK(streaming[i] == m[i]);
      // bosch's own TSV reader (threshold 0.5, DuoAttention's) reads it back.
      CHECK(io::mask_from_tsv(p.scores_tsv, lay.num_query_heads) == m);
      CHECK(p.config.at("sink_size") == 4);
      CHECK(p.config.at("recent_size") == 64);
      CHECK(p.config.at("bosch").at("score_order") == "index");
    }
  }
}

TEST_CASE("kvpress pattern: other ratios add or spare heads in the order of the evidence") {
  const HeadLayout lay{4, 4, 2};
  // Layers 0 and 2 SWA, 1 and 3 full; Stage 1 drops say layer 2 is the
  // cheapest to window and layer 3 the cheapest of the full ones.
  const HeadMask m = layer_mask(lay, {0, 2});
  const nlohmann::json meta{{"layer_drops", {0.3, 0.9, 0.1, 0.5}}};
  const auto p = io::duo_pattern(m, meta, {16, 0});
  CHECK(p.config.at("bosch").at("score_order") == "layer_drops");
  const auto scores = parse_scores(p.scores_tsv);
  // Ratio 2/8: only layer 2's heads stream.
  auto s = kvpress_streaming(scores, 0.25);
  CHECK(s == std::vector<bool>{false, false, false, false, true, true, false, false});
  // Ratio 6/8: the mask plus layer 3 (the least global full layer).
  s = kvpress_streaming(scores, 0.75);
  CHECK(s == std::vector<bool>{true, true, false, false, true, true, true, true});
  // A layer Stage 1 did not probe (null) counts as the most global.
  const auto q = io::duo_pattern(m, nlohmann::json{{"layer_drops", {0.3, 0.9, nullptr, 0.5}}}, {16, 0});
  s = kvpress_streaming(parse_scores(q.scores_tsv), 0.25);
  CHECK(s == std::vector<bool>{true, true, false, false, false, false, false, false});
  // Per-head scores beat layer drops: the lowest full head goes first.
  const nlohmann::json hs{{"head_scores", {{0.1, 0.2}, {0.8, 0.05}, {0.3, 0.4}, {0.9, 0.7}}}};
  const auto h = io::duo_pattern(m, hs, {16, 0});
  CHECK(h.config.at("bosch").at("score_order") == "head_scores");
  s = kvpress_streaming(parse_scores(h.scores_tsv), 5.0 / 8.0);
  CHECK(s == std::vector<bool>{true, true, false, true, true, true, false, false});
  // Malformed evidence is named.
  try {
    (void)io::duo_pattern(m, nlohmann::json{{"layer_drops", {0.1, 0.2}}}, {16, 0}, "m.json");
    FAIL("expected a format_error");
  } catch (const bosch::format_error& e) {
    CHECK(std::string(e.what()).find("m.json: metadata.layer_drops") != std::string::npos);
  }
  CHECK_THROWS_AS((void)io::duo_pattern(m, nlohmann::json{{"head_scores", {{0.1}}}}, {16, 0}), bosch::format_error);
  CHECK_THROWS_AS((void)io::duo_pattern(m, meta, {0, 0}), bosch::invalid_argument);
}

TEST_CASE("kvpress pattern directory: atomic write, read back, replace only a previous export") {
  const fs::path dir = temp_dir("duo");
  const HeadLayout lay{6, 8, 4};
  const HeadMask m = random_mask(lay, bosch::test::seed(7));
  io::write_duo_pattern(dir / "pattern", m, nlohmann::json::object(), {32, 2});
  auto back = io::read_duo_pattern(dir / "pattern");
  CHECK(back.mask == m);
  CHECK(back.mask.layout() == lay);  // query heads from config.json's bosch.layout
  CHECK(back.windows.window == 32);
  CHECK(back.windows.sinks == 2);
  // Replacing a previous export.
  const HeadMask m2 = random_mask(lay, bosch::test::seed(8));
  io::write_duo_pattern(dir / "pattern", m2, nlohmann::json::object(), {48, 0});
  back = io::read_duo_pattern(dir / "pattern");
  CHECK(back.mask == m2);
  CHECK(back.windows.window == 48);
  // Nothing else was left next to it (no temporary directory).
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  CHECK(names == std::vector<std::string>{"pattern"});
  // A directory holding other files is not replaced (and keeps them).
  fs::create_directories(dir / "mine");
  bosch::test::write_text(dir / "mine" / "notes.txt", "keep me");
  try {
    io::write_duo_pattern(dir / "mine", m, nlohmann::json::object(), {32, 0});
    FAIL("expected a file_error");
  } catch (const bosch::file_error& e) {
    CHECK(std::string(e.what()).find("notes.txt") != std::string::npos);
  }
  CHECK(fs::exists(dir / "mine" / "notes.txt"));
  CHECK(!fs::exists(dir / "mine" / io::duo_scores_file));
  // A regular file is not replaced by a directory.
  bosch::test::write_text(dir / "file", "x");
  CHECK_THROWS_AS(io::write_duo_pattern(dir / "file", m, nlohmann::json::object(), {32, 0}), bosch::file_error);
  CHECK(fs::is_regular_file(dir / "file"));
  // Malformed config.json names the file and field.
  bosch::test::write_text(dir / "pattern" / io::duo_config_file, "{\"sink_size\": 0}");
  try {
    (void)io::read_duo_pattern(dir / "pattern");
    FAIL("expected a format_error");
  } catch (const bosch::format_error& e) {
    CHECK(std::string(e.what()).find("config.json: recent_size") != std::string::npos);
  }
  fs::remove_all(dir);
}

TEST_CASE("Hugging Face patch: one entry per layer, read back; head-level masks refused") {
  const HeadLayout lay{5, 6, 2};
  const HeadMask m = layer_mask(lay, {1, 2, 4});
  const auto j = io::hf_config_patch(m, {128, 0});
  REQUIRE(j.at("layer_types").size() == 5);
  CHECK(j.at("layer_types")[0] == "full_attention");
  CHECK(j.at("layer_types")[1] == "sliding_attention");
  CHECK(j.at("sliding_window") == 128);
  CHECK(j.at("use_sliding_window") == true);
  const auto [back, w] = io::mask_from_hf_config(nlohmann::json::parse(j.dump()), lay, "patch");
  CHECK(back == m);
  CHECK(w.window == 128);
  CHECK(io::hf_config_patch(HeadMask(lay), {128, 0}).at("use_sliding_window") == false);

  HeadMask head = m;
  head.set(3, 1, true);  // layer 3 now mixes SWA and full heads
  try {
    (void)io::hf_config_patch(head, {128, 0}, "mask.json");
    FAIL("expected an invalid_argument");
  } catch (const bosch::invalid_argument& e) {
    const std::string msg = e.what();
    CHECK(msg.find("mask.json") != std::string::npos);
    CHECK(msg.find("layer 3 has 1 of 2") != std::string::npos);
    CHECK(msg.find("kvpress") != std::string::npos);
    CHECK(msg.find("--variant layer") != std::string::npos);
  }
  CHECK_THROWS_AS((void)io::hf_config_patch(m, {128, 4}), bosch::invalid_argument);  // sinks
  CHECK_THROWS_AS((void)io::mask_from_hf_config(j, HeadLayout{4, 6, 2}, "patch"), bosch::format_error);
  nlohmann::json bad = j;
  bad["layer_types"][2] = "local";
  try {
    (void)io::mask_from_hf_config(bad, lay, "patch");
    FAIL("expected a format_error");
  } catch (const bosch::format_error& e) {
    CHECK(std::string(e.what()).find("patch: layer_types[2]") != std::string::npos);
  }
}

TEST_CASE("layer windows: TensorRT-LLM and SGLang fields, read back") {
  const HeadLayout lay{4, 9, 3};
  const HeadMask m = layer_mask(lay, {0, 3});
  const auto j = io::layer_windows(m, {64, 4}, 8192);
  CHECK(j.at("max_attention_window") == nlohmann::json{64, 8192, 8192, 64});
  CHECK(j.at("layer_windows") == j.at("max_attention_window"));
  CHECK(j.at("sink_token_length") == 4);
  CHECK(j.at("sinks") == 4);
  CHECK(j.at("swa_attention_layer_ids") == nlohmann::json{0, 3});
  CHECK(j.at("full_attention_layer_ids") == nlohmann::json{1, 2});
  const auto [back, w] = io::mask_from_layer_windows(nlohmann::json::parse(j.dump()), lay, "w.json");
  CHECK(back == m);
  CHECK(w.window == 64);
  CHECK(w.sinks == 4);
  // A window longer than the served context is capped by it.
  CHECK(io::layer_windows(m, {10000, 0}, 8192).at("max_attention_window")[0] == 8192);
  HeadMask mixed = m;
  mixed.set(1, 0, true);
  CHECK_THROWS_AS((void)io::layer_windows(mixed, {64, 0}, 8192), bosch::invalid_argument);
  CHECK_THROWS_AS((void)io::layer_windows(m, {64, 0}, 0), bosch::invalid_argument);
  nlohmann::json bad = j;
  bad["layer_windows"][1] = 64;
  CHECK_THROWS_AS((void)io::mask_from_layer_windows(bad, lay, "w.json"), bosch::format_error);
}

TEST_CASE("check_export_engine: per format and architecture, whether the engine applies the windows") {
  const HeadLayout lay{5, 6, 2};
  const HeadMask some = layer_mask(lay, {1, 2}), all = HeadMask::filled(lay, true);
  auto refusal = [](const std::string& format, const std::string& arch, const HeadMask& m) -> std::string {
    try {
      io::check_export_engine(format, arch, m, "mask.json");
    } catch (const bosch::invalid_argument& e) {
      CHECK(e.where() == "mask.json");
      return e.message();
    }
    return {};
  };
  // hf: transformers applies layer_types for qwen2 and qwen3.
  CHECK(refusal("hf", "qwen2", some).empty());
  CHECK(refusal("hf", "qwen3", some).empty());
  CHECK(refusal("hf", "llama", some).find("Hugging Face transformers would ignore") != std::string::npos);
  CHECK(refusal("hf", "qwen3moe", some).find("2 of 5 layers") != std::string::npos);
  CHECK(refusal("hf", "qwen3moe", all).empty());
  CHECK(refusal("hf", "qwen3moe", HeadMask(lay)).empty());
  CHECK(refusal("hf", "", some).find("needs the model's architecture") != std::string::npos);
  CHECK(refusal("hf", "gemma2", some).find("does not know") != std::string::npos);
  // gguf: llama.cpp's graphs of all four attend fully.
  for (const std::string arch : {"llama", "qwen2", "qwen3", "qwen3moe"}) {
    const std::string m = refusal("gguf", arch, some);
    CHECK(m.find("llama.cpp would ignore") != std::string::npos);
    CHECK(m.find("its " + arch + " graph") != std::string::npos);
    CHECK(m.find("bosch generate") != std::string::npos);
    // --to hf is offered only where transformers applies it.
    CHECK((m.find("--to hf") != std::string::npos) == (arch == "qwen2" || arch == "qwen3"));
  }
  CHECK(!refusal("gguf", "", some).empty());
  // layers (TensorRT-LLM) and kvpress: any architecture, or none.
  for (const std::string arch : {"", "llama", "qwen3moe", "gemma2"}) {
    CHECK(refusal("layers", arch, some).empty());
    CHECK(refusal("kvpress", arch, some).empty());
  }
  // The patch: max_window_layers = the layer count for qwen2 and qwen3 only.
  CHECK(io::hf_config_patch(some, {16, 0}, "m", "qwen2").at("max_window_layers") == 5);
  CHECK(io::hf_config_patch(some, {16, 0}, "m", "qwen3").at("max_window_layers") == 5);
  CHECK(!io::hf_config_patch(all, {16, 0}, "m", "qwen3moe").contains("max_window_layers"));
  CHECK(!io::hf_config_patch(some, {16, 0}).contains("max_window_layers"));
}

TEST_CASE("export_architecture: the model's or the named one, else the metadata's; contradictions refused") {
  const nlohmann::json none = nlohmann::json::object(), qwen2{{"architecture", "qwen2"}};
  CHECK(io::export_architecture("", "--arch", none, "m.json").empty());
  CHECK(io::export_architecture("", "--arch", qwen2, "m.json") == "qwen2");
  CHECK(io::export_architecture("qwen2", "--arch", qwen2, "m.json") == "qwen2");
  CHECK(io::export_architecture("llama", "model.gguf", none, "m.json") == "llama");
  CHECK_THROWS_WITH_AS(io::export_architecture("llama", "model.gguf", qwen2, "m.json"),
                       doctest::Contains("model.gguf: architecture llama differs from the qwen2"),
                       bosch::invalid_argument);
  CHECK_THROWS_WITH_AS(io::export_architecture("phi3", "--arch", none, "m.json"),
                       doctest::Contains("--arch: unknown architecture 'phi3'"), bosch::invalid_argument);
  CHECK_THROWS_WITH_AS(io::export_architecture("", "--arch", nlohmann::json{{"architecture", 1}}, "m.json"),
                       doctest::Contains("m.json: metadata.architecture"), bosch::format_error);
  CHECK(io::metadata_architecture(nlohmann::json{{"architecture", nullptr}}, "m").empty());
}
