// SPDX-License-Identifier: Apache-2.0
// The comparison's outputs: Markdown report, CSV tables, head maps and
// score-versus-ratio plots, every held-out figure with its sample count and
// bootstrap interval.

#include "ratio_text.hpp"

#include <bosch/error.hpp>
#include <bosch/eval/compare.hpp>
#include <bosch/io/atomic_file.hpp>
#include <bosch/io/svg.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace bosch::eval {
namespace {

constexpr double nan = std::numeric_limits<double>::quiet_NaN();

std::string fmt(const char* f, double v) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

/// "v [low, high]" (values times `scale`), or "v" when the interval is unknown.
std::string with_ci(const char* f, double v, const Interval& ci, double scale = 1.0) {
  std::string s = fmt(f, scale * v);
  if (std::isfinite(v) && ci.valid()) s += " [" + fmt(f, scale * ci.low) + ", " + fmt(f, scale * ci.high) + "]";
  return s;
}

using detail::ratio_text;

std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string o = "\"";
  for (char c : s) o += c == '"' ? std::string("\"\"") : std::string(1, c);
  return o + "\"";
}

std::string csv_number(double v) { return std::isfinite(v) ? fmt("%.10g", v) : std::string(); }

/// The reference method's name: options.reference_method when present, else the first.
std::string reference_of(const ComparisonResult& r, const ComparisonOptions& o) {
  for (const auto& m : r.methods)
    if (m.name == o.reference_method) return m.name;
  return r.methods.empty() ? std::string() : r.methods.front().name;
}

std::vector<std::string> task_names(const ComparisonResult& r) {
  std::vector<std::string> names;
  for (const auto& t : r.all_full.per_task) names.push_back(t.task);
  if (names.empty())
    for (const auto& c : r.cells)
      if (!c.quality.per_task.empty()) {
        for (const auto& t : c.quality.per_task) names.push_back(t.task);
        break;
      }
  return names;
}

/// Greedy accuracy when it was computed, else the greedy exact match (free with
/// the teacher-forced pass: the greedy answer equals the gold tokens).
bool has_accuracy(const ComparisonResult& r) {
  bool have = std::isfinite(r.all_full.all.accuracy);
  for (const auto& c : r.cells) have = have || std::isfinite(c.quality.all.accuracy);
  return have;
}

double acc_value(const TaskScore& t, bool accuracy) { return accuracy ? t.accuracy : t.exact; }
const Interval& acc_ci(const TaskScore& t, bool accuracy) { return accuracy ? t.accuracy_ci : t.exact_ci; }

/// The sample count of a set: "n = 64 (16 per task x 4 tasks)".
std::string sample_text(const HeldOutReport* q) {
  if (q == nullptr || q->all.samples == 0) return "n unknown";
  std::string s = "n = " + std::to_string(q->all.samples);
  if (q->per_task.size() > 1) {
    bool equal = true;
    for (const auto& t : q->per_task) equal = equal && t.samples == q->per_task.front().samples;
    if (equal)
      s += " (" + std::to_string(q->per_task.front().samples) + " per task x " + std::to_string(q->per_task.size()) +
           " tasks)";
  }
  return s;
}

/// A report of the set (references first) to read the sample count from.
const HeldOutReport* any_report(const ComparisonResult& r, const std::string& key) {
  if (const auto* q = r.reference(true, key); q && q->all.samples > 0) return q;
  const std::string primary = r.held_out_sets.empty() ? std::string() : r.held_out_sets.front().first;
  for (const auto& c : r.cells)
    if (const auto* q = c.report(key, primary)) return q;
  return nullptr;
}

std::string file_suffix(const ComparisonResult& r, const std::string& key) {
  if (r.held_out_sets.empty() || key == r.held_out_sets.front().first) return "";
  return "-" + sanitize_name(key);
}

}  // namespace

