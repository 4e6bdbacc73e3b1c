// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file io/svg.hpp
/// A small SVG writer for the figures bosch produces (header-only): a grid
/// map (heat map or categorical map, e.g. the SWA/full head map of a mask) and
/// a line plot with axes, ticks and a legend. Output is a self-contained SVG
/// 1.1 document (no scripts, no external fonts; text in the generic
/// sans-serif family), deterministic for the same input.
///
/// @code
/// bosch::io::LinePlot p;
/// p.title = "held-out score vs SWA ratio";
/// p.x_label = "SWA ratio";
/// p.y_label = "accuracy";
/// p.series.push_back({"BOSCH", {0.25, 0.5, 0.75}, {0.9, 0.8, 0.5}});
/// bosch::io::write_svg("plot.svg", bosch::io::line_plot_svg(p));
/// bosch::io::write_svg("mask.svg", bosch::io::head_map_svg(mask, "SmolLM2 at 50%"));
/// @endcode

#include <bosch/error.hpp>
#include <bosch/io/atomic_file.hpp>
#include <bosch/mask.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

namespace bosch::io {

/// One colour class of a categorical grid map.
struct GridCategory {
  double value = 0;   ///< cells with exactly this value get this class
  std::string color;  ///< CSS colour ("#d62728")
  std::string label;  ///< legend text
};

/// A rows x cols grid of coloured cells with labelled axes.
struct GridMap {
  std::string title;    ///< drawn above the grid (may be empty)
  std::string x_label;  ///< under the columns, e.g. "KV head"
  std::string y_label;  ///< beside the rows, e.g. "layer"
  int rows = 0;
  int cols = 0;
  std::vector<double> values;  ///< rows*cols, row-major (row 0 drawn at the top); NaN = blank
  std::vector<std::string> row_labels;  ///< optional, one per row (default: 0, 1, ...)
  std::vector<std::string> col_labels;  ///< optional, one per column (default: 0, 1, ...)
  /// Non-empty: categorical colouring (a cell whose value matches no category
  /// is drawn blank) with a legend of the categories. Empty: continuous
  /// colouring from low_color to high_color over [min_value, max_value]
  /// (NaN bounds = the data's range) with a gradient legend.
  std::vector<GridCategory> categories;
  std::string low_color = "#f7fbff";
  std::string high_color = "#08306b";
  double min_value = std::numeric_limits<double>::quiet_NaN();
  double max_value = std::numeric_limits<double>::quiet_NaN();
  bool show_values = false;  ///< print each value (printf "%.3g") in its cell
  double cell_size = 18;     ///< cell edge in px (cells are square)
};

/// One line of a LinePlot.
struct Series {
  std::string name;       ///< legend entry (may be empty: no entry)
  std::vector<double> x;  ///< x values (same length as y; NaN points are skipped)
  std::vector<double> y;
  std::string color;    ///< empty = the built-in palette in series order
  bool markers = true;  ///< draw a dot at each point
  bool dashed = false;
  /// Optional error bars: the interval [y_low[i], y_high[i]] of each point
  /// (both empty = none; else the length of y; NaN bounds = no bar).
  std::vector<double> y_low, y_high;
};

/// A line plot with axes, ticks, grid lines and a legend.
struct LinePlot {
  std::string title;
  std::string x_label;
  std::string y_label;
  std::vector<Series> series;
  double width = 640;   ///< px
  double height = 400;  ///< px
  /// Axis ranges; NaN = the data's range (padded to nice tick values).
  double x_min = std::numeric_limits<double>::quiet_NaN();
  double x_max = std::numeric_limits<double>::quiet_NaN();
  double y_min = std::numeric_limits<double>::quiet_NaN();
  double y_max = std::numeric_limits<double>::quiet_NaN();
};

namespace svg_detail {

inline std::string escape(std::string_view s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&': o += "&amp;"; break;
      case '<': o += "&lt;"; break;
      case '>': o += "&gt;"; break;
      case '"': o += "&quot;"; break;
      default: o += c;
    }
  }
  return o;
}

inline std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  std::string s = buf;
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

inline std::string tick_text(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.6g", std::abs(v) < 1e-12 ? 0.0 : v);
  return buf;
}

inline std::string text(double x, double y, std::string_view s, const char* anchor = "middle",
                        double size = 12, const char* extra = "") {
  return "<text x=\"" + num(x) + "\" y=\"" + num(y) + "\" font-size=\"" + num(size) +
         "\" text-anchor=\"" + anchor + "\"" + extra + ">" + escape(s) + "</text>\n";
}

