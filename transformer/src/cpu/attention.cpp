// SPDX-License-Identifier: Apache-2.0
// Tiled windowed grouped-query attention with an online softmax, and the
// exact per-head attention statistics.

#include <bosch/cpu/attention.hpp>
#include <bosch/cpu/kernels.hpp>
#include <bosch/error.hpp>

#include "attention_bf16.hpp"
#include "eigen.hpp"
#include "simd.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <string>

namespace bosch::cpu {
namespace {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using ConstStrided = Eigen::Map<const RowMatrix, 0, Eigen::OuterStride<>>;
constexpr float neg_inf = -std::numeric_limits<float>::infinity();

/// A half-open range of key positions (relative to the sequence).
struct KeyRange {
  int begin = 0;
  int end = 0;
};

/// The window a head really needs for a sequence of n rows: a window at
/// least as long as the sequence sees every earlier key, so it runs as a
/// full head (same tiles, bitwise the same result).
HeadWindow effective(const HeadWindow& w, int n) {
  if (w.full() || w.window >= n) return {};
  return w;
}

/// Key ranges visible to some row of the query rows [i0, i1) (at most 2).
int key_ranges(const HeadWindow& w, int i0, int i1, KeyRange out[2]) {
  if (w.full()) {
    out[0] = {0, i1};
    return 1;
  }
  const int lo = std::max(0, i0 - w.window + 1);
  const int s = std::min(w.sinks, i1);
  if (s >= lo) {
    out[0] = {0, i1};
    return 1;
  }
  int c = 0;
  if (s > 0) out[c++] = {0, s};
  out[c++] = {lo, i1};
  return c;
}

/// Visible keys of query row i inside [j0, j1): up to two intervals.
int row_intervals(const HeadWindow& w, int i, int j0, int j1, KeyRange out[2]) {
  int c = 0;
  auto add = [&](int a, int b) {
    a = std::max(a, j0);
    b = std::min(b, j1);
    if (a < b) out[c++] = {a, b};
  };
  if (w.full()) {
    add(0, i + 1);
    return c;
  }
  const int lo = std::max(0, i - w.window + 1);
  const int s = std::min(w.sinks, lo);  // sinks not already inside the window
  add(0, s);
  add(lo, i + 1);
  return c;
}

struct Item {
  int seq = 0;    // the sequence
  int base = 0;   // first row of the sequence in the packed key/value buffers
  std::ptrdiff_t qbase = 0;  // query row i sits at row qbase + i of q and out
  int n = 0;      // rows of the sequence
  int i0 = 0;     // first query row (relative)
  int i1 = 0;     // one past the last query row
  int kv = 0;
  HeadWindow window;
  std::size_t keys = 0;  // keys walked (sum of range lengths)
};

void check_shape(const AttentionShape& s, std::size_t windows) {
  if (s.num_heads <= 0 || s.num_kv_heads <= 0 || s.head_dim <= 0 || s.num_heads % s.num_kv_heads != 0)
    throw invalid_argument("bad attention shape: " + std::to_string(s.num_heads) + " query heads, " +
                               std::to_string(s.num_kv_heads) + " KV heads, head_dim " +
                               std::to_string(s.head_dim),
                           "attention");
  const auto hd = static_cast<std::size_t>(s.head_dim);
  if (s.q_stride < static_cast<std::size_t>(s.num_heads) * hd ||
      s.out_stride < static_cast<std::size_t>(s.num_heads) * hd ||
      s.kv_stride < static_cast<std::size_t>(s.num_kv_heads) * hd)
    throw invalid_argument("attention row strides smaller than the heads they hold", "attention");
  if (windows != static_cast<std::size_t>(s.num_kv_heads))
    throw invalid_argument("attention needs one window per KV head (" + std::to_string(s.num_kv_heads) +
                               "), got " + std::to_string(windows),
                           "attention");
}

}  // namespace

int query_tile(const AttentionTiles& tiles, const HeadWindow& window) {
  if (window.full()) return tiles.tile;
  if (tiles.swa_tile > 0) return tiles.swa_tile;
  int t = std::min(tiles.tile, std::max(16, window.window / 8));
  t = std::max(8, t / 8 * 8);
  return std::min(t, tiles.tile);
}

namespace {

/// The tiled kernel of attention() and attention_rows(): the query rows of
/// sequence b are [query_begin, n_b) (query_begin > 0 only with one sequence,
/// whose q and out then hold its rows from query_begin on).
AttentionWork tiled_attention(const float* q, const float* k, const float* v, float* out,
                              std::span<const int> offsets, int query_begin, const AttentionShape& shape,
                              std::span<const HeadWindow> windows, const AttentionTiles& tiles,
                              std::optional<Bf16Kernel> bf16) {
  check_shape(shape, windows.size());
  if (tiles.tile <= 0 || tiles.swa_tile < 0)
    throw invalid_argument("attention tile sizes must be positive", "tile");
  if (offsets.empty() || offsets.front() != 0)
    throw invalid_argument("sequence offsets must start at 0", "attention");
  for (std::size_t b = 1; b < offsets.size(); ++b)
    if (offsets[b] < offsets[b - 1]) throw invalid_argument("sequence offsets must not decrease", "attention");
  for (const auto& w : windows)
    if (w.window < 0 || w.sinks < 0) throw invalid_argument("negative window or sink count", "attention");

  const int G = shape.num_heads / shape.num_kv_heads;
  const int hd = shape.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));