std::string comparison_markdown(const ComparisonResult& r, const ComparisonOptions& o) {
  std::ostringstream md;
  const bool have_accuracy = has_accuracy(r);
  const std::string acc_name = have_accuracy ? "accuracy" : "greedy exact match";
  const std::string primary = r.held_out_sets.empty() ? std::string() : r.held_out_sets.front().first;
  md << "# SWA head selection: method comparison" << (o.title.empty() ? "" : " (" + o.title + ")") << "\n\n";
  md << "Settings: `" << r.run.dump() << "`\n\n";
  md << "Layout: " << r.layout.num_layers << " layers x " << r.layout.num_kv_heads << " KV heads ("
     << r.layout.num_query_heads << " query heads per layer). Held-out accuracy is greedy decoding scored by "
     << "the task rule (RULER string match, passkey rule); log-prob is the mean teacher-forced answer-token "
     << "log-probability (nats). Cost columns: calibration-set evaluations, forward-pass equivalents and wall "
     << "time to produce the masks (set-up + all ratios; held-out scoring excluded).\n\n";
  md << "Every held-out figure is a mean over the held-out samples (n below) followed by its "
     << fmt("%g", 100.0 * o.bootstrap.level) << "% confidence interval [low, high]: percentile bootstrap over "
     << "the samples (" << o.bootstrap.resamples << " resamples, fixed seed), resampled within each task so the "
     << "task mix stays fixed; per-task figures are resampled within their task. The interval is over samples "
     << "because they are the only random part: another draw of tasks from the same generator would move the "
     << "figure by about that much.\n\n";
  if (!have_accuracy)
    md << "Greedy accuracy was not computed: the accuracy tables show the greedy exact match (the greedy answer "
          "equals the gold tokens) instead.\n\n";

  auto header = [&](const std::string& first, bool cost) {
    md << "| " << first << " |";
    for (double x : r.ratios) md << " rho=" << ratio_text(x) << " |";
    if (cost) md << " evaluations | forwards | time (s) |";
    md << "\n|---|";
    for (std::size_t i = 0; i < r.ratios.size(); ++i) md << "---:|";
    if (cost) md << "---:|---:|---:|";
    md << "\n";
  };
  const auto paired = paired_comparisons(r, o);
  const auto layered = layer_comparisons(r, o);
  // One table of paired differences (PairedComparison rows of held-out set
  // `key`); nothing when it has no row.
  auto paired_section = [&](const std::vector<PairedComparison>& rows, const std::string& key,
                            const std::string& title, const char* intro, const char* other_column) {
    if (std::none_of(rows.begin(), rows.end(), [&](const PairedComparison& p) { return p.held_out == key; })) return;
    md << "\n### " << title << "\n\n"
       << intro << "\n\n"
       << "| rho | metric | " << other_column << " | difference | samples |\n|---:|---|---|---:|---:|\n";
    for (const auto& p : rows) {
      if (p.held_out != key) continue;
      const bool lp = p.metric == HeldOutMetric::logprob;
      md << "| " << ratio_text(p.ratio) << " | " << (lp ? "log-prob" : acc_name + " (%)") << " | " << p.other
         << " | "
         << (lp ? with_ci("%+.4f", p.difference.mean, p.difference.ci)
                : with_ci("%+.1f", p.difference.mean, p.difference.ci, 100.0))
         << " | " << p.difference.samples << " |\n";
    }
  };

  bool first_set = true;
  for (const auto& [key, label] : r.held_out_sets) {
    const HeldOutReport* full = r.reference(true, key);
    const HeldOutReport* swa = r.reference(false, key);
    md << "## " << label << " (" << sample_text(any_report(r, key)) << ")\n\n";
    if (full && swa)
      md << "References: all full attention: " << acc_name << " "
         << with_ci("%.1f", acc_value(full->all, have_accuracy), acc_ci(full->all, have_accuracy), 100.0)
         << " %, log-prob " << with_ci("%.4f", full->all.mean_logprob, full->all.logprob_ci) << "; all SWA: "
         << acc_name << " "
         << with_ci("%.1f", acc_value(swa->all, have_accuracy), acc_ci(swa->all, have_accuracy), 100.0)
         << " %, log-prob " << with_ci("%.4f", swa->all.mean_logprob, swa->all.logprob_ci) << ".\n\n";

    // A method's row: cell(report) at each ratio, "-" where it has none.
    auto method_row = [&](const auto& m, auto&& cell) {
      md << "| " << m.name << " |";
      for (double x : r.ratios) {
        const auto* c = r.find(m.name, x);
        const auto* q = c ? c->report(key, primary) : nullptr;
        md << " " << (q ? cell(*q) : std::string("-")) << " |";
      }
    };
    md << "### Held-out " << acc_name << " (%)\n\n";
    header("method", first_set);
    for (const auto& m : r.methods) {
      method_row(m, [&](const auto& q) {
        return with_ci("%.1f", acc_value(q.all, have_accuracy), acc_ci(q.all, have_accuracy), 100.0);
      });
      if (first_set)
        md << " " << r.method_evaluations(m.name) << " | " << fmt("%.1f", r.method_forwards(m.name)) << " | "
           << fmt("%.1f", r.method_seconds(m.name)) << " |";
      md << "\n";
    }
    md << "\n### Held-out answer log-probability (nats per token)\n\n";
    header("method", false);
    for (const auto& m : r.methods) {
      method_row(m, [&](const auto& q) { return with_ci("%.4f", q.all.mean_logprob, q.all.logprob_ci); });
      md << "\n";
    }

    paired_section(paired, key,
                   reference_of(r, o) + " minus the best method of another family (paired bootstrap)",
                   "Per ratio, the best other method by the mean of each metric; the difference of means with the "
                   "interval of the per-sample differences (both masks scored on the same samples, resampled "
                   "together). An interval above 0 says the difference holds beyond sampling noise.",
                   "best other");
    paired_section(layered, key,
                   o.layer_method + " (whole layers, for engines that window only layers) against " +
                       o.reference_method + " (per KV head) and the best layer heuristic (paired bootstrap)",
                   "The layer-granular mask minus the head-level mask at the same ratio (what deploying on a "
                   "layer-only engine costs), and minus the best of the layer heuristics (what the search gains "
                   "over them); intervals as above.",
                   "other");

    const auto tasks = task_names(r);
    if (tasks.size() > 1) {
      md << "\n### Held-out " << acc_name << " per task (%)\n\n| method | rho |";
      for (const auto& t : tasks) md << " " << t << " |";
      md << "\n|---|---:|";
      for (std::size_t i = 0; i < tasks.size(); ++i) md << "---:|";
      md << "\n";
      auto row = [&](const std::string& name, const std::string& rho, const HeldOutReport* q) {
        if (!q) return;
        md << "| " << name << " | " << rho << " |";
        for (const auto& t : tasks) {
          std::string v = "-";
          for (const auto& s : q->per_task)
            if (s.task == t)
              v = with_ci("%.1f", acc_value(s, have_accuracy), acc_ci(s, have_accuracy), 100.0) + " (n " +
                  std::to_string(s.samples) + ")";
          md << " " << v << " |";
        }
        md << "\n";
      };
      row("all full", "0", full);
      row("all SWA", "1", swa);
      for (const auto& m : r.methods)
        for (double x : r.ratios)
          if (const auto* c = r.find(m.name, x)) row(m.name, ratio_text(x), c->report(key, primary));
    }
    md << "\n";
    first_set = false;
  }

  md << "## Head-set turnover across ratios\n\n"
     << "T(a, b) = |S(a) \\ S(b)| / sqrt(|S(a)| |S(b)|) between consecutive ratios (0 for nested sets, as any "
        "fixed ranking gives).\n\n| method |";
  for (std::size_t i = 0; i + 1 < r.ratios.size(); ++i)
    md << " " << ratio_text(r.ratios[i]) << " -> " << ratio_text(r.ratios[i + 1]) << " |";
  md << "\n|---|";
  for (std::size_t i = 0; i + 1 < r.ratios.size(); ++i) md << "---:|";
  md << "\n";
  for (const auto& m : r.methods) {
    md << "| " << m.name << " |";
    for (std::size_t i = 0; i + 1 < r.ratios.size(); ++i) {
      const auto* a = r.find(m.name, r.ratios[i]);
      const auto* b = r.find(m.name, r.ratios[i + 1]);
      md << " " << (a && b ? fmt("%.3f", turnover(a->mask, b->mask)) : std::string("-")) << " |";
    }
    md << "\n";
  }

  const std::string ref = reference_of(r, o);
  if (!ref.empty()) {
    md << "\n## Jaccard distance of the SWA-head sets to " << ref << "\n\n";
    header("method", false);
    for (const auto& m : r.methods) {
      if (m.name == ref) continue;
      md << "| " << m.name << " |";
      for (double x : r.ratios) {
        const auto* a = r.find(ref, x);
        const auto* b = r.find(m.name, x);
        md << " " << (a && b ? fmt("%.3f", jaccard_distance(a->mask, b->mask)) : std::string("-")) << " |";
      }
      md << "\n";
    }
  }
  md << "\nFigures: heads/<method>.svg (SWA heads per layer at every ratio), accuracy_vs_ratio.svg, "
        "logprob_vs_ratio.svg (with interval bars; -KEY variants for the other held-out sets). Data: "
        "results.json (per-sample scores included), results.csv, paired.csv, turnover.csv, jaccard.csv.\n";
  return md.str();
}

