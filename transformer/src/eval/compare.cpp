// SPDX-License-Identifier: Apache-2.0
// The comparison runner: references, method set-ups and (method, ratio) cells,
// resumable through an atomically rewritten results.json.

#include "ratio_text.hpp"

#include <bosch/error.hpp>
#include <bosch/eval/compare.hpp>
#include <bosch/io/atomic_file.hpp>
#include <bosch/io/file_lock.hpp>
#include <bosch/io/mask_io.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>

namespace bosch::eval {
namespace {

using clock = std::chrono::steady_clock;
double since(clock::time_point t0) { return std::chrono::duration<double>(clock::now() - t0).count(); }

nlohmann::json layout_json(const HeadLayout& l) { return {l.num_layers, l.num_query_heads, l.num_kv_heads}; }

nlohmann::json reports_json(const std::map<std::string, HeldOutReport>& m) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [key, r] : m) j[key] = to_json(r);
  return j;
}

std::map<std::string, HeldOutReport> reports_from(const nlohmann::json& j, const std::string& where,
                                                  const BootstrapOptions& b) {
  std::map<std::string, HeldOutReport> out;
  if (j.is_null()) return out;
  for (auto it = j.begin(); it != j.end(); ++it)
    out[it.key()] = held_out_report_from_json(it.value(), where + ": " + it.key(), b);
  return out;
}

nlohmann::json cell_json(const CellResult& c) {
  return {{"method", c.method},
          {"ratio", c.ratio},
          {"swa_heads", c.mask.count()},
          {"mask", to_grid(c.mask)},
          {"quality", to_json(c.quality)},
          {"quality_at", reports_json(c.quality_at)},
          {"evaluations", c.evaluations},
          {"forwards", c.forwards},
          {"select_seconds", c.select_seconds},
          {"score_seconds", c.score_seconds},
          {"details", c.details}};
}

CellResult cell_from(const nlohmann::json& j, const HeadLayout& layout, const std::string& where,
                     const BootstrapOptions& b) {
  CellResult c;
  c.method = j.at("method").get<std::string>();
  c.ratio = j.at("ratio").get<double>();
  c.mask = mask_from_grid(j.at("mask").get<std::string>(), layout.num_query_heads, where);
  io::check_mask_layout(c.mask, layout, where);
  c.quality = held_out_report_from_json(j.at("quality"), where + ": quality", b);
  c.quality_at = reports_from(j.value("quality_at", nlohmann::json(nullptr)), where + ": quality_at", b);
  c.evaluations = j.at("evaluations").get<std::size_t>();
  c.forwards = j.at("forwards").get<double>();
  c.select_seconds = j.at("select_seconds").get<double>();
  c.score_seconds = j.at("score_seconds").get<double>();
  c.details = j.value("details", nlohmann::json(nullptr));
  c.resumed = true;
  return c;
}

nlohmann::json setup_json(const MethodSummary& m) {
  return {{"family", m.family},
          {"state", m.setup.state},
          {"evaluations", m.setup.evaluations},
          {"forwards", m.setup.forwards},
          {"note", m.setup.note},
          {"seconds", m.setup_seconds}};
}

std::string cell_key(const std::string& method, double ratio) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "@%.17g", ratio);
  return method + buf;
}

/// What an existing results file holds.
struct Stored {
  bool references = false;
  HeldOutReport full, swa;
  std::map<std::string, HeldOutReport> full_at, swa_at;
  std::map<std::string, nlohmann::json> setups;  // by method
  std::map<std::string, nlohmann::json> cells;   // by cell_key
};

