// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file mask_export.hpp
/// Mask exports that serving engines load (docs/deployment.md), and their
/// readers, so that bosch reads back what it wrote:
///
///  - **kvpress / DuoAttention pattern directory**: `full_attention_heads.tsv`
///    (one row per layer, one real score in [0, 1] per KV head, higher = more
///    global) and `config.json` with `sink_size` and `recent_size`. Every full
///    head scores above every SWA head (full heads in [0.5, 1], SWA heads in
///    (0, 0.5)), all scores distinct, so that
///      - kvpress's DuoAttentionPress, whose streaming heads are the
///        round(n * head_compression_ratio) lowest scores of np.argsort, marks
///        exactly the mask's SWA heads at head_compression_ratio = SWA heads /
///        KV heads (the mask's ratio, written to config.json as
///        "head_compression_ratio"); other ratios add or spare heads in the
///        order of the evidence (duo_head_order);
///      - DuoAttention's threshold 0.5, and bosch's TSV reader (values >= 0.5
///        mean full), read the mask back exactly.
///  - **Hugging Face config patch** (layer masks only): `layer_types`
///    ("sliding_attention" / "full_attention" per layer), `sliding_window`,
///    `use_sliding_window`, and `max_window_layers` for qwen2 and qwen3.
///  - **layer windows** (layer masks only): per-layer windows for TensorRT-LLM
///    (`max_attention_window`, `sink_token_length`), and the layer-id lists
///    (`swa_attention_layer_ids`, `full_attention_layer_ids`) and
///    `layer_types`, which describe the mask (SGLang reads no user layer
///    list; vLLM reads the config patch).
///  - GGUF: bosch::transformer (bosch/model/gguf_export.hpp), which needs the
///    model file.
///
/// Whether the engine of an export applies the windows at all depends on the
/// architecture: check_export_engine (the table in docs/deployment.md).
///
/// A window `w` means what it means in bosch (bosch/model/windows.hpp): a
/// query sees its last w keys, itself included (the Hugging Face
/// `sliding_window` convention), plus the first `sinks` keys.
///
/// Every file is written atomically; the pattern directory as a whole
/// (write_directory_atomic). Errors: bosch::invalid_argument for a mask a
/// format cannot express (naming the format, the first offending layer and
/// the formats that take it), bosch::format_error for malformed input naming
/// the file and field, bosch::file_error for I/O.

#include <bosch/error.hpp>
#include <bosch/io/atomic_file.hpp>
#include <bosch/io/mask_io.hpp>
#include <bosch/io/shortest_text.hpp>
#include <bosch/mask.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <numeric>
#include <optional>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#if __has_include(<unistd.h>)
#include <fcntl.h>
#include <unistd.h>
#endif

