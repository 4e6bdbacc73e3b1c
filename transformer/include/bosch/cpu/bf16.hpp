// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file cpu/bf16.hpp
/// bf16 products with fp32 accumulation for the CPU backend's reduced
/// precision (cpu/precision.hpp, docs/precision.md): weight matrices packed
/// once into bf16 panels, activations rounded to bf16 per call, and the
/// product Y = X W^T (+ bias) with the arithmetic of VDPBF16PS.
///
/// Rounding: fp32 -> bf16 rounds to nearest even, flushes denormals to zero
/// and quiets NaNs (VCVTNE2PS2BF16). Accumulation: for output (r, c), with
/// acc = 0 and the k-pairs t = 0, 1, ... in order,
///     acc = fl(acc + x[r][2t+1] w[c][2t+1]);  acc = fl(acc + x[r][2t] w[c][2t])
/// (each bf16 x bf16 product is exact in fp32, so each step is one fp32
/// rounding), then + bias. Both kernels (Bf16Kernel) follow this order, so
/// they agree bitwise except where the hardware flushes a denormal partial
/// sum (|acc| < 1.2e-38), which the emulation keeps.

#include <bosch/cpu/precision.hpp>
#include <bosch/model/model.hpp>

#include <cstddef>
#include <cstdint>
#include <new>
#include <vector>

namespace bosch::cpu {

/// A std::allocator with 64-byte (cache line) alignment: the packed weights
/// and the bf16 activations are read in 64-byte rows (an AVX-512 vector, an
/// AMX tile row), which must not straddle two cache lines.
template <class T>
struct CacheAligned {
  using value_type = T;
  static constexpr std::align_val_t alignment{64};
  CacheAligned() noexcept = default;
  template <class U>
  CacheAligned(const CacheAligned<U>&) noexcept {}
  T* allocate(std::size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), alignment)); }
  void deallocate(T* p, std::size_t) noexcept { ::operator delete(p, alignment); }
  template <class U>
  bool operator==(const CacheAligned<U>&) const noexcept {
    return true;
  }
};

/// bf16 values (raw bits) in cache-aligned storage.
using Bf16Vector = std::vector<std::uint16_t, CacheAligned<std::uint16_t>>;

/// fp32 -> bf16 bits: round to nearest even, denormals to signed zero, NaN
/// quieted (the rule of VCVTNE2PS2BF16).
std::uint16_t to_bf16(float x) noexcept;

/// bf16 bits -> fp32 (exact).
float from_bf16(std::uint16_t b) noexcept;

/// A weight matrix W [rows = outputs, cols = inputs] in bf16, packed for the
/// kernels: outputs in panels of 16 (the last padded with zero outputs),
/// panels in groups of up to 3, inputs in pairs, the pairs padded with zeros
/// to a multiple of 16 (an AMX tile's depth). Group g (panels 3g .. 3g + np
/// - 1) starts at 3g x padded_pairs() x 32 values and holds, for each pair
/// t, for each of its np panels q, for each of 16 outputs j:
/// W[16(3g+q)+j][2t], W[16(3g+q)+j][2t+1] (a panel's pairs are the rows of
/// an AMX B tile, np x 64 bytes apart).
struct PackedMatrix {
  int rows = 0;  ///< outputs (W.rows)
  int cols = 0;  ///< inputs (W.cols)
  Bf16Vector data;
  /// Input pairs: ceil(cols / 2).
  int pairs() const noexcept { return (cols + 1) / 2; }
  /// Input pairs stored: pairs() rounded up to a multiple of 16.
  int padded_pairs() const noexcept { return (pairs() + 15) / 16 * 16; }
  /// Panels of 16 outputs: ceil(rows / 16).
  int panels() const noexcept { return (rows + 15) / 16; }
  std::size_t bytes() const noexcept { return data.size() * sizeof(std::uint16_t); }
};

/// Row stride (in bf16 values) of a bf16 activation of `cols` inputs: the
/// pairs rounded up to a multiple of 16, twice (= 2 padded_pairs()).
std::size_t bf16_stride(int cols) noexcept;

/// Packs `w` (row-major fp32, W.rows x W.cols) into bf16 panels.
PackedMatrix pack_bf16(const model::Matrix& w);

/// Rounds `rows` rows of `cols` fp32 values (row stride `cols`) to bf16
/// rows of stride bf16_stride(cols), zeros after the `cols` values: the
/// activation layout gemm_bf16 reads. `out` holds rows x bf16_stride(cols)
/// values. Runs on `kernel` (same bits either way); threaded over rows with
/// the calling thread's OpenMP thread count.
void convert_bf16(const float* x, std::size_t rows, int cols, std::uint16_t* out, Bf16Kernel kernel);

/// Y = X W^T (+ bias) in fp32: `xb` is the bf16 activation of `rows` rows
/// (convert_bf16 of w.cols inputs), Y is [rows, w.rows] row-major, `bias`
/// (w.rows entries) may be null. Threaded over blocks of rows and output
/// panels with the calling thread's OpenMP thread count; the result does not
/// depend on the thread count, the blocking or the other rows. `kernel` must
/// be runnable on this CPU (as choose_precision picks it). The avx512 and
/// emulated kernels follow the arithmetic of the file comment bit for bit;
/// the AMX kernel (TDPBF16PS) rounds its fp32 accumulation in an
/// implementation-defined way, so it differs from them at the fp32 level
/// (within the sum's fp32 error bound), never in the bf16 rounding of the
/// inputs.
void gemm_bf16(const std::uint16_t* xb, std::size_t rows, const PackedMatrix& w, const float* bias, float* y,
               Bf16Kernel kernel);

/// The packed projection and FFN weights of one decoder layer.
struct Bf16Layer {
  PackedMatrix wq, wk, wv, wo, w_gate, w_up, w_down;
};

/// The bf16 copies of a model's layer weights (embedding, norms, biases and
/// the output projection stay fp32) and the kernel that runs them.
struct Bf16Weights {
  Bf16Kernel kernel = Bf16Kernel::emulated;
  std::vector<Bf16Layer> layers;
  /// Bytes of the packed weights.
  std::size_t bytes() const noexcept;
};

/// Packs every layer of `model` (threaded over matrices).
Bf16Weights pack_bf16(const model::Model& model, Bf16Kernel kernel);

}  // namespace bosch::cpu
