// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file mask_io.hpp
/// Head-mask files. Three forms, all written atomically (temp file + rename):
///
/// 1. JSON (".json"), self-describing:
///
///        {"format": "bosch.head_mask", "version": 1,
///         "layout": {"num_layers": 2, "num_query_heads": 8, "num_kv_heads": 4},
///         "swa": [[0, 3], [1]],
///         "metadata": {"model": "...", "ratio": 0.375, "score": 0.91, ...}}
///
///    "swa" has one array per layer (layer 0 first) listing the KV-head
///    indices that use sliding-window attention (ascending when written; on
///    reading each must be in [0, Hkv) and appear once). "metadata" is a free
///    JSON object (model, checksum, ratio, window, sinks, score, evaluations,
///    seed, bosch_version, ...); it may be absent.
///
/// 2. DuoAttention-style TSV (".tsv"): one row per layer, one tab-separated
///    value per KV head, **1 = FULL attention, 0 = SWA** -- the convention of
///    DuoAttention's full_attention_heads.tsv (gate values, 1 = keep the full
///    KV cache). That is the inverse of HeadMask's bits. On reading, any
///    number in [0, 1] is accepted and values >= `threshold` (default 0.5)
///    mean full attention, so DuoAttention's real-valued gates can be read.
///
/// 3. Text grid (any other extension, e.g. ".txt"): one line per layer, one
///    character per KV head, 'S' = SWA, '.' = full (bosch::to_grid).
///
/// TSV and grid files do not carry the query-head count; readers take it as
/// a parameter (default: equal to the KV-head count) or from the expected
/// layout. Errors: bosch::file_error (cannot read/write), bosch::format_error
/// naming the file and the field or line (malformed content),
/// bosch::invalid_argument naming the file (valid file whose layout differs
/// from the expected one).

#include <bosch/error.hpp>
#include <bosch/io/atomic_file.hpp>
#include <bosch/mask.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace bosch::io {

/// A mask file's content: the mask and its metadata (JSON object; empty for
/// TSV and grid files).
struct MaskFile {
  HeadMask mask;
  nlohmann::json metadata = nlohmann::json::object();
};

/// Throws bosch::invalid_argument (where = `where`, e.g. the file) unless
/// `mask` has layout `expected`.
inline void check_mask_layout(const HeadMask& mask, const HeadLayout& expected,
                              const std::string& where) {
  if (!(mask.layout() == expected))
    throw invalid_argument("mask layout (" + to_string(mask.layout()) +
                               ") does not match the expected layout (" + to_string(expected) +
                               ")",
                           where);
}

/// The JSON document of a mask (see the file comment). Throws
/// bosch::invalid_argument when `metadata` is not an object.
inline nlohmann::json mask_to_json(const HeadMask& mask,
                                   const nlohmann::json& metadata = nlohmann::json::object()) {
  if (!metadata.is_object())
    throw invalid_argument("metadata must be a JSON object", "mask_to_json");
  const auto& l = mask.layout();
  nlohmann::json swa = nlohmann::json::array();
  for (int layer = 0; layer < l.num_layers; ++layer) {
    nlohmann::json row = nlohmann::json::array();
    for (int k = 0; k < l.num_kv_heads; ++k)
      if (mask.swa(layer, k)) row.push_back(k);
    swa.push_back(std::move(row));
  }
  return nlohmann::json{{"format", "bosch.head_mask"},
                        {"version", 1},
                        {"layout",
                         {{"num_layers", l.num_layers},
                          {"num_query_heads", l.num_query_heads},
                          {"num_kv_heads", l.num_kv_heads}}},
                        {"swa", std::move(swa)},
                        {"metadata", metadata}};
}

/// The most KV heads (layers x KV heads per layer) a mask document may
/// declare: 2^20, far above any real model, so that a corrupt layout cannot
/// make the reader allocate gigabytes.
inline constexpr std::size_t max_mask_heads = std::size_t{1} << 20;

