// SPDX-License-Identifier: Apache-2.0
// Eigen for the CPU backend's compute kernels. The backend splits all work
// into OpenMP tasks itself and calls Eigen serially inside them: Eigen's own
// GEMM threading synchronizes its threads by spinning, which collapses when
// the cores are shared, and it would nest inside the backend's parallel
// regions. So these translation units build Eigen without it. (The plain
// Eigen GEMM used as a benchmark yardstick lives in reference_gemm.cpp and
// keeps Eigen's threading.)
#pragma once

#ifndef EIGEN_DONT_PARALLELIZE
#define EIGEN_DONT_PARALLELIZE
#endif
#include <Eigen/Core>