  // Work items, largest first.
  std::vector<Item> items;
  AttentionWork work;
  int max_rows = 1;
  for (std::size_t b = 0; b + 1 < offsets.size(); ++b) {
    const int n = offsets[b + 1] - offsets[b];
    for (int g = 0; g < shape.num_kv_heads; ++g) {
      const HeadWindow w = effective(windows[g], n);
      const int t = std::max(1, query_tile(tiles, w));
      max_rows = std::max(max_rows, t);
      for (int i0 = query_begin; i0 < n; i0 += t) {
        Item it{static_cast<int>(b), offsets[b], static_cast<std::ptrdiff_t>(offsets[b]) - query_begin, n, i0,
                std::min(n, i0 + t), g, w, 0};
        KeyRange r[2];
        const int c = key_ranges(w, it.i0, it.i1, r);
        for (int x = 0; x < c; ++x) it.keys += static_cast<std::size_t>(r[x].end - r[x].begin);
        work.scores += it.keys * static_cast<std::size_t>(it.i1 - it.i0) * static_cast<std::size_t>(G);
        items.push_back(it);
      }
    }
  }
  work.items = items.size();
  std::stable_sort(items.begin(), items.end(), [](const Item& a, const Item& b) {
    return a.keys * static_cast<std::size_t>(a.i1 - a.i0) > b.keys * static_cast<std::size_t>(b.i1 - b.i0);
  });