namespace bosch::io {

/// The file names of a DuoAttention / kvpress pattern directory.
inline constexpr const char* duo_scores_file = "full_attention_heads.tsv";
inline constexpr const char* duo_config_file = "config.json";

/// Window and sink count of an export.
struct ExportWindows {
  int window = 0;  ///< w >= 1
  int sinks = 0;   ///< s >= 0
};

/// Throws bosch::invalid_argument naming `where` unless window >= 1 and sinks >= 0.
inline void check_export_windows(const ExportWindows& w, const std::string& where) {
  if (w.window < 1) throw invalid_argument("window must be >= 1, got " + std::to_string(w.window), where);
  if (w.sinks < 0) throw invalid_argument("sinks must be >= 0, got " + std::to_string(w.sinks), where);
}

// ---- layer granularity ------------------------------------------------------------------------

/// The first layer that mixes SWA and full KV heads, or -1 when every layer
/// is all SWA or all full (a layer-granular mask).
inline int first_mixed_layer(const HeadMask& mask) {
  const auto& l = mask.layout();
  for (int layer = 0; layer < l.num_layers; ++layer) {
    int swa = 0;
    for (int k = 0; k < l.num_kv_heads; ++k) swa += mask.swa(layer, k) ? 1 : 0;
    if (swa != 0 && swa != l.num_kv_heads) return layer;
  }
  return -1;
}

/// Throws bosch::invalid_argument (where = `where`) unless `mask` is
/// layer-granular; the message names `format`, the first mixed layer and
/// the formats and engines that take head-level masks.
inline void check_layer_mask(const HeadMask& mask, const std::string& format, const std::string& where) {
  const int layer = first_mixed_layer(mask);
  if (layer < 0) return;
  const auto& l = mask.layout();
  int swa = 0;
  for (int k = 0; k < l.num_kv_heads; ++k) swa += mask.swa(layer, k) ? 1 : 0;
  throw invalid_argument(
      "the " + format + " format takes whole layers only, but this is a head-level mask (layer " +
          std::to_string(layer) + " has " + std::to_string(swa) + " of " + std::to_string(l.num_kv_heads) +
          " KV heads SWA); head-level masks load in kvpress's DuoAttentionPress and DuoAttention "
          "(--to kvpress) and in bosch itself; for " + format +
          " select a layer mask (bosch select --variant layer at a ratio whose SWA-head count is a "
          "multiple of " + std::to_string(l.num_kv_heads) + ")",
      where);
}

/// True per layer when the layer is SWA (layer-granular masks; check first).
inline std::vector<bool> swa_layers(const HeadMask& mask) {
  std::vector<bool> out(static_cast<std::size_t>(mask.layout().num_layers));
  for (int layer = 0; layer < mask.layout().num_layers; ++layer)
    out[static_cast<std::size_t>(layer)] = mask.layout().num_kv_heads > 0 && mask.swa(layer, 0);
  return out;
}

/// The mask of `layout` whose SWA layers are those set in `swa`
/// (bosch::invalid_argument naming `where` when the sizes differ).
inline HeadMask mask_from_swa_layers(const HeadLayout& layout, const std::vector<bool>& swa,
                                     const std::string& where) {
  if (swa.size() != static_cast<std::size_t>(layout.num_layers))
    throw invalid_argument(std::to_string(swa.size()) + " layers, the layout (" + to_string(layout) +
                               ") has " + std::to_string(layout.num_layers),
                           where);
  HeadMask m(layout);
  for (int layer = 0; layer < layout.num_layers; ++layer)
    if (swa[static_cast<std::size_t>(layer)])
      for (int k = 0; k < layout.num_kv_heads; ++k) m.set(layer, k, true);
  return m;
}

// ---- kvpress / DuoAttention -------------------------------------------------------------------

/// The evidence duo_head_order ranks heads by: a metadata field, or the index.
enum class DuoEvidence { head_scores, layer_drops, index };

inline const char* to_string(DuoEvidence e) noexcept {
  return e == DuoEvidence::head_scores ? "head_scores" : e == DuoEvidence::layer_drops ? "layer_drops" : "index";
}

/// Per-head evidence from a mask's metadata, higher = more global (keep it
/// full longer), one value per flat head (layer-major), and which field it
/// came from:
///  - "head_scores": an array of layers arrays of KV-head numbers (e.g. the
///    scores given to mask_from_scores), taken as they are;
///  - else "layer_drops": one number per layer, the search's Stage 1 score
///    drop when the layer's heads become SWA (bosch/io/search_metadata.hpp);
///    every head of a layer gets its layer's drop; a layer not probed (null)
///    counts as the most global, since nothing shows it can be spared;
///  - else none: all equal (the order is then the head index).
/// A field of the wrong shape or with non-numbers raises bosch::format_error
/// naming "`where`: metadata.<field>".
inline std::pair<std::vector<double>, DuoEvidence> duo_evidence(const HeadMask& mask, const nlohmann::json& metadata,
                                                                const std::string& where) {
  const auto& l = mask.layout();
  const auto L = static_cast<std::size_t>(l.num_layers), H = static_cast<std::size_t>(l.num_kv_heads);
  std::vector<double> ev(mask.size(), 0.0);
  const double most = std::numeric_limits<double>::infinity();
  auto number = [&](const nlohmann::json& v, const std::string& field, bool null_ok) {
    if (v.is_null() && null_ok) return most;
    if (!v.is_number()) throw format_error("expected a number, got " + v.dump(), where + ": metadata." + field);
    const double d = v.get<double>();
    if (!std::isfinite(d)) throw format_error("not a finite number", where + ": metadata." + field);
    return d;
  };
  if (metadata.is_object() && metadata.contains("head_scores")) {
    const auto& hs = metadata["head_scores"];
    if (!hs.is_array() || hs.size() != L)
      throw format_error("expected " + std::to_string(L) + " arrays of " + std::to_string(H) + " numbers",
                         where + ": metadata.head_scores");
    for (std::size_t i = 0; i < L; ++i) {
      if (!hs[i].is_array() || hs[i].size() != H)
        throw format_error("expected " + std::to_string(H) + " numbers",
                           where + ": metadata.head_scores[" + std::to_string(i) + "]");
      for (std::size_t k = 0; k < H; ++k)
        ev[i * H + k] = number(hs[i][k], "head_scores[" + std::to_string(i) + "]", false);
    }
    return {ev, DuoEvidence::head_scores};
  }
  if (metadata.is_object() && metadata.contains("layer_drops") && !metadata["layer_drops"].is_null()) {
    const auto& d = metadata["layer_drops"];
    if (!d.is_array() || d.size() != L)
      throw format_error("expected " + std::to_string(L) + " numbers (one per layer)", where + ": metadata.layer_drops");
    for (std::size_t i = 0; i < L; ++i) {
      const double v = number(d[i], "layer_drops[" + std::to_string(i) + "]", true);
      for (std::size_t k = 0; k < H; ++k) ev[i * H + k] = v;
    }
    return {ev, DuoEvidence::layer_drops};
  }
  return {ev, DuoEvidence::index};
}

/// The flat head indices in the order kvpress should turn them into
/// streaming heads as its head_compression_ratio grows: every SWA head of
/// `mask` first, then every full head; within each group by ascending
/// evidence (least global first), ties by ascending flat index.
inline std::vector<std::size_t> duo_head_order(const HeadMask& mask, const std::vector<double>& evidence) {
  std::vector<std::size_t> order(mask.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    if (mask[a] != mask[b]) return mask[a];  // SWA heads first
    return evidence[a] < evidence[b];
  });
  return order;
}

