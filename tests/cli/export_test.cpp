// bosch convert --to kvpress|duo|hf|gguf|layers: exports that serving engines
// load, read back by bosch; refusals (head-level masks for layer-only formats,
// masks that do not fit the model) before anything is written.
#include "cli_support.hpp"

#include <bosch/bosch.hpp>
#include <bosch/io/mask_export.hpp>
#include <bosch/io/mask_io.hpp>
#include <bosch/model/gguf.hpp>
#include <bosch/model/gguf_export.hpp>
#include <bosch/model/loader.hpp>

#include <cstring>

using namespace bosch::test::cli;

namespace {

bosch::HeadMask layer_mask(const bosch::HeadLayout& lay, const std::vector<int>& swa_layers) {
  bosch::HeadMask m(lay);
  for (int l : swa_layers)
    for (int k = 0; k < lay.num_kv_heads; ++k) m.set(l, k, true);
  return m;
}

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

}  // namespace

TEST_CASE("convert --to kvpress: a pattern directory bosch reads back") {
  TempDir dir;
  const bosch::HeadLayout lay{30, 9, 3};
  bosch::HeadMask mask(lay);
  for (std::size_t i = 0; i < mask.size(); i += 3) mask.set_flat(i, true);
  bosch::io::write_mask_json(dir / "m.json", mask, {{"window", 64}, {"sinks", 4}});

  Run r = run({"convert", dir / "m.json", "--to", "kvpress", "-o", dir / "pattern/"}, dir);
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  const auto p = bosch::io::read_duo_pattern(dir / "pattern");
  CHECK(p.mask == mask);
  CHECK(p.windows.window == 64);
  CHECK(p.windows.sinks == 4);
  const auto config = read_json(dir / "pattern/config.json");
  CHECK(config.at("head_compression_ratio").get<double>() == doctest::Approx(mask.ratio()));

  // A directory is read as a pattern: back to JSON, windows in the metadata.
  r = run({"convert", dir / "pattern", dir / "back.json"}, dir);
  REQUIRE(r.status == 0);
  const auto back = bosch::io::read_mask_json(dir / "back.json");
  CHECK(back.mask == mask);
  CHECK(back.metadata.at("window") == 64);
  CHECK(back.metadata.at("sinks") == 4);

  // "duo" is the same export; --window/--sinks override the metadata.
  r = run({"convert", dir / "m.json", "--to", "duo", "--window", "128", "--sinks", "0", "-o", dir / "pattern"}, dir);
  REQUIRE(r.status == 0);
  CHECK(bosch::io::read_duo_pattern(dir / "pattern").windows.window == 128);
  CHECK(bosch::io::read_duo_pattern(dir / "pattern").windows.sinks == 0);

  // No window anywhere: a usage error, nothing written.
  bosch::io::write_mask_json(dir / "nowindow.json", mask);
  r = run({"convert", dir / "nowindow.json", "--to", "kvpress", "-o", dir / "p2"}, dir);
  CHECK(r.status == 2);
  CHECK(one_line(r.err));
  CHECK(contains(r.err, "--window"));
  CHECK(!fs::exists(dir / "p2"));

  // Not to stdout; OUT not twice.
  r = run({"convert", dir / "m.json", "--to", "kvpress", "-"}, dir);
  CHECK(r.status == 2);
  CHECK(contains(r.err, "stdout"));
  r = run({"convert", dir / "m.json", dir / "a.tsv", "-o", dir / "b.tsv"}, dir);
  CHECK(r.status == 2);
  CHECK(contains(r.err, "twice"));
}

