// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file mask.hpp
/// HeadLayout and HeadMask: the decision variables of BOSCH.
///
/// Under grouped-query attention the KV cache is only saved when a whole KV
/// group is local, so the decision unit is one bit per (layer, KV head):
/// true = sliding-window attention (SWA), false = full attention. The query
/// heads of a group inherit its bit (query head h reads KV head
/// h / (num_query_heads / num_kv_heads), the Hugging Face repeat_kv layout).

#include <bosch/error.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace bosch {

/// Attention-head layout of a decoder, uniform across layers.
struct HeadLayout {
  int num_layers = 0;       ///< L
  int num_query_heads = 0;  ///< query heads per layer
  int num_kv_heads = 0;     ///< KV heads per layer; the decision unit

  /// Number of decision bits, L * Hkv.
  constexpr std::size_t size() const noexcept {
    return static_cast<std::size_t>(num_layers) * static_cast<std::size_t>(num_kv_heads);
  }
  /// Query heads per KV head (GQA group size).
  constexpr int group_size() const noexcept {
    return num_kv_heads > 0 ? num_query_heads / num_kv_heads : 0;
  }
  /// True when every count is positive and the query heads divide evenly into
  /// KV groups.
  constexpr bool valid() const noexcept {
    return num_layers > 0 && num_kv_heads > 0 && num_query_heads >= num_kv_heads &&
           num_query_heads % num_kv_heads == 0;
  }
  friend constexpr bool operator==(const HeadLayout&, const HeadLayout&) = default;
};

/// The compact text form "LxHqxHkv" (layers x query heads x KV heads, e.g.
/// "30x9x3"), as printed in messages, mask metadata and checkpoints.
inline std::string to_string(const HeadLayout& l) {
  return std::to_string(l.num_layers) + "x" + std::to_string(l.num_query_heads) + "x" +
         std::to_string(l.num_kv_heads);
}

/// Parses "LxHqxHkv" (or "LxHkv", meaning as many query heads as KV heads;
/// 'x' or 'X'). Throws bosch::invalid_argument (where = "layout") when the
/// text is malformed or the layout is invalid.
inline HeadLayout parse_layout(std::string_view text) {
  auto bad = [&] {
    return invalid_argument("expected LxHqxHkv (layers x query heads x KV heads, e.g. 30x9x3), got '" +
                                std::string(text) + "'",
                            "layout");
  };
  std::vector<int> parts;
  std::size_t pos = 0;
  while (pos <= text.size()) {
    std::size_t x = text.find_first_of("xX", pos);
    if (x == std::string_view::npos) x = text.size();
    const std::string_view part = text.substr(pos, x - pos);
    if (part.empty() || part.size() > 7 || part.find_first_not_of("0123456789") != std::string_view::npos)
      throw bad();
    int v = 0;
    for (char c : part) v = v * 10 + (c - '0');
    parts.push_back(v);
    pos = x + 1;
  }
  HeadLayout l;
  if (parts.size() == 3)
    l = {parts[0], parts[1], parts[2]};
  else if (parts.size() == 2)
    l = {parts[0], parts[1], parts[1]};
  else
    throw bad();
  if (l.num_layers < 1 || l.num_query_heads < 1 || l.num_kv_heads < 1)
    throw invalid_argument("every count must be at least 1, got '" + std::string(text) + "'", "layout");
  if (l.num_query_heads % l.num_kv_heads != 0)
    throw invalid_argument(std::to_string(l.num_query_heads) + " query heads are not a multiple of " +
                               std::to_string(l.num_kv_heads) + " KV heads in '" + std::string(text) + "'",
                           "layout");
  if (!l.valid()) throw bad();
  return l;
}

/// Throws bosch::invalid_argument naming `what` unless `layout.valid()`.
inline void check_layout(const HeadLayout& layout, const std::string& what = "head layout") {
  if (!layout.valid())
    throw invalid_argument("invalid layout " + to_string(layout) +
                               " (layers x query heads x KV heads: counts must be positive and KV "
                               "heads must divide query heads)",
                           what);
}

/// The number of SWA heads a target ratio asks for: round(rho * L * Hkv),
/// halves rounded up. Throws bosch::invalid_argument unless 0 < rho < 1.
inline std::size_t target_count(const HeadLayout& layout, double rho) {
  if (!(rho > 0.0 && rho < 1.0))
    throw invalid_argument("SWA ratio must lie in (0, 1), got " + std::to_string(rho), "target_ratio");
  return static_cast<std::size_t>(std::floor(rho * static_cast<double>(layout.size()) + 0.5));
}