/// Real scores in [0, 1] per flat head (see the file comment): the i-th SWA
/// head of the order scores 0.5 (i + 1) / (s + 1), the j-th full head
/// 0.5 + 0.5 (j + 1) / f, for s SWA and f full heads. All distinct; every SWA
/// head below 0.5, every full head above.
inline std::vector<double> duo_head_scores(const HeadMask& mask, const std::vector<std::size_t>& order) {
  const std::size_t s = mask.count(), f = mask.size() - s;
  std::vector<double> scores(mask.size(), 0.0);
  for (std::size_t r = 0; r < order.size(); ++r) {
    const std::size_t h = order[r];
    scores[h] = r < s ? 0.5 * static_cast<double>(r + 1) / static_cast<double>(s + 1)
                      : 0.5 + 0.5 * static_cast<double>(r - s + 1) / static_cast<double>(f);
  }
  return scores;
}

/// The TSV text of per-head scores (layers rows of KV-head values).
inline std::string scores_to_tsv(const HeadLayout& layout, const std::vector<double>& scores) {
  std::string s;
  for (int layer = 0; layer < layout.num_layers; ++layer) {
    for (int k = 0; k < layout.num_kv_heads; ++k) {
      if (k) s += '\t';
      s += shortest_text(scores[static_cast<std::size_t>(layer) * static_cast<std::size_t>(layout.num_kv_heads) +
                                  static_cast<std::size_t>(k)]);
    }
    s += '\n';
  }
  return s;
}

/// A pattern directory's two files.
struct DuoPattern {
  std::string scores_tsv;  ///< full_attention_heads.tsv
  nlohmann::json config;   ///< config.json
};

/// The pattern directory of `mask` (see the file comment). config.json has
/// sink_size and recent_size (what kvpress and DuoAttention read; recent_size
/// = the window), head_compression_ratio (the value to pass to kvpress's
/// DuoAttentionPress), num_layers, num_kv_heads and "bosch" (the evidence
/// that ordered the scores, the SWA-head count, the mask's layout).
inline DuoPattern duo_pattern(const HeadMask& mask, const nlohmann::json& metadata, const ExportWindows& w,
                              const std::string& where = "mask") {
  check_export_windows(w, where);
  const auto [evidence, source] = duo_evidence(mask, metadata, where);
  const auto scores = duo_head_scores(mask, duo_head_order(mask, evidence));
  const auto& l = mask.layout();
  DuoPattern p;
  p.scores_tsv = scores_to_tsv(l, scores);
  p.config = nlohmann::json{
      {"sink_size", w.sinks},
      {"recent_size", w.window},
      {"head_compression_ratio", mask.size() ? static_cast<double>(mask.count()) / static_cast<double>(mask.size()) : 0.0},
      {"num_layers", l.num_layers},
      {"num_kv_heads", l.num_kv_heads},
      {"bosch",
       {{"format", "bosch.duo_pattern"},
        {"version", 1},
        {"layout", to_string(l)},
        {"swa_heads", mask.count()},
        {"score_order", to_string(source)},
        {"threshold", 0.5}}}};
  return p;
}

