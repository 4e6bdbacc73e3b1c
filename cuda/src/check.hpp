// SPDX-License-Identifier: Apache-2.0
#pragma once

// Checking of every CUDA runtime and cuBLAS call: a failure throws
// bosch::device_error with the call's text, the error's name and message, and
// "file:line" as the location. Internal to bosch::cuda (plain C++; the .cu
// files use only the runtime part).

#include <bosch/error.hpp>

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>

namespace bosch::cuda::detail {

/// Throws device_error unless `status` is cudaSuccess. Clears the (non-sticky)
/// last-error state so a later check does not report the same failure.
void check_cuda(cudaError_t status, const char* call, const char* file, int line);

/// Throws device_error for a kernel launch failure (cudaGetLastError).
void check_launch(const char* kernel, const char* file, int line);

/// "N bytes (X MiB)".
std::string format_bytes(std::size_t bytes);

}  // namespace bosch::cuda::detail

/// Checks a CUDA runtime call.
#define BOSCH_CUDA_CHECK(call) ::bosch::cuda::detail::check_cuda((call), #call, __FILE__, __LINE__)
/// Checks the launch of the kernel just issued.
#define BOSCH_CUDA_CHECK_LAUNCH(name) ::bosch::cuda::detail::check_launch((name), __FILE__, __LINE__)
