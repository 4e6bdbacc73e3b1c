// SPDX-License-Identifier: Apache-2.0
#pragma once

// Checking of cuBLAS calls (host code only). Internal to bosch::cuda.

#include <cublas_v2.h>

namespace bosch::cuda::detail {

/// Throws bosch::device_error unless `status` is CUBLAS_STATUS_SUCCESS.
void check_cublas(cublasStatus_t status, const char* call, const char* file, int line);

}  // namespace bosch::cuda::detail

/// Checks a cuBLAS call.
#define BOSCH_CUBLAS_CHECK(call) ::bosch::cuda::detail::check_cublas((call), #call, __FILE__, __LINE__)