TEST_CASE("convert --to hf and --to layers: layer masks only, one entry per layer, read back") {
  TempDir dir;
  const bosch::HeadLayout lay{6, 9, 3};
  const bosch::HeadMask mask = layer_mask(lay, {1, 2, 5});
  // A Qwen2 mask: transformers applies the patch (the next test case covers the others).
  bosch::io::write_mask_json(dir / "layer.json", mask, {{"window", 32}, {"sinks", 0}, {"architecture", "qwen2"}});

  Run r = run({"convert", dir / "layer.json", "--to", "hf", "-o", dir / "patch.json"}, dir);
  REQUIRE(r.status == 0);
  const auto patch = read_json(dir / "patch.json");
  REQUIRE(patch.at("layer_types").size() == 6);
  CHECK(patch.at("layer_types")[1] == "sliding_attention");
  CHECK(patch.at("layer_types")[3] == "full_attention");
  CHECK(patch.at("sliding_window") == 32);
  CHECK(patch.at("use_sliding_window") == true);
  r = run({"convert", "--from", "hf", "--layout", "6x9x3", dir / "patch.json", dir / "back.json"}, dir);
  REQUIRE(r.status == 0);
  CHECK(bosch::io::read_mask_json(dir / "back.json").mask == mask);
  r = run({"convert", "--from", "hf", dir / "patch.json", dir / "back2.json"}, dir);  // no --layout
  CHECK(r.status == 2);
  CHECK(contains(r.err, "--layout"));

  r = run({"convert", dir / "layer.json", "--to", "layers", "--max-seq-len", "2048", "-o", dir / "w.json"}, dir);
  REQUIRE(r.status == 0);
  const auto w = read_json(dir / "w.json");
  CHECK(w.at("max_attention_window") == nlohmann::json{2048, 32, 32, 2048, 2048, 32});
  CHECK(w.at("swa_attention_layer_ids") == nlohmann::json{1, 2, 5});
  CHECK(w.at("sink_token_length") == 0);
  r = run({"convert", "--from", "layers", "--layout", "6x9x3", dir / "w.json", "-"}, dir);
  REQUIRE(r.status == 0);
  CHECK(r.out == bosch::to_grid(mask));
  r = run({"convert", dir / "layer.json", "--to", "layers", "-o", dir / "w2.json"}, dir);  // no length
  CHECK(r.status == 2);
  CHECK(contains(r.err, "--max-seq-len"));

  // A head-level mask: refused with the formats that take it, nothing written.
  bosch::HeadMask head = mask;
  head.set(3, 0, true);
  bosch::io::write_mask_json(dir / "head.json", head, {{"window", 32}, {"architecture", "qwen2"}});
  for (const std::string to : {"hf", "layers"}) {
    r = run({"convert", dir / "head.json", "--to", to, "--max-seq-len", "2048", "-o", dir / "x.json"}, dir);
    CHECK(r.status == 1);
    CHECK(one_line(r.err));
    CHECK(contains(r.err, "head-level"));
    CHECK(contains(r.err, "layer 3"));
    CHECK(contains(r.err, "kvpress"));
    CHECK(!fs::exists(dir / "x.json"));
  }
  // Sinks: Hugging Face windows have none.
  bosch::io::write_mask_json(dir / "sinks.json", mask, {{"window", 32}, {"sinks", 4}, {"architecture", "qwen2"}});
  r = run({"convert", dir / "sinks.json", "--to", "hf", "-o", dir / "x.json"}, dir);
  CHECK(r.status == 1);
  CHECK(contains(r.err, "sinks"));
  r = run({"convert", dir / "sinks.json", "--to", "hf", "--sinks", "0", "-o", dir / "x.json"}, dir);
  CHECK(r.status == 0);
}

