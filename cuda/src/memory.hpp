// SPDX-License-Identifier: Apache-2.0
#pragma once

// Device memory with RAII (internal to bosch::cuda). Allocation failures
// throw bosch::device_error with the bytes asked for, what they were for and
// the device's free/total memory.

#include <cuda_runtime_api.h>

#include <cstddef>
#include <string>
#include <utility>

namespace bosch::cuda::detail {

/// cudaMalloc with an informative out-of-memory error; `what` names the use.
void* device_malloc(std::size_t bytes, const std::string& what);
/// cudaMallocFromPoolAsync on `stream` from `pool` (plain cudaMalloc when
/// `pool` is null: a runtime without memory pools), same errors.
void* device_malloc_async(std::size_t bytes, cudaMemPool_t pool, cudaStream_t stream,
                          const std::string& what);

/// Sets the current device for its lifetime and restores the previous one.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = -1;
};

/// Device memory freed when destroyed: from cudaMalloc, freed with cudaFree
/// (weights: live as long as the backend), or scratch from a stream-ordered
/// pool, returned to the pool on its stream (cheap to allocate per call once
/// the pool has grown). With a null pool scratch is plain cudaMalloc/cudaFree
/// (cudaFree waits for the device).
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  /// cudaMalloc.
  DeviceBuffer(std::size_t bytes, const std::string& what)
      : data_(bytes ? device_malloc(bytes, what) : nullptr), bytes_(bytes) {}
  /// From `pool` on `stream` (cudaMalloc when `pool` is null).
  DeviceBuffer(std::size_t bytes, cudaMemPool_t pool, cudaStream_t stream, const std::string& what)
      : data_(bytes ? device_malloc_async(bytes, pool, stream, what) : nullptr),
        bytes_(bytes),
        stream_(stream),
        pooled_(pool != nullptr) {}
  DeviceBuffer(DeviceBuffer&& o) noexcept { take(o); }
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    if (this != &o) {
      release();
      take(o);
    }
    return *this;
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { release(); }

  template <class T = void>
  T* get() const noexcept { return static_cast<T*>(data_); }
  std::size_t bytes() const noexcept { return bytes_; }

 private:
  void take(DeviceBuffer& o) noexcept {
    data_ = std::exchange(o.data_, nullptr);
    bytes_ = std::exchange(o.bytes_, 0);
    stream_ = o.stream_;
    pooled_ = o.pooled_;
  }
  void release() noexcept {
    if (data_) {
      if (pooled_) cudaFreeAsync(data_, stream_);
      else cudaFree(data_);
    }
    data_ = nullptr;
    bytes_ = 0;
  }
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  cudaStream_t stream_ = nullptr;
  bool pooled_ = false;
};

/// Scratch memory: a DeviceBuffer made with a pool and a stream.
using StreamBuffer = DeviceBuffer;

}  // namespace bosch::cuda::detail