/// What a pattern directory holds, read back.
struct DuoPatternFile {
  HeadMask mask;
  ExportWindows windows;
};

/// Parses a pattern directory's files (TSV: bosch::io::mask_from_tsv with
/// `threshold`; config: sink_size and recent_size, non-negative integers,
/// recent_size >= 1). The query-head count comes from `num_query_heads`
/// (0: config.json's "bosch".layout when present, else the KV heads).
/// `where` names the directory.
inline DuoPatternFile parse_duo_pattern(const std::string& tsv, const std::string& config_text,
                                        const std::string& where, int num_query_heads = 0,
                                        double threshold = 0.5) {
  const std::string cwhere = where + "/" + duo_config_file;
  nlohmann::json c;
  try {
    c = nlohmann::json::parse(config_text);
  } catch (const nlohmann::json::exception& e) {
    throw format_error(std::string("not valid JSON: ") + e.what(), cwhere);
  }
  if (!c.is_object()) throw format_error("not a JSON object", cwhere);
  auto field = [&](const char* name, int min) {
    if (!c.contains(name) || !c[name].is_number_integer())
      throw format_error("missing or not an integer", cwhere + ": " + name);
    const auto v = c[name].get<long long>();
    if (v < min || v > std::numeric_limits<int>::max())
      throw format_error("out of range: " + std::to_string(v), cwhere + ": " + name);
    return static_cast<int>(v);
  };
  DuoPatternFile out{HeadMask(), ExportWindows{field("recent_size", 1), field("sink_size", 0)}};
  int hq = num_query_heads;
  if (hq <= 0 && c.contains("bosch") && c["bosch"].is_object() && c["bosch"].contains("layout") &&
      c["bosch"]["layout"].is_string()) {
    try {
      hq = parse_layout(c["bosch"]["layout"].get<std::string>()).num_query_heads;
    } catch (const bosch::error&) {
      throw format_error("not a layout LxHqxHkv", cwhere + ": bosch.layout");
    }
  }
  out.mask = mask_from_tsv(tsv, hq, threshold, where + "/" + duo_scores_file);
  return out;
}

// ---- which engine applies the windows ---------------------------------------------------------

/// The architectures bosch runs (model::Arch; the GGUF general.architecture
/// names), which a mask's metadata records as "architecture".
inline bool known_architecture(const std::string& arch) {
  return arch == "llama" || arch == "qwen2" || arch == "qwen3" || arch == "qwen3moe";
}

/// The architecture a mask's metadata records ("architecture", a string, as
/// `bosch select`, `bosch baseline` and TransformerEvaluator.metadata write
/// it), or "" when it records none (older files, masks of other searches).
/// bosch::format_error naming "`where`: metadata.architecture" when present
/// but not a string.
inline std::string metadata_architecture(const nlohmann::json& metadata, const std::string& where) {
  if (!metadata.is_object() || !metadata.contains("architecture") || metadata["architecture"].is_null()) return {};
  if (!metadata["architecture"].is_string())
    throw format_error("expected a string, got " + metadata["architecture"].dump(), where + ": metadata.architecture");
  return metadata["architecture"].get<std::string>();
}

/// The architecture an export targets: `given` (the model's, or the one the
/// user named; `given_where` says which) when not empty, else the mask
/// metadata's. Throws bosch::invalid_argument naming `given_where` when both
/// are present and differ, or when `given` is not one bosch runs.
inline std::string export_architecture(const std::string& given, const std::string& given_where,
                                       const nlohmann::json& metadata, const std::string& where) {
  const std::string recorded = metadata_architecture(metadata, where);
  if (given.empty()) return recorded;
  if (!known_architecture(given))
    throw invalid_argument("unknown architecture '" + given + "' (expected llama, qwen2, qwen3 or qwen3moe)",
                           given_where);
  if (!recorded.empty() && recorded != given)
    throw invalid_argument("architecture " + given + " differs from the " + recorded +
                               " that the mask's metadata records (" + where + ")",
                           given_where);
  return given;
}

