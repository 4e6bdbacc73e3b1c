// SPDX-License-Identifier: Apache-2.0
// Hugging Face checkpoint directory -> Checkpoint (see bosch/model/loader.hpp).

#include "weight_plan.hpp"

#include <bosch/error.hpp>
#include <bosch/io/atomic_file.hpp>
#include <bosch/model/hf_config.hpp>
#include <bosch/model/loader.hpp>
#include <bosch/model/safetensors.hpp>
#include <bosch/model/tokenizer_json.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <map>
#include <memory>
#include <sstream>

namespace bosch::model {

namespace {

namespace fs = std::filesystem;

constexpr std::uintmax_t max_json_bytes = 256u << 20;  // config/index files are small

std::string read_text(const fs::path& p) {
  io::check_input_file(p);  // before opening: a FIFO would block
  std::error_code ec;
  const auto size = fs::file_size(p, ec);
  if (ec) throw file_error("cannot read: " + ec.message(), p.string());
  if (size > max_json_bytes) throw format_error("file of " + std::to_string(size) + " bytes is too large", p.string());
  std::ifstream in(p, std::ios::binary);
  if (!in) throw file_error("cannot open", p.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw file_error("cannot read", p.string());
  return ss.str();
}

/// The safetensors files of a directory and which file holds each tensor.
struct Shards {
  std::vector<std::unique_ptr<safetensors::File>> files;
  std::map<std::string, std::pair<const safetensors::File*, const safetensors::TensorInfo*>> tensors;
  fs::path index;  // model.safetensors.index.json when used
  std::string where_missing;  // what to name for a missing tensor
};

Shards open_shards(const fs::path& dir) {
  Shards s;
  const fs::path index = dir / "model.safetensors.index.json";
  std::vector<fs::path> paths;
  std::map<std::string, std::string> weight_map;
  if (fs::exists(index)) {
    s.index = index;
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(read_text(index));
    } catch (const nlohmann::json::exception& e) {
      throw format_error(std::string("not valid JSON: ") + e.what(), index.string());
    }
    if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
      throw format_error("missing or non-object weight_map", index.string() + ": field 'weight_map'");
    std::vector<std::string> names;
    for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
      const std::string field = index.string() + ": weight_map '" + it.key() + "'";
      if (!it->is_string()) throw format_error("shard name is not a string", field);
      const std::string file = it->get<std::string>();
      const fs::path fp(file);
      if (file.empty() || fp.is_absolute() || fp.has_parent_path() || file == "." || file == "..")
        throw format_error("shard '" + file + "' is not a plain file name in the directory", field);
      weight_map[it.key()] = file;
      if (std::find(names.begin(), names.end(), file) == names.end()) names.push_back(file);
    }
    std::sort(names.begin(), names.end());
    for (const auto& n : names) paths.push_back(dir / n);
  } else {
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".safetensors") paths.push_back(e.path());
    std::sort(paths.begin(), paths.end());
    if (paths.empty()) throw file_error("no *.safetensors file in the directory", dir.string());
  }
  for (const auto& p : paths) {
    if (!fs::exists(p))
      throw file_error("shard listed in " + index.filename().string() + " does not exist", p.string());
    s.files.push_back(std::make_unique<safetensors::File>(p));
  }
  for (const auto& f : s.files)
    for (const auto& t : f->tensors()) {
      if (!weight_map.empty()) {
        auto it = weight_map.find(t.name);
        if (it == weight_map.end() || it->second != f->path().filename().string()) continue;  // not its home
      }
      auto [pos, inserted] = s.tensors.emplace(t.name, std::make_pair(f.get(), &t));
      if (!inserted)
        throw format_error("duplicate tensor (also in " + pos->second.first->path().string() + ")",
                           f->where_tensor(t.name));
    }
  for (const auto& [name, file] : weight_map)
    if (!s.tensors.count(name))
      throw format_error("tensor listed in the index is missing from shard '" + file + "'",
                         (dir / file).string() + ": tensor '" + name + "'");
  s.where_missing = s.index.empty() ? (s.files.size() == 1 ? s.files[0]->path().string() : dir.string())
                                    : s.index.string();
  return s;
}

class ShardSource final : public detail::TensorSource {
 public:
  explicit ShardSource(const Shards& s) : s_(s) {}
  bool has(const std::string& n) const override { return s_.tensors.count(n) != 0; }
  std::vector<std::uint64_t> shape(const std::string& n) const override { return s_.tensors.at(n).second->shape; }
  void check_convertible(const std::string& n) const override {
    const auto& t = *s_.tensors.at(n).second;
    if (!safetensors::can_convert(t.dtype))
      throw format_error("unsupported dtype " + t.dtype + " (supported: F32, F16, BF16)", where_tensor(n));
  }
  void read(const std::string& n, std::span<float> dst) const override {
    const auto& [f, t] = s_.tensors.at(n);
    safetensors::to_fp32(t->dtype, f->tensor_data(*t), dst);
  }
  std::string where_tensor(const std::string& n) const override {
    auto it = s_.tensors.find(n);
    if (it != s_.tensors.end()) return it->second.first->where_tensor(n);
    return s_.where_missing + ": tensor '" + n + "'";
  }

