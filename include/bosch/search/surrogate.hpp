// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file search/surrogate.hpp
/// A cheap model of the objective, fitted online to the evaluation log, that
/// ranks candidate masks before any is evaluated (docs/algorithm.md,
/// §Inner solvers).
///
/// The model is Bayesian linear regression on the SWA bits z (1 = SWA) with
/// linear terms and pairwise terms between heads of the same layer and of
/// neighbouring layers, the interactions BOSCH's entanglement argument is
/// about (a head's value depends on the heads beside it in the circuit),
/// in the spirit of BOCS (Baptista and Poloczek, 2018). It is used in its
/// kernel (Gaussian-process) form, so the cost depends on the number of
/// observations n, not on the number of features:
///
///     k(a, b) = s0 + s1 * sum_i a_i b_i + s2 * P(a AND b),
///     P(c) = sum_l C(c_l, 2) + sum_l c_l c_{l+1},
///
/// where c_l counts the bits set in both masks in layer l: exactly the inner
/// product of the feature vectors [1, z_i, z_i z_j (same or neighbouring
/// layers)] weighted by the prior variances s0, s1, s2. Targets are the
/// logged scores, standardized; s1, s2 and the noise variance are chosen by
/// the log marginal likelihood over a fixed grid (relative to the typical
/// overlap, so the grid is scale-free). The posterior mean and standard
/// deviation of the score of any mask follow.
///
/// Only the `max_points` logged masks nearest (Hamming) to a focus mask are
/// used (ties: later evaluations first), which keeps a fit at O(n^3) with n
/// bounded and the model local to where the search is. Every computation is
/// plain loops in a fixed order (no vectorized library), so the same log
/// gives the same predictions on every platform.

#include <bosch/mask.hpp>
#include <bosch/options.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <numeric>
#include <span>
#include <utility>
#include <vector>

namespace bosch::search {

/// Bits of a mask packed per layer (ceil(Hkv / 64) words per layer), for fast
/// overlaps.
class PackedMask {
 public:
  PackedMask() = default;
  explicit PackedMask(const HeadMask& m) : PackedMask(m.layout(), m.bits()) {}
  PackedMask(const HeadLayout& lay, std::span<const std::uint8_t> bits)
      : words_per_layer_(static_cast<std::size_t>((lay.num_kv_heads + 63) / 64)),
        words_(static_cast<std::size_t>(lay.num_layers) * words_per_layer_, 0) {
    const std::size_t h = static_cast<std::size_t>(lay.num_kv_heads);
    for (std::size_t i = 0; i < bits.size(); ++i)
      if (bits[i]) {
        const std::size_t l = i / h, k = i % h;
        words_[l * words_per_layer_ + k / 64] |= std::uint64_t{1} << (k % 64);
      }
  }
  std::size_t words_per_layer() const noexcept { return words_per_layer_; }
  const std::vector<std::uint64_t>& words() const noexcept { return words_; }

 private:
  std::size_t words_per_layer_ = 0;
  std::vector<std::uint64_t> words_;
};

/// The two overlap statistics of masks a and b the kernel needs: the number of
/// bits set in both (linear) and P(a AND b) (pairwise).
struct Overlap {
  double linear = 0;
  double pairwise = 0;
};

inline Overlap overlap(const PackedMask& a, const PackedMask& b) {
  const std::size_t w = a.words_per_layer();
  const std::size_t layers = w == 0 ? 0 : a.words().size() / w;
  Overlap o;
  double prev = 0;
  for (std::size_t l = 0; l < layers; ++l) {
    int c = 0;
    for (std::size_t j = 0; j < w; ++j) c += std::popcount(a.words()[l * w + j] & b.words()[l * w + j]);
    const double cl = c;
    o.linear += cl;
    o.pairwise += cl * (cl - 1) / 2 + prev * cl;
    prev = cl;
  }
  return o;
}

/// The surrogate's posterior mean written as what it is, a quadratic function
/// of the SWA bits z of a mask (see Surrogate::mean_form):
///
///     mean(z) = constant + sum_i linear[i] z_i + sum_{i<j neighbours} pair(i, j) z_i z_j,
///
/// where neighbours are two heads of the same layer or of adjacent layers.
/// Lets a search find the model's own optimum under exact counts
/// (search/surrogate_optimum.hpp) without predicting every mask.
struct QuadraticMean {
  HeadLayout layout;
  double constant = 0;
  std::vector<double> linear;  ///< per flat head index
  /// Pair weights, H x H per layer, symmetric: same[l*H*H + a*H + b] for heads
  /// a != b of layer l; next[l*H*H + a*H + b] for head a of layer l and head b
  /// of layer l+1.
  std::vector<double> same, next;

