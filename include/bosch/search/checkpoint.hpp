// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file checkpoint.hpp
/// Checkpoint files of a search and the JSON form of Options.
///
/// A checkpoint is a JSON object:
///
///     {"magic": "bosch.checkpoint", "format": 1, "bosch_version": "0.1.0",
///      "layout": {"num_layers": L, "num_query_heads": Hq, "num_kv_heads": Hkv},
///      "seed": 42, "options": {...every Options field...},
///      "complete": false,
///      "evaluations": [{"index": 0, "stage": "anchors", "mask": "0000...",
///                       "score": 0.93, "seconds": 1.5}, ...],
///      "log_checksum": "89ab...", "checksum": "01cd..."}
///
/// "mask" is the layer-major bit string ('1' = SWA) of L*Hkv characters;
/// "log_checksum" is FNV-1a 64 (16 hex digits) over the records' indices,
/// mask bits, stage names and score bit patterns; "checksum" is FNV-1a 64
/// over the compact JSON text (nlohmann::json::dump(), keys sorted) of the
/// whole document without "checksum", so a damaged file is detected even when
/// it is still valid JSON, whichever field the damage hit (a timing, an
/// option, the version). Both are required. Files are written atomically
/// (io::write_file_atomic: temporary file, fsync, rename, fsync of the
/// directory), so a search killed at any moment leaves the previous complete
/// checkpoint or the new one, never a torn file; a torn or corrupt file (from
/// a copy, a full disk, a bit flip) is rejected whole with a format_error
/// naming the file and the field, never half-read.
///
/// Resume (Options::resume_from): select() reads the file, checks magic,
/// format, checksums, layout, seed and options (all but max_evaluations,
/// batch_size and resume_from), then registers every record for replay and
/// re-runs the deterministic search: logged masks are answered from the file,
/// new ones from the evaluator, so the resumed run reaches the same mask and
/// log as an uninterrupted one.

#include <bosch/error.hpp>
#include <bosch/io/atomic_file.hpp>
#include <bosch/mask.hpp>
#include <bosch/options.hpp>
#include <bosch/version.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace bosch {

/// Every Options field as JSON (enum fields by name).
inline nlohmann::json options_to_json(const Options& o) {
  return nlohmann::json{{"target_ratio", o.target_ratio},
                        {"seed", o.seed},
                        {"variant", to_string(o.variant)},
                        {"max_evaluations", o.max_evaluations},
                        {"probe_budget", o.probe_budget},
                        {"drop_mode", to_string(o.drop_mode)},
                        {"ratio_levels", o.ratio_levels},
                        {"level_spread", o.level_spread},
                        {"ratio_init", to_string(o.ratio_init)},
                        {"chunk_budget", o.chunk_budget},
                        {"max_vars", o.max_vars},
                        {"group_rounds", o.group_rounds},
                        {"group_init", to_string(o.group_init)},
                        {"layer_budget", o.layer_budget},
                        {"inner_solver", to_string(o.inner_solver)},
                        {"exhaustive_when_fits", o.exhaustive_when_fits},
                        {"lambda", o.lambda},
                        {"max_swaps", o.max_swaps},
                        {"restart_after", o.restart_after},
                        {"accept_equal", o.accept_equal},
                        {"alpha", o.alpha},
                        {"penalty_scope", to_string(o.penalty_scope)},
                        {"mutation_rate", o.mutation_rate},
                        {"batch_size", o.batch_size},
                        {"return_best_seen", o.return_best_seen},
                        {"resume_from", o.resume_from}};
}

namespace detail {
/// An integer JSON value of type T; format_error (where = `where`) for a
/// non-integer (nlohmann's get<int>() would truncate a float, with undefined
/// behaviour when it is out of range) or a value outside T's range.
template <class T>
T json_integer(const nlohmann::json& v, const std::string& where) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (std::in_range<T>(u)) return static_cast<T>(u);
  } else if (v.is_number_integer()) {
    const auto x = v.get<std::int64_t>();
    if (std::in_range<T>(x)) return static_cast<T>(x);
  } else {
    throw format_error(std::string("expected an integer, found ") + v.type_name(), where);
  }
  throw format_error("integer " + v.dump() + " out of range", where);
}
/// A number (format_error naming `where` otherwise, e.g. null for a NaN).
inline double json_number(const nlohmann::json& v, const std::string& where) {
  if (!v.is_number())
    throw format_error(std::string("expected a number, found ") + v.type_name(), where);
  return v.get<double>();
}
}  // namespace detail