inline std::string header(double w, double h) {
  return "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<svg xmlns=\"http://www.w3.org/2000/svg\" "
         "version=\"1.1\" width=\"" +
         num(w) + "\" height=\"" + num(h) + "\" viewBox=\"0 0 " + num(w) + " " + num(h) +
         "\" font-family=\"sans-serif\">\n<rect width=\"100%\" "
         "height=\"100%\" fill=\"white\"/>\n";
}

/// Parses "#rrggbb" (anything else: black).
inline void rgb(const std::string& c, int out[3]) {
  out[0] = out[1] = out[2] = 0;
  if (c.size() != 7 || c[0] != '#') return;
  for (int i = 0; i < 3; ++i)
    out[i] = static_cast<int>(std::strtol(c.substr(1 + 2 * i, 2).c_str(), nullptr, 16));
}

inline std::string mix(const std::string& a, const std::string& b, double t) {
  int ca[3], cb[3];
  rgb(a, ca);
  rgb(b, cb);
  t = std::clamp(t, 0.0, 1.0);
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x",
                static_cast<int>(std::lround(ca[0] + (cb[0] - ca[0]) * t)),
                static_cast<int>(std::lround(ca[1] + (cb[1] - ca[1]) * t)),
                static_cast<int>(std::lround(ca[2] + (cb[2] - ca[2]) * t)));
  return buf;
}

/// About `target` "nice" ticks (1, 2, 5 x 10^k steps) covering [lo, hi].
inline std::vector<double> nice_ticks(double& lo, double& hi, int target = 6) {
  if (!(hi > lo)) {
    const double pad = lo == 0 ? 1.0 : std::abs(lo) * 0.1;
    lo -= pad;
    hi += pad;
  }
  const double raw = (hi - lo) / std::max(1, target - 1);
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  double step = mag;
  for (double m : {1.0, 2.0, 2.5, 5.0, 10.0})
    if (m * mag >= raw) {
      step = m * mag;
      break;
    }
  lo = std::floor(lo / step + 1e-9) * step;
  hi = std::ceil(hi / step - 1e-9) * step;
  std::vector<double> t;
  for (double v = lo; v <= hi + step * 1e-6; v += step) t.push_back(v);
  return t;
}

inline const char* palette(std::size_t i) {
  static const char* colors[] = {"#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd",
                                 "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
  return colors[i % 10];
}

}  // namespace svg_detail