  /// The weight of the pair of flat heads i and j (0 unless neighbours; i != j).
  double pair(std::size_t i, std::size_t j) const {
    const std::size_t H = static_cast<std::size_t>(layout.num_kv_heads);
    std::size_t li = i / H, lj = j / H;
    if (li > lj) {
      std::swap(i, j);
      std::swap(li, lj);
    }
    if (li == lj) return same[li * H * H + (i % H) * H + j % H];
    if (lj == li + 1) return next[li * H * H + (i % H) * H + j % H];
    return 0.0;
  }
  /// The value for the bits `z` (one per flat head, 1 = SWA).
  double value(std::span<const std::uint8_t> z) const {
    double v = constant;
    const std::size_t n = z.size(), H = static_cast<std::size_t>(layout.num_kv_heads);
    for (std::size_t i = 0; i < n; ++i) {
      if (!z[i]) continue;
      v += linear[i];
      const std::size_t l = i / H;
      for (std::size_t j = i + 1; j < std::min(n, (l + 2) * H); ++j)
        if (z[j]) v += pair(i, j);
    }
    return v;
  }
};

/// The surrogate model (see the file comment).
class Surrogate {
 public:
  /// A posterior prediction of a mask's score.
  struct Prediction {
    double mean = 0;
    double sd = 0;
  };

  /// @param max_points most observations a fit uses (>= 2).
  explicit Surrogate(std::size_t max_points = 300) : max_points_(std::max<std::size_t>(2, max_points)) {}

