// SPDX-License-Identifier: Apache-2.0
// bosch inspect MODEL: architecture, head layout, size, context length,
// tokenizer and fingerprint of a model, from its configuration where possible.

#include "commands.hpp"
#include "model_options.hpp"
#include "run_options.hpp"

#include <bosch/model/dequant.hpp>
#include <bosch/model/gguf.hpp>
#include <bosch/model/loader.hpp>
#include <bosch/model/tokenizer_json.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>

namespace bosch::cli {

namespace {

/// Parameters implied by the configuration (embedding counted once when tied),
/// the count bosch::model::Model::parameter_count() gives for a loaded model.
std::uint64_t parameters_from_config(const model::Config& c) {
  const std::uint64_t h = static_cast<std::uint64_t>(c.hidden_size);
  const std::uint64_t q = static_cast<std::uint64_t>(c.num_heads) * static_cast<std::uint64_t>(c.head_dim);
  const std::uint64_t kv = static_cast<std::uint64_t>(c.num_kv_heads) * static_cast<std::uint64_t>(c.head_dim);
  const std::uint64_t f = static_cast<std::uint64_t>(c.intermediate_size);
  std::uint64_t attention = 2 * h                 // attention and FFN norms
                            + q * h + 2 * kv * h  // Q, K, V
                            + h * q;              // output projection
  if (c.qkv_bias) attention += q + 2 * kv;
  if (c.qk_norm) attention += 2 * static_cast<std::uint64_t>(c.head_dim);
  // A dense FFN: gate, up, down. A mixture of experts (Qwen3-MoE): the router
  // and every expert's gate, up and down, active or not (what the file holds).
  const std::uint64_t E = static_cast<std::uint64_t>(c.moe.num_experts);
  const std::uint64_t dense_ffn = 3 * f * h;
  const std::uint64_t sparse_ffn = E * h + E * 3 * static_cast<std::uint64_t>(c.moe.expert_intermediate_size) * h;
  std::uint64_t layers = 0;
  for (int l = 0; l < c.num_layers; ++l) layers += attention + (c.is_sparse_layer(l) ? sparse_ffn : dense_ffn);
  const std::uint64_t emb = static_cast<std::uint64_t>(c.vocab_size) * h;
  return emb * (c.tie_embeddings ? 1 : 2) + h + layers;
}

const char* kind_name(model::TokenizerSpec::Kind k) {
  return k == model::TokenizerSpec::Kind::spm ? "spm (SentencePiece-style BPE)" : "byte-level BPE";
}

std::string human_bytes(std::uintmax_t b) {
  char buf[32];
  if (b < 10u << 10) std::snprintf(buf, sizeof buf, "%ju B", b);
  else if (b < 10u << 20) std::snprintf(buf, sizeof buf, "%.1f KiB", static_cast<double>(b) / 1024);
  else if (b < std::uintmax_t{10} << 30) std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(b) / (1 << 20));
  else std::snprintf(buf, sizeof buf, "%.2f GiB", static_cast<double>(b) / (1 << 30));
  return buf;
}

std::uintmax_t size_on_disk(const std::filesystem::path& p) {
  std::error_code ec;
  if (!std::filesystem::is_directory(p, ec)) return std::filesystem::file_size(p, ec);
  std::uintmax_t total = 0;
  for (const auto& e : std::filesystem::directory_iterator(p, ec))
    if (e.is_regular_file(ec)) total += e.file_size(ec);
  return total;
}

}  // namespace

