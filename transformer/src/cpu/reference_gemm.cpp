// SPDX-License-Identifier: Apache-2.0
// The plain Eigen GEMM (with Eigen's own OpenMP threading) that benchmarks
// compare the forward pass with. Kept apart from the backend's kernels, which
// build Eigen without its threading (see eigen.hpp).

#include <bosch/cpu/kernels.hpp>
#include <bosch/error.hpp>

#include <Eigen/Core>

#include <string>

namespace bosch::cpu {

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
