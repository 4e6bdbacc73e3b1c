// SPDX-License-Identifier: Apache-2.0
// Error checking, device memory and device queries of bosch::cuda.

#include "blas_check.hpp"
#include "check.hpp"
#include "kernels.hpp"
#include "memory.hpp"

#include <bosch/cuda/backend.hpp>

#include <cstdio>
#include <string>

namespace bosch::cuda {
namespace detail {
namespace {

// "dir/file.cpp:line": the last two path components keep messages short.
std::string location(const char* file, int line) {
  std::string f = file ? file : "?";
  const auto last = f.find_last_of('/');
  if (last != std::string::npos && last > 0) {
    const auto before = f.find_last_of('/', last - 1);
    if (before != std::string::npos) f = f.substr(before + 1);
  }
  return f + ":" + std::to_string(line);
}

device_error out_of_memory(std::size_t bytes, const std::string& what, const char* call) {
  std::size_t free_bytes = 0, total_bytes = 0;
  const bool known = cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess;
  cudaGetLastError();
  std::string message = "out of device memory: " + std::string(call) + " asked for " +
                        format_bytes(bytes) + " for " + what;
  if (known)
    message += " (" + format_bytes(free_bytes) + " free of " + format_bytes(total_bytes) + ")";
  return device_error(message, "bosch::cuda");
}

}  // namespace

std::string format_bytes(std::size_t bytes) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%zu bytes (%.1f MiB)", bytes,
                static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buffer;
}

void check_cuda(cudaError_t status, const char* call, const char* file, int line) {
  if (status == cudaSuccess) return;
  cudaGetLastError();  // clear a non-sticky error
  throw device_error(std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) +
                         ") in " + call,
                     location(file, line));
}

void check_launch(const char* kernel, const char* file, int line) {
  const cudaError_t status = cudaGetLastError();
  if (status == cudaSuccess) return;
  throw device_error(std::string(cudaGetErrorName(status)) + " (" + cudaGetErrorString(status) +
                         ") launching " + kernel,
                     location(file, line));
}

void check_cublas(cublasStatus_t status, const char* call, const char* file, int line) {
  if (status == CUBLAS_STATUS_SUCCESS) return;
  throw device_error(std::string(cublasGetStatusName(status)) + " (" + cublasGetStatusString(status) +
                         ") in " + call,
                     location(file, line));
}

void* device_malloc(std::size_t bytes, const std::string& what) {
  void* p = nullptr;
  const cudaError_t status = cudaMalloc(&p, bytes);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    throw out_of_memory(bytes, what, "cudaMalloc");
  }
  check_cuda(status, ("cudaMalloc for " + what).c_str(), __FILE__, __LINE__);
  return p;
}

void* device_malloc_async(std::size_t bytes, cudaMemPool_t pool, cudaStream_t stream,
                          const std::string& what) {
  if (!pool) return device_malloc(bytes, what);
  void* p = nullptr;
  const cudaError_t status = cudaMallocFromPoolAsync(&p, bytes, pool, stream);
  if (status == cudaErrorMemoryAllocation) {
    cudaGetLastError();
    throw out_of_memory(bytes, what, "cudaMallocFromPoolAsync");
  }
  check_cuda(status, ("cudaMallocFromPoolAsync for " + what).c_str(), __FILE__, __LINE__);
  return p;
}

DeviceGuard::DeviceGuard(int device) {
  BOSCH_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != device) BOSCH_CUDA_CHECK(cudaSetDevice(device));
}

DeviceGuard::~DeviceGuard() {
  int current = -1;
  if (cudaGetDevice(&current) == cudaSuccess && current != previous_ && previous_ >= 0)
    cudaSetDevice(previous_);
}

}  // namespace detail

bool device_available(std::string* why, int device) {
  int count = 0;
  const cudaError_t status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    cudaGetLastError();
    if (why)
      *why = std::string("cudaGetDeviceCount failed: ") + cudaGetErrorName(status) + " (" +
             cudaGetErrorString(status) + ")";
    return false;
  }
  if (count == 0) {
    if (why) *why = "no CUDA device found (cudaGetDeviceCount returned 0)";
    return false;
  }
  if (device < 0 || device >= count) {
    if (why)
      *why = "device index " + std::to_string(device) + " outside [0, " + std::to_string(count) + ")";
    return false;
  }
  return detail::kernel_image_available(device, why);
}

std::string device_description(int device) {
  std::string why;
  if (!device_available(&why, device)) throw device_error("no usable CUDA device: " + why, "bosch::cuda");
  cudaDeviceProp prop{};
  BOSCH_CUDA_CHECK(cudaGetDeviceProperties(&prop, device));
  char buffer[512];
  std::snprintf(buffer, sizeof buffer, "%s (compute capability %d.%d, %d SMs, %.1f GiB)", prop.name,
                prop.major, prop.minor, prop.multiProcessorCount,
                static_cast<double>(prop.totalGlobalMem) / (1024.0 * 1024.0 * 1024.0));
  return buffer;
}

}  // namespace bosch::cuda
