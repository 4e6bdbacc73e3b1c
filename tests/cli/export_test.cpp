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
  bosch::io::write_mask_json(dir / "layer.json", mask, {{"window", 32}, {"sinks", 0}});

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
  bosch::io::write_mask_json(dir / "head.json", head, {{"window", 32}});
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
  bosch::io::write_mask_json(dir / "sinks.json", mask, {{"window", 32}, {"sinks", 4}});
  r = run({"convert", dir / "sinks.json", "--to", "hf", "-o", dir / "x.json"}, dir);
  CHECK(r.status == 1);
  CHECK(contains(r.err, "sinks"));
  r = run({"convert", dir / "sinks.json", "--to", "hf", "--sinks", "0", "-o", dir / "x.json"}, dir);
  CHECK(r.status == 0);
}

TEST_CASE("convert --to gguf: a copy of the model with the windows, read by bosch") {
  const std::string model = bosch::test::cli::model();
  if (!fs::exists(model)) return;
  TempDir dir;
  const auto config = bosch::model::read_config(model);
  const bosch::HeadLayout lay = config.layout();
  REQUIRE(lay.num_layers >= 2);
  const bosch::HeadMask mask = layer_mask(lay, {0, lay.num_layers - 1});
  bosch::io::write_mask_json(dir / "layer.json", mask, {{"window", 16}});

  Run r = run({"convert", dir / "layer.json", "--to", "gguf", "--model", model, "-o", dir / "swa.gguf"}, dir);
  REQUIRE(r.status == 0);
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
  r = run({"convert", dir / "swa.gguf", dir / "back.json"}, dir);
  REQUIRE(r.status == 0);
  const auto back = bosch::io::read_mask_json(dir / "back.json");
  CHECK(back.mask == mask);
  CHECK(back.metadata.at("window") == 16);
  // Exporting again over the copy replaces the keys in place (no duplicates).
  const bosch::HeadMask other = layer_mask(lay, {1});
  bosch::io::write_mask_json(dir / "other.json", other, {{"window", 8}});
  r = run({"convert", dir / "other.json", "--to", "gguf", "--model", dir / "swa.gguf", "-o", dir / "swa.gguf"}, dir);
  REQUIRE(r.status == 0);
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
    r = run({"convert", dir / "head.json", "--to", "gguf", "--model", model, "-o", dir / "x.gguf"}, dir);
    CHECK(r.status == 1);
    CHECK(contains(r.err, "head-level"));
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