/// The SVG document of a grid map. Throws bosch::invalid_argument when
/// rows/cols are not positive or values/labels have the wrong length.
inline std::string grid_map_svg(const GridMap& g) {
  using namespace svg_detail;
  if (g.rows <= 0 || g.cols <= 0)
    throw invalid_argument("rows and cols must be positive", "grid_map_svg");
  if (g.values.size() != static_cast<std::size_t>(g.rows) * static_cast<std::size_t>(g.cols))
    throw invalid_argument("values must hold rows*cols entries", "grid_map_svg");
  if (!g.row_labels.empty() && g.row_labels.size() != static_cast<std::size_t>(g.rows))
    throw invalid_argument("row_labels must be empty or hold one label per row", "grid_map_svg");
  if (!g.col_labels.empty() && g.col_labels.size() != static_cast<std::size_t>(g.cols))
    throw invalid_argument("col_labels must be empty or hold one label per column", "grid_map_svg");
  const double cs = g.cell_size > 0 ? g.cell_size : 18;
  auto row_label = [&](int r) {
    return g.row_labels.empty() ? std::to_string(r) : g.row_labels[static_cast<std::size_t>(r)];
  };
  auto col_label = [&](int c) {
    return g.col_labels.empty() ? std::to_string(c) : g.col_labels[static_cast<std::size_t>(c)];
  };
  std::size_t max_row_label = 1;
  for (int r = 0; r < g.rows; ++r) max_row_label = std::max(max_row_label, row_label(r).size());

  const double left = 30 + 7.0 * static_cast<double>(max_row_label) + 8;
  const double top = g.title.empty() ? 20 : 44;
  const double grid_w = cs * g.cols, grid_h = cs * g.rows;
  const double legend_w = 150;
  const double width = left + grid_w + 20 + legend_w;
  const double height = std::max(
      top + grid_h + 50,
      top + 30.0 * static_cast<double>(std::max<std::size_t>(2, g.categories.size())) + 20);

  double lo = g.min_value, hi = g.max_value;
  if (g.categories.empty() && (std::isnan(lo) || std::isnan(hi))) {
    double dlo = std::numeric_limits<double>::infinity(), dhi = -dlo;
    for (double v : g.values)
      if (std::isfinite(v)) {
        dlo = std::min(dlo, v);
        dhi = std::max(dhi, v);
      }
    if (!std::isfinite(dlo)) dlo = 0, dhi = 1;
    if (std::isnan(lo)) lo = dlo;
    if (std::isnan(hi)) hi = dhi;
  }
  auto color_of = [&](double v) -> std::string {
    if (std::isnan(v)) return {};
    if (!g.categories.empty()) {
      for (const auto& c : g.categories)
        if (c.value == v) return c.color;
      return {};
    }
    return mix(g.low_color, g.high_color, hi > lo ? (v - lo) / (hi - lo) : 0.5);
  };

  std::string s = header(width, height);
  if (!g.title.empty())
    s += text(left + grid_w / 2, 24, g.title, "middle", 14, " font-weight=\"bold\"");
  for (int r = 0; r < g.rows; ++r) {
    for (int c = 0; c < g.cols; ++c) {
      const double v = g.values[static_cast<std::size_t>(r) * static_cast<std::size_t>(g.cols) +
                                static_cast<std::size_t>(c)];
      const std::string col = color_of(v);
      s += "<rect x=\"" + num(left + cs * c) + "\" y=\"" + num(top + cs * r) + "\" width=\"" +
           num(cs) + "\" height=\"" + num(cs) + "\" fill=\"" +
           (col.empty() ? std::string("none") : col) +
           "\" stroke=\"#ffffff\" stroke-width=\"1\"><title>" + escape(row_label(r)) + ", " +
           escape(col_label(c)) + ": " + tick_text(v) + "</title></rect>\n";
      if (g.show_values && std::isfinite(v)) {
        const bool dark = !g.categories.empty() ? false : (hi > lo && (v - lo) / (hi - lo) > 0.6);
        s += text(left + cs * (c + 0.5), top + cs * (r + 0.5) + 3.5, tick_text(v), "middle",
                  std::min(10.0, cs * 0.45), dark ? " fill=\"white\"" : "");
      }
    }
  }
  s += "<rect x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(grid_w) +
       "\" height=\"" + num(grid_h) + "\" fill=\"none\" stroke=\"#333333\" stroke-width=\"1\"/>\n";
  // Axis labels: every row/column when they fit, else every k-th.
  const int row_step = std::max(1, static_cast<int>(std::ceil(11.0 / cs)));
  for (int r = 0; r < g.rows; r += row_step)
    s += text(left - 4, top + cs * (r + 0.5) + 4, row_label(r), "end", 10);
  std::size_t max_col_label = 1;
  for (int c = 0; c < g.cols; ++c) max_col_label = std::max(max_col_label, col_label(c).size());
  const int col_step =
      std::max(1, static_cast<int>(std::ceil((6.5 * static_cast<double>(max_col_label) + 3) / cs)));
  for (int c = 0; c < g.cols; c += col_step)
    s += text(left + cs * (c + 0.5), top + grid_h + 13, col_label(c), "middle", 10);
  if (!g.x_label.empty()) s += text(left + grid_w / 2, top + grid_h + 32, g.x_label, "middle", 12);
  if (!g.y_label.empty()) {
    const double x = 14, y = top + grid_h / 2;
    s += "<text x=\"" + num(x) + "\" y=\"" + num(y) +
         "\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 " + num(x) + " " +
         num(y) + ")\">" + escape(g.y_label) + "</text>\n";
  }
  // Legend.
  const double lx = left + grid_w + 20;
  if (!g.categories.empty()) {
    double ly = top;
    for (const auto& c : g.categories) {
      s += "<rect x=\"" + num(lx) + "\" y=\"" + num(ly) + "\" width=\"14\" height=\"14\" fill=\"" +
           c.color + "\" stroke=\"#333333\" stroke-width=\"0.5\"/>\n";
      s += text(lx + 20, ly + 11, c.label, "start", 11);
      ly += 22;
    }
  } else {
    const double bar_h = std::max(60.0, std::min(grid_h, 160.0));
    s += "<defs><linearGradient id=\"scale\" x1=\"0\" y1=\"1\" x2=\"0\" y2=\"0\"><stop "
         "offset=\"0\" stop-color=\"" +
         g.low_color + "\"/><stop offset=\"1\" stop-color=\"" + g.high_color +
         "\"/></linearGradient></defs>\n";
    s += "<rect x=\"" + num(lx) + "\" y=\"" + num(top) + "\" width=\"14\" height=\"" + num(bar_h) +
         "\" fill=\"url(#scale)\" stroke=\"#333333\" stroke-width=\"0.5\"/>\n";
    s += text(lx + 20, top + 10, tick_text(hi), "start", 11);
    s += text(lx + 20, top + bar_h, tick_text(lo), "start", 11);
  }
  s += "</svg>\n";
  return s;
}

