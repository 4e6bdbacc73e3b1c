// SPDX-License-Identifier: Apache-2.0
// Element-wise kernels, RMSNorm and the Eigen GEMM wrappers of the CPU backend.

#include <bosch/cpu/kernels.hpp>
#include <bosch/error.hpp>

#include <Eigen/Core>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace bosch::cpu {

using RowMatrix = Eigen::Matrix<float, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;

ThreadScope::ThreadScope(int threads) : previous_(omp_get_max_threads()), current_(previous_) {
  if (threads > 0 && threads != previous_) {
    omp_set_num_threads(threads);
    current_ = threads;
    changed_ = true;
  }
}

ThreadScope::~ThreadScope() {
  if (changed_) omp_set_num_threads(previous_);
}

void rms_norm(const float* x, float* y, std::size_t rows, int dim, const float* gain, float eps) {
  const auto n = static_cast<std::ptrdiff_t>(rows);
#pragma omp parallel for schedule(static) if (rows * static_cast<std::size_t>(dim) > 32768)
  for (std::ptrdiff_t r = 0; r < n; ++r) {
    const float* xr = x + static_cast<std::size_t>(r) * dim;
    float* yr = y + static_cast<std::size_t>(r) * dim;
    double ss = 0.0;
    for (int c = 0; c < dim; ++c) ss += static_cast<double>(xr[c]) * xr[c];
    const float scale = static_cast<float>(1.0 / std::sqrt(ss / dim + static_cast<double>(eps)));
    for (int c = 0; c < dim; ++c) yr[c] = xr[c] * scale * gain[c];
  }
}

void linear(const float* x, std::size_t rows, const model::Matrix& w, const float* bias, float* y) {
  if (rows == 0) return;
  const auto n = static_cast<Eigen::Index>(rows);
  Eigen::Map<const RowMatrix> X(x, n, w.cols);
  Eigen::Map<const RowMatrix> W(w.data.data(), w.rows, w.cols);
  Eigen::Map<RowMatrix> Y(y, n, w.rows);
  Y.noalias() = X * W.transpose();
  if (bias != nullptr) {
    Eigen::Map<const Eigen::Matrix<float, 1, Eigen::Dynamic>> b(bias, w.rows);
    Y.rowwise() += b;
  }
}

namespace {
constexpr int block = 16;
using Block = Eigen::Array<float, block, 1>;
}  // namespace

float exp_shifted(float* x, std::size_t count, float shift) {
  alignas(64) Block b;
  Block acc = Block::Zero();
  for (std::size_t i = 0; i < count; i += block) {
    const std::size_t len = std::min<std::size_t>(block, count - i);
    if (len == block) {
      std::copy_n(x + i, block, b.data());
    } else {
      b.setConstant(-std::numeric_limits<float>::infinity());
      std::copy_n(x + i, len, b.data());
    }
    b = (b - shift).exp();
    if (len < block) b.tail(block - static_cast<Eigen::Index>(len)).setZero();
    acc += b;
    std::copy_n(b.data(), len, x + i);
  }
  return acc.sum();
}

void silu_mul(float* gate, const float* up, std::size_t count) {
  constexpr std::size_t chunk = 4096;
  const auto chunks = static_cast<std::ptrdiff_t>((count + chunk - 1) / chunk);
#pragma omp parallel for schedule(static) if (count > 65536)
  for (std::ptrdiff_t c = 0; c < chunks; ++c) {
    const std::size_t begin = static_cast<std::size_t>(c) * chunk;
    const std::size_t end = std::min(count, begin + chunk);
    alignas(64) Block g, u;
    for (std::size_t i = begin; i < end; i += block) {
      const std::size_t len = std::min<std::size_t>(block, end - i);
      g.setZero();
      u.setZero();
      std::copy_n(gate + i, len, g.data());
      std::copy_n(up + i, len, u.data());
      g = g / (1.0f + (-g).exp()) * u;
      std::copy_n(g.data(), len, gate + i);
    }
  }
}

void add_inplace(float* dst, const float* src, std::size_t count) {
  Eigen::Map<Eigen::ArrayXf> d(dst, static_cast<Eigen::Index>(count));
  Eigen::Map<const Eigen::ArrayXf> s(src, static_cast<Eigen::Index>(count));
  d += s;
}

struct ReferenceGemm::Impl {
  Eigen::MatrixXf a, b, c;
};

ReferenceGemm::ReferenceGemm(int m, int k, int n) : impl_(new Impl) {
  if (m <= 0 || k <= 0 || n <= 0)
    throw invalid_argument("GEMM sizes must be positive, got " + std::to_string(m) + "x" +
                               std::to_string(k) + "x" + std::to_string(n),
                           "ReferenceGemm");
  impl_->a.resize(m, k);
  impl_->b.resize(k, n);
  impl_->c.resize(m, n);
  for (Eigen::Index j = 0; j < k; ++j)
    for (Eigen::Index i = 0; i < m; ++i) impl_->a(i, j) = static_cast<float>((i * 7 + j * 13) % 17) / 17.0f - 0.5f;
  for (Eigen::Index j = 0; j < n; ++j)
    for (Eigen::Index i = 0; i < k; ++i) impl_->b(i, j) = static_cast<float>((i * 11 + j * 5) % 19) / 19.0f - 0.5f;
  impl_->c.setZero();
}

ReferenceGemm::~ReferenceGemm() { delete impl_; }

void ReferenceGemm::run() { impl_->c.noalias() = impl_->a * impl_->b; }

double ReferenceGemm::flops() const noexcept {
  return 2.0 * static_cast<double>(impl_->a.rows()) * static_cast<double>(impl_->a.cols()) *
         static_cast<double>(impl_->b.cols());
}

double ReferenceGemm::checksum() const { return static_cast<double>(impl_->c.sum()); }

}  // namespace bosch::cpu