  const int tk = tiles.tile;
  // Key chunks of at most 4 tiles (rounded up to multiples of 8 keys): fewer,
  // larger GEMMs and fewer softmax rescales; a window head's band usually fits
  // in one chunk.
  const int chunk_cols = 4 * ((tk + 7) / 8 * 8);
  const auto count = static_cast<std::ptrdiff_t>(items.size());
  // Threads only when there is enough work to pay for waking them (~1 MFLOP).
  const bool parallel = count > 1 && work.scores * static_cast<std::size_t>(hd) > 250000;
  // bf16: the keys and values rounded and packed once; chunks start at
  // multiples of 16 keys of their sequence (a panel of the packed keys).
  std::optional<detail::Bf16KeyValues> kv16;
  if (bf16) kv16.emplace(k, v, offsets, shape, *bf16);
  const std::size_t ldq = bf16_stride(hd), ldp = bf16_stride(chunk_cols);
#pragma omp parallel if (parallel)
  {
    RowMatrix qp(static_cast<Eigen::Index>(G) * max_rows, hd);
    RowMatrix acc(static_cast<Eigen::Index>(G) * max_rows, hd);
    RowMatrix s(static_cast<Eigen::Index>(G) * max_rows, chunk_cols);
    std::vector<float> m(static_cast<std::size_t>(G) * max_rows), l(m.size());
    Bf16Vector q16, p16;
    std::vector<float> pv;
    if (kv16) {
      q16.resize(static_cast<std::size_t>(G) * max_rows * ldq);
      p16.resize(static_cast<std::size_t>(G) * max_rows * ldp);
      pv.resize(static_cast<std::size_t>(G) * max_rows * hd);
    }

#pragma omp for schedule(dynamic, 1)
    for (std::ptrdiff_t idx = 0; idx < count; ++idx) {
      const Item& it = items[static_cast<std::size_t>(idx)];
      const int T = it.i1 - it.i0;
      const Eigen::Index R = static_cast<Eigen::Index>(G) * T;
      const HeadWindow& w = it.window;
      // Pack the group's query rows, scaled: row hh * T + r = query head g*G+hh at position i0+r.
      for (int hh = 0; hh < G; ++hh)
        for (int r = 0; r < T; ++r) {
          const float* src = q + static_cast<std::size_t>(it.qbase + it.i0 + r) * shape.q_stride +
                             static_cast<std::size_t>(it.kv * G + hh) * hd;
          float* dst = qp.data() + (static_cast<std::size_t>(hh) * T + r) * hd;
          for (int c = 0; c < hd; ++c) dst[c] = src[c] * scale;
        }
      auto Q = qp.topRows(R);
      auto A = acc.topRows(R);
      A.setZero();
      std::fill(m.begin(), m.begin() + R, neg_inf);
      std::fill(l.begin(), l.begin() + R, 0.0f);
      if (kv16)
        for (Eigen::Index r = 0; r < R; ++r)
          kv16->round(qp.data() + r * hd, static_cast<std::size_t>(hd), q16.data() + r * ldq, ldq);

      KeyRange ranges[2];
      int nr = key_ranges(w, it.i0, it.i1, ranges);
      // Chunk lengths: multiples of 8 keys (vector loops without scalar
      // tails); bf16: ranges widened to multiples of 16 of the sequence (the
      // extra keys are hidden like any invisible key), merged where they meet.
      const int align = kv16 ? 16 : 8;
      if (kv16) {
        const int padded = (it.n + 15) / 16 * 16;
        for (int x = 0; x < nr; ++x)
          ranges[x] = {ranges[x].begin / 16 * 16, std::min(padded, (ranges[x].end + 15) / 16 * 16)};
        if (nr == 2 && ranges[0].end >= ranges[1].begin) {
          ranges[0].end = ranges[1].end;
          nr = 1;
        }
      }
      for (int ri = 0; ri < nr; ++ri) {
        // Equal chunks.
        const int limit = chunk_cols;
        const int span = ranges[ri].end - ranges[ri].begin;
        const int chunks = (span + limit - 1) / limit;
        int step = chunks > 0 ? (span + chunks - 1) / chunks : limit;
        step = std::min(limit, (step + align - 1) / align * align);
        for (int j0 = ranges[ri].begin; j0 < ranges[ri].end; j0 += step) {
          const int len = std::min(step, ranges[ri].end - j0);
          const int j1 = j0 + len;
          const std::size_t col = static_cast<std::size_t>(it.kv) * hd;
          auto S = s.topLeftCorner(R, len);
          if (kv16) {
            kv16->scores(q16.data(), ldq, static_cast<std::size_t>(R), it.seq, it.kv, j0, len, s.data(),
                         static_cast<std::size_t>(chunk_cols));
          } else {
            ConstStrided K(k + static_cast<std::size_t>(it.base + j0) * shape.kv_stride + col, len, hd,
                           Eigen::OuterStride<>(static_cast<Eigen::Index>(shape.kv_stride)));
            S.noalias() = Q * K.transpose();
          }

          // Is every key of the chunk visible to every row?
          bool all_visible = j1 - 1 <= it.i0;
          if (all_visible && !w.full()) all_visible = j0 > it.i1 - 1 - w.window || j1 <= w.sinks;
          for (int r = 0; r < T; ++r) {
            const int i = it.i0 + r;
            KeyRange vis[2] = {{j0, j1}, {}};
            const int nv = all_visible ? 1 : row_intervals(w, i, j0, j1, vis);
            const bool whole = nv == 1 && vis[0].begin == j0 && vis[0].end == j1;
            for (int hh = 0; hh < G; ++hh) {
              const Eigen::Index row = static_cast<Eigen::Index>(hh) * T + r;
              float* srow = s.data() + row * chunk_cols;
              if (nv == 0) {  // nothing visible in this chunk
                std::fill(srow, srow + len, 0.0f);
                continue;
              }
              // Invisible keys: -inf for the max, exact zeros after the exponential.
              auto for_hidden = [&](auto&& f) {
                int pos = 0;
                for (int x = 0; x < nv; ++x) {
                  f(pos, vis[x].begin - j0);
                  pos = vis[x].end - j0;
                }
                f(pos, len);
              };
              if (!whole) for_hidden([&](int a, int b) { std::fill(srow + a, srow + b, neg_inf); });
              const float m_new = std::max(m[row], simd::row_max(srow, static_cast<std::size_t>(len)));
              const float alpha = m[row] == neg_inf ? 0.0f : simd::exp_scalar(m[row] - m_new);
              const float sum = simd::exp_sum(srow, static_cast<std::size_t>(len), m_new);
              if (!whole) for_hidden([&](int a, int b) { std::fill(srow + a, srow + b, 0.0f); });
              // (The hidden keys' e^-87 ~ 1e-38 terms in `sum` vanish next to the
              // row maximum's e^0 = 1.)
              l[row] = l[row] * alpha + sum;
              if (alpha != 1.0f && m[row] != neg_inf)  // (a row's first keys: acc is still 0)
                simd::scale(acc.data() + row * hd, static_cast<std::size_t>(hd), alpha);
              m[row] = m_new;
            }
          }
          if (kv16) {
            for (Eigen::Index r = 0; r < R; ++r)
              kv16->round(s.data() + r * chunk_cols, static_cast<std::size_t>(len), p16.data() + r * ldp,
                          static_cast<std::size_t>(len));
            kv16->values(p16.data(), ldp, static_cast<std::size_t>(R), it.seq, it.kv, j0, len, pv.data());
            A += Eigen::Map<const RowMatrix>(pv.data(), R, hd);
          } else {
            ConstStrided V(v + static_cast<std::size_t>(it.base + j0) * shape.kv_stride + col, len, hd,
                           Eigen::OuterStride<>(static_cast<Eigen::Index>(shape.kv_stride)));
            A.noalias() += S * V;
          }
        }
      }
      // Normalize and write out.
      for (int hh = 0; hh < G; ++hh)
        for (int r = 0; r < T; ++r) {
          const Eigen::Index row = static_cast<Eigen::Index>(hh) * T + r;
          float* dst = out + static_cast<std::size_t>(it.qbase + it.i0 + r) * shape.out_stride +
                       static_cast<std::size_t>(it.kv * G + hh) * hd;
          const float inv = 1.0f / l[row];
          const float* a = acc.data() + row * hd;
          for (int c = 0; c < hd; ++c) dst[c] = a[c] * inv;
        }
    }
  }
  return work;
}

}  // namespace

