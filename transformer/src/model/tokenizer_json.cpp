// SPDX-License-Identifier: Apache-2.0
// Hugging Face tokenizer.json -> TokenizerSpec (see model/tokenizer_json.hpp).

#include <bosch/model/tokenizer_json.hpp>

#include <bosch/error.hpp>
#include <bosch/io/atomic_file.hpp>
#include <bosch/model/tokenizer.hpp>

#include "tokenizer_detail.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <optional>

namespace bosch::model {

namespace {

using nlohmann::json;

constexpr std::string_view kMetaspace = "\xE2\x96\x81";  // U+2581

// The Split regexes of the known tokenizer.json files (as written there).
constexpr const char* kLlama3Split =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kQwen2Split =
    R"re((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)re";
constexpr const char* kGpt2Regex =
    R"re('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)re";
// One word for the whole text (no splitting at all).
constexpr const char* kWholeText = R"re([\s\S]+)re";

/// Errors name the source and a JSON path such as "model.merges[12]".
struct Context {
  std::string source;
  /// Ids at or above this (the JSON text's size) are rejected: the vocabulary
  /// is allocated up to the largest id, holes included, so an id is bounded by
  /// what the file could list (found by fuzzing: {"x": 2000000000}).
  std::size_t max_ids = 0;
  std::string at(const std::string& field) const { return source + ": " + field; }
  [[noreturn]] void fail(const std::string& message, const std::string& field) const {
    throw format_error(message, at(field));
  }
};

std::string type_of(const json& j) {
  if (j.is_object()) {
    auto it = j.find("type");
    if (it != j.end() && it->is_string()) return it->get<std::string>();
  }
  return {};
}

const json* member(const json& j, const char* key) {
  if (!j.is_object()) return nullptr;
  auto it = j.find(key);
  return (it == j.end() || it->is_null()) ? nullptr : &*it;
}

bool bool_member(const Context& cx, const json& j, const char* key, bool fallback,
                 const std::string& field) {
  const json* v = member(j, key);
  if (!v) return fallback;
  if (!v->is_boolean()) cx.fail(std::string("'") + key + "' is not a boolean", field + "." + key);
  return v->get<bool>();
}

std::string string_member(const Context& cx, const json& j, const char* key,
                          const std::string& field) {
  const json* v = member(j, key);
  if (!v || !v->is_string()) cx.fail(std::string("missing string '") + key + "'", field + "." + key);
  return v->get<std::string>();
}

/// The steps of a pre-tokenizer (Sequence flattened), each with its JSON path.
void flatten(const json& j, const std::string& field,
             std::vector<std::pair<const json*, std::string>>& out) {
  if (j.is_null()) return;
  if (type_of(j) == "Sequence") {
    const json* list = member(j, "pretokenizers");
    if (!list) list = member(j, "processors");
    if (!list) list = member(j, "decoders");
    if (!list) list = member(j, "normalizers");
    if (list && list->is_array())
      for (std::size_t i = 0; i < list->size(); ++i)
        flatten((*list)[i], field + "[" + std::to_string(i) + "]", out);
    return;
  }
  out.emplace_back(&j, field);
}

std::vector<std::pair<const json*, std::string>> steps(const json& root, const char* key) {
  std::vector<std::pair<const json*, std::string>> out;
  if (const json* j = member(root, key)) flatten(*j, key, out);
  return out;
}

bool has_type(const std::vector<std::pair<const json*, std::string>>& list, std::string_view t) {
  return std::any_of(list.begin(), list.end(),
                     [&](const auto& s) { return type_of(*s.first) == t; });
}

/// The text of a token reference in tokenizer_config.json: "text" or {"content": "text"}.
std::optional<std::string> token_text(const json* j) {
  if (!j) return std::nullopt;
  if (j->is_string()) return j->get<std::string>();
  if (j->is_object()) {
    const json* c = member(*j, "content");
    if (c && c->is_string()) return c->get<std::string>();
  }
  return std::nullopt;
}

json parse(std::string_view text, const std::string& where) {
  try {
    return json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {
    throw format_error(std::string("invalid JSON: ") + e.what(), where);
  }
}

// ---- pieces of the spec -----------------------------------------------------------------

void read_vocab(const Context& cx, const json& model, TokenizerSpec& spec,
                std::vector<int>& types) {
  const json* vocab = member(model, "vocab");
  if (!vocab || !vocab->is_object()) cx.fail("missing object 'vocab'", "model.vocab");
  std::vector<std::pair<int, std::string>> entries;
  entries.reserve(vocab->size());
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it->is_number_integer()) cx.fail("id of '" + it.key() + "' is not an integer", "model.vocab");
    const auto id = it->get<std::int64_t>();
    if (id < 0 || id >= std::numeric_limits<int>::max())
      cx.fail("id " + std::to_string(id) + " of '" + it.key() + "' out of range", "model.vocab");
    if (static_cast<std::uint64_t>(id) >= cx.max_ids)
      cx.fail("id " + std::to_string(id) + " of '" + it.key() + "' exceeds the " +
                  std::to_string(cx.max_ids) + " bytes of the file",
              "model.vocab");
    entries.emplace_back(static_cast<int>(id), it.key());
  }
  int size = 0;
  for (const auto& e : entries) size = std::max(size, e.first + 1);
  spec.tokens.assign(static_cast<std::size_t>(size), {});
  types.assign(static_cast<std::size_t>(size), detail::type_unused);
  for (auto& [id, text] : entries) {
    auto& slot = spec.tokens[static_cast<std::size_t>(id)];
    if (types[static_cast<std::size_t>(id)] != detail::type_unused)
      cx.fail("id " + std::to_string(id) + " given to both '" + slot + "' and '" + text + "'",
              "model.vocab");
    slot = std::move(text);
    types[static_cast<std::size_t>(id)] = detail::type_normal;
  }
}

void read_added_tokens(const Context& cx, const json& root, TokenizerSpec& spec,
                       std::vector<int>& types) {
  const json* added = member(root, "added_tokens");
  if (!added) return;
  if (!added->is_array()) cx.fail("'added_tokens' is not an array", "added_tokens");
  for (std::size_t i = 0; i < added->size(); ++i) {
    const json& t = (*added)[i];
    const std::string field = "added_tokens[" + std::to_string(i) + "]";
    const json* id_j = member(t, "id");
    if (!id_j || !id_j->is_number_integer()) cx.fail("missing integer 'id'", field + ".id");
    const auto id64 = id_j->get<std::int64_t>();
    if (id64 < 0 || id64 >= std::numeric_limits<int>::max())
      cx.fail("id " + std::to_string(id64) + " out of range", field + ".id");
    if (static_cast<std::uint64_t>(id64) >= cx.max_ids)
      cx.fail("id " + std::to_string(id64) + " exceeds the " + std::to_string(cx.max_ids) +
                  " bytes of the file",
              field + ".id");
    const auto id = static_cast<std::size_t>(id64);
    const std::string content = string_member(cx, t, "content", field);
    const bool special = bool_member(cx, t, "special", false, field);
    if (id >= spec.tokens.size()) {
      spec.tokens.resize(id + 1);
      types.resize(id + 1, detail::type_unused);
    }
    if (types[id] != detail::type_unused && spec.tokens[id] != content)
      cx.fail("id " + std::to_string(id) + " is '" + spec.tokens[id] + "' in the vocab but '" +
                  content + "' here",
              field);
    spec.tokens[id] = content;
    types[id] = special ? detail::type_control : detail::type_user_defined;
  }
}

void read_merges(const Context& cx, const json& model, TokenizerSpec& spec) {
  const json* merges = member(model, "merges");
  if (!merges) return;
  if (!merges->is_array()) cx.fail("'merges' is not an array", "model.merges");
  spec.merges.reserve(merges->size());
  for (std::size_t i = 0; i < merges->size(); ++i) {
    const json& m = (*merges)[i];
    const std::string field = "model.merges[" + std::to_string(i) + "]";
    if (m.is_string()) {
      std::string s = m.get<std::string>();
      if (s.find(' ') == std::string::npos) cx.fail("merge '" + s + "' has no space", field);
      spec.merges.push_back(std::move(s));
    } else if (m.is_array() && m.size() == 2 && m[0].is_string() && m[1].is_string()) {
      spec.merges.push_back(m[0].get<std::string>() + " " + m[1].get<std::string>());
    } else {
      cx.fail("a merge is a \"left right\" string or a [left, right] pair", field);
    }
  }
}

/// Byte-level pre-tokenizer -> a named one, or carried regexes.
void read_byte_level_pre(const Context& cx, const json& root, TokenizerSpec& spec) {
  std::vector<std::string> regexes;
  for (const auto& [step, field] : steps(root, "pre_tokenizer")) {
    const std::string type = type_of(*step);
    if (type == "ByteLevel") {
      if (bool_member(cx, *step, "add_prefix_space", false, field))
        cx.fail("ByteLevel with add_prefix_space is not supported", field + ".add_prefix_space");
      if (bool_member(cx, *step, "use_regex", true, field)) regexes.emplace_back(kGpt2Regex);
    } else if (type == "Digits") {
      regexes.emplace_back(bool_member(cx, *step, "individual_digits", false, field)
                               ? R"re(\p{N})re"
                               : R"re(\p{N}+)re");
    } else if (type == "Split") {
      const json* pattern = member(*step, "pattern");
      if (!pattern || !pattern->is_object()) cx.fail("missing 'pattern'", field + ".pattern");
      const std::string behavior =
          member(*step, "behavior") && (*step)["behavior"].is_string()
              ? (*step)["behavior"].get<std::string>()
              : "Isolated";
      if (behavior != "Isolated")
        cx.fail("Split behavior '" + behavior + "' is not supported (only Isolated)",
                field + ".behavior");
      if (bool_member(cx, *step, "invert", false, field))
        cx.fail("inverted Split is not supported", field + ".invert");
      if (const json* r = member(*pattern, "Regex"); r && r->is_string()) {
        regexes.push_back(r->get<std::string>());
      } else if (const json* s = member(*pattern, "String"); s && s->is_string()) {
        // A literal: quote it for PCRE2.
        regexes.push_back("\\Q" + s->get<std::string>() + "\\E");
      } else {
        cx.fail("pattern is neither {\"Regex\": ...} nor {\"String\": ...}", field + ".pattern");
      }
    } else {
      cx.fail("pre-tokenizer '" + type + "' is not supported with byte-level BPE", field);
    }
  }
  using V = std::vector<std::string>;
  if (regexes == V{kGpt2Regex}) {
    spec.pre = "gpt2";
  } else if (regexes == V{R"re(\p{N})re", kGpt2Regex}) {
    spec.pre = "smollm";
  } else if (regexes == V{kLlama3Split}) {
    spec.pre = "llama-bpe";
  } else if (regexes == V{kQwen2Split}) {
    spec.pre = "qwen2";
  } else {
    spec.pre = "default";
    spec.pre_regexes = regexes.empty() ? V{kWholeText} : regexes;
  }
}

/// SentencePiece-style: space handling from the normalizer / Metaspace.
void read_spm_pre(const Context& cx, const json& root, TokenizerSpec& spec) {
  bool prepend = false;
  for (const auto& [step, field] : steps(root, "normalizer")) {
    const std::string type = type_of(*step);
    if (type == "Prepend") {
      prepend = string_member(cx, *step, "prepend", field) == kMetaspace;
      if (!prepend) cx.fail("only Prepend(\"\xE2\x96\x81\") is supported", field);
    } else if (type == "Replace") {
      const json* pattern = member(*step, "pattern");
      const json* literal = pattern ? member(*pattern, "String") : nullptr;
      if (!literal || !literal->is_string() || literal->get<std::string>() != " " ||
          string_member(cx, *step, "content", field) != kMetaspace)
        cx.fail("only Replace(\" \" -> \"\xE2\x96\x81\") is supported", field);
    } else if (type != "NFC") {
      cx.fail("normalizer '" + type + "' is not supported", field);
    }
  }
  for (const auto& [step, field] : steps(root, "pre_tokenizer")) {
    const std::string type = type_of(*step);
    if (type != "Metaspace") cx.fail("pre-tokenizer '" + type + "' is not supported here", field);
    const json* scheme = member(*step, "prepend_scheme");
    const std::string s = scheme && scheme->is_string() ? scheme->get<std::string>() : "always";
    if (bool_member(cx, *step, "split", false, field))
      cx.fail("Metaspace with split = true is not supported", field + ".split");
    if (s == "always" || s == "first") prepend = true;
    if (bool_member(cx, *step, "add_prefix_space", false, field)) prepend = true;
  }
  spec.add_space_prefix = prepend;
}

/// SentencePiece scores from merge ranks: minus the rank of the first merge
/// that makes a token; tokens no merge makes score below every merge.
void spm_scores(const Context& cx, TokenizerSpec& spec) {
  detail::TextMap ids;
  for (std::size_t i = 0; i < spec.tokens.size(); ++i)
    if (!spec.tokens[i].empty()) ids.emplace(spec.tokens[i], static_cast<int>(i));
  const float never = -static_cast<float>(spec.merges.size() + 1);
  spec.scores.assign(spec.tokens.size(), never);
  for (std::size_t k = 0; k < spec.merges.size(); ++k) {
    const std::string& m = spec.merges[k];
    std::string merged;
    for (std::size_t sp = m.find(' '); sp != std::string::npos; sp = m.find(' ', sp + 1)) {
      if (ids.count(std::string_view(m).substr(0, sp)) && ids.count(std::string_view(m).substr(sp + 1))) {
        merged = m.substr(0, sp) + m.substr(sp + 1);
        break;
      }
    }
    auto it = merged.empty() ? ids.end() : ids.find(merged);
    if (it == ids.end())
      cx.fail("merge '" + m + "' does not join two vocabulary tokens into one",
              "model.merges[" + std::to_string(k) + "]");
    float& score = spec.scores[static_cast<std::size_t>(it->second)];
    score = std::max(score, -static_cast<float>(k));
  }
  // The merges live on as scores; the SPM tokenizer does not read them.
  spec.merges.clear();
}

/// BOS from the post-processor: a special token before the sequence.
void read_post_processor(const Context& cx, const json& root, TokenizerSpec& spec,
                         const detail::TextMap& ids) {
  for (const auto& [step, field] : steps(root, "post_processor")) {
    const std::string type = type_of(*step);
    std::optional<std::string> first;
    if (type == "TemplateProcessing") {
      const json* single = member(*step, "single");
      if (single && single->is_array() && !single->empty()) {
        const json* st = member((*single)[0], "SpecialToken");
        if (st) first = string_member(cx, *st, "id", field + ".single[0].SpecialToken");
      }
      if (first) {
        // The template names a special token whose ids are listed under special_tokens.
        const json* table = member(*step, "special_tokens");
        const json* entry = table ? member(*table, first->c_str()) : nullptr;
        const json* list = entry ? member(*entry, "ids") : nullptr;
        if (list && list->is_array() && list->size() == 1 && (*list)[0].is_number_integer()) {
          const auto id = (*list)[0].get<std::int64_t>();
          if (id < 0 || id >= static_cast<std::int64_t>(spec.tokens.size()))
            cx.fail("BOS id " + std::to_string(id) + " outside the vocabulary",
                    field + ".special_tokens");
          spec.bos = static_cast<int>(id);
          spec.add_bos = true;
          continue;
        }
      }
    } else if (type == "BertProcessing" || type == "RobertaProcessing") {
      const json* cls = member(*step, "cls");
      if (cls && cls->is_array() && !cls->empty() && (*cls)[0].is_string())
        first = (*cls)[0].get<std::string>();
    } else if (type == "ByteLevel") {
      continue;
    } else {
      cx.fail("post-processor '" + type + "' is not supported", field);
    }
    if (first) {
      auto it = ids.find(*first);
      if (it == ids.end()) cx.fail("BOS token '" + *first + "' is not in the vocabulary", field);
      spec.bos = it->second;
      spec.add_bos = true;
    }
  }
}

void read_config(std::string_view config_json, const std::string& where, TokenizerSpec& spec,
                 const detail::TextMap& ids) {
  if (config_json.empty()) return;
  const json config = parse(config_json, where);
  const auto lookup = [&](const char* key, int& slot) {
    if (slot >= 0) return;
    if (auto text = token_text(member(config, key))) {
      auto it = ids.find(*text);
      if (it == ids.end())
        throw format_error("token '" + *text + "' is not in the vocabulary", where + ": " + key);
      slot = it->second;
    }
  };
  lookup("bos_token", spec.bos);
  lookup("eos_token", spec.eos);
  lookup("unk_token", spec.unk);
  lookup("pad_token", spec.pad);
  if (const json* add = member(config, "add_bos_token")) {
    if (!add->is_boolean()) throw format_error("not a boolean", where + ": add_bos_token");
    spec.add_bos = add->get<bool>() && spec.bos >= 0;
  }
}

TokenizerSpec from_text(std::string_view json_text, const std::string& where,
                        std::string_view config_json, const std::string& config_where) {
  const Context cx{where, json_text.size()};
  const json root = parse(json_text, where);
  if (!root.is_object()) cx.fail("not a JSON object", "(root)");
  const json* model_j = member(root, "model");
  if (!model_j || !model_j->is_object()) cx.fail("missing object 'model'", "model");
  const json& model = *model_j;
  const std::string model_type = type_of(model);
  if (!model_type.empty() && model_type != "BPE")
    cx.fail("model type '" + model_type + "' is not supported (only BPE)", "model.type");
  if (const json* d = member(model, "dropout"); d && !(d->is_number() && d->get<double>() == 0.0))
    cx.fail("BPE dropout is not supported", "model.dropout");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (const json* v = member(model, key); v && !(v->is_string() && v->get<std::string>().empty()))
      cx.fail("subword prefixes and suffixes are not supported", std::string("model.") + key);

  TokenizerSpec spec;
  std::vector<int> types;
  read_vocab(cx, model, spec, types);
  read_added_tokens(cx, root, spec, types);
  read_merges(cx, model, spec);
  if (spec.tokens.empty()) cx.fail("empty vocabulary", "model.vocab");
  spec.ignore_merges = bool_member(cx, model, "ignore_merges", false, "model");
  const bool byte_fallback = bool_member(cx, model, "byte_fallback", false, "model");

  // Which kind: byte-level (ByteLevel pre-tokenizer or decoder) or SentencePiece style.
  const auto pre = steps(root, "pre_tokenizer");
  const auto dec = steps(root, "decoder");
  const auto norm = steps(root, "normalizer");
  const bool byte_level = has_type(pre, "ByteLevel") || has_type(dec, "ByteLevel");
  const bool metaspace = has_type(pre, "Metaspace") || has_type(dec, "Metaspace") ||
                         std::any_of(norm.begin(), norm.end(), [](const auto& s) {
                           const json* c = member(*s.first, "content");
                           return type_of(*s.first) == "Replace" && c && c->is_string() &&
                                  c->get<std::string>() == kMetaspace;
                         });
  if (byte_level) {
    spec.kind = TokenizerSpec::Kind::byte_bpe;
    spec.add_space_prefix = false;
    for (const auto& [step, field] : norm)
      if (type_of(*step) != "NFC")
        cx.fail("normalizer '" + type_of(*step) + "' is not supported with byte-level BPE", field);
    read_byte_level_pre(cx, root, spec);
  } else if (metaspace) {
    spec.kind = TokenizerSpec::Kind::spm;
    read_spm_pre(cx, root, spec);
    for (std::size_t i = 0; i < spec.tokens.size(); ++i)
      if (byte_fallback && types[i] == detail::type_normal &&
          detail::parse_byte_token(spec.tokens[i]))
        types[i] = detail::type_byte;
    spm_scores(cx, spec);
  } else {
    cx.fail("neither a byte-level BPE (ByteLevel) nor a SentencePiece-style BPE (Metaspace, "
            "\xE2\x96\x81 normalizer) tokenizer",
            "pre_tokenizer");
  }

  detail::TextMap ids;
  for (std::size_t i = 0; i < spec.tokens.size(); ++i)
    if (types[i] != detail::type_unused) ids.emplace(spec.tokens[i], static_cast<int>(i));
  if (const json* unk = member(model, "unk_token")) {
    if (!unk->is_string()) cx.fail("'unk_token' is not a string", "model.unk_token");
    auto it = ids.find(unk->get<std::string>());
    if (it == ids.end())
      cx.fail("'" + unk->get<std::string>() + "' is not in the vocabulary", "model.unk_token");
    spec.unk = it->second;
    if (types[static_cast<std::size_t>(spec.unk)] == detail::type_normal)
      types[static_cast<std::size_t>(spec.unk)] = detail::type_unknown;
  }
  read_post_processor(cx, root, spec, ids);
  read_config(config_json, config_where, spec, ids);
  spec.token_types = std::move(types);

  // Check the whole spec (merges naming unknown tokens, bad regexes, ...) now,
  // with errors naming this file.
  try {
    const Tokenizer check(spec);
  } catch (const error& e) {
    std::string field = e.where();
    if (field.rfind("tokenizer: ", 0) == 0) field = field.substr(11);
    if (field.rfind("merges", 0) == 0) field = "model." + field;
    throw format_error(e.message(), cx.at(field));
  }
  return spec;
}

}  // namespace

TokenizerSpec tokenizer_spec_from_json_text(std::string_view json_text, const std::string& where,
                                            std::string_view config_json) {
  return from_text(json_text, where, config_json, where + " (tokenizer_config.json)");
}

TokenizerSpec tokenizer_spec_from_json(const std::filesystem::path& tokenizer_json) {
  // Regular files (checked before opening: a FIFO would block), bounded.
  const auto read = [](const std::filesystem::path& p) {
    return io::read_file(p, std::uintmax_t{512} << 20, "a tokenizer file");
  };
  const std::string text = read(tokenizer_json);
  std::string config;
  const auto config_path = tokenizer_json.parent_path() / "tokenizer_config.json";
  std::error_code ec;
  if (std::filesystem::is_regular_file(config_path, ec)) config = read(config_path);
  return from_text(text, tokenizer_json.string(), config, config_path.string());
}

}  // namespace bosch::model
