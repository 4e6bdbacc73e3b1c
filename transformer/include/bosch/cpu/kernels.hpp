// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file cpu/kernels.hpp
/// Building blocks of the CPU forward pass, on plain row-major fp32 buffers.
/// They are public so that tests and benchmarks can check them one by one;
/// bosch::cpu::Backend is the supported entry point. All kernels use the
/// calling thread's OpenMP thread count (omp_get_max_threads(); see
/// ThreadScope) and keep Eigen out of this header.

#include <bosch/model/config.hpp>
#include <bosch/model/weights.hpp>

#include <cstddef>
#include <vector>

namespace bosch::cpu {

/// Sets the calling thread's OpenMP thread count (omp_set_num_threads) for
/// its lifetime and restores the previous value on exit. Eigen's GEMM reads
/// the same setting, so this bounds both. `threads` <= 0 leaves it unchanged.
class ThreadScope {
 public:
  explicit ThreadScope(int threads);
  ~ThreadScope();
  ThreadScope(const ThreadScope&) = delete;
  ThreadScope& operator=(const ThreadScope&) = delete;
  /// The thread count in force inside the scope.
  int threads() const noexcept { return current_; }

 private:
  int previous_ = 0;
  int current_ = 0;
  bool changed_ = false;
};

/// y[r] = x[r] / sqrt(mean(x[r]^2) + eps) * gain for each of `rows` rows of
/// `dim` values (the mean of squares accumulated in double, as ggml does).
/// `y` may equal `x`. `gain` has `dim` entries.
void rms_norm(const float* x, float* y, std::size_t rows, int dim, const float* gain, float eps);

/// Y = X W^T (+ bias): X is [rows, W.cols], Y is [rows, W.rows], both
/// row-major; `bias` (W.rows entries) may be null. One Eigen GEMM, threaded
/// by Eigen over the OpenMP threads in force.
void linear(const float* x, std::size_t rows, const model::Matrix& w, const float* bias, float* y);

/// x[i] = exp(x[i] - shift) for `count` values; returns their sum (in fp32,
/// in an order fixed by `count`). Cody-Waite reduction + Cephes polynomial
/// (relative error <= 1e-7), AVX2 when compiled for it. Which elements take
/// the vector path depends only on `count`, never on the address, so results
/// never depend on memory alignment.
float exp_shifted(float* x, std::size_t count, float shift);

/// gate[i] = silu(gate[i]) * up[i] for `count` values (SwiGLU), silu(g) = g / (1 + e^-g).
/// Same exponential as exp_shifted.
void silu_mul(float* gate, const float* up, std::size_t count);

/// dst[i] += src[i] for `count` values.
void add_inplace(float* dst, const float* src, std::size_t count);

/// The plain Eigen GEMM C = A B with A [m, k], B [k, n], all column-major
/// Eigen matrices held inside (filled with a fixed pattern on construction),
/// threaded by Eigen itself: the yardstick the forward pass is compared with.
class ReferenceGemm {
 public:
  ReferenceGemm(int m, int k, int n);
  ~ReferenceGemm();
  ReferenceGemm(const ReferenceGemm&) = delete;
  ReferenceGemm& operator=(const ReferenceGemm&) = delete;
  /// Runs the product once.
  void run();
  /// Floating-point operations of one run: 2 m k n.
  double flops() const noexcept;
  /// A checksum of C (keeps the work observable).
  double checksum() const;

 private:
  struct Impl;
  Impl* impl_;
};

}  // namespace bosch::cpu