/// The routes that apply a layer mask's windows whatever the engine does.
inline std::string export_routes(const std::string& arch) {
  std::string s = "run the mask through bosch itself (bosch generate, logits or evaluate with --mask), "
                  "through transformers with the Python package's per-head attention (bosch.hf.WindowedAttention)";
  if (arch == "qwen2" || arch == "qwen3") s += ", through transformers with --to hf";
  return s + ", or select a head-level mask for kvpress's DuoAttentionPress (--to kvpress)";
}

/// Throws bosch::invalid_argument (where = `where`) when the engine that the
/// export `format` ("hf", "gguf", "layers", "kvpress") targets would ignore
/// the windows of `mask` for architecture `arch` ("" = not known), naming the
/// engine, the reason and the routes that work (docs/deployment.md):
///  - hf (Hugging Face transformers, and vLLM, which reads the same config):
///    applied for qwen2 and qwen3 (layer_types); qwen3moe windows every
///    layer or none (no layer_types), so only a mask whose layers all agree
///    passes; llama has no sliding window at all; an unknown or unnamed
///    architecture is refused rather than guessed;
///  - gguf (llama.cpp): refused for every architecture bosch runs (llama.cpp
///    reads the keys only in the loaders of SWA architectures such as
///    gemma2/3, cohere2, llama4, olmo2, phi3; its llama, qwen2, qwen3 and
///    qwen3moe graphs attend fully) and for an unnamed one;
///  - layers (TensorRT-LLM's per-layer max_attention_window) and kvpress
///    (per-head patterns): any architecture.
inline void check_export_engine(const std::string& format, const std::string& arch, const HeadMask& mask,
                                const std::string& where) {
  if (format != "hf" && format != "gguf") return;
  const std::string engine = format == "hf" ? "Hugging Face transformers" : "llama.cpp";
  if (arch.empty())
    throw invalid_argument("the " + format + " export needs the model's architecture, because " + engine +
                               " applies these windows for some architectures and silently ignores them for "
                               "others, and the mask's metadata records none; pass --model (or --arch; Python: "
                               "model= or arch=)",
                           where);
  if (!known_architecture(arch))
    throw invalid_argument("bosch does not know whether " + engine + " applies sliding windows for architecture '" +
                               arch + "' (it knows llama, qwen2, qwen3 and qwen3moe); " + export_routes(arch),
                           where);
  if (format == "gguf")
    throw invalid_argument("llama.cpp would ignore these windows: it reads <arch>.attention.sliding_window and "
                           "sliding_window_pattern only for architectures with sliding-window attention (gemma2, "
                           "gemma3, cohere2, llama4, olmo2, phi3, ...), and its " + arch +
                               " graph attends fully in every layer; " + export_routes(arch),
                           where);
  if (arch == "llama")
    throw invalid_argument("Hugging Face transformers would ignore these windows: its Llama attention (architecture "
                           "llama) has no sliding window, so the patched model computes full attention; " +
                               export_routes(arch),
                           where);
  if (arch == "qwen3moe" && first_mixed_layer(mask) < 0) {
    const auto& l = mask.layout();
    int swa_layers = 0;
    for (int layer = 0; layer < l.num_layers; ++layer) swa_layers += l.num_kv_heads > 0 && mask.swa(layer, 0) ? 1 : 0;
    if (swa_layers != 0 && swa_layers != l.num_layers)
      throw invalid_argument("Hugging Face transformers would window every layer: its Qwen3-MoE (architecture "
                             "qwen3moe) has no layer_types and applies sliding_window to all layers or none, but "
                             "this mask windows " + std::to_string(swa_layers) + " of " +
                                 std::to_string(l.num_layers) + " layers; " + export_routes(arch),
                             where);
  }
}

// ---- Hugging Face config patch ----------------------------------------------------------------