Stored read_stored(const std::filesystem::path& path, const HeadLayout& layout, const nlohmann::json& run,
                   const BootstrapOptions& b) {
  Stored s;
  if (!std::filesystem::exists(path)) return s;
  const std::string where = path.string();
  nlohmann::json doc;
  try {
    doc = nlohmann::json::parse(io::read_file(path));
  } catch (const nlohmann::json::exception& e) {
    throw format_error(std::string("not valid JSON: ") + e.what(), where);
  }
  try {
    if (doc.value("format", "") != "bosch.comparison")
      throw format_error("not a comparison results file (format is not \"bosch.comparison\")", where);
    if (doc.at("layout") != layout_json(layout))
      throw invalid_argument("results file was written for layout " + doc.at("layout").dump() + ", this run has " +
                                 layout_json(layout).dump(),
                             where);
    if (doc.at("run") != run) {
      std::string diff;
      const auto& old = doc.at("run");
      for (auto it = run.begin(); it != run.end(); ++it)
        if (!old.contains(it.key()) || old.at(it.key()) != it.value()) diff += (diff.empty() ? "" : ", ") + it.key();
      for (auto it = old.begin(); it != old.end(); ++it)
        if (!run.contains(it.key())) diff += (diff.empty() ? "" : ", ") + it.key();
      throw invalid_argument("results file was written for other settings (differing: " + diff +
                                 "); use another output directory or the same settings",
                             where);
    }
    if (doc.contains("references") && !doc.at("references").is_null()) {
      const auto& refs = doc.at("references");
      s.references = true;
      s.full = held_out_report_from_json(refs.at("all_full"), where + ": references.all_full", b);
      s.swa = held_out_report_from_json(refs.at("all_swa"), where + ": references.all_swa", b);
      if (refs.contains("at"))
        for (auto it = refs.at("at").begin(); it != refs.at("at").end(); ++it) {
          const std::string w = where + ": references.at." + it.key();
          s.full_at[it.key()] = held_out_report_from_json(it.value().at("all_full"), w + ".all_full", b);
          s.swa_at[it.key()] = held_out_report_from_json(it.value().at("all_swa"), w + ".all_swa", b);
        }
    }
    for (auto it = doc.at("methods").begin(); it != doc.at("methods").end(); ++it) s.setups[it.key()] = it.value();
    for (const auto& c : doc.at("cells"))
      s.cells[cell_key(c.at("method").get<std::string>(), c.at("ratio").get<double>())] = c;
  } catch (const nlohmann::json::exception& e) {
    throw format_error(std::string("malformed results file: ") + e.what(), where);
  }
  return s;
}

}  // namespace

const char* to_string(RatioOrder order) noexcept {
  return order == RatioOrder::ascending ? "ascending" : "descending";
}

RatioOrder parse_ratio_order(std::string_view text) {
  if (text == "up" || text == "ascending") return RatioOrder::ascending;
  if (text == "down" || text == "descending") return RatioOrder::descending;
  throw invalid_argument("expected up or down, got '" + std::string(text) + "'", "ratio_order");
}

const HeldOutReport* CellResult::report(const std::string& key, const std::string& primary_key) const {
  if (key.empty() || key == primary_key) return &quality;
  const auto it = quality_at.find(key);
  return it == quality_at.end() ? nullptr : &it->second;
}

std::string ComparisonResult::family(const std::string& method) const {
  for (const auto& m : methods)
    if (m.name == method) return m.family;
  return {};
}

const HeldOutReport* ComparisonResult::reference(bool full, const std::string& key) const {
  if (key.empty() || (!held_out_sets.empty() && key == held_out_sets.front().first)) return full ? &all_full : &all_swa;
  const auto& m = full ? all_full_at : all_swa_at;
  const auto it = m.find(key);
  return it == m.end() ? nullptr : &it->second;
}

const CellResult* ComparisonResult::find(const std::string& method, double ratio) const {
  for (const auto& c : cells)
    if (c.method == method && c.ratio == ratio) return &c;
  return nullptr;
}

namespace {
/// The sum over `method`'s set-up records and cells of a cost.
template <class T, class Setup, class Cell>
T method_total(const ComparisonResult& r, const std::string& method, Setup setup, Cell cell) {
  T n = 0;
  for (const auto& m : r.methods)
    if (m.name == method) n += setup(m);
  for (const auto& c : r.cells)
    if (c.method == method) n += cell(c);
  return n;
}
}  // namespace

std::size_t ComparisonResult::method_evaluations(const std::string& method) const {
  return method_total<std::size_t>(*this, method, [](const auto& m) { return m.setup.evaluations; },
                                   [](const auto& c) { return c.evaluations; });
}