  /// Fits the model to the logged masks and scores nearest to `focus`
  /// (`masks` and `scores` of equal length). Hyperparameters are chosen
  /// again when `retune` or when none were chosen yet. `extra_variance`
  /// (empty, or one per mask, in squared score units) is added to the noise
  /// of each point: a score known only as a noisy estimate (a candidate a
  /// race eliminated) weighs less.
  void fit(std::span<const HeadMask> masks, std::span<const double> scores, const HeadMask& focus,
           bool retune, std::span<const double> extra_variance = {}) {
    // The nearest observations (Hamming distance to the focus; later first on ties).
    const std::size_t total = masks.size();
    std::vector<std::size_t> order(total);
    std::iota(order.begin(), order.end(), std::size_t{0});
    std::vector<std::size_t> dist(total);
    for (std::size_t i = 0; i < total; ++i) {
      std::size_t d = 0;
      for (std::size_t b = 0; b < focus.size(); ++b) d += masks[i][b] != focus[b];
      dist[i] = d;
    }
    std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
      return dist[a] != dist[b] ? dist[a] < dist[b] : a > b;
    });
    order.resize(std::min(total, max_points_));
    std::sort(order.begin(), order.end());
    points_.clear();
    y_.clear();
    extra_.clear();
    if (total > 0) layout_ = masks[0].layout();
    for (std::size_t i : order) {
      points_.emplace_back(masks[i]);
      y_.push_back(scores[i]);
      if (!extra_variance.empty()) extra_.push_back(extra_variance[i]);
    }
    const std::size_t n = points_.size();
    ready_ = false;
    mean_ = 0;
    scale_ = 1;
    for (double v : y_) mean_ += v;
    if (n > 0) mean_ /= static_cast<double>(n);
    if (n < 2) return;
    double var = 0;
    for (double v : y_) var += (v - mean_) * (v - mean_);
    scale_ = std::sqrt(var / static_cast<double>(n));
    if (!(scale_ > 0)) return;  // a constant: predict the mean
    for (double& v : y_) v = (v - mean_) / scale_;
    for (double& v : extra_) v /= scale_ * scale_;
    // Overlaps are independent of the hyperparameters: compute them once.
    lin_.assign(n * n, 0.0);
    pair_.assign(n * n, 0.0);
    double lin_typ = 0, pair_typ = 0;
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j <= i; ++j) {
        const Overlap o = overlap(points_[i], points_[j]);
        lin_[i * n + j] = lin_[j * n + i] = o.linear;
        pair_[i * n + j] = pair_[j * n + i] = o.pairwise;
        if (i == j) {
          lin_typ += o.linear;
          pair_typ += o.pairwise;
        }
      }
    lin_typ = std::max(1.0, lin_typ / static_cast<double>(n));
    pair_typ = std::max(1.0, pair_typ / static_cast<double>(n));
    if (retune || !tuned_) {
      double best = -std::numeric_limits<double>::infinity();
      for (double a : {0.3, 1.0, 3.0})
        for (double b : {0.0, 0.1, 1.0})
          for (double noise : {1e-3, 1e-2, 1e-1}) {
            const double s1 = a / lin_typ, s2 = a * b / pair_typ;
            double lml;
            if (!factor(s1, s2, noise, &lml)) continue;
            if (lml > best) {
              best = lml;
              a_ = a;
              b_ = b;
              noise_ = noise;
            }
          }
      tuned_ = std::isfinite(best);
      if (!tuned_) return;
    }
    s1_ = a_ / lin_typ;
    s2_ = a_ * b_ / pair_typ;
    ready_ = factor(s1_, s2_, noise_, nullptr);
  }

  /// Whether the last fit produced a model (false: too few or constant data;
  /// predict() then returns the data mean with zero spread).
  bool ready() const noexcept { return ready_; }
  std::size_t points() const noexcept { return points_.size(); }

  /// The posterior mean of the score of `m`; with `with_sd` also its
  /// standard deviation (O(n^2) instead of O(n)).
  Prediction predict(const PackedMask& m, bool with_sd = true) const {
    Prediction p{mean_, 0.0};
    if (!ready_) return p;
    const std::size_t n = points_.size();
    std::vector<double> k(n);
    for (std::size_t i = 0; i < n; ++i) k[i] = kernel(overlap(m, points_[i]));
    double f = 0;
    for (std::size_t i = 0; i < n; ++i) f += alpha_[i] * k[i];
    p.mean = mean_ + scale_ * f;
    if (with_sd) {
      // v = L^-1 k; var = k(m, m) - |v|^2.
      for (std::size_t i = 0; i < n; ++i) {
        double s = k[i];
        for (std::size_t j = 0; j < i; ++j) s -= chol_[i * n + j] * k[j];
        k[i] = s / chol_[i * n + i];
      }
      double q = 0;
      for (double v : k) q += v * v;
      const double var = kernel(overlap(m, m)) - q;
      p.sd = scale_ * std::sqrt(std::max(0.0, var));
    }
    return p;
  }
  Prediction predict(const HeadMask& m, bool with_sd = true) const {
    return predict(PackedMask(m), with_sd);
  }

  /// The posterior mean as a QuadraticMean: with the weights alpha of the
  /// fit, mean(z) = mean + scale * sum_j alpha_j k(z, x_j), and the kernel's
  /// features are exactly 1, z_i and z_i z_j for neighbouring heads, so
  /// linear[i] = scale * s1 * sum_j alpha_j x_ji and pair(i, i') = scale * s2 *
  /// sum_j alpha_j x_ji x_ji'. Equal to predict(m).mean up to rounding. Not
  /// ready(): the constant data mean and zero weights.
  QuadraticMean mean_form() const {
    QuadraticMean q;
    q.layout = layout_;
    const std::size_t H = static_cast<std::size_t>(layout_.num_kv_heads);
    const std::size_t L = static_cast<std::size_t>(layout_.num_layers);
    q.constant = mean_;
    q.linear.assign(L * H, 0.0);
    q.same.assign(L * H * H, 0.0);
    q.next.assign(L * H * H, 0.0);
    if (!ready_) return q;
    std::vector<std::vector<std::size_t>> on(L);
    for (std::size_t j = 0; j < points_.size(); ++j) {
      const double a = alpha_[j];
      q.constant += scale_ * a;
      const auto& w = points_[j].words();
      const std::size_t wpl = points_[j].words_per_layer();
      for (std::size_t l = 0; l < L; ++l) {
        on[l].clear();
        for (std::size_t k = 0; k < H; ++k)
          if ((w[l * wpl + k / 64] >> (k % 64)) & 1u) on[l].push_back(k);
      }
      for (std::size_t l = 0; l < L; ++l)
        for (std::size_t x : on[l]) {
          q.linear[l * H + x] += scale_ * s1_ * a;
          for (std::size_t y : on[l])
            if (y != x) q.same[l * H * H + x * H + y] += scale_ * s2_ * a;
          if (l + 1 < L)
            for (std::size_t y : on[l + 1]) q.next[l * H * H + x * H + y] += scale_ * s2_ * a;
        }
    }
    return q;
  }

 private:
  double kernel(const Overlap& o) const { return 1.0 + s1_ * o.linear + s2_ * o.pairwise; }

  /// Cholesky of K + noise I for (s1, s2, noise) into chol_, alpha_ =
  /// (K + noise I)^-1 y; the log marginal likelihood into *lml when given.
  /// False when the matrix is not positive definite.
  bool factor(double s1, double s2, double noise, double* lml) {
    const std::size_t n = points_.size();
    chol_.assign(n * n, 0.0);
    for (std::size_t i = 0; i < n; ++i)
      for (std::size_t j = 0; j <= i; ++j) {
        double v = 1.0 + s1 * lin_[i * n + j] + s2 * pair_[i * n + j];
        if (i == j) {
          v += noise;
          if (!extra_.empty()) v += extra_[i];
        }
        for (std::size_t k = 0; k < j; ++k) v -= chol_[i * n + k] * chol_[j * n + k];
        if (i == j) {
          if (!(v > 0)) return false;
          chol_[i * n + i] = std::sqrt(v);
        } else {
          chol_[i * n + j] = v / chol_[j * n + j];
        }
      }
    // alpha = L^-T L^-1 y
    alpha_.assign(y_.begin(), y_.end());
    for (std::size_t i = 0; i < n; ++i) {
      double s = alpha_[i];
      for (std::size_t j = 0; j < i; ++j) s -= chol_[i * n + j] * alpha_[j];
      alpha_[i] = s / chol_[i * n + i];
    }
    double fit = 0, logdet = 0;
    for (std::size_t i = 0; i < n; ++i) {
      fit += alpha_[i] * alpha_[i];
      logdet += std::log(chol_[i * n + i]);
    }
    for (std::size_t i = n; i-- > 0;) {
      double s = alpha_[i];
      for (std::size_t j = i + 1; j < n; ++j) s -= chol_[j * n + i] * alpha_[j];
      alpha_[i] = s / chol_[i * n + i];
    }
    if (lml) *lml = -0.5 * fit - logdet;
    return true;
  }

  std::size_t max_points_;
  HeadLayout layout_{};
  std::vector<PackedMask> points_;
  std::vector<double> y_;
  std::vector<double> extra_;  // per-point noise added (standardized), empty when none
  std::vector<double> lin_, pair_;
  std::vector<double> chol_, alpha_;
  double mean_ = 0, scale_ = 1;
  double a_ = 1, b_ = 0.1, noise_ = 1e-2;
  double s1_ = 0, s2_ = 0;
  bool tuned_ = false, ready_ = false;
};

}  // namespace bosch::search