/// Parses a mask document. Throws bosch::format_error with where =
/// "`where`: field" on any malformed or inconsistent field (including a
/// layout of more than max_mask_heads KV heads).
inline MaskFile mask_from_json(const nlohmann::json& j, const std::string& where = "mask") {
  auto fail = [&](const std::string& field, const std::string& msg) -> void {
    throw format_error(msg, where + ": " + field);
  };
  if (!j.is_object()) fail("(document)", "not a JSON object");
  if (!j.contains("format") || !j["format"].is_string() || j["format"] != "bosch.head_mask")
    fail("format", "expected \"bosch.head_mask\"");
  if (!j.contains("version") || !j["version"].is_number_integer())
    fail("version", "missing or not an integer");
  if (j["version"] != 1)
    fail("version", "unsupported version " + j["version"].dump() + " (this build reads 1)");
  if (!j.contains("layout") || !j["layout"].is_object()) fail("layout", "missing or not an object");
  HeadLayout lay;
  for (const char* f : {"num_layers", "num_query_heads", "num_kv_heads"}) {
    const auto& lj = j["layout"];
    if (!lj.contains(f) || !lj[f].is_number_integer())
      fail(std::string("layout.") + f, "missing or not an integer");
    const auto v = lj[f].get<long long>();
    if (v <= 0 || v > 1000000)
      fail(std::string("layout.") + f, "out of range: " + std::to_string(v));
    (std::string(f) == "num_layers"        ? lay.num_layers
     : std::string(f) == "num_query_heads" ? lay.num_query_heads
                                           : lay.num_kv_heads) = static_cast<int>(v);
  }
  if (!lay.valid()) fail("layout", "invalid layout (" + to_string(lay) + ")");
  // The "swa" lists need not name every head, so the mask's size is not
  // bounded by the document's: cap it (real models have a few thousand).
  if (lay.size() > max_mask_heads)
    fail("layout", std::to_string(lay.size()) + " KV heads in all exceed the limit of " +
                       std::to_string(max_mask_heads));
  if (!j.contains("swa") || !j["swa"].is_array()) fail("swa", "missing or not an array");
  const auto& swa = j["swa"];
  if (swa.size() != static_cast<std::size_t>(lay.num_layers))
    fail("swa", "has " + std::to_string(swa.size()) + " layers, layout says " +
                    std::to_string(lay.num_layers));
  MaskFile out{HeadMask(lay), nlohmann::json::object()};
  for (int layer = 0; layer < lay.num_layers; ++layer) {
    const auto& row = swa[static_cast<std::size_t>(layer)];
    const std::string field = "swa[" + std::to_string(layer) + "]";
    if (!row.is_array()) fail(field, "not an array of KV-head indices");
    for (const auto& v : row) {
      if (!v.is_number_integer()) fail(field, "not an integer: " + v.dump());
      const auto k = v.get<long long>();
      if (k < 0 || k >= lay.num_kv_heads)
        fail(field, "KV head " + std::to_string(k) + " outside [0, " +
                        std::to_string(lay.num_kv_heads) + ")");
      if (out.mask.swa(layer, static_cast<int>(k)))
        fail(field, "KV head " + std::to_string(k) + " listed twice");
      out.mask.set(layer, static_cast<int>(k), true);
    }
  }
  if (j.contains("metadata")) {
    if (!j["metadata"].is_object()) fail("metadata", "not a JSON object");
    out.metadata = j["metadata"];
  }
  return out;
}

/// Writes the JSON form atomically.
inline void write_mask_json(const std::filesystem::path& path, const HeadMask& mask,
                            const nlohmann::json& metadata = nlohmann::json::object()) {
  write_file_atomic(path, mask_to_json(mask, metadata).dump(2) + "\n");
}

/// Reads the JSON form. Throws bosch::format_error naming the file (and field)
/// when it is not valid JSON or not a valid mask document.
inline MaskFile read_mask_json(const std::filesystem::path& path);

/// The TSV text (1 = full attention; see the file comment).
inline std::string mask_to_tsv(const HeadMask& mask) {
  std::string s;
  const auto& l = mask.layout();
  for (int layer = 0; layer < l.num_layers; ++layer) {
    for (int k = 0; k < l.num_kv_heads; ++k) {
      if (k) s += '\t';
      s += mask.swa(layer, k) ? '0' : '1';
    }
    s += '\n';
  }
  return s;
}

/// Parses TSV text (see the file comment); `where` names the source.
inline HeadMask mask_from_tsv(const std::string& text, int num_query_heads = 0,
                              double threshold = 0.5, const std::string& where = "tsv") {
  std::vector<std::vector<double>> rows;
  std::size_t pos = 0, line_no = 0;
  while (pos <= text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string::npos) eol = text.size();
    std::string line = text.substr(pos, eol - pos);
    pos = eol + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) {
      if (pos > text.size()) break;
      rows.push_back({});  // blank lines are only allowed at the end (checked below)
      continue;
    }
    std::vector<double> row;
    std::size_t p = 0, col = 0;
    while (true) {
      std::size_t tab = line.find('\t', p);
      const std::string cell =
          line.substr(p, tab == std::string::npos ? std::string::npos : tab - p);
      ++col;
      char* end = nullptr;
      const double v = cell.empty() ? std::nan("") : std::strtod(cell.c_str(), &end);
      if (cell.empty() || end != cell.c_str() + cell.size() || !(v >= 0.0 && v <= 1.0))
        throw format_error("line " + std::to_string(line_no) + ", column " + std::to_string(col) +
                               ": expected a number in [0, 1] (1 = full attention), got '" + cell +
                               "'",
                           where);
      row.push_back(v);
      if (tab == std::string::npos) break;
      p = tab + 1;
    }
    rows.push_back(std::move(row));
  }
  while (!rows.empty() && rows.back().empty()) rows.pop_back();
  if (rows.empty()) throw format_error("empty head-mask TSV", where);
  const std::size_t width = rows.front().size();
  for (std::size_t i = 0; i < rows.size(); ++i)
    if (rows[i].size() != width)
      throw format_error("line " + std::to_string(i + 1) + ": " + std::to_string(rows[i].size()) +
                             " values, expected " + std::to_string(width) +
                             (rows[i].empty() ? " (blank line)" : ""),
                         where);
  HeadLayout lay{static_cast<int>(rows.size()),
                 num_query_heads > 0 ? num_query_heads : static_cast<int>(width),
                 static_cast<int>(width)};
  if (!lay.valid())
    throw format_error("TSV of " + std::to_string(width) + " KV heads per layer does not fit " +
                           std::to_string(lay.num_query_heads) + " query heads",
                       where);
  HeadMask m(lay);
  for (std::size_t l = 0; l < rows.size(); ++l)
    for (std::size_t k = 0; k < width; ++k)
      m.set(static_cast<int>(l), static_cast<int>(k), rows[l][k] < threshold);
  return m;
}