void write_comparison_outputs(const ComparisonResult& r, const ComparisonOptions& o) {
  if (o.output_dir.empty()) throw invalid_argument("no output directory given", "output_dir");
  std::filesystem::create_directories(o.output_dir / "heads");
  const auto& dir = o.output_dir;
  const std::string primary = r.held_out_sets.empty() ? std::string() : r.held_out_sets.front().first;
  io::write_file_atomic(dir / "table.md", comparison_markdown(r, o));

  // results.csv: one row per (held-out set, cell), references first.
  {
    const auto tasks = task_names(r);
    std::ostringstream csv;
    csv << "held_out,method,family,ratio,swa_heads,samples,accuracy,accuracy_low,accuracy_high,exact,exact_low,"
           "exact_high,mean_logprob,mean_logprob_low,mean_logprob_high,probability,evaluations,forwards,"
           "select_seconds,score_seconds";
    for (const auto& t : tasks)
      for (const char* f : {"samples_", "accuracy_", "accuracy_low_", "accuracy_high_", "mean_logprob_",
                            "mean_logprob_low_", "mean_logprob_high_"})
        csv << "," << csv_field(f + t);
    csv << "\n";
    auto line = [&](const std::string& set, const std::string& name, const std::string& fam, double ratio,
                    std::size_t heads, const HeldOutReport& q, std::size_t evals, double fw, double sel, double sc) {
      const auto& a = q.all;
      csv << csv_field(set) << "," << csv_field(name) << "," << csv_field(fam) << "," << csv_number(ratio) << ","
          << heads << "," << a.samples << "," << csv_number(a.accuracy) << "," << csv_number(a.accuracy_ci.low) << ","
          << csv_number(a.accuracy_ci.high) << "," << csv_number(a.exact) << "," << csv_number(a.exact_ci.low) << ","
          << csv_number(a.exact_ci.high) << "," << csv_number(a.mean_logprob) << ","
          << csv_number(a.logprob_ci.low) << "," << csv_number(a.logprob_ci.high) << ","
          << csv_number(a.probability) << "," << evals << "," << csv_number(fw) << "," << csv_number(sel) << ","
          << csv_number(sc);
      for (const auto& t : tasks) {
        const TaskScore* s = nullptr;
        for (const auto& x : q.per_task)
          if (x.task == t) s = &x;
        if (!s) {
          csv << ",,,,,,,";
          continue;
        }
        csv << "," << s->samples << "," << csv_number(s->accuracy) << "," << csv_number(s->accuracy_ci.low) << ","
            << csv_number(s->accuracy_ci.high) << "," << csv_number(s->mean_logprob) << ","
            << csv_number(s->logprob_ci.low) << "," << csv_number(s->logprob_ci.high);
      }
      csv << "\n";
    };
    for (const auto& [key, label] : r.held_out_sets) {
      if (const auto* q = r.reference(true, key)) line(key, "all full", "reference", 0.0, 0, *q, 0, 0, 0, 0);
      if (const auto* q = r.reference(false, key))
        line(key, "all SWA", "reference", 1.0, r.layout.size(), *q, 0, 0, 0, 0);
      for (const auto& c : r.cells)
        if (const auto* q = c.report(key, primary))
          line(key, c.method, r.family(c.method), c.ratio, c.mask.count(), *q, c.evaluations, c.forwards,
               c.select_seconds, c.score_seconds);
    }
    io::write_file_atomic(dir / "results.csv", csv.str());
  }
  // paired.csv
  {
    std::ostringstream p;
    p << "held_out,ratio,metric,method,other,samples,difference,low,high\n";
    auto all = paired_comparisons(r, o);
    for (auto& c : layer_comparisons(r, o)) all.push_back(std::move(c));
    for (const auto& c : all)
      p << csv_field(c.held_out) << "," << csv_number(c.ratio) << "," << to_string(c.metric) << ","
        << csv_field(c.method) << "," << csv_field(c.other) << "," << c.difference.samples << ","
        << csv_number(c.difference.mean) << "," << csv_number(c.difference.ci.low) << ","
        << csv_number(c.difference.ci.high) << "\n";
    io::write_file_atomic(dir / "paired.csv", p.str());
  }
  // turnover.csv and jaccard.csv
  {
    std::ostringstream t, j;
    t << "method,ratio_low,ratio_high,turnover\n";
    j << "ratio,method_a,method_b,jaccard_distance\n";
    for (const auto& m : r.methods)
      for (std::size_t i = 0; i + 1 < r.ratios.size(); ++i) {
        const auto* a = r.find(m.name, r.ratios[i]);
        const auto* b = r.find(m.name, r.ratios[i + 1]);
        if (a && b)
          t << csv_field(m.name) << "," << csv_number(r.ratios[i]) << "," << csv_number(r.ratios[i + 1]) << ","
            << csv_number(turnover(a->mask, b->mask)) << "\n";
      }
    for (double x : r.ratios)
      for (std::size_t a = 0; a < r.methods.size(); ++a)
        for (std::size_t b = a + 1; b < r.methods.size(); ++b) {
          const auto* ca = r.find(r.methods[a].name, x);
          const auto* cb = r.find(r.methods[b].name, x);
          if (ca && cb)
            j << csv_number(x) << "," << csv_field(ca->method) << "," << csv_field(cb->method) << ","
              << csv_number(jaccard_distance(ca->mask, cb->mask)) << "\n";
        }
    io::write_file_atomic(dir / "turnover.csv", t.str());
    io::write_file_atomic(dir / "jaccard.csv", j.str());
  }
  // Head maps: the ratios side by side, one blank column between them.
  const int H = r.layout.num_kv_heads, R = static_cast<int>(r.ratios.size());
  for (const auto& m : r.methods) {
    io::GridMap g;
    g.title = (o.title.empty() ? "" : o.title + ": ") + m.name + ", SWA heads at rho =";
    for (double x : r.ratios) g.title += " " + ratio_text(x);
    g.x_label = "KV head, one block per ratio";
    g.y_label = "layer";
    g.rows = r.layout.num_layers;
    g.cols = R * (H + 1) - 1;
    g.values.assign(static_cast<std::size_t>(g.rows) * static_cast<std::size_t>(g.cols), nan);
    for (int k = 0; k < R; ++k) {
      const auto* c = r.find(m.name, r.ratios[static_cast<std::size_t>(k)]);
      for (int l = 0; l < g.rows; ++l)
        for (int h = 0; h < H; ++h)
          if (c)
            g.values[static_cast<std::size_t>(l) * g.cols + static_cast<std::size_t>(k * (H + 1) + h)] =
                c->mask.swa(l, h) ? 1.0 : 0.0;
    }
    for (int col = 0; col < g.cols; ++col) {
      const int k = col / (H + 1), h = col % (H + 1);
      g.col_labels.push_back(h == H ? std::string() : (h == 0 ? ratio_text(r.ratios[static_cast<std::size_t>(k)]) + ":" : "") + std::to_string(h));
    }
    g.categories = {{1.0, "#ff7f0e", "SWA"}, {0.0, "#1f77b4", "full"}};
    g.cell_size = H <= 4 ? 16 : 12;
    io::write_svg(dir / "heads" / (sanitize_name(m.name) + ".svg"), io::grid_map_svg(g));
  }
  // Score-versus-ratio plots with interval bars, one pair per held-out set.
  const bool have_accuracy = has_accuracy(r);
  for (const auto& [key, label] : r.held_out_sets) {
    auto plot = [&](const std::string& file, const std::string& what, auto value, auto interval, bool unit_range) {
      io::LinePlot p;
      p.title = (o.title.empty() ? "" : o.title + ": ") + label + " " + what + " vs SWA ratio";
      p.x_label = "SWA ratio rho (fraction of KV heads); bars: 95% bootstrap intervals";
      p.y_label = what;
      p.width = 760;
      p.height = 440;
      if (unit_range) {
        p.y_min = 0;
        p.y_max = 1;
      }
      static const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b",
                                     "#e377c2", "#17becf", "#bcbd22", "#7f7f7f", "#393b79", "#ad494a",
                                     "#637939", "#e7969c", "#6b6ecf", "#843c39"};
      for (const auto& m : r.methods) {
        io::Series s;
        s.name = m.name;
        s.color = colors[p.series.size() % 16];
        s.dashed = m.family == "layer";
        for (double x : r.ratios)
          if (const auto* c = r.find(m.name, x))
            if (const auto* q = c->report(key, primary)) {
              s.x.push_back(x);
              s.y.push_back(value(*q));
              s.y_low.push_back(interval(*q).low);
              s.y_high.push_back(interval(*q).high);
            }
        p.series.push_back(std::move(s));
      }
      for (bool full : {true, false}) {
        const auto* q = r.reference(full, key);
        const double v = q ? value(*q) : nan;
        io::Series s;
        s.name = full ? "all full" : "all SWA";
        s.x = {r.ratios.front(), r.ratios.back()};
        s.y = {v, v};
        s.color = full ? "#000000" : "#999999";
        s.markers = false;
        s.dashed = true;
        p.series.push_back(std::move(s));
      }
      io::write_svg(dir / (file + file_suffix(r, key) + ".svg"), io::line_plot_svg(p));
    };
    if (have_accuracy)
      plot("accuracy_vs_ratio", "accuracy", [](const HeldOutReport& q) { return q.all.accuracy; },
           [](const HeldOutReport& q) { return q.all.accuracy_ci; }, true);
    else
      plot("accuracy_vs_ratio", "greedy exact match", [](const HeldOutReport& q) { return q.all.exact; },
           [](const HeldOutReport& q) { return q.all.exact_ci; }, true);
    plot("logprob_vs_ratio", "answer log-prob (nats)", [](const HeldOutReport& q) { return q.all.mean_logprob; },
         [](const HeldOutReport& q) { return q.all.logprob_ci; }, false);
  }
}

}  // namespace bosch::eval
