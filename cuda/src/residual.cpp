// SPDX-License-Identifier: Apache-2.0
// bosch::cuda::Residual: a device buffer with value semantics.

#include "check.hpp"
#include "memory.hpp"

#include <bosch/cuda/backend.hpp>

#include <string>
#include <utility>

namespace bosch::cuda {
namespace {

// Device-to-device copy, complete when this returns (the legacy default
// stream, then a wait on it): a backend call after it sees the data.
void copy_device(float* dst, const float* src, std::size_t bytes) {
  if (bytes == 0) return;
  BOSCH_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, cudaStreamLegacy));
  BOSCH_CUDA_CHECK(cudaStreamSynchronize(cudaStreamLegacy));
}

}  // namespace

Residual::Residual(int n_tokens, int hidden, int device)
    : n_tokens_(n_tokens), hidden_(hidden), device_(device) {
  if (n_tokens < 0 || hidden < 0)
    throw invalid_argument("negative residual shape " + std::to_string(n_tokens) + " x " +
                               std::to_string(hidden),
                           "cuda::Residual");
  if (bytes() == 0) return;
  detail::DeviceGuard guard(device);
  data_ = static_cast<float*>(detail::device_malloc(
      bytes(), "a residual stream of " + std::to_string(n_tokens) + " x " + std::to_string(hidden) +
                   " floats"));
}

Residual::Residual(const Residual& other) : Residual(other.n_tokens_, other.hidden_, other.device_) {
  if (bytes()) {
    detail::DeviceGuard guard(device_);
    copy_device(data_, other.data_, bytes());
  }
}

Residual& Residual::operator=(const Residual& other) {
  if (this == &other) return *this;
  if (data_ && bytes() == other.bytes() && device_ == other.device_) {
    n_tokens_ = other.n_tokens_;
    hidden_ = other.hidden_;
    detail::DeviceGuard guard(device_);
    copy_device(data_, other.data_, bytes());
    return *this;
  }
  Residual copy(other);
  *this = std::move(copy);
  return *this;
}

Residual::Residual(Residual&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      n_tokens_(std::exchange(other.n_tokens_, 0)),
      hidden_(std::exchange(other.hidden_, 0)),
      device_(other.device_) {}

Residual& Residual::operator=(Residual&& other) noexcept {
  if (this != &other) {
    if (data_) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    n_tokens_ = std::exchange(other.n_tokens_, 0);
    hidden_ = std::exchange(other.hidden_, 0);
    device_ = other.device_;
  }
  return *this;
}

Residual::~Residual() {
  if (data_) cudaFree(data_);  // unified addressing: valid from any current device
}

Residual Residual::upload(std::span<const float> host, int n_tokens, int hidden, int device) {
  if (n_tokens < 0 || hidden < 0 ||
      host.size() != static_cast<std::size_t>(n_tokens) * static_cast<std::size_t>(hidden))
    throw invalid_argument("host data of " + std::to_string(host.size()) + " floats for a " +
                               std::to_string(n_tokens) + " x " + std::to_string(hidden) +
                               " residual stream",
                           "cuda::Residual::upload");
  Residual r(n_tokens, hidden, device);
  if (r.bytes()) {
    detail::DeviceGuard guard(device);
    BOSCH_CUDA_CHECK(cudaMemcpy(r.data_, host.data(), r.bytes(), cudaMemcpyHostToDevice));
  }
  return r;
}

std::vector<float> Residual::download() const {
  std::vector<float> host(static_cast<std::size_t>(n_tokens_) * static_cast<std::size_t>(hidden_));
  if (!host.empty()) {
    detail::DeviceGuard guard(device_);
    BOSCH_CUDA_CHECK(cudaMemcpy(host.data(), data_, bytes(), cudaMemcpyDeviceToHost));
  }
  return host;
}

}  // namespace bosch::cuda