/// target_count(layout, rho), refused when it is 0 or every head: such a
/// search has nothing to choose (it would write all-full or all-SWA). The
/// bosch::invalid_argument (where = `what`) gives the count and the ratios
/// nearest to rho that leave a choice (1 and N - 1 SWA heads).
inline std::size_t checked_target_count(const HeadLayout& layout, double rho,
                                        const std::string& what = "target_ratio") {
  const std::size_t n = layout.size(), t = target_count(layout, rho);
  if (t > 0 && t < n) return t;
  auto text = [](double x) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.4g", x);
    return std::string(buf);
  };
  if (n < 2)
    throw invalid_argument("a layout of " + std::to_string(n) + " KV head leaves no choice of SWA heads", what);
  const double dn = static_cast<double>(n);
  throw invalid_argument("ratio " + text(rho) + " gives " + std::to_string(t) + " of " + std::to_string(n) +
                             " KV heads SWA (round(ratio * " + std::to_string(n) +
                             ")), leaving nothing to choose; the nearest ratios that do are " + text(1.0 / dn) +
                             " (1 head) and " + text((dn - 1.0) / dn) + " (" + std::to_string(n - 1) + " heads)",
                         what);
}

/// One bit per (layer, KV head); true = sliding-window head. Stored
/// layer-major: index = layer * num_kv_heads + kv.
class HeadMask {
 public:
  HeadMask() = default;
  /// All-full mask (every bit false) for `layout`; throws on an invalid layout.
  explicit HeadMask(HeadLayout layout) : layout_(layout) {
    check_layout(layout);
    bits_.assign(layout.size(), 0);
  }
  /// Mask with every bit set to `swa`.
  static HeadMask filled(HeadLayout layout, bool swa) {
    HeadMask m(layout);
    std::fill(m.bits_.begin(), m.bits_.end(), static_cast<std::uint8_t>(swa));
    return m;
  }

  const HeadLayout& layout() const noexcept { return layout_; }
  /// Number of bits (L * Hkv).
  std::size_t size() const noexcept { return bits_.size(); }

  /// Flat index of (layer, kv); checked.
  std::size_t index(int layer, int kv) const {
    if (layer < 0 || layer >= layout_.num_layers || kv < 0 || kv >= layout_.num_kv_heads)
      throw invalid_argument("head (" + std::to_string(layer) + ", " + std::to_string(kv) +
                             ") outside layout " + to_string(layout_));
    return static_cast<std::size_t>(layer) * static_cast<std::size_t>(layout_.num_kv_heads) +
           static_cast<std::size_t>(kv);
  }
  /// True when KV head `kv` of `layer` uses a sliding window.
  bool swa(int layer, int kv) const { return bits_[index(layer, kv)] != 0; }
  void set(int layer, int kv, bool swa) { bits_[index(layer, kv)] = swa ? 1 : 0; }
  /// Bit by flat (layer-major) index; unchecked.
  bool operator[](std::size_t i) const noexcept { return bits_[i] != 0; }
  void set_flat(std::size_t i, bool swa) noexcept { bits_[i] = swa ? 1 : 0; }
  /// True when query head `q` of `layer` uses a sliding window (inherits its KV group's bit).
  bool swa_query(int layer, int q) const { return swa(layer, q / layout_.group_size()); }

  /// Number of SWA heads.
  std::size_t count() const noexcept {
    std::size_t n = 0;
    for (auto b : bits_) n += b;
    return n;
  }
  /// Number of SWA heads in one layer.
  int count_in_layer(int layer) const {
    int n = 0;
    for (int kv = 0; kv < layout_.num_kv_heads; ++kv) n += swa(layer, kv);
    return n;
  }
  /// Fraction of KV heads that are SWA (0 for an empty mask).
  double ratio() const noexcept {
    return bits_.empty() ? 0.0 : static_cast<double>(count()) / static_cast<double>(bits_.size());
  }
  /// The raw bits, layer-major (0 or 1).
  const std::vector<std::uint8_t>& bits() const noexcept { return bits_; }

  friend bool operator==(const HeadMask& a, const HeadMask& b) {
    return a.layout_ == b.layout_ && a.bits_ == b.bits_;
  }

  /// FNV-1a over layout and bits; stable across platforms and runs.
  std::uint64_t hash() const noexcept {
    std::uint64_t h = 1469598103934665603ull;
    auto mix = [&h](std::uint64_t v) {
      h ^= v;
      h *= 1099511628211ull;
    };
    mix(static_cast<std::uint64_t>(layout_.num_layers));
    mix(static_cast<std::uint64_t>(layout_.num_query_heads));
    mix(static_cast<std::uint64_t>(layout_.num_kv_heads));
    for (auto b : bits_) mix(b);
    return h;
  }

 private:
  HeadLayout layout_{};
  std::vector<std::uint8_t> bits_;
};


// --- set comparisons and text form (search core helpers) ----------------------

namespace detail {
inline void check_same_layout(const HeadMask& a, const HeadMask& b, const char* what) {
  if (!(a.layout() == b.layout()))
    throw invalid_argument("masks have different layouts (" + to_string(a.layout()) + " vs " +
                               to_string(b.layout()) + ")",
                           what);
}
}  // namespace detail