/// Options from JSON: fields absent keep their defaults; unknown fields,
/// wrongly typed values and unknown enum names raise bosch::format_error
/// (where = `where` + field). The result is validated
/// (bosch::invalid_argument on a bad value, where = `where` + field).
inline Options options_from_json(const nlohmann::json& j, const std::string& where = "options") {
  if (!j.is_object()) throw format_error("options must be a JSON object", where);
  Options o;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const auto& v = it.value();
    const std::string at = where + ": " + k;
    try {
      // clang-format off
      if (k == "target_ratio") o.target_ratio = detail::json_number(v, at);
      else if (k == "seed") o.seed = detail::json_integer<std::uint64_t>(v, at);
      else if (k == "variant") o.variant = parse_variant(v.get<std::string>());
      else if (k == "max_evaluations") o.max_evaluations = detail::json_integer<std::size_t>(v, at);
      else if (k == "probe_budget") o.probe_budget = detail::json_integer<std::size_t>(v, at);
      else if (k == "drop_mode") o.drop_mode = parse_drop_mode(v.get<std::string>());
      else if (k == "ratio_levels") o.ratio_levels = v.get<std::vector<double>>();
      else if (k == "level_spread") o.level_spread = detail::json_integer<int>(v, at);
      else if (k == "ratio_init") o.ratio_init = parse_ratio_init(v.get<std::string>());
      else if (k == "chunk_budget") o.chunk_budget = detail::json_integer<std::size_t>(v, at);
      else if (k == "max_vars") o.max_vars = detail::json_integer<int>(v, at);
      else if (k == "group_rounds") o.group_rounds = detail::json_integer<int>(v, at);
      else if (k == "group_init") o.group_init = parse_group_init(v.get<std::string>());
      else if (k == "layer_budget") o.layer_budget = detail::json_integer<std::size_t>(v, at);
      else if (k == "inner_solver") o.inner_solver = parse_inner_solver(v.get<std::string>());
      else if (k == "exhaustive_when_fits") o.exhaustive_when_fits = v.get<bool>();
      else if (k == "lambda") o.lambda = detail::json_integer<int>(v, at);
      else if (k == "max_swaps") o.max_swaps = detail::json_integer<int>(v, at);
      else if (k == "restart_after") o.restart_after = detail::json_integer<int>(v, at);
      else if (k == "accept_equal") o.accept_equal = v.get<bool>();
      else if (k == "alpha") o.alpha = detail::json_number(v, at);
      else if (k == "penalty_scope") o.penalty_scope = parse_penalty_scope(v.get<std::string>());
      else if (k == "mutation_rate") o.mutation_rate = detail::json_number(v, at);
      else if (k == "batch_size") o.batch_size = detail::json_integer<std::size_t>(v, at);
      else if (k == "return_best_seen") o.return_best_seen = v.get<bool>();
      else if (k == "resume_from") o.resume_from = v.get<std::string>();
      else throw format_error("unknown option field", where + ": " + k);
      // clang-format on
    } catch (const nlohmann::json::exception& e) {
      throw format_error(std::string("wrong type: ") + e.what(), where + ": " + k);
    } catch (const format_error&) {
      throw;
    } catch (const error& e) {  // an unknown enum name (parse_variant, ...)
      throw format_error(e.message(), where + ": " + k);
    }
  }
  try {
    validate(o);
  } catch (const invalid_argument& e) {
    throw invalid_argument(e.message(), where + ": " + e.where());
  }
  return o;
}

/// A checkpoint as read back.
struct CheckpointData {
  std::string bosch_version;
  HeadLayout layout;
  std::uint64_t seed = 0;
  nlohmann::json options;
  bool complete = false;
  std::vector<EvaluationRecord> log;
};

