// SPDX-License-Identifier: Apache-2.0
// The comparison's outputs: Markdown report, CSV tables, head maps and
// score-versus-ratio plots.

#include <bosch/error.hpp>
#include <bosch/eval/compare.hpp>
#include <bosch/io/atomic_file.hpp>
#include <bosch/io/svg.hpp>

#include <cmath>
#include <cstdio>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

namespace bosch::eval {
namespace {

std::string fmt(const char* f, double v) {
  if (!std::isfinite(v)) return "-";
  char buf[64];
  std::snprintf(buf, sizeof buf, f, v);
  return buf;
}

std::string ratio_text(double r) { return fmt("%g", r); }

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
  return names;
}

}  // namespace

std::string comparison_markdown(const ComparisonResult& r, const ComparisonOptions& o) {
  std::ostringstream md;
  md << "# SWA head selection: method comparison" << (o.title.empty() ? "" : " (" + o.title + ")") << "\n\n";
  md << "Settings: `" << r.run.dump() << "`\n\n";
  md << "Layout: " << r.layout.num_layers << " layers x " << r.layout.num_kv_heads << " KV heads ("
     << r.layout.num_query_heads << " query heads per layer). Held-out accuracy is greedy decoding scored by "
     << "the task rule (RULER string match, passkey rule); log-prob is the mean teacher-forced answer-token "
     << "log-probability (nats). Cost columns: calibration-set evaluations, forward-pass equivalents and wall "
     << "time to produce the masks (set-up + all ratios; held-out scoring excluded).\n\n";
  md << "References: all full attention: accuracy " << fmt("%.3f", r.all_full.all.accuracy) << ", exact match "
     << fmt("%.3f", r.all_full.all.exact) << ", log-prob " << fmt("%.4f", r.all_full.all.mean_logprob)
     << "; all SWA: accuracy " << fmt("%.3f", r.all_swa.all.accuracy) << ", exact match "
     << fmt("%.3f", r.all_swa.all.exact) << ", log-prob " << fmt("%.4f", r.all_swa.all.mean_logprob) << ".\n\n";

  auto header = [&](const std::string& first, bool cost) {
    md << "| " << first << " |";
    for (double x : r.ratios) md << " rho=" << ratio_text(x) << " |";
    if (cost) md << " evaluations | forwards | time (s) |";
    md << "\n|---|";
    for (std::size_t i = 0; i < r.ratios.size(); ++i) md << "---:|";
    if (cost) md << "---:|---:|---:|";
    md << "\n";
  };
  // Greedy accuracy when it was computed, else the greedy exact match (free with
  // the teacher-forced pass: the greedy answer equals the gold tokens).
  bool have_accuracy = std::isfinite(r.all_full.all.accuracy);
  for (const auto& c : r.cells) have_accuracy = have_accuracy || std::isfinite(c.quality.all.accuracy);
  auto acc = [&](const HeldOutReport& q) { return have_accuracy ? q.all.accuracy : q.all.exact; };
  md << (have_accuracy ? "## Held-out accuracy (%)\n\n"
                       : "## Held-out greedy exact match (%) (accuracy not computed: greedy answer == gold tokens)\n\n");
  header("method", true);
  for (const auto& m : r.methods) {
    md << "| " << m.name << " |";
    for (double x : r.ratios) {
      const auto* c = r.find(m.name, x);
      md << " " << (c ? fmt("%.1f", 100.0 * acc(c->quality)) : std::string("-")) << " |";
    }
    md << " " << r.method_evaluations(m.name) << " | " << fmt("%.1f", r.method_forwards(m.name)) << " | "
       << fmt("%.1f", r.method_seconds(m.name)) << " |\n";
  }
  md << "\n## Held-out answer log-probability (nats per token)\n\n";
  header("method", false);
  for (const auto& m : r.methods) {
    md << "| " << m.name << " |";
    for (double x : r.ratios) {
      const auto* c = r.find(m.name, x);
      md << " " << (c ? fmt("%.4f", c->quality.all.mean_logprob) : std::string("-")) << " |";
    }
    md << "\n";
  }

  md << "\n## Head-set turnover across ratios\n\n"
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

  const auto tasks = task_names(r);
  if (tasks.size() > 1) {
    md << "\n## Held-out " << (have_accuracy ? "accuracy" : "greedy exact match") << " per task (%)\n\n| method | rho |";
    for (const auto& t : tasks) md << " " << t << " |";
    md << "\n|---|---:|";
    for (std::size_t i = 0; i < tasks.size(); ++i) md << "---:|";
    md << "\n";
    auto row = [&](const std::string& name, const std::string& rho, const HeldOutReport& q) {
      md << "| " << name << " | " << rho << " |";
      for (const auto& t : tasks) {
        double v = std::numeric_limits<double>::quiet_NaN();
        for (const auto& s : q.per_task)
          if (s.task == t) v = 100.0 * (have_accuracy ? s.accuracy : s.exact);
        md << " " << fmt("%.1f", v) << " |";
      }
      md << "\n";
    };
    row("all full", "0", r.all_full);
    row("all SWA", "1", r.all_swa);
    for (const auto& m : r.methods)
      for (double x : r.ratios)
        if (const auto* c = r.find(m.name, x)) row(m.name, ratio_text(x), c->quality);
  }
  md << "\nFigures: heads/<method>.svg (SWA heads per layer at every ratio), accuracy_vs_ratio.svg, "
        "logprob_vs_ratio.svg. Data: results.json, results.csv, turnover.csv, jaccard.csv.\n";
  return md.str();
}

