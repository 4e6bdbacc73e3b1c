// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file io/checkpoint.hpp
/// Checkpoint files of a search, and the Checkpoint callback that writes them
/// and resumes from them.
///
/// A checkpoint is a JSON object:
///
///     {"magic": "bosch.checkpoint", "format": 1, "bosch_version": "0.1.0",
///      "layout": {"num_layers": L, "num_query_heads": Hq, "num_kv_heads": Hkv},
///      "seed": 42, "options": {...every Options field...},
///      "complete": false,
///      "evaluations": [{"index": 0, "stage": "anchors", "mask": "0000...",
///                       "score": 0.93, "seconds": 1.5, "forwards": 4}, ...],
///      (with Options::race also "samples", "sample_scores" and, for a
///      candidate the race stopped, "eliminated": true and "score_sd")
///      "log_checksum": "89ab...", "checksum": "01cd..."}
///
/// "mask" is the layer-major bit string ('1' = SWA) of L*Hkv characters;
/// "forwards" (EvaluationRecord::forwards) is present only when the evaluator
/// counts its cost, so that a resumed search reports the cost of all of it;
/// "log_checksum" is FNV-1a 64 (16 hex digits) over the records' indices,
/// mask bits, stage names and score bit patterns (and, where present, the
/// race fields: the eliminated flag, samples, sample score and score_sd bits); "checksum" is FNV-1a 64
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
/// Resume (Checkpoint::resume): the callback reads the file, checks magic,
/// format, checksums, layout, seed and options (all but the run-control
/// fields), and hands every record to select() for replay (the replay_log
/// hook); the deterministic search re-runs: logged masks are answered from the
/// file, new ones from the evaluator, so the resumed run reaches the same mask
/// and log as an uninterrupted one.

#include <bosch/error.hpp>
#include <bosch/io/atomic_file.hpp>
#include <bosch/io/options_json.hpp>
#include <bosch/mask.hpp>
#include <bosch/callbacks.hpp>
#include <bosch/options.hpp>
#include <bosch/version.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>
#include <vector>

namespace bosch {

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
    // Racing fields (Options::race) only where present, so that the checksum
    // of a checkpoint without them is what it always was.
    if (r.samples > 0 || r.eliminated) {
      mix(r.eliminated ? 1u : 0u);
      mix(r.samples);
      for (double v : r.sample_scores) {
        std::memcpy(&bits, &v, sizeof bits);
        mix(bits);
      }
      std::memcpy(&bits, &r.score_sd, sizeof bits);
      mix(bits);
    }
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
}  // namespace detail