// The CLI refuses --to gguf for every architecture bosch runs (llama.cpp's
// graphs of llama, qwen2, qwen3 and qwen3moe attend fully; next test case);
// the writer itself stays correct for an architecture that reads the keys.
TEST_CASE("write_gguf_windows: a copy of the model with the windows, read back by bosch convert") {
  const std::string model = bosch::test::cli::model();
  if (!fs::exists(model)) return;
  TempDir dir;
  const auto config = bosch::model::read_config(model);
  const bosch::HeadLayout lay = config.layout();
  REQUIRE(lay.num_layers >= 2);
  const bosch::HeadMask mask = layer_mask(lay, {0, lay.num_layers - 1});
  bosch::io::write_mask_json(dir / "layer.json", mask, {{"window", 16}});

  bosch::model::write_gguf_windows(model, dir / "swa.gguf", mask, {16, 0});
  {
    const bosch::model::gguf::File src(model), out(dir / "swa.gguf");
    const std::string arch = src.get_string("general.architecture");
    CHECK(out.get_int(arch + ".attention.sliding_window") == 16);
    const auto& pattern = out.at(arch + ".attention.sliding_window_pattern");
    CHECK(pattern.element_type == bosch::model::gguf::ValueType::boolean);
    const auto windows = bosch::model::gguf_windows(out);
    REQUIRE(windows);
    CHECK(windows->window == 16);
    CHECK(windows->swa == bosch::io::swa_layers(mask));
    // Everything else unchanged: every other key, every tensor's bytes.
    CHECK(out.keys().size() == src.keys().size() + 2);
    for (const auto& k : src.keys()) CHECK(out.contains(k));
    REQUIRE(out.tensors().size() == src.tensors().size());
    for (std::size_t i = 0; i < src.tensors().size(); ++i) {
      const auto a = src.tensor_data(src.tensors()[i]), b = out.tensor_data(out.tensors()[i]);
      CHECK(out.tensors()[i].name == src.tensors()[i].name);
      REQUIRE(a.size() == b.size());
      CHECK(std::memcmp(a.data(), b.data(), a.size()) == 0);
    }
  }
  // The copy still loads as a model, with the same configuration.
  CHECK(bosch::model::read_config(dir / "swa.gguf").layout() == lay);
  // bosch reads the windows back as a mask.
  Run r = run({"convert", dir / "swa.gguf", dir / "back.json"}, dir);
  REQUIRE(r.status == 0);
  const auto back = bosch::io::read_mask_json(dir / "back.json");
  CHECK(back.mask == mask);
  CHECK(back.metadata.at("window") == 16);
  CHECK(back.metadata.at("architecture") == bosch::model::to_string(config.arch));
  // Exporting again over the copy replaces the keys in place (no duplicates).
  const bosch::HeadMask other = layer_mask(lay, {1});
  bosch::model::write_gguf_windows(dir / "swa.gguf", dir / "swa.gguf", other, {8, 0});
  {
    const bosch::model::gguf::File out(dir / "swa.gguf");
    const auto windows = bosch::model::gguf_windows(out);
    REQUIRE(windows);
    CHECK(windows->window == 8);
    CHECK(windows->swa == bosch::io::swa_layers(other));
  }

  // Refusals, before anything is written: a mask of another layout (both
  // layouts named), a head-level mask, no --model.
  const bosch::HeadLayout wrong{lay.num_layers + 1, lay.num_query_heads, lay.num_kv_heads};
  bosch::io::write_mask_json(dir / "wrong.json", layer_mask(wrong, {0}), {{"window", 16}});
  r = run({"convert", dir / "wrong.json", "--to", "gguf", "--model", model, "-o", dir / "x.gguf"}, dir);
  CHECK(r.status == 1);
  CHECK(one_line(r.err));
  CHECK(contains(r.err, bosch::to_string(wrong)));
  CHECK(contains(r.err, bosch::to_string(lay)));
  CHECK(!fs::exists(dir / "x.gguf"));
  if (lay.num_kv_heads > 1) {
    bosch::HeadMask head(lay);
    head.set(0, 0, true);
    bosch::io::write_mask_json(dir / "head.json", head, {{"window", 16}});
    // The engine comes first: llama.cpp would ignore any windows of this model.
    r = run({"convert", dir / "head.json", "--to", "gguf", "--model", model, "-o", dir / "x.gguf"}, dir);
    CHECK(r.status == 2);
    CHECK(contains(r.err, "llama.cpp"));
    CHECK(!fs::exists(dir / "x.gguf"));
    CHECK_THROWS_WITH_AS(bosch::model::write_gguf_windows(model, dir / "x.gguf", head, {16, 0}),
                         doctest::Contains("head-level"), bosch::invalid_argument);
    CHECK(!fs::exists(dir / "x.gguf"));
  }
  r = run({"convert", dir / "layer.json", "--to", "gguf", "-o", dir / "x.gguf"}, dir);
  CHECK(r.status == 2);
  CHECK(contains(r.err, "--model"));
  // --model also checks the other exports' layout.
  r = run({"convert", dir / "wrong.json", "--to", "kvpress", "--model", model, "-o", dir / "pat"}, dir);
  CHECK(r.status == 1);
  CHECK(contains(r.err, bosch::to_string(lay)));
  CHECK(!fs::exists(dir / "pat"));
  // The model's context length is the full layers' window of --to layers.
  r = run({"convert", dir / "layer.json", "--to", "layers", "--model", model, "-o", dir / "w.json"}, dir);
  if (config.max_position > 0) {
    REQUIRE(r.status == 0);
    CHECK(read_json(dir / "w.json").at("max_sequence_length") == config.max_position);
  }
}