AttentionWork attention(const float* q, const float* k, const float* v, float* out,
                        std::span<const int> offsets, const AttentionShape& shape,
                        std::span<const HeadWindow> windows, const AttentionTiles& tiles,
                        std::optional<Bf16Kernel> bf16) {
  return tiled_attention(q, k, v, out, offsets, 0, shape, windows, tiles, bf16);
}

AttentionWork attention_rows(const float* q, const float* k, const float* v, float* out, int n, int query_begin,
                             const AttentionShape& shape, std::span<const HeadWindow> windows,
                             const AttentionTiles& tiles, std::optional<Bf16Kernel> bf16) {
  if (n < 0 || query_begin < 0 || query_begin > n)
    throw invalid_argument("query rows [" + std::to_string(query_begin) + ", " + std::to_string(n) +
                               ") outside a sequence of " + std::to_string(n) + " keys",
                           "attention_rows");
  const int offsets[2] = {0, n};
  return tiled_attention(q, k, v, out, offsets, query_begin, shape, windows, tiles, bf16);
}

void attention_cached(const float* q, int n, int start, const float* k, const float* v, float* out,
                      const AttentionShape& shape, std::span<const HeadWindow> windows) {
  check_shape(shape, windows.size());
  if (n < 0 || start < 0) throw invalid_argument("negative row count or start position", "attention_cached");
  const int G = shape.num_heads / shape.num_kv_heads;
  const int hd = shape.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  std::vector<float> scores(static_cast<std::size_t>(start + n)), qs(static_cast<std::size_t>(hd));
  for (int r = 0; r < n; ++r) {
    const int p = start + r;
    for (int head = 0; head < shape.num_heads; ++head) {
      const int g = head / G;
      const float* qh = q + static_cast<std::size_t>(r) * shape.q_stride + static_cast<std::size_t>(head) * hd;
      float* o = out + static_cast<std::size_t>(r) * shape.out_stride + static_cast<std::size_t>(head) * hd;
      const std::size_t col = static_cast<std::size_t>(g) * hd;
      KeyRange vis[2];
      const int nv = row_intervals(windows[static_cast<std::size_t>(g)], p, 0, p + 1, vis);
      for (int c = 0; c < hd; ++c) qs[static_cast<std::size_t>(c)] = qh[c] * scale;
      int count = 0;
      float mx = neg_inf;
      for (int x = 0; x < nv; ++x)
        for (int j = vis[x].begin; j < vis[x].end; ++j) {
          const float* kj = k + static_cast<std::size_t>(j) * shape.kv_stride + col;
          float dot = 0.0f;
          for (int c = 0; c < hd; ++c) dot += qs[static_cast<std::size_t>(c)] * kj[c];
          scores[static_cast<std::size_t>(count++)] = dot;
          mx = std::max(mx, dot);
        }
      const float sum = exp_shifted(scores.data(), static_cast<std::size_t>(count), mx);
      std::fill_n(o, hd, 0.0f);
      int t = 0;
      for (int x = 0; x < nv; ++x)
        for (int j = vis[x].begin; j < vis[x].end; ++j) {
          const float a = scores[static_cast<std::size_t>(t++)];
          const float* vj = v + static_cast<std::size_t>(j) * shape.kv_stride + col;
          for (int c = 0; c < hd; ++c) o[c] += a * vj[c];
        }
      const float inv = 1.0f / sum;
      for (int c = 0; c < hd; ++c) o[c] *= inv;
    }
  }
}