/// Geometrically normalized turnover between the SWA-head sets S(a) and S(b):
///
///     T(a, b) = |S(a) \ S(b)| / sqrt(|S(a)| * |S(b)|)
///
/// For a lower-ratio mask `a` and a higher-ratio mask `b` this counts the heads
/// that are SWA at the lower ratio but go back to full attention at the higher
/// one; a nested (fixed-ranking) family gives 0. The formula is a
/// reconstruction (docs/algorithm.md §Turnover: the paper reports a
/// "geometrically normalized turnover rate" of 26-44% without the formula).
/// Returns 0 when either set is empty. Throws bosch::invalid_argument when the
/// layouts differ.
inline double turnover(const HeadMask& a, const HeadMask& b) {
  detail::check_same_layout(a, b, "turnover");
  std::size_t na = 0, nb = 0, only_a = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    na += a[i];
    nb += b[i];
    only_a += (a[i] && !b[i]);
  }
  if (na == 0 || nb == 0) return 0.0;
  return static_cast<double>(only_a) / std::sqrt(static_cast<double>(na) * static_cast<double>(nb));
}

/// Jaccard distance between the SWA-head sets: 1 - |S(a) n S(b)| / |S(a) u S(b)|.
/// 0 for identical sets (and for two empty sets), 1 for disjoint non-empty
/// sets. Throws bosch::invalid_argument when the layouts differ.
inline double jaccard_distance(const HeadMask& a, const HeadMask& b) {
  detail::check_same_layout(a, b, "jaccard_distance");
  std::size_t inter = 0, uni = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    inter += (a[i] && b[i]);
    uni += (a[i] || b[i]);
  }
  if (uni == 0) return 0.0;
  return 1.0 - static_cast<double>(inter) / static_cast<double>(uni);
}

/// Text grid: one line per layer (layer 0 first), one character per KV head,
/// `swa_char` for a sliding-window head and `full_char` for full attention;
/// every line ends with '\n'. Example for 2 layers x 4 KV heads: "S..S\n.SS.\n".
inline std::string to_grid(const HeadMask& mask, char swa_char = 'S', char full_char = '.') {
  const auto& lay = mask.layout();
  std::string out;
  out.reserve(mask.size() + static_cast<std::size_t>(lay.num_layers));
  for (int l = 0; l < lay.num_layers; ++l) {
    for (int k = 0; k < lay.num_kv_heads; ++k) out += mask.swa(l, k) ? swa_char : full_char;
    out += '\n';
  }
  return out;
}

/// Parses the text grid written by to_grid(): one non-empty line per layer,
/// each of the same length (= KV heads per layer); `swa_char` marks a SWA head
/// and `full_char` a full head; '\r' and trailing blank lines are ignored.
/// `num_query_heads` (the grid does not carry it) defaults to the KV head
/// count. Throws bosch::format_error (where = `where`, e.g. the file name)
/// naming the line and column of an unexpected character or a ragged line.
inline HeadMask mask_from_grid(const std::string& text, int num_query_heads = 0,
                               const std::string& where = "grid", char swa_char = 'S',
                               char full_char = '.') {
  std::vector<std::string> lines;
  std::string cur;
  for (char c : text) {
    if (c == '\r') continue;
    if (c == '\n') {
      lines.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  if (!cur.empty()) lines.push_back(cur);
  while (!lines.empty() && lines.back().empty()) lines.pop_back();
  if (lines.empty()) throw format_error("empty head-mask grid", where);
  const std::size_t width = lines.front().size();
  if (width == 0) throw format_error("line 1: empty line in head-mask grid", where);
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].size() != width)
      throw format_error("line " + std::to_string(i + 1) + ": " + std::to_string(lines[i].size()) +
                             " heads, expected " + std::to_string(width) + " (ragged grid)",
                         where);
    for (std::size_t j = 0; j < width; ++j)
      if (lines[i][j] != swa_char && lines[i][j] != full_char)
        throw format_error("line " + std::to_string(i + 1) + ", column " + std::to_string(j + 1) +
                               ": unexpected character '" + std::string(1, lines[i][j]) +
                               "' (expected '" + std::string(1, swa_char) + "' or '" +
                               std::string(1, full_char) + "')",
                           where);
  }
  HeadLayout lay{static_cast<int>(lines.size()),
                 num_query_heads > 0 ? num_query_heads : static_cast<int>(width),
                 static_cast<int>(width)};
  if (!lay.valid())
    throw format_error("grid of " + std::to_string(width) + " KV heads per layer does not fit " +
                           std::to_string(lay.num_query_heads) + " query heads",
                       where);
  HeadMask m(lay);
  for (int l = 0; l < lay.num_layers; ++l)
    for (int k = 0; k < lay.num_kv_heads; ++k)
      m.set(l, k, lines[static_cast<std::size_t>(l)][static_cast<std::size_t>(k)] == swa_char);
  return m;
}

/// Number of SWA heads in each layer, layer 0 first.
inline std::vector<int> layer_counts(const HeadMask& mask) {
  std::vector<int> out(static_cast<std::size_t>(mask.layout().num_layers));
  for (int l = 0; l < mask.layout().num_layers; ++l)
    out[static_cast<std::size_t>(l)] = mask.count_in_layer(l);
  return out;
}

}  // namespace bosch

template <>
struct std::hash<bosch::HeadMask> {
  std::size_t operator()(const bosch::HeadMask& m) const noexcept {
    return static_cast<std::size_t>(m.hash());
  }
};