/// The checkpoint document for a search state.
inline nlohmann::json checkpoint_json(const HeadLayout& layout, const Options& options,
                                      const std::vector<EvaluationRecord>& log, bool complete) {
  nlohmann::json recs = nlohmann::json::array();
  for (const auto& r : log) {
    nlohmann::json rec{{"index", r.index},
                       {"stage", to_string(r.stage)},
                       {"mask", detail::mask_bits(r.mask)},
                       {"score", r.score},
                       {"seconds", r.seconds}};
    if (std::isfinite(r.forwards)) rec["forwards"] = r.forwards;
    if (r.samples > 0) {
      rec["samples"] = r.samples;
      rec["sample_scores"] = r.sample_scores;
    }
    if (r.eliminated) {
      rec["eliminated"] = true;
      rec["score_sd"] = r.score_sd;
    }
    recs.push_back(std::move(rec));
  }
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

/// Before a search that starts over with its checkpoint at `path`: a
/// checkpoint an earlier run left there is never overwritten silently. Without
/// `fresh` it is a bosch::invalid_argument (where = `where`) "'PATH': a
/// checkpoint of an earlier run is there; " + `how` (how to resume or discard
/// it, in the caller's words); with `fresh` it is removed, with `companions`
/// (files that belong to it, such as a run identity).
inline void refuse_or_discard_checkpoint(const std::filesystem::path& path, bool fresh, const std::string& how,
                                         const std::string& where = {},
                                         const std::vector<std::filesystem::path>& companions = {}) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return;
  if (!fresh) throw invalid_argument("'" + path.string() + "': a checkpoint of an earlier run is there; " + how, where);
  std::filesystem::remove(path, ec);
  for (const auto& c : companions) std::filesystem::remove(c, ec);
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
    if (r.contains("forwards")) e.forwards = detail::json_number(r.at("forwards"), at + ".forwards");
    if (r.contains("samples")) {
      e.samples = detail::json_integer<std::size_t>(r.at("samples"), at + ".samples");
      const auto& v = in(r, "sample_scores", at);
      if (!v.is_array() || v.size() != e.samples)
        throw format_error("expected an array of " + std::to_string(e.samples) + " numbers", at + ".sample_scores");
      for (std::size_t k = 0; k < v.size(); ++k)
        e.sample_scores.push_back(detail::json_number(v[k], at + ".sample_scores[" + std::to_string(k) + "]"));
    }
    if (r.contains("eliminated")) {
      if (!r.at("eliminated").is_boolean()) throw format_error("not a bool", at + ".eliminated");
      e.eliminated = r.at("eliminated").get<bool>();
      if (e.eliminated) {
        e.score_sd = detail::json_number(in(r, "score_sd", at), at + ".score_sd");
        if (e.samples == 0) throw format_error("an eliminated record needs its samples", at + ".samples");
      }
    }
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
/// (the run-control fields, FieldRole::run, may differ).
inline void check_resumable(const CheckpointData& d, const HeadLayout& layout, const Options& o,
                            const std::string& where) {
  if (!(d.layout == layout))
    throw invalid_argument("checkpoint layout " + to_string(d.layout) +
                               " does not match the evaluator's " + to_string(layout),
                           where);
  if (d.seed != o.seed)
    throw invalid_argument("checkpoint seed " + std::to_string(d.seed) +
                               " does not match Options::seed " + std::to_string(o.seed),
                           where);
  // Run-control fields (FieldRole::run) may differ; a field absent from the
  // checkpoint holds its default.
  const nlohmann::json a = options_identity(options_from_json(d.options, where + ": options")),
                       b = options_identity(o);
  if (a != b) {
    // Long values (warm-start masks) are shown by size and checksum.
    auto shown = [](const nlohmann::json& v) {
      std::string s = v.dump();
      if (s.size() <= 120) return s;
      return std::string(v.is_array() ? "[" + std::to_string(v.size()) + " entries" : "[value") +
             ", checksum " + detail::hex64(detail::fnv1a(s)) + "]";
    };
    std::string diff;
    for (auto it = b.begin(); it != b.end(); ++it)
      if (a.at(it.key()) != it.value())
        diff += (diff.empty() ? "" : ", ") + it.key() + " (checkpoint " + shown(a.at(it.key())) +
                ", now " + shown(it.value()) + ")";
    throw invalid_argument("checkpoint was written with different options: " + diff, where);
  }
}

/// A select() callback that writes a checkpoint file atomically every `every`
/// evaluations and at the end of the search and, when asked to resume, hands
/// the checkpoint's evaluations to the search for replay (after checking that
/// it was written by a search with the same layout, seed and options).
/// While a resumed search replays its checkpoint nothing is written (nor at
/// its end, when it stopped before the replay was done), so the file never
/// holds fewer evaluations than before (a search may be killed and
/// resumed any number of times, at any moment).
///
/// @code
/// bosch::Checkpoint ck("run.checkpoint", 1, bosch::Checkpoint::resume);
/// bosch::Result r = bosch::select(evaluator, options, ck);
/// @endcode
class Checkpoint {
 public:
  /// Whether to continue from an existing checkpoint file.
  enum Mode { start, resume };
  /// @param path  checkpoint file (its directory must exist).
  /// @param every write after every `every`-th evaluation (0 = only at the end).
  /// @param mode  resume: replay `path` (which must exist) before searching.
  explicit Checkpoint(std::filesystem::path path, std::size_t every = 10, Mode mode = start)
      : path_(std::move(path)), every_(every), mode_(mode) {}

  /// select()'s replay hook: the checkpoint's evaluations when resuming.
  /// Throws bosch::file_error / bosch::format_error for an unreadable or
  /// corrupt file and bosch::invalid_argument for one written by another search.
  std::vector<EvaluationRecord> replay_log(const SearchView& v) {
    if (mode_ != resume) return {};
    CheckpointData d = read_checkpoint(path_);
    check_resumable(d, v.layout, *v.options, path_.string());
    resumed_from_ = d.log.size();
    return std::move(d.log);
  }
  void on_evaluation(const SearchView& v, const EvaluationRecord& r) {
    // A replayed evaluation (resume) is already in the checkpoint resumed
    // from: writing now would replace that file with a shorter log, and a kill
    // during the replay would lose the rest (found by tests/crash). Writing
    // resumes with the first new evaluation.
    const bool replay = v.replayed > replayed_;
    replayed_ = v.replayed;
    if (replay) return;
    if (every_ > 0 && (r.index + 1) % every_ == 0) write(v, false);
  }
  void end_search(const SearchView& v, const Result& r) {
    // A resumed search stopped before it had replayed the whole file (a
    // callback's stop, Ctrl-C): the file holds more than the search's log, so
    // it is kept as it is.
    if (v.evaluations < resumed_from_) return;
    write(v, !r.stopped && !r.budget_exhausted);
  }
  /// Number of files written so far.
  std::size_t writes() const noexcept { return writes_; }
  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  void write(const SearchView& v, bool complete) {
    write_checkpoint(path_, v.layout, *v.options, *v.log, complete);
    ++writes_;
  }
  std::filesystem::path path_;
  std::size_t every_;
  Mode mode_;
  std::size_t writes_ = 0;
  std::size_t replayed_ = 0;  // SearchView::replayed at the last evaluation
  std::size_t resumed_from_ = 0;  // evaluations in the checkpoint resumed from
};

}  // namespace bosch
