// SPDX-License-Identifier: Apache-2.0
// The inner kernels of the bf16 products (cpu/bf16.hpp): one block of rows
// times one group of packed output panels, on AMX tiles (bf16_amx.cpp), on
// AVX512_BF16 (bf16_avx512.cpp; both compiled per function for their
// target) or emulated with fp32 FMAs (bf16_gemm.cpp). The last two give the
// same bits; AMX accumulates in its own order.
#pragma once

#include <cstddef>
#include <cstdint>

namespace bosch::cpu::bf16 {

/// Rows [0, rows) of the bf16 activation `a` (row stride lda = 2 k2p values,
/// zeros after the 2 k2 used) times one group of `np` (1..3; 4 with
/// panel_stride, not on AMX) packed panels `b` (k2 pairs of k2p stored, see
/// PackedMatrix), written to the first `ncols` (1..16 np) columns of `c` (row
/// stride ldc), plus bias[0 .. ncols) when `bias` is not null.
struct Block {
  const std::uint16_t* a = nullptr;
  std::size_t lda = 0;
  std::size_t rows = 0;
  const std::uint16_t* b = nullptr;
  int k2 = 0;
  int k2p = 0;
  int np = 0;
  int ncols = 0;
  float* c = nullptr;
  std::size_t ldc = 0;
  const float* bias = nullptr;
  /// Values between consecutive pairs of one panel in `b`, and between the
  /// np panels (0 = the packed group layout: np x 32 and 32). Attention's
  /// keys and values are packed panel after panel (cpu/attention_bf16.cpp),
  /// so any run of panels is a group. The AMX kernel reads only the packed
  /// group layout.
  std::size_t pair_stride = 0;
  std::size_t panel_stride = 0;
};

/// Whether this build contains the AVX512_BF16 kernel (x86-64 with GCC or Clang).
bool avx512_compiled() noexcept;

/// The block on VDPBF16PS. Call only where the CPU has AVX512F/BW/VL and AVX512_BF16.
void block_avx512(const Block& blk);

/// x[0 .. n) rounded to bf16 with VCVTNE2PS2BF16 (same CPU requirement).
void convert_avx512(const float* x, std::size_t n, std::uint16_t* out);

/// The block with fp32 FMAs in the same order (any CPU).
void block_emulated(const Block& blk);

/// Whether this build contains the AMX kernel (x86-64 Linux with GCC >= 11 or Clang >= 12).
bool amx_compiled() noexcept;

/// The block on AMX tiles: loads its tile configuration, releases the tiles
/// at the end. Call only where detect_cpu_features reported amx_bf16 (which
/// includes the process's tile permission).
void block_amx(const Block& blk);

}  // namespace bosch::cpu::bf16