 private:
  const Shards& s_;
};

detail::TensorNames hf_names() {
  detail::TensorNames names;
  names.embedding = "model.embed_tokens.weight";
  names.final_norm = "model.norm.weight";
  names.output = "lm_head.weight";
  names.layer_prefix = "model.layers.";
  names.roles = {{"attn_norm", "input_layernorm.weight"},
                 {"q", "self_attn.q_proj.weight"},
                 {"k", "self_attn.k_proj.weight"},
                 {"v", "self_attn.v_proj.weight"},
                 {"o", "self_attn.o_proj.weight"},
                 {"q_bias", "self_attn.q_proj.bias"},
                 {"k_bias", "self_attn.k_proj.bias"},
                 {"v_bias", "self_attn.v_proj.bias"},
                 {"q_norm", "self_attn.q_norm.weight"},
                 {"k_norm", "self_attn.k_norm.weight"},
                 {"ffn_norm", "post_attention_layernorm.weight"},
                 {"gate", "mlp.gate_proj.weight"},
                 {"up", "mlp.up_proj.weight"},
                 {"down", "mlp.down_proj.weight"},
                 {"router", "mlp.gate.weight"},
                 {"gate_exps", "mlp.experts.{e}.gate_proj.weight"},
                 {"up_exps", "mlp.experts.{e}.up_proj.weight"},
                 {"down_exps", "mlp.experts.{e}.down_proj.weight"}};
  return names;
}

/// Resolves tie_embeddings: as config.json says, else by lm_head's presence.
void resolve_tie(Config& c, const HfConfig& hc, const Shards& s) {
  c.tie_embeddings = hc.tie_word_embeddings.value_or(s.tensors.count("lm_head.weight") == 0);
}

void check_layers(const Config& c, const Shards& s) {
  const std::string prefix = "model.layers.";
  for (const auto& [name, ft] : s.tensors) {
    if (name.find(".shared_expert") != std::string::npos)
      throw format_error("shared-expert tensor: mixture of experts with shared experts (Qwen2-MoE) is not supported",
                         ft.first->where_tensor(name));
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    std::size_t i = prefix.size();
    long l = 0;
    bool digit = false;
    while (i < name.size() && name[i] >= '0' && name[i] <= '9' && l < 1000000) l = l * 10 + (name[i++] - '0'), digit = true;
    if (digit && l >= c.num_layers)
      throw format_error("tensor of layer " + std::to_string(l) + " but config.json has " +
                             std::to_string(c.num_layers) + " layers",
                         ft.first->where_tensor(name));
  }
}

void require_directory(const fs::path& dir) {
  if (!fs::exists(dir)) throw file_error("no such file or directory", dir.string());
  if (!fs::is_directory(dir)) throw file_error("not a directory", dir.string());
}

}  // namespace

Checkpoint read_hf(const fs::path& dir) {
  require_directory(dir);
  const fs::path config_path = dir / "config.json", tok_path = dir / "tokenizer.json";
  if (!fs::exists(config_path)) throw file_error("missing config.json", config_path.string());
  const HfConfig hc = parse_hf_config(read_text(config_path), config_path.string());
  if (!fs::exists(tok_path)) throw file_error("missing tokenizer.json", tok_path.string());
  Checkpoint ck;
  ck.config = hc.config;
  detail::check_config(ck.config, config_path.string());
  ck.tokenizer = tokenizer_spec_from_json(tok_path);
  {
    Shards s = open_shards(dir);
    resolve_tie(ck.config, hc, s);
    check_layers(ck.config, s);
    detail::WeightOptions opt;
    opt.output = !ck.config.tie_embeddings;
    opt.qkv_bias = ck.config.qkv_bias;
    opt.qk_norm = ck.config.qk_norm;
    ck.weights = detail::fill_weights(ShardSource(s), ck.config, hf_names(), opt);
    ck.files = {config_path, tok_path};
    if (!s.index.empty()) ck.files.push_back(s.index);
    for (const auto& f : s.files) ck.files.push_back(f->path());
  }  // shards unmapped here
  ck.source = fs::absolute(dir);
  ck.fingerprint = fingerprint(ck.files);
  return ck;
}

Config detail::read_hf_config_only(const fs::path& dir) {
  require_directory(dir);
  const fs::path config_path = dir / "config.json";
  if (!fs::exists(config_path)) throw file_error("missing config.json", config_path.string());
  const HfConfig hc = parse_hf_config(read_text(config_path), config_path.string());
  Config c = hc.config;
  detail::check_config(c, config_path.string());
  if (!hc.tie_word_embeddings) {
    Shards s = open_shards(dir);
    resolve_tie(c, hc, s);
  }
  return c;
}

}  // namespace bosch::model