/// The config.json patch of a layer-granular mask: layer_types,
/// sliding_window (the window), use_sliding_window (true when any layer is
/// SWA), and for architecture (`arch`) qwen2 and qwen3 max_window_layers =
/// the number of layers: transformers follows layer_types and ignores it,
/// but vLLM's Qwen2 model refuses a sliding window unless it equals the layer
/// count (and a config converted from GGUF may carry another value). Throws
/// bosch::invalid_argument for a head-level mask (check_layer_mask) or
/// sinks > 0 (Hugging Face windows keep no sink tokens). Which architectures
/// apply the patch at all: check_export_engine.
inline nlohmann::json hf_config_patch(const HeadMask& mask, const ExportWindows& w, const std::string& where = "mask",
                                      const std::string& arch = {}) {
  check_export_windows(w, where);
  check_layer_mask(mask, "hf", where);
  if (w.sinks > 0)
    throw invalid_argument("Hugging Face sliding windows keep no attention sinks, but the mask uses " +
                               std::to_string(w.sinks) +
                               " (export with sinks 0 to accept the difference, or use --to kvpress or --to layers, "
                               "which carry the sink count)",
                           where);
  nlohmann::json types = nlohmann::json::array();
  bool any = false;
  for (bool s : swa_layers(mask)) {
    types.push_back(s ? "sliding_attention" : "full_attention");
    any = any || s;
  }
  nlohmann::json patch{{"layer_types", std::move(types)}, {"sliding_window", w.window}, {"use_sliding_window", any}};
  if (arch == "qwen2" || arch == "qwen3") patch["max_window_layers"] = mask.layout().num_layers;
  return patch;
}

/// Reads a Hugging Face config (a patch or a whole config.json) back into a
/// mask of `layout`: layer_types must have one entry per layer, each
/// "sliding_attention" or "full_attention"; sliding_window must be a positive
/// integer when any layer slides (the window; 0 when none does). Throws
/// bosch::format_error naming "`where`: field".
inline std::pair<HeadMask, ExportWindows> mask_from_hf_config(const nlohmann::json& j, const HeadLayout& layout,
                                                              const std::string& where) {
  if (!j.is_object()) throw format_error("not a JSON object", where);
  if (!j.contains("layer_types") || !j["layer_types"].is_array())
    throw format_error("missing or not an array", where + ": layer_types");
  const auto& t = j["layer_types"];
  if (t.size() != static_cast<std::size_t>(layout.num_layers))
    throw format_error("has " + std::to_string(t.size()) + " entries, the layout (" + to_string(layout) + ") has " +
                           std::to_string(layout.num_layers) + " layers",
                       where + ": layer_types");
  std::vector<bool> swa;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t[i] == "sliding_attention")
      swa.push_back(true);
    else if (t[i] == "full_attention")
      swa.push_back(false);
    else
      throw format_error("expected \"sliding_attention\" or \"full_attention\", got " + t[i].dump(),
                         where + ": layer_types[" + std::to_string(i) + "]");
  }
  ExportWindows w;
  if (std::find(swa.begin(), swa.end(), true) != swa.end()) {
    if (!j.contains("sliding_window") || !j["sliding_window"].is_number_integer() ||
        j["sliding_window"].get<long long>() < 1 || j["sliding_window"].get<long long>() > std::numeric_limits<int>::max())
      throw format_error("missing or not a positive integer", where + ": sliding_window");
    w.window = j["sliding_window"].get<int>();
  }
  return {mask_from_swa_layers(layout, swa, where), w};
}

// ---- layer windows ----------------------------------------------------------------------------

/// The per-layer window document of a layer-granular mask:
///
///     {"format": "bosch.layer_windows", "version": 1, "num_layers": L,
///      "window": w, "sinks": s, "max_sequence_length": n,
///      "layer_windows": [w or n per layer],        // = max_attention_window
///      "max_attention_window": [...],              // TensorRT-LLM, per layer
///      "sink_token_length": s,                     // TensorRT-LLM
///      "swa_attention_layer_ids": [...],           // the mask, for reference
///      "full_attention_layer_ids": [...],          // (SGLang reads no user list)
///      "layer_types": ["sliding_attention" | "full_attention", ...]}  // as in the hf patch
///
/// A full layer's window is `max_sequence_length` (the longest context it is
/// served at; TensorRT-LLM caps every window by it). Throws
/// bosch::invalid_argument for a head-level mask or max_sequence_length < 1.
inline nlohmann::json layer_windows(const HeadMask& mask, const ExportWindows& w, int max_sequence_length,
                                    const std::string& where = "mask") {
  check_export_windows(w, where);
  check_layer_mask(mask, "layers", where);
  if (max_sequence_length < 1)
    throw invalid_argument("the maximum sequence length must be >= 1, got " + std::to_string(max_sequence_length), where);
  nlohmann::json windows = nlohmann::json::array(), swa_ids = nlohmann::json::array(),
                 full_ids = nlohmann::json::array(), types = nlohmann::json::array();
  const auto s = swa_layers(mask);
  for (std::size_t i = 0; i < s.size(); ++i) {
    windows.push_back(s[i] ? std::min(w.window, max_sequence_length) : max_sequence_length);
    (s[i] ? swa_ids : full_ids).push_back(i);
    types.push_back(s[i] ? "sliding_attention" : "full_attention");
  }
  return nlohmann::json{{"format", "bosch.layer_windows"},
                        {"version", 1},
                        {"num_layers", mask.layout().num_layers},
                        {"window", w.window},
                        {"sinks", w.sinks},
                        {"max_sequence_length", max_sequence_length},
                        {"layer_windows", windows},
                        {"max_attention_window", windows},
                        {"sink_token_length", w.sinks},
                        {"swa_attention_layer_ids", std::move(swa_ids)},
                        {"full_attention_layer_ids", std::move(full_ids)},
                        {"layer_types", std::move(types)}};
}