void write_comparison_outputs(const ComparisonResult& r, const ComparisonOptions& o) {
  if (o.output_dir.empty()) throw invalid_argument("no output directory given", "output_dir");
  std::filesystem::create_directories(o.output_dir / "heads");
  const auto& dir = o.output_dir;
  io::write_file_atomic(dir / "table.md", comparison_markdown(r, o));

  // results.csv
  {
    const auto tasks = task_names(r);
    std::ostringstream csv;
    csv << "method,family,ratio,swa_heads,accuracy,exact,mean_logprob,probability,evaluations,forwards,"
           "select_seconds,score_seconds";
    for (const auto& t : tasks) csv << "," << csv_field("accuracy_" + t);
    csv << "\n";
    auto family = [&](const std::string& name) {
      for (const auto& m : r.methods)
        if (m.name == name) return m.family;
      return std::string();
    };
    auto line = [&](const std::string& name, const std::string& fam, double ratio, std::size_t heads,
                    const HeldOutReport& q, std::size_t evals, double fw, double sel, double sc) {
      csv << csv_field(name) << "," << csv_field(fam) << "," << csv_number(ratio) << "," << heads << ","
          << csv_number(q.all.accuracy) << "," << csv_number(q.all.exact) << "," << csv_number(q.all.mean_logprob)
          << "," << csv_number(q.all.probability) << "," << evals << "," << csv_number(fw) << "," << csv_number(sel)
          << "," << csv_number(sc);
      for (const auto& t : tasks) {
        double v = std::numeric_limits<double>::quiet_NaN();
        for (const auto& s : q.per_task)
          if (s.task == t) v = s.accuracy;
        csv << "," << csv_number(v);
      }
      csv << "\n";
    };
    line("all full", "reference", 0.0, 0, r.all_full, 0, 0, 0, 0);
    line("all SWA", "reference", 1.0, r.layout.size(), r.all_swa, 0, 0, 0, 0);
    for (const auto& c : r.cells)
      line(c.method, family(c.method), c.ratio, c.mask.count(), c.quality, c.evaluations, c.forwards,
           c.select_seconds, c.score_seconds);
    io::write_file_atomic(dir / "results.csv", csv.str());
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
    g.values.assign(static_cast<std::size_t>(g.rows) * static_cast<std::size_t>(g.cols),
                    std::numeric_limits<double>::quiet_NaN());
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
  // Score-versus-ratio plots.
  auto plot = [&](const std::string& file, const std::string& what, auto value, bool unit_range) {
    io::LinePlot p;
    p.title = (o.title.empty() ? "" : o.title + ": ") + "held-out " + what + " vs SWA ratio";
    p.x_label = "SWA ratio rho (fraction of KV heads)";
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
        if (const auto* c = r.find(m.name, x)) {
          s.x.push_back(x);
          s.y.push_back(value(c->quality));
        }
      p.series.push_back(std::move(s));
    }
    io::Series full{"all full", {r.ratios.front(), r.ratios.back()}, {value(r.all_full), value(r.all_full)}, "#000000",
                    false, true};
    io::Series swa{"all SWA", {r.ratios.front(), r.ratios.back()}, {value(r.all_swa), value(r.all_swa)}, "#999999",
                   false, true};
    p.series.push_back(full);
    p.series.push_back(swa);
    io::write_svg(dir / file, io::line_plot_svg(p));
  };
  bool have_accuracy = std::isfinite(r.all_full.all.accuracy);
  for (const auto& c : r.cells) have_accuracy = have_accuracy || std::isfinite(c.quality.all.accuracy);
  if (have_accuracy)
    plot("accuracy_vs_ratio.svg", "accuracy", [](const HeldOutReport& q) { return q.all.accuracy; }, true);
  else
    plot("accuracy_vs_ratio.svg", "greedy exact match", [](const HeldOutReport& q) { return q.all.exact; }, true);
  plot("logprob_vs_ratio.svg", "answer log-prob (nats)", [](const HeldOutReport& q) { return q.all.mean_logprob; },
       false);
}

}  // namespace bosch::eval