double ComparisonResult::method_forwards(const std::string& method) const {
  return method_total<double>(*this, method, [](const auto& m) { return m.setup.forwards; },
                              [](const auto& c) { return c.forwards; });
}

double ComparisonResult::method_seconds(const std::string& method) const {
  return method_total<double>(*this, method, [](const auto& m) { return m.setup_seconds; },
                              [](const auto& c) { return c.select_seconds; });
}

nlohmann::json comparison_to_json(const ComparisonResult& r) {
  nlohmann::json methods = nlohmann::json::object();
  for (const auto& m : r.methods)
    if (m.has_setup) methods[m.name] = setup_json(m);
  nlohmann::json cells = nlohmann::json::array();
  for (const auto& c : r.cells) cells.push_back(cell_json(c));
  nlohmann::json ratios = nlohmann::json::array();
  for (double x : r.ratios) ratios.push_back(x);
  nlohmann::json at = nlohmann::json::object();
  for (const auto& [key, rep] : r.all_full_at) at[key]["all_full"] = to_json(rep);
  for (const auto& [key, rep] : r.all_swa_at) at[key]["all_swa"] = to_json(rep);
  nlohmann::json sets = nlohmann::json::array();
  for (const auto& [key, label] : r.held_out_sets) sets.push_back({{"key", key}, {"label", label}});
  return {{"format", "bosch.comparison"},
          {"version", 2},
          {"layout", layout_json(r.layout)},
          {"run", r.run},
          {"ratios", ratios},
          {"held_out_sets", sets},
          {"references", {{"all_full", to_json(r.all_full)}, {"all_swa", to_json(r.all_swa)}, {"at", at}}},
          {"methods", methods},
          {"cells", cells}};
}