int run_inspect(int argc, char** argv) {
  return run_command("inspect", [&] {
    RunOptions model_options({SettingGroup::model}, {"device", "gpu", "threads"});
    bool json = false, load = false;
    CommandLine cl("inspect", "bosch inspect [options] MODEL",
                   "Print a model's architecture, head layout (the decision bits of BOSCH),\n"
                   "parameter count, context length, tokenizer and fingerprint. Reads only the\n"
                   "configuration and metadata (fast); --load reads the weights too.");
    cl.options.add(model_options.describe());
    cl.options.add_options()("json", flag(&json), "print one JSON object instead of text")(
        "load", flag(&load),
        "load the whole model (checks every tensor; gives the fingerprint of a Hugging Face "
        "directory)");
    cl.positional.add("model", 1);
    po::variables_map vm;
    if (!cl.parse(argc, argv, vm)) return exit_success;
    const RunSettings settings = model_options.resolve(vm);

    const std::filesystem::path path = settings.model;
    if (!std::filesystem::exists(path)) throw file_error("no such file or directory", path.string());
    const bool is_dir = std::filesystem::is_directory(path);

    model::Config cfg;
    model::TokenizerSpec tok;
    std::string fingerprint, format;
    std::map<std::string, int> tensor_types;
    std::optional<std::uint64_t> loaded_parameters;
    if (load) {
      const model::Model m = model::load(path);
      cfg = m.config;
      tok = m.tokenizer.spec();
      fingerprint = m.fingerprint;
      loaded_parameters = m.parameter_count();
    }
    if (is_dir) {
      format = "Hugging Face directory";
      if (!load) {
        cfg = model::read_config(path);
        tok = model::tokenizer_spec_from_json(path / "tokenizer.json");
      }
    } else {
      const model::gguf::File file(path);
      format = "GGUF v" + std::to_string(file.version());
      for (const auto& t : file.tensors()) ++tensor_types[model::type_name(t.type)];
      if (!load) {
        cfg = model::config_from_gguf(file);
        tok = model::tokenizer_spec_from_gguf(file);
        fingerprint = model::fingerprint({std::filesystem::absolute(path)});
      }
    }
    const HeadLayout layout = cfg.layout();
    const std::uint64_t params = loaded_parameters ? *loaded_parameters : parameters_from_config(cfg);
    const std::uintmax_t bytes = size_on_disk(path);

    if (json) {
      nlohmann::json types = nlohmann::json::object();
      for (const auto& [name, count] : tensor_types) types[name] = count;
      nlohmann::json j{
          {"model", cfg.name},
          {"path", path.string()},
          {"format", format},
          {"bytes", bytes},
          {"architecture", model::to_string(cfg.arch)},
          {"layers", cfg.num_layers},
          {"hidden_size", cfg.hidden_size},
          {"intermediate_size", cfg.intermediate_size},
          {"query_heads", cfg.num_heads},
          {"kv_heads", cfg.num_kv_heads},
          {"head_dim", cfg.head_dim},
          {"layout", {{"num_layers", layout.num_layers},
                      {"num_query_heads", layout.num_query_heads},
                      {"num_kv_heads", layout.num_kv_heads}}},
          {"decision_bits", layout.size()},
          {"parameters", params},
          {"parameters_source", loaded_parameters ? "weights" : "configuration"},
          {"context_length", cfg.max_position},
          {"vocab_size", cfg.vocab_size},
          {"rope_theta", cfg.rope_theta},
          {"rope_style", cfg.rope_style == model::RopeStyle::neox ? "neox" : "interleaved"},
          {"rope_scaling", cfg.rope_scaling.type},
          {"rms_eps", cfg.rms_eps},
          {"tie_embeddings", cfg.tie_embeddings},
          {"qkv_bias", cfg.qkv_bias},
          {"qk_norm", cfg.qk_norm},
          {"tokenizer",
           {{"kind", tok.kind == model::TokenizerSpec::Kind::spm ? "spm" : "byte_bpe"},
            {"pre", tok.pre},
            {"tokens", tok.tokens.size()},
            {"bos", tok.bos},
            {"eos", tok.eos},
            {"add_bos", tok.add_bos}}},
          {"tensor_types", types},
          {"fingerprint", fingerprint.empty() ? nlohmann::json() : nlohmann::json(fingerprint)}};
      std::cout << j.dump(2) << "\n";
      return exit_success;
    }

    char buf[256];
    auto row = [](const char* key, const std::string& value) {
      char k[32];
      std::snprintf(k, sizeof k, "%-16s ", key);
      std::cout << k << value << "\n";
    };
    row("model:", cfg.name.empty() ? "(unnamed)" : cfg.name);
    row("path:", path.string() + " (" + format + ", " + human_bytes(bytes) + ")");
    row("architecture:", model::to_string(cfg.arch));
    std::snprintf(buf, sizeof buf, "%d layers, hidden %d, FFN %d", cfg.num_layers, cfg.hidden_size,
                  cfg.intermediate_size);
    row("size:", buf);
    std::snprintf(buf, sizeof buf, "%d query, %d KV (group size %d), head dim %d", cfg.num_heads,
                  cfg.num_kv_heads, layout.valid() ? layout.group_size() : 0, cfg.head_dim);
    row("heads:", buf);
    row("layout:", to_string(layout) + " (layers x query heads x KV heads; " +
                       std::to_string(layout.size()) + " KV heads to choose from)");
    std::snprintf(buf, sizeof buf, "%.3fM (%llu, from the %s)", static_cast<double>(params) / 1e6,
                  static_cast<unsigned long long>(params), loaded_parameters ? "weights" : "configuration");
    row("parameters:", buf);
    row("context length:", std::to_string(cfg.max_position) + " tokens");
    row("vocabulary:", std::to_string(cfg.vocab_size) + " tokens");
    std::snprintf(buf, sizeof buf, "theta %g, %s, scaling %s", cfg.rope_theta,
                  cfg.rope_style == model::RopeStyle::neox ? "neox" : "interleaved",
                  cfg.rope_scaling.type.c_str());
    row("RoPE:", buf);
    std::snprintf(buf, sizeof buf, "RMSNorm eps %g", cfg.rms_eps);
    std::string extras = buf;
    if (cfg.tie_embeddings) extras += ", tied embeddings";
    if (cfg.qkv_bias) extras += ", QKV biases";
    if (cfg.qk_norm) extras += ", Q/K norms";
    row("details:", extras);
    std::snprintf(buf, sizeof buf, "%s, pre '%s', %zu tokens, BOS %d, EOS %d, adds BOS: %s",
                  kind_name(tok.kind), tok.pre.c_str(), tok.tokens.size(), tok.bos, tok.eos,
                  tok.add_bos ? "yes" : "no");
    row("tokenizer:", buf);
    if (!tensor_types.empty()) {
      std::string t;
      for (const auto& [name, count] : tensor_types)
        t += (t.empty() ? "" : ", ") + name + " x " + std::to_string(count);
      row("tensor types:", t);
    }
    row("fingerprint:", fingerprint.empty() ? "(use --load for a directory)" : fingerprint);
    return exit_success;
  });
}

}  // namespace bosch::cli