namespace detail {
inline std::string mask_bits(const HeadMask& m) {
  std::string s(m.size(), '0');
  for (std::size_t i = 0; i < m.size(); ++i) s[i] = m[i] ? '1' : '0';
  return s;
}
inline std::uint64_t log_checksum(const std::vector<EvaluationRecord>& log) {
  std::uint64_t h = 1469598103934665603ull;
  auto mix = [&h](std::uint64_t v) {
    for (int i = 0; i < 8; ++i) {
      h ^= (v >> (8 * i)) & 0xffu;
      h *= 1099511628211ull;
    }
  };
  for (const auto& r : log) {
    mix(r.index);
    for (std::size_t i = 0; i < r.mask.size(); ++i) mix(r.mask[i]);
    for (const char* c = to_string(r.stage); *c; ++c) mix(static_cast<unsigned char>(*c));
    std::uint64_t bits;
    static_assert(sizeof bits == sizeof r.score);
    std::memcpy(&bits, &r.score, sizeof bits);
    mix(bits);
  }
  return h;
}
inline std::string hex64(std::uint64_t v) {
  static const char* d = "0123456789abcdef";
  std::string s(16, '0');
  for (int i = 15; i >= 0; --i, v >>= 4) s[static_cast<std::size_t>(i)] = d[v & 15];
  return s;
}
/// FNV-1a 64 over the bytes of `s`.
inline std::uint64_t fnv1a(std::string_view s) {
  std::uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}
/// The compact JSON text of `j` (invalid UTF-8 in strings replaced, as the
/// writer does, so that dumping never throws).
inline std::string dump_text(const nlohmann::json& j, int indent = -1) {
  return j.dump(indent, ' ', false, nlohmann::json::error_handler_t::replace);
}
/// The "checksum" of a checkpoint document: FNV-1a 64 over its compact text
/// without the "checksum" field.
inline std::string document_checksum(nlohmann::json j) {
  if (j.is_object()) j.erase("checksum");
  return hex64(fnv1a(dump_text(j)));
}
/// The options that must match for a resume.
inline nlohmann::json resume_relevant(nlohmann::json j) {
  for (const char* k : {"max_evaluations", "batch_size", "resume_from"}) j.erase(k);
  return j;
}
}  // namespace detail

/// The checkpoint document for a search state.
inline nlohmann::json checkpoint_json(const HeadLayout& layout, const Options& options,
                                      const std::vector<EvaluationRecord>& log, bool complete) {
  nlohmann::json recs = nlohmann::json::array();
  for (const auto& r : log)
    recs.push_back({{"index", r.index},
                    {"stage", to_string(r.stage)},
                    {"mask", detail::mask_bits(r.mask)},
                    {"score", r.score},
                    {"seconds", r.seconds}});
  nlohmann::json doc{{"magic", "bosch.checkpoint"},
                     {"format", 1},
                     {"bosch_version", version_string},
                     {"layout",
                      {{"num_layers", layout.num_layers},
                       {"num_query_heads", layout.num_query_heads},
                       {"num_kv_heads", layout.num_kv_heads}}},
                     {"seed", options.seed},
                     {"options", options_to_json(options)},
                     {"complete", complete},
                     {"evaluations", std::move(recs)},
                     {"log_checksum", detail::hex64(detail::log_checksum(log))}};
  doc["checksum"] = detail::document_checksum(doc);
  return doc;
}

/// Writes a checkpoint atomically. Throws bosch::file_error on failure.
inline void write_checkpoint(const std::filesystem::path& path, const HeadLayout& layout,
                             const Options& options, const std::vector<EvaluationRecord>& log,
                             bool complete) {
  io::write_file_atomic(
      path, detail::dump_text(checkpoint_json(layout, options, log, complete), 1) + "\n");
}