/// Reads a layer-window document back into a mask of `layout` (SWA layers:
/// those listed in swa_attention_layer_ids, which must agree with
/// layer_windows) and its window and sinks. bosch::format_error naming
/// "`where`: field" on anything malformed.
inline std::pair<HeadMask, ExportWindows> mask_from_layer_windows(const nlohmann::json& j, const HeadLayout& layout,
                                                                  const std::string& where) {
  auto fail = [&](const std::string& field, const std::string& msg) { throw format_error(msg, where + ": " + field); };
  if (!j.is_object()) fail("(document)", "not a JSON object");
  if (!j.contains("format") || j["format"] != "bosch.layer_windows") fail("format", "expected \"bosch.layer_windows\"");
  if (!j.contains("version") || j["version"] != 1) fail("version", "expected 1");
  auto integer = [&](const char* f, long long min) {
    if (!j.contains(f) || !j[f].is_number_integer()) fail(f, "missing or not an integer");
    const auto v = j[f].get<long long>();
    if (v < min || v > std::numeric_limits<int>::max()) fail(f, "out of range: " + std::to_string(v));
    return static_cast<int>(v);
  };
  if (integer("num_layers", 1) != layout.num_layers)
    fail("num_layers", std::to_string(j["num_layers"].get<long long>()) + " layers, the layout (" + to_string(layout) +
                           ") has " + std::to_string(layout.num_layers));
  ExportWindows w{integer("window", 1), integer("sinks", 0)};
  const int n = integer("max_sequence_length", 1);
  if (!j.contains("swa_attention_layer_ids") || !j["swa_attention_layer_ids"].is_array())
    fail("swa_attention_layer_ids", "missing or not an array");
  std::vector<bool> swa(static_cast<std::size_t>(layout.num_layers), false);
  for (const auto& v : j["swa_attention_layer_ids"]) {
    if (!v.is_number_integer() || v.get<long long>() < 0 || v.get<long long>() >= layout.num_layers)
      fail("swa_attention_layer_ids", "not a layer in [0, " + std::to_string(layout.num_layers) + "): " + v.dump());
    if (swa[v.get<std::size_t>()]) fail("swa_attention_layer_ids", "layer " + v.dump() + " listed twice");
    swa[v.get<std::size_t>()] = true;
  }
  if (j.contains("layer_windows")) {
    const auto& lw = j["layer_windows"];
    if (!lw.is_array() || lw.size() != swa.size()) fail("layer_windows", "expected one window per layer");
    for (std::size_t i = 0; i < swa.size(); ++i)
      if (lw[i] != (swa[i] ? std::min(w.window, n) : n))
        fail("layer_windows[" + std::to_string(i) + "]", "disagrees with swa_attention_layer_ids");
  }
  return {mask_from_swa_layers(layout, swa, where), w};
}

// ---- atomic directories -----------------------------------------------------------------------