std::vector<int> stats_rows(const StatsRequest& request, int n) {
  std::vector<int> rows;
  if (!request.rows.empty()) {
    for (int r : request.rows) {
      if (r < 0 || r >= n)
        throw invalid_argument("statistics row " + std::to_string(r) + " outside the sequence of " +
                                   std::to_string(n) + " tokens",
                               "StatsRequest.rows");
      rows.push_back(r);
    }
    std::sort(rows.begin(), rows.end());
    rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    return rows;
  }
  if (request.query_begin < 0)
    throw invalid_argument("query_begin must be >= 0, got " + std::to_string(request.query_begin),
                           "StatsRequest.query_begin");
  for (int i = request.query_begin; i < n; ++i) rows.push_back(i);
  return rows;
}

void attention_stats(const float* q, const float* k, int n, const AttentionShape& shape,
                     std::span<const HeadWindow> windows, const StatsRequest& request,
                     std::span<const int> rows, int layer, HeadStats& stats) {
  check_shape(shape, windows.size());
  if (stats.num_heads != shape.num_heads || layer < 0 || layer >= stats.num_layers)
    throw invalid_argument("statistics sized for another model", "HeadStats");
  if (rows.empty()) return;
  if (request.window < 0 || request.sinks < 0 || request.period < 0)
    throw invalid_argument("statistics window, sinks and period must be >= 0", "StatsRequest");
  const int G = shape.num_heads / shape.num_kv_heads;
  const int hd = shape.head_dim;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  constexpr int block = 64;
  const int s_req = request.sinks;
  const int w_req = request.window;
  const int period = request.period;

#pragma omp parallel for schedule(dynamic, 1)
  for (int h = 0; h < shape.num_heads; ++h) {
    const HeadWindow w = effective(windows[static_cast<std::size_t>(h / G)], n);
    const std::size_t col = static_cast<std::size_t>(h) * hd;
    const std::size_t kcol = static_cast<std::size_t>(h / G) * hd;
    double beyond = 0, distance = 0, entropy = 0, sink = 0, echo = 0, induction = 0;
    RowMatrix qb(block, hd);
    RowMatrix sc;
    std::vector<double> p;
    for (std::size_t b0 = 0; b0 < rows.size(); b0 += block) {
      const std::size_t b1 = std::min(rows.size(), b0 + block);
      const auto nb = static_cast<Eigen::Index>(b1 - b0);
      const int first = rows[b0], last = rows[b1 - 1];
      // Keys [0, last] are computed (scores of invisible keys are ignored).
      int lo = 0;
      if (!w.full() && w.sinks == 0) lo = std::max(0, first - w.window + 1);
      const int hi = last + 1;
      for (Eigen::Index r = 0; r < nb; ++r)
        for (int c = 0; c < hd; ++c)
          qb(r, c) = q[static_cast<std::size_t>(rows[b0 + r]) * shape.q_stride + col + c] * scale;
      ConstStrided K(k + static_cast<std::size_t>(lo) * shape.kv_stride + kcol, hi - lo, hd,
                     Eigen::OuterStride<>(static_cast<Eigen::Index>(shape.kv_stride)));
      sc.resize(nb, hi - lo);
      sc.noalias() = qb.topRows(nb) * K.transpose();
      for (Eigen::Index r = 0; r < nb; ++r) {
        const int i = rows[b0 + r];
        KeyRange vis[2];
        const int nv = row_intervals(w, i, 0, i + 1, vis);
        const float* srow = sc.data() + r * sc.cols() - lo;  // srow[j] = score of key j
        float mx = neg_inf;
        for (int x = 0; x < nv; ++x)
          for (int j = vis[x].begin; j < vis[x].end; ++j) mx = std::max(mx, srow[j]);
        p.assign(static_cast<std::size_t>(i) + 1, 0.0);
        double l = 0.0, weighted = 0.0;
        for (int x = 0; x < nv; ++x)
          for (int j = vis[x].begin; j < vis[x].end; ++j) {
            const float e = std::exp(srow[j] - mx);
            p[j] = e;
            l += e;
            weighted += static_cast<double>(e) * static_cast<double>(srow[j] - mx);
          }
        const double inv = 1.0 / l;
        entropy += std::log(l) - weighted * inv;
        for (int x = 0; x < nv; ++x)
          for (int j = vis[x].begin; j < vis[x].end; ++j) {
            const double a = p[j] * inv;
            if (j < s_req) {
              sink += a;
              continue;
            }
            distance += a * static_cast<double>(i - j);
            if (w_req >= 1 && j <= i - w_req) beyond += a;
          }
        if (period > 0)
          for (int j = i - period; j >= 0; j -= period) {
            echo += p[j] * inv;
            if (j + 1 <= i) induction += p[j + 1] * inv;
          }
      }
    }
    const std::size_t at = stats.at(layer, h);
    stats.beyond_window_mass[at] += beyond;
    stats.mean_distance[at] += distance;
    stats.entropy[at] += entropy;
    stats.sink_mass[at] += sink;
    stats.echo[at] += echo;
    stats.induction[at] += induction;
  }
}

}  // namespace bosch::cpu