/// The head map of a mask: layers as rows (layer 0 at the top), KV heads as
/// columns; SWA heads in orange, full-attention heads in blue, with a legend
/// giving the counts.
inline std::string head_map_svg(const HeadMask& mask, const std::string& title = {}) {
  const auto& l = mask.layout();
  GridMap g;
  g.title = title;
  g.x_label = "KV head";
  g.y_label = "layer";
  g.rows = l.num_layers;
  g.cols = l.num_kv_heads;
  g.values.resize(mask.size());
  for (std::size_t i = 0; i < mask.size(); ++i) g.values[i] = mask[i] ? 1.0 : 0.0;
  const std::size_t swa = mask.count();
  g.categories = {{1.0, "#ff7f0e", "SWA (" + std::to_string(swa) + ")"},
                  {0.0, "#1f77b4", "full (" + std::to_string(mask.size() - swa) + ")"}};
  g.cell_size = l.num_kv_heads <= 4 ? 22 : (l.num_kv_heads <= 16 ? 18 : 12);
  return grid_map_svg(g);
}

/// The SVG document of a line plot (error bars included in the y range).
/// Throws bosch::invalid_argument when a series has x and y (or y and
/// non-empty error bounds) of different lengths.
inline std::string line_plot_svg(const LinePlot& p) {
  using namespace svg_detail;
  double xlo = std::numeric_limits<double>::infinity(), xhi = -xlo, ylo = xlo, yhi = -xlo;
  for (const auto& se : p.series) {
    if (se.x.size() != se.y.size())
      throw invalid_argument("series '" + se.name + "': x and y differ in length", "line_plot_svg");
    const bool bars = !se.y_low.empty() || !se.y_high.empty();
    if (bars && (se.y_low.size() != se.y.size() || se.y_high.size() != se.y.size()))
      throw invalid_argument("series '" + se.name + "': error bounds and y differ in length", "line_plot_svg");
    for (std::size_t i = 0; i < se.x.size(); ++i) {
      if (!std::isfinite(se.x[i]) || !std::isfinite(se.y[i])) continue;
      xlo = std::min(xlo, se.x[i]);
      xhi = std::max(xhi, se.x[i]);
      ylo = std::min(ylo, se.y[i]);
      yhi = std::max(yhi, se.y[i]);
      if (bars && std::isfinite(se.y_low[i]) && std::isfinite(se.y_high[i])) {
        ylo = std::min(ylo, se.y_low[i]);
        yhi = std::max(yhi, se.y_high[i]);
      }
    }
  }
  if (!std::isfinite(xlo)) xlo = 0, xhi = 1, ylo = 0, yhi = 1;
  if (!std::isnan(p.x_min)) xlo = p.x_min;
  if (!std::isnan(p.x_max)) xhi = p.x_max;
  if (!std::isnan(p.y_min)) ylo = p.y_min;
  if (!std::isnan(p.y_max)) yhi = p.y_max;
  const auto xt = nice_ticks(xlo, xhi), yt = nice_ticks(ylo, yhi);

  std::size_t named = 0, longest = 0;
  for (const auto& se : p.series)
    if (!se.name.empty()) ++named, longest = std::max(longest, se.name.size());
  const double legend_w = named ? 36 + 6.5 * static_cast<double>(longest) : 0;
  const double left = 64, right = 16 + legend_w, top = p.title.empty() ? 16 : 36, bottom = 52;
  const double w = std::max(p.width, left + right + 100), h = std::max(p.height, top + bottom + 80);
  const double pw = w - left - right, ph = h - top - bottom;
  auto X = [&](double v) { return left + (v - xlo) / (xhi - xlo) * pw; };
  auto Y = [&](double v) { return top + ph - (v - ylo) / (yhi - ylo) * ph; };

  std::string s = header(w, h);
  if (!p.title.empty())
    s += text(left + pw / 2, 22, p.title, "middle", 14, " font-weight=\"bold\"");
  for (double v : xt) {
    s += "<line x1=\"" + num(X(v)) + "\" y1=\"" + num(top) + "\" x2=\"" + num(X(v)) + "\" y2=\"" +
         num(top + ph) + "\" stroke=\"#e0e0e0\" stroke-width=\"1\"/>\n";
    s += text(X(v), top + ph + 16, tick_text(v), "middle", 11);
  }
  for (double v : yt) {
    s += "<line x1=\"" + num(left) + "\" y1=\"" + num(Y(v)) + "\" x2=\"" + num(left + pw) +
         "\" y2=\"" + num(Y(v)) + "\" stroke=\"#e0e0e0\" stroke-width=\"1\"/>\n";
    s += text(left - 6, Y(v) + 4, tick_text(v), "end", 11);
  }
  s += "<rect x=\"" + num(left) + "\" y=\"" + num(top) + "\" width=\"" + num(pw) + "\" height=\"" +
       num(ph) + "\" fill=\"none\" stroke=\"#333333\" stroke-width=\"1\"/>\n";
  if (!p.x_label.empty()) s += text(left + pw / 2, h - 12, p.x_label, "middle", 12);
  if (!p.y_label.empty()) {
    const double x = 16, y = top + ph / 2;
    s += "<text x=\"" + num(x) + "\" y=\"" + num(y) +
         "\" font-size=\"12\" text-anchor=\"middle\" transform=\"rotate(-90 " + num(x) + " " +
         num(y) + ")\">" + escape(p.y_label) + "</text>\n";
  }
  double ly = top + 8;
  for (std::size_t i = 0; i < p.series.size(); ++i) {
    const auto& se = p.series[i];
    const std::string color = se.color.empty() ? palette(i) : se.color;
    const std::string dash = se.dashed ? " stroke-dasharray=\"6 4\"" : "";
    std::string pts;
    for (std::size_t k = 0; k < se.x.size(); ++k) {
      if (!std::isfinite(se.x[k]) || !std::isfinite(se.y[k])) continue;
      if (!pts.empty()) pts += ' ';
      pts += num(X(se.x[k])) + "," + num(Y(se.y[k]));
      if (!se.y_low.empty() && std::isfinite(se.y_low[k]) && std::isfinite(se.y_high[k])) {
        const std::string x = num(X(se.x[k])), a = num(Y(se.y_low[k])), b = num(Y(se.y_high[k]));
        const std::string l = num(X(se.x[k]) - 3), r = num(X(se.x[k]) + 3);
        s += "<path d=\"M" + x + " " + a + "V" + b + "M" + l + " " + a + "H" + r + "M" + l + " " + b + "H" + r +
             "\" fill=\"none\" stroke=\"" + color + "\" stroke-width=\"1\" opacity=\"0.7\"/>\n";
      }
      if (se.markers)
        s += "<circle cx=\"" + num(X(se.x[k])) + "\" cy=\"" + num(Y(se.y[k])) +
             "\" r=\"3\" fill=\"" + color + "\"><title>" + escape(se.name) + ": (" +
             tick_text(se.x[k]) + ", " + tick_text(se.y[k]) + ")</title></circle>\n";
    }
    if (!pts.empty())
      s += "<polyline points=\"" + pts + "\" fill=\"none\" stroke=\"" + color +
           "\" stroke-width=\"2\"" + dash + "/>\n";
    if (!se.name.empty()) {
      const double lx = left + pw + 14;
      s += "<line x1=\"" + num(lx) + "\" y1=\"" + num(ly) + "\" x2=\"" + num(lx + 20) + "\" y2=\"" +
           num(ly) + "\" stroke=\"" + color + "\" stroke-width=\"2\"" + dash + "/>\n";
      s += text(lx + 26, ly + 4, se.name, "start", 11);
      ly += 18;
    }
  }
  s += "</svg>\n";
  return s;
}

/// Writes an SVG document atomically (bosch::file_error on failure).
inline void write_svg(const std::filesystem::path& path, const std::string& svg) {
  write_file_atomic(path, svg);
}

}  // namespace bosch::io