inline void write_mask_tsv(const std::filesystem::path& path, const HeadMask& mask) {
  write_file_atomic(path, mask_to_tsv(mask));
}
inline HeadMask read_mask_tsv(const std::filesystem::path& path, int num_query_heads = 0,
                              double threshold = 0.5) {
  return mask_from_tsv(read_file(path, max_mask_bytes, "a mask file"), num_query_heads, threshold, path.string());
}

inline void write_mask_grid(const std::filesystem::path& path, const HeadMask& mask) {
  write_file_atomic(path, to_grid(mask));
}
inline HeadMask read_mask_grid(const std::filesystem::path& path, int num_query_heads = 0) {
  return mask_from_grid(read_file(path, max_mask_bytes, "a mask file"), num_query_heads, path.string());
}

/// The three forms of a mask file (see the file comment).
enum class MaskFormat { json, tsv, grid };

/// The form a file name selects: ".json", ".tsv", anything else the grid.
inline MaskFormat mask_format_of(const std::filesystem::path& path) {
  const auto ext = path.extension().string();
  return ext == ".json" ? MaskFormat::json : ext == ".tsv" ? MaskFormat::tsv : MaskFormat::grid;
}

/// Parses the text of a mask file of form `format`; `where` names its source
/// (a file, "<stdin>") in errors. With `expected`, the mask must have that
/// layout: a JSON mask exactly; a TSV or grid mask (which carries no
/// query-head count) its layers and KV heads, the query heads then taken
/// from `expected`. A mismatch raises bosch::invalid_argument naming `where`.
/// Without `expected`, TSV and grid masks get as many query heads as KV
/// heads. `tsv_threshold`: see mask_from_tsv. Metadata comes only from JSON.
/// Malformed text raises bosch::format_error naming `where`.
inline MaskFile parse_mask(const std::string& text, MaskFormat format, const std::string& where,
                           const std::optional<HeadLayout>& expected = std::nullopt,
                           double tsv_threshold = 0.5) {
  if (format == MaskFormat::json) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for 1e999
      throw format_error(std::string("not valid JSON: ") + e.what(), where);
    }
    MaskFile f = mask_from_json(j, where);
    if (expected) check_mask_layout(f.mask, *expected, where);
    return f;
  }
  HeadMask m = format == MaskFormat::tsv ? mask_from_tsv(text, 0, tsv_threshold, where)
                                         : mask_from_grid(text, 0, where);
  if (!expected) return MaskFile{std::move(m), nlohmann::json::object()};
  const HeadLayout got = m.layout();
  if (got.num_layers != expected->num_layers || got.num_kv_heads != expected->num_kv_heads)
    throw invalid_argument("mask has " + std::to_string(got.num_layers) + " layers x " +
                               std::to_string(got.num_kv_heads) + " KV heads, expected " +
                               std::to_string(expected->num_layers) + " x " +
                               std::to_string(expected->num_kv_heads),
                           where);
  MaskFile f{HeadMask(*expected), nlohmann::json::object()};
  for (std::size_t i = 0; i < m.size(); ++i) f.mask.set_flat(i, m[i]);
  return f;
}

inline MaskFile read_mask_json(const std::filesystem::path& path) {
  return parse_mask(read_file(path, max_mask_bytes, "a mask file"), MaskFormat::json, path.string());
}

/// Writes `mask` in the form chosen by the extension (".json", ".tsv", else
/// the text grid); `metadata` is kept only by JSON.
inline void write_mask(const std::filesystem::path& path, const HeadMask& mask,
                       const nlohmann::json& metadata = nlohmann::json::object()) {
  switch (mask_format_of(path)) {
    case MaskFormat::json: write_mask_json(path, mask, metadata); break;
    case MaskFormat::tsv: write_mask_tsv(path, mask); break;
    case MaskFormat::grid: write_mask_grid(path, mask); break;
  }
}

/// Reads a mask in the form chosen by the extension and checks it against
/// `expected` (see parse_mask; bosch::invalid_argument naming the file on a
/// mismatch).
inline HeadMask read_mask(const std::filesystem::path& path, const HeadLayout& expected) {
  return parse_mask(read_file(path, max_mask_bytes, "a mask file"), mask_format_of(path), path.string(), expected).mask;
}

}  // namespace bosch::io