/// Reads and checks a checkpoint. Throws bosch::file_error when unreadable and
/// bosch::format_error (where = path, plus the field) when it is not valid
/// JSON (torn or truncated), has the wrong magic or format, a checksum that
/// does not match its content, or a missing or malformed field. Nothing is
/// returned from a file that fails any check.
inline CheckpointData read_checkpoint(const std::filesystem::path& path) {
  const std::string where = path.string();
  const std::string text = io::read_file(path);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // parse_error, or out_of_range for 1e999
    throw format_error(std::string("not valid JSON (truncated or corrupt checkpoint): ") + e.what(),
                       where);
  }
  if (!j.is_object()) throw format_error("not a JSON object (not a bosch checkpoint)", where);
  auto in = [&](const nlohmann::json& obj, const char* name,
                const std::string& at) -> const nlohmann::json& {
    if (!obj.is_object() || !obj.contains(name))
      throw format_error("missing field", at.empty() ? where + ": " + name : at + "." + name);
    return obj.at(name);
  };
  auto field = [&](const char* name) -> const nlohmann::json& { return in(j, name, ""); };
  auto string_field = [&](const nlohmann::json& v, const std::string& at) -> std::string {
    if (!v.is_string())
      throw format_error(std::string("expected a string, found ") + v.type_name(), at);
    return v.get<std::string>();
  };
  if (field("magic") != "bosch.checkpoint")
    throw format_error(
        "not a bosch checkpoint (magic is " + detail::dump_text(field("magic")) + ")",
        where + ": magic");
  if (field("format") != 1)
    throw format_error("unsupported checkpoint format " + detail::dump_text(field("format")) +
                           " (this build reads format 1)",
                       where + ": format");
  // The whole document first: a damaged field is reported as damage, not as
  // whatever that field now seems to say.
  if (string_field(field("checksum"), where + ": checksum") != detail::document_checksum(j))
    throw format_error("checksum does not match the content (corrupt or edited checkpoint)",
                       where + ": checksum");
  CheckpointData d;
  d.bosch_version = string_field(field("bosch_version"), where + ": bosch_version");
  const auto& lay = field("layout");
  const std::string lw = where + ": layout";
  d.layout = {detail::json_integer<int>(in(lay, "num_layers", lw), lw + ".num_layers"),
              detail::json_integer<int>(in(lay, "num_query_heads", lw), lw + ".num_query_heads"),
              detail::json_integer<int>(in(lay, "num_kv_heads", lw), lw + ".num_kv_heads")};
  if (!d.layout.valid()) throw format_error("invalid layout", lw);
  d.seed = detail::json_integer<std::uint64_t>(field("seed"), where + ": seed");
  d.options = field("options");
  if (!d.options.is_object()) throw format_error("not an object", where + ": options");
  if (!field("complete").is_boolean()) throw format_error("not a bool", where + ": complete");
  d.complete = field("complete").get<bool>();
  const auto& recs = field("evaluations");
  if (!recs.is_array()) throw format_error("not an array", where + ": evaluations");
  d.log.reserve(recs.size());
  for (std::size_t i = 0; i < recs.size(); ++i) {
    const auto& r = recs[i];
    const std::string at = where + ": evaluations[" + std::to_string(i) + "]";
    EvaluationRecord e;
    e.index = detail::json_integer<std::size_t>(in(r, "index", at), at + ".index");
    if (e.index != i) throw format_error("index " + std::to_string(e.index) + " out of order", at);
    try {
      e.stage = parse_stage(string_field(in(r, "stage", at), at + ".stage"));
    } catch (const invalid_argument& x) {
      throw format_error(x.message(), at + ".stage");
    }
    // A mask string has exactly L*Hkv characters, so the masks allocated are
    // bounded by the file's size whatever the layout claims.
    const std::string bits = string_field(in(r, "mask", at), at + ".mask");
    if (bits.size() != d.layout.size())
      throw format_error("mask has " + std::to_string(bits.size()) + " bits, layout needs " +
                             std::to_string(d.layout.size()),
                         at + ".mask");
    e.mask = HeadMask(d.layout);
    for (std::size_t b = 0; b < bits.size(); ++b) {
      if (bits[b] != '0' && bits[b] != '1')
        throw format_error("mask is not a bit string", at + ".mask");
      e.mask.set_flat(b, bits[b] == '1');
    }
    e.score = detail::json_number(in(r, "score", at), at + ".score");
    e.seconds = detail::json_number(in(r, "seconds", at), at + ".seconds");
    d.log.push_back(std::move(e));
  }
  if (string_field(field("log_checksum"), where + ": log_checksum") !=
      detail::hex64(detail::log_checksum(d.log)))
    throw format_error("checksum does not match the evaluation records (corrupt checkpoint)",
                       where + ": log_checksum");
  return d;
}

/// Throws bosch::invalid_argument (where = the checkpoint path) unless the
/// checkpoint was written by a search with this layout, seed and options
/// (max_evaluations, batch_size and resume_from may differ).
inline void check_resumable(const CheckpointData& d, const HeadLayout& layout, const Options& o,
                            const std::string& where) {
  auto lay_str = [](const HeadLayout& l) {
    return std::to_string(l.num_layers) + "x" + std::to_string(l.num_query_heads) + "x" +
           std::to_string(l.num_kv_heads);
  };
  if (!(d.layout == layout))
    throw invalid_argument("checkpoint layout " + lay_str(d.layout) +
                               " does not match the evaluator's " + lay_str(layout),
                           where);
  if (d.seed != o.seed)
    throw invalid_argument("checkpoint seed " + std::to_string(d.seed) +
                               " does not match Options::seed " + std::to_string(o.seed),
                           where);
  const auto a = detail::resume_relevant(d.options),
             b = detail::resume_relevant(options_to_json(o));
  if (a != b) {
    std::string diff;
    for (auto it = b.begin(); it != b.end(); ++it) {
      if (!a.contains(it.key()) || a.at(it.key()) != it.value())
        diff += (diff.empty() ? "" : ", ") + it.key() + " (checkpoint " +
                (a.contains(it.key()) ? a.at(it.key()).dump() : std::string("absent")) + ", now " +
                it.value().dump() + ")";
    }
    for (auto it = a.begin(); it != a.end(); ++it)
      if (!b.contains(it.key())) diff += (diff.empty() ? "" : ", ") + it.key() + " (unknown)";
    throw invalid_argument("checkpoint was written with different options: " + diff, where);
  }
}

}  // namespace bosch