/// Writes the files `files` (name, content) as the directory `dir`,
/// atomically: they are written into a fresh temporary directory next to
/// `dir` (each file fsync'ed), which is then renamed into place, so a reader
/// sees the old directory or the complete new one, never a mix. An existing
/// `dir` is replaced only when it holds nothing but files of these names
/// (a previous export), so that pointing the output at a directory of other
/// files cannot delete them: bosch::file_error naming the stranger file
/// otherwise, or when `dir` exists and is not a directory. The old directory
/// is swapped out by an atomic exchange where the system has one (Linux
/// renameat2), else moved aside first (a reader may then briefly find no
/// directory, never a torn one).
inline void write_directory_atomic(const std::filesystem::path& dir,
                                   const std::vector<std::pair<std::string, std::string>>& files) {
  namespace fs = std::filesystem;
  static std::atomic<unsigned long> counter{0};
  const fs::path target = dir.has_filename() ? dir : dir.parent_path();  // "out/" -> "out"
  const fs::path parent = target.has_parent_path() ? target.parent_path() : fs::path(".");
  std::error_code ec;
  const auto st = fs::symlink_status(target, ec);
  const bool exists = fs::exists(st);
  if (exists) {
    if (!fs::is_directory(st)) throw file_error("exists and is not a directory", target.string());
    for (const auto& e : fs::directory_iterator(target)) {
      const std::string name = e.path().filename().string();
      const bool ours = std::any_of(files.begin(), files.end(), [&](const auto& f) { return f.first == name; });
      if (!ours || !e.is_regular_file())
        throw file_error("will not replace a directory holding '" + name +
                             "', which is not part of this export (choose a new or empty directory)",
                         target.string());
    }
  }
#if __has_include(<unistd.h>)
  const long pid = static_cast<long>(::getpid());
#else
  const long pid = 0;
#endif
  auto temp_name = [&](const char* what) {
    std::string n(1, '.');
    n += target.filename().string();
    n += what;
    n += std::to_string(pid);
    n += '.';
    n += std::to_string(counter.fetch_add(1));
    return parent / n;
  };
  const fs::path tmp = temp_name(".tmp.");
  auto cleanup = [](const fs::path& p) {
    std::error_code e;
    fs::remove_all(p, e);
  };
  if (!fs::create_directory(tmp, ec) || ec)
    throw file_error("cannot create temporary directory " + tmp.string() + ": " + ec.message(), target.string());
  try {
    for (const auto& [name, content] : files) write_file_atomic(tmp / name, content);
  } catch (...) {
    cleanup(tmp);
    throw;
  }
  if (!exists) {
    fs::rename(tmp, target, ec);
    if (ec) {
      cleanup(tmp);
      throw file_error("cannot rename temporary directory into place: " + ec.message(), target.string());
    }
  } else {
    bool swapped = false;
#if defined(__linux__) && defined(RENAME_EXCHANGE)
    swapped = ::renameat2(AT_FDCWD, tmp.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0;
    if (swapped) cleanup(tmp);  // tmp now holds the old directory
#endif
    if (!swapped) {
      const fs::path old = temp_name(".old.");
      fs::rename(target, old, ec);
      if (ec) {
        cleanup(tmp);
        throw file_error("cannot move the old directory aside: " + ec.message(), target.string());
      }
      fs::rename(tmp, target, ec);
      if (ec) {
        std::error_code back;
        fs::rename(old, target, back);
        cleanup(tmp);
        throw file_error("cannot rename temporary directory into place: " + ec.message(), target.string());
      }
      cleanup(old);
    }
  }
#if __has_include(<unistd.h>)
  const int dfd = ::open(parent.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    (void)::fsync(dfd);
    ::close(dfd);
  }
#endif
}

/// Writes the pattern directory of `mask` atomically (duo_pattern).
inline void write_duo_pattern(const std::filesystem::path& dir, const HeadMask& mask, const nlohmann::json& metadata,
                              const ExportWindows& w) {
  const DuoPattern p = duo_pattern(mask, metadata, w, dir.string());
  write_directory_atomic(dir, {{duo_scores_file, p.scores_tsv}, {duo_config_file, p.config.dump(2) + "\n"}});
}

/// Reads a pattern directory (parse_duo_pattern).
inline DuoPatternFile read_duo_pattern(const std::filesystem::path& dir, int num_query_heads = 0,
                                       double threshold = 0.5) {
  return parse_duo_pattern(read_file(dir / duo_scores_file, max_mask_bytes, "a mask file"),
                           read_file(dir / duo_config_file, max_mask_bytes, "a mask file"), dir.string(),
                           num_query_heads, threshold);
}

}  // namespace bosch::io