TEST_CASE("convert --to hf/gguf: the architecture decides whether the engine applies the windows") {
  TempDir dir;
  const bosch::HeadLayout lay{6, 9, 3};
  const bosch::HeadMask mask = layer_mask(lay, {1, 2, 5});
  auto write = [&](const std::string& name, const std::string& arch) {
    nlohmann::json meta{{"window", 32}, {"sinks", 0}};
    if (!arch.empty()) meta["architecture"] = arch;
    bosch::io::write_mask_json(dir / name, mask, meta);
  };
  write("qwen2.json", "qwen2");
  write("qwen3.json", "qwen3");
  write("llama.json", "llama");
  write("moe.json", "qwen3moe");
  write("none.json", "");  // a mask file of an older bosch: no architecture

  // qwen2 and qwen3 (from the metadata): transformers follows layer_types;
  // max_window_layers = the layer count, which vLLM's Qwen2 insists on.
  for (const std::string arch : {"qwen2", "qwen3"}) {
    Run r = run({"convert", dir / (arch + ".json"), "--to", "hf", "-o", dir / (arch + "-patch.json")}, dir);
    INFO(r.err);
    REQUIRE(r.status == 0);
    const auto patch = read_json(dir / (arch + "-patch.json"));
    CHECK(patch.at("max_window_layers") == 6);
    CHECK(patch.at("layer_types")[1] == "sliding_attention");
    CHECK(patch.at("layer_types")[0] == "full_attention");
    CHECK(patch.at("use_sliding_window") == true);
  }
  // llama: refused (exit 2, one line) naming the engine, the reason and the routes; nothing written.
  Run r = run({"convert", dir / "llama.json", "--to", "hf", "-o", dir / "x.json"}, dir);
  CHECK(r.status == 2);
  CHECK(one_line(r.err));
  CHECK(contains(r.err, "transformers"));
  CHECK(contains(r.err, "llama"));
  CHECK(contains(r.err, "no sliding window"));
  CHECK(contains(r.err, "bosch.hf"));
  CHECK(contains(r.err, "--to kvpress"));
  CHECK(!fs::exists(dir / "x.json"));
  // qwen3moe: one window for all layers or none; a mixed layer mask is refused,
  // an all-SWA one passes (without max_window_layers, which Qwen3-MoE lacks).
  r = run({"convert", dir / "moe.json", "--to", "hf", "-o", dir / "x.json"}, dir);
  CHECK(r.status == 2);
  CHECK(contains(r.err, "transformers"));
  CHECK(contains(r.err, "qwen3moe"));
  CHECK(contains(r.err, "3 of 6 layers"));
  CHECK(!fs::exists(dir / "x.json"));
  bosch::io::write_mask_json(dir / "moe-all.json", bosch::HeadMask::filled(lay, true),
                             {{"window", 32}, {"architecture", "qwen3moe"}});
  r = run({"convert", dir / "moe-all.json", "--to", "hf", "-o", dir / "moe-patch.json"}, dir);
  REQUIRE(r.status == 0);
  CHECK(!read_json(dir / "moe-patch.json").contains("max_window_layers"));

  // No architecture anywhere: refused, asking for --model, rather than guessed.
  r = run({"convert", dir / "none.json", "--to", "hf", "-o", dir / "x.json"}, dir);
  CHECK(r.status == 2);
  CHECK(one_line(r.err));
  CHECK(contains(r.err, "--model"));
  CHECK(contains(r.err, "architecture"));
  CHECK(!fs::exists(dir / "x.json"));
  // --arch names it for a mask without metadata (a TSV, an old file).
  r = run({"convert", dir / "none.json", "--to", "hf", "--arch", "qwen2", "-o", dir / "arch-patch.json"}, dir);
  REQUIRE(r.status == 0);
  CHECK(read_json(dir / "arch-patch.json").at("max_window_layers") == 6);
  r = run({"convert", dir / "none.json", "--to", "hf", "--arch", "llama", "-o", dir / "x.json"}, dir);
  CHECK(r.status == 2);
  CHECK(contains(r.err, "transformers"));
  r = run({"convert", dir / "none.json", "--to", "hf", "--arch", "gemma2", "-o", dir / "x.json"}, dir);
  CHECK(r.status == 2);
  CHECK(contains(r.err, "--arch"));
  CHECK(contains(r.err, "qwen3moe"));
  // --arch against the metadata: both named.
  r = run({"convert", dir / "qwen2.json", "--to", "hf", "--arch", "llama", "-o", dir / "x.json"}, dir);
  CHECK(r.status == 2);
  CHECK(contains(r.err, "qwen2"));
  CHECK(contains(r.err, "llama"));
  CHECK(!fs::exists(dir / "x.json"));
  // An architecture recorded as something else than a string: the field named.
  bosch::io::write_mask_json(dir / "bad.json", mask, {{"window", 32}, {"architecture", 2}});
  r = run({"convert", dir / "bad.json", "--to", "hf", "-o", dir / "x.json"}, dir);
  CHECK(r.status == 1);
  CHECK(contains(r.err, "metadata.architecture"));

  // --to layers (TensorRT-LLM's per-layer windows) takes any architecture, and none.
  for (const std::string name : {"llama.json", "none.json"}) {
    r = run({"convert", dir / name, "--to", "layers", "--max-seq-len", "512", "-o", dir / "w.json"}, dir);
    CHECK(r.status == 0);
  }
  // kvpress takes any architecture.
  r = run({"convert", dir / "none.json", "--to", "kvpress", "-o", dir / "pattern"}, dir);
  CHECK(r.status == 0);

  // The model's architecture (--model) wins over nothing and must agree with the metadata.
  const std::string model = bosch::test::cli::model();
  if (!fs::exists(model)) return;
  const auto config = bosch::model::read_config(model);
  REQUIRE(bosch::model::to_string(config.arch) == std::string("llama"));  // stories260K
  const bosch::HeadLayout mlay = config.layout();
  const bosch::HeadMask mmask = layer_mask(mlay, {0});
  bosch::io::write_mask_json(dir / "m-none.json", mmask, {{"window", 16}});
  bosch::io::write_mask_json(dir / "m-qwen2.json", mmask, {{"window", 16}, {"architecture", "qwen2"}});
  r = run({"convert", dir / "m-none.json", "--to", "hf", "--model", model, "-o", dir / "x.json"}, dir);
  CHECK(r.status == 2);
  CHECK(contains(r.err, "transformers"));
  CHECK(contains(r.err, "Llama"));
  r = run({"convert", dir / "m-qwen2.json", "--to", "hf", "--model", model, "-o", dir / "x.json"}, dir);
  CHECK(r.status == 2);
  CHECK(contains(r.err, "qwen2"));
  CHECK(contains(r.err, model));
  r = run({"convert", dir / "m-none.json", "--to", "hf", "--model", model, "--arch", "qwen2", "-o", dir / "x.json"},
          dir);
  CHECK(r.status == 2);
  CHECK(contains(r.err, "--arch"));
  CHECK(!fs::exists(dir / "x.json"));
  // GGUF: llama.cpp's llama graph attends fully, so the copy is refused (the
  // same for qwen2, qwen3 and qwen3moe); nothing written.
  r = run({"convert", dir / "m-none.json", "--to", "gguf", "--model", model, "-o", dir / "x.gguf"}, dir);
  CHECK(r.status == 2);
  CHECK(one_line(r.err));
  CHECK(contains(r.err, "llama.cpp"));
  CHECK(contains(r.err, "attends fully"));
  CHECK(contains(r.err, "bosch generate"));
  CHECK(!fs::exists(dir / "x.gguf"));
  // bosch baseline records the architecture, so its masks need no --model.
  r = run({"baseline", "--model", model, "--method", "RAND", "--ratio", "0.2", "--layer-count", "whole",
           "-o", dir / "rand.json"},
          dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(bosch::io::read_mask_json(dir / "rand.json").metadata.at("architecture") == "llama");
  r = run({"convert", dir / "rand.json", "--to", "hf", "-o", dir / "x.json"}, dir);
  CHECK(r.status == 2);
  CHECK(contains(r.err, "Llama"));
}