std::string sanitize_name(const std::string& name) {
  std::string out;
  for (char c : name)
    out += (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_') ? c : '_';
  return out.empty() ? std::string("method") : out;
}

ComparisonResult run_comparison(std::span<const ComparisonMethod> methods, const MaskScorer& score,
                                const HeadLayout& layout, const ComparisonOptions& options,
                                const ComparisonProgress& progress) {
  const HeldOutSet set{"held-out", "held-out", score};
  return run_comparison(methods, std::span<const HeldOutSet>(&set, 1), layout, options, progress);
}

ComparisonResult run_comparison(std::span<const ComparisonMethod> methods, std::span<const HeldOutSet> held_out,
                                const HeadLayout& layout, const ComparisonOptions& options,
                                const ComparisonProgress& progress) {
  check_layout(layout, "run_comparison");
  if (options.ratios.empty()) throw invalid_argument("no ratio given", "ratios");
  for (double r : options.ratios)
    if (!(r > 0.0 && r < 1.0)) throw invalid_argument("every ratio must lie in (0, 1), got " + std::to_string(r), "ratios");
  if (options.output_dir.empty()) throw invalid_argument("no output directory given", "output_dir");
  if (held_out.empty()) throw invalid_argument("no held-out set given", "run_comparison");
  {
    std::set<std::string> keys;
    for (const auto& h : held_out) {
      if (h.key.empty()) throw invalid_argument("a held-out set has an empty key", "held_out");
      if (!keys.insert(h.key).second) throw invalid_argument("duplicate held-out set '" + h.key + "'", "held_out");
      if (!h.score) throw invalid_argument("held-out set '" + h.key + "' has no scorer", "held_out");
    }
  }
  validate(options.bootstrap);
  std::set<std::string> names;
  for (const auto& m : methods) {
    if (m.name.empty()) throw invalid_argument("a method has an empty name", "methods");
    if (!names.insert(m.name).second) throw invalid_argument("duplicate method name '" + m.name + "'", "methods");
    if (!m.select) throw invalid_argument("method '" + m.name + "' has no select function", "methods");
  }
  auto say = [&](const std::string& s) {
    if (progress) progress(s);
  };
  const auto path = options.output_dir / "results.json";
  // A report of nothing would be empty tables: a report-only run needs the
  // results of an earlier one.
  if (!options.compute_missing && !std::filesystem::is_regular_file(path))
    throw file_error("no results.json to report on (a report-only run reads the results of an earlier run)",
                     options.output_dir.string());
  std::filesystem::create_directories(options.output_dir);
  // A second run on the same directory would rewrite results.json from its own
  // state and drop the cells the first one finished: refuse it. Report-only
  // runs write no results.json and may read a file a running job is filling.
  std::optional<io::FileLock> lock;
  if (options.compute_missing && options.write_results)
    lock.emplace(options.output_dir / ".results.lock", "comparison output directory");
  Stored stored = read_stored(path, layout, options.run, options.bootstrap);
  if (options.after_load) options.after_load();

  ComparisonResult res;
  res.layout = layout;
  res.ratios = options.ratios;
  res.run = options.run;
  for (const auto& h : held_out) res.held_out_sets.emplace_back(h.key, h.label);
  // Stored set-ups and cells outside this run's grid are kept in the file.
  auto save = [&] {
    auto doc = comparison_to_json(res);
    for (const auto& [name, setup] : stored.setups)
      if (!names.count(name) && !doc["methods"].contains(name)) doc["methods"][name] = setup;
    std::set<std::string> here;
    for (const auto& c : res.cells) here.insert(cell_key(c.method, c.ratio));
    for (const auto& [key, cell] : stored.cells) {
      const std::string m = cell.at("method").get<std::string>();
      bool in_grid = names.count(m) > 0;
      if (in_grid) {
        in_grid = false;
        for (double r : options.ratios) in_grid = in_grid || key == cell_key(m, r);
      }
      if (!in_grid && !here.count(key)) doc["cells"].push_back(cell);
    }
    if (options.write_results) io::write_file_atomic(path, doc.dump(1) + "\n");
  };

  // The references on every set.
  const HeadMask full(layout), swa = HeadMask::filled(layout, true);
  if (stored.references) {
    res.all_full = stored.full;
    res.all_swa = stored.swa;
    res.all_full_at = stored.full_at;
    res.all_swa_at = stored.swa_at;
    say("references read back from " + path.string());
  } else if (!options.compute_missing) {
    res.all_full.all.mean_logprob = res.all_full.all.probability = res.all_full.all.accuracy =
        res.all_full.all.exact = std::numeric_limits<double>::quiet_NaN();
    res.all_swa = res.all_full;
  } else {
    say("scoring the references (all full, all SWA) on " + held_out.front().label);
    res.all_full = held_out.front().score(full);
    res.all_swa = held_out.front().score(swa);
    save();
  }
  for (std::size_t k = 1; k < held_out.size() && options.compute_missing; ++k) {
    const auto& h = held_out[k];
    if (res.all_full_at.count(h.key) && res.all_swa_at.count(h.key)) continue;
    say("scoring the references (all full, all SWA) on " + h.label);
    res.all_full_at[h.key] = h.score(full);
    res.all_swa_at[h.key] = h.score(swa);
    save();
  }

  // Set-ups read back are announced before anything runs (methods may share work).
  for (const auto& m : methods) {
    const auto it = stored.setups.find(m.name);
    if (m.setup && m.on_setup && it != stored.setups.end() && it->second.contains("state"))
      m.on_setup(it->second.at("state"));
  }

  // Each method's ratios in run order.
  std::vector<double> order = options.ratios;
  std::sort(order.begin(), order.end());
  order.erase(std::unique(order.begin(), order.end()), order.end());
  if (options.ratio_order == RatioOrder::descending) std::reverse(order.begin(), order.end());

  for (const auto& m : methods) {
    MethodSummary sum;
    sum.name = m.name;
    sum.family = m.family;
    sum.has_setup = static_cast<bool>(m.setup);
    if (sum.has_setup) {
      const auto it = stored.setups.find(m.name);
      if (it != stored.setups.end()) {
        try {
          sum.setup.state = it->second.at("state");
          sum.setup.evaluations = it->second.at("evaluations").get<std::size_t>();
          sum.setup.forwards = it->second.at("forwards").get<double>();
          sum.setup.note = it->second.at("note").get<std::string>();
          sum.setup_seconds = it->second.at("seconds").get<double>();
        } catch (const nlohmann::json::exception& e) {
          throw format_error(std::string("malformed set-up of '") + m.name + "': " + e.what(), path.string());
        }
        sum.resumed = true;
      } else {
        // A method whose cells are all stored needs no set-up.
        bool all_stored = true;
        for (double r : options.ratios) all_stored = all_stored && stored.cells.count(cell_key(m.name, r));
        if (!all_stored && options.compute_missing) {
          say(m.name + ": set-up");
          const auto t0 = clock::now();
          sum.setup = m.setup();
          sum.setup_seconds = sum.setup.seconds >= 0 ? sum.setup.seconds : since(t0);
          if (m.on_setup) m.on_setup(sum.setup.state);
          say(m.name + ": set-up done in " + std::to_string(sum.setup_seconds) + " s" +
              (sum.setup.note.empty() ? "" : " (" + sum.setup.note + ")"));
        } else {
          sum.has_setup = false;
        }
      }
    }
    res.methods.push_back(sum);
    if (sum.has_setup && !sum.resumed && options.compute_missing) save();

    std::optional<std::size_t> previous;  // index in res.cells of this method's previous ratio
    for (double rho : order) {
      const auto key = cell_key(m.name, rho);
      const auto it = stored.cells.find(key);
      if (it != stored.cells.end()) {
        try {
          res.cells.push_back(cell_from(it->second, layout, path.string() + ": cell " + key, options.bootstrap));
        } catch (const nlohmann::json::exception& e) {
          throw format_error(std::string("malformed cell ") + key + ": " + e.what(), path.string());
        }
        ++res.resumed;
        previous = res.cells.size() - 1;
        // Held-out sets added since the cell was computed: score its mask on them.
        auto& c = res.cells.back();
        for (std::size_t k = 1; k < held_out.size() && options.compute_missing; ++k) {
          if (c.quality_at.count(held_out[k].key)) continue;
          say(m.name + " at ratio " + detail::ratio_text(rho) + ": scoring on " + held_out[k].label);
          c.quality_at[held_out[k].key] = held_out[k].score(c.mask);
          ++res.rescored;
          save();
        }
        continue;
      }
      if (!options.compute_missing) continue;
      say(m.name + " at ratio " + detail::ratio_text(rho) + ": selecting");
      CellResult c;
      c.method = m.name;
      c.ratio = rho;
      const auto t0 = clock::now();
      MethodCell mc = m.select(rho, sum.setup.state, previous ? &res.cells[*previous] : nullptr);
      c.select_seconds = since(t0);
      io::check_mask_layout(mc.mask, layout, "method '" + m.name + "'");
      c.mask = std::move(mc.mask);
      c.evaluations = mc.evaluations;
      c.forwards = mc.forwards;
      c.details = std::move(mc.details);
      const auto t1 = clock::now();
      c.quality = held_out.front().score(c.mask);
      for (std::size_t k = 1; k < held_out.size(); ++k) c.quality_at[held_out[k].key] = held_out[k].score(c.mask);
      c.score_seconds = since(t1);
      res.cells.push_back(std::move(c));
      previous = res.cells.size() - 1;
      ++res.computed;
      save();
      const auto& done = res.cells.back();
      char buf[240];
      std::snprintf(buf, sizeof buf,
                    "%s at ratio %g: %zu SWA heads, accuracy %.3f, log-prob %.4f [%.4f, %.4f] (select %.1f s, %zu evaluations)",
                    m.name.c_str(), rho, done.mask.count(), done.quality.all.accuracy, done.quality.all.mean_logprob,
                    done.quality.all.logprob_ci.low, done.quality.all.logprob_ci.high, done.select_seconds,
                    done.evaluations);
      say(buf);
    }
  }
  if (options.compute_missing) save();
  return res;
}

namespace {

/// The value of `metric` in a report.
double metric_value(const HeldOutReport& q, HeldOutMetric metric) {
  return metric == HeldOutMetric::logprob ? q.all.mean_logprob
                                          : metric == HeldOutMetric::accuracy ? q.all.accuracy : q.all.exact;
}

/// The metrics the paired comparisons use: log-prob, and accuracy (exact
/// match when no accuracy was computed).
std::vector<HeldOutMetric> paired_metrics(const ComparisonResult& r) {
  bool have_accuracy = std::isfinite(r.all_full.all.accuracy);
  for (const auto& c : r.cells) have_accuracy = have_accuracy || std::isfinite(c.quality.all.accuracy);
  return {HeldOutMetric::logprob, have_accuracy ? HeldOutMetric::accuracy : HeldOutMetric::exact};
}

/// For every held-out set, metric and ratio where `method` has a cell: the
/// paired difference against the cell that `pick` chooses at that ratio
/// (nullptr: no row).
template <class Pick>
void add_pairs(std::vector<PairedComparison>& out, const ComparisonResult& r, const ComparisonOptions& o,
               const std::string& method, const Pick& pick) {
  const std::string primary = r.held_out_sets.empty() ? std::string() : r.held_out_sets.front().first;
  for (const auto& [key, label] : r.held_out_sets)
    for (HeldOutMetric metric : paired_metrics(r))
      for (double x : r.ratios) {
        const CellResult* a = r.find(method, x);
        const HeldOutReport* qa = a ? a->report(key, primary) : nullptr;
        if (!qa) continue;
        const CellResult* b = pick(x, key, primary, metric);
        if (!b) continue;
        PairedComparison p;
        p.held_out = key;
        p.ratio = x;
        p.metric = metric;
        p.method = method;
        p.other = b->method;
        p.difference = paired_difference(*qa, *b->report(key, primary), metric, "all", o.bootstrap,
                                         "paired comparison of " + method + " and " + b->method);
        out.push_back(std::move(p));
      }
}

/// The best cell (by the mean of `metric`) at ratio x among the methods `take` accepts.
template <class Take>
const CellResult* best_cell(const ComparisonResult& r, double x, const std::string& key, const std::string& primary,
                            HeldOutMetric metric, const Take& take) {
  const CellResult* best = nullptr;
  const HeldOutReport* qb = nullptr;
  for (const auto& m : r.methods) {
    if (!take(m)) continue;
    const CellResult* c = r.find(m.name, x);
    const HeldOutReport* q = c ? c->report(key, primary) : nullptr;
    if (q && std::isfinite(metric_value(*q, metric)) && (!qb || metric_value(*q, metric) > metric_value(*qb, metric)))
      best = c, qb = q;
  }
  return best;
}

bool has_method(const ComparisonResult& r, const std::string& name) {
  return std::any_of(r.methods.begin(), r.methods.end(), [&](const MethodSummary& m) { return m.name == name; });
}

}  // namespace

std::vector<PairedComparison> paired_comparisons(const ComparisonResult& r, const ComparisonOptions& o) {
  std::vector<PairedComparison> out;
  if (!has_method(r, o.reference_method)) return out;
  const std::string family = r.family(o.reference_method);
  add_pairs(out, r, o, o.reference_method,
            [&](double x, const std::string& key, const std::string& primary, HeldOutMetric metric) {
              return best_cell(r, x, key, primary, metric,
                               [&](const MethodSummary& m) { return m.family != family; });
            });
  return out;
}

std::vector<PairedComparison> layer_comparisons(const ComparisonResult& r, const ComparisonOptions& o) {
  std::vector<PairedComparison> out;
  if (o.layer_method.empty() || o.layer_method == o.reference_method || !has_method(r, o.layer_method)) return out;
  // Against the head-level reference at the same ratio ...
  if (has_method(r, o.reference_method))
    add_pairs(out, r, o, o.layer_method,
              [&](double x, const std::string& key, const std::string& primary, HeldOutMetric) -> const CellResult* {
                const CellResult* c = r.find(o.reference_method, x);
                return c && c->report(key, primary) ? c : nullptr;
              });
  // ... and against the best layer heuristic (family "layer").
  add_pairs(out, r, o, o.layer_method,
            [&](double x, const std::string& key, const std::string& primary, HeldOutMetric metric) {
              return best_cell(r, x, key, primary, metric,
                               [](const MethodSummary& m) { return m.family == "layer"; });
            });
  return out;
}

}  // namespace bosch::eval
