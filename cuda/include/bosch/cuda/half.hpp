// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file cuda/half.hpp
/// Host-side conversions between fp32 and the 16-bit formats the CUDA backend
/// stores weights and activations in (plain C++, no CUDA headers), used to
/// upload weights and to read device results back.
///
/// bf16 (bfloat16: 1 sign, 8 exponent, 7 mantissa bits) keeps fp32's range;
/// fp16 (IEEE binary16: 5 exponent, 10 mantissa bits) has more precision but
/// overflows above 65504. Both round to nearest, ties to even, as the CUDA
/// intrinsics __float2bfloat16_rn and __float2half_rn do, so a value converted
/// here equals the value the device would produce.

#include <bit>
#include <cmath>
#include <cstdint>

namespace bosch::cuda {

/// The 16-bit element type of device weights and activations.
enum class DType {
  bf16,  ///< bfloat16 (default): fp32 range, 8-bit significand (unit roundoff 2^-8)
  fp16,  ///< IEEE half: 11-bit significand (unit roundoff 2^-11), max 65504
};

/// "bf16" or "fp16".
inline const char* to_string(DType t) noexcept { return t == DType::bf16 ? "bf16" : "fp16"; }

/// Unit roundoff u = 2^-p of a format with p significand bits: one rounding
/// to nearest changes a (normal) value x by at most u * |x|.
inline double unit_roundoff(DType t) noexcept { return t == DType::bf16 ? 0x1p-8 : 0x1p-11; }

/// fp32 -> bf16 bits, round to nearest even; NaN stays NaN (quiet).
inline std::uint16_t float_to_bf16(float f) noexcept {
  std::uint32_t u = std::bit_cast<std::uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<std::uint16_t>(u >> 16);
}

/// bf16 bits -> fp32 (exact).
inline float bf16_to_float(std::uint16_t h) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(h) << 16);
}

/// fp32 -> IEEE half bits, round to nearest even; overflow gives +-inf,
/// tiny values become subnormal halves or zero; NaN stays NaN.
inline std::uint16_t float_to_fp16(float f) noexcept {
  const std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const std::uint32_t sign = (x >> 16) & 0x8000u;
  std::uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return static_cast<std::uint16_t>(sign | 0x7e00u);  // NaN
  if (a >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u); // >= 65520: inf
  if (a < 0x38800000u) {  // below 2^-14: a subnormal half (or zero)
    // Scaling by 2^24 is exact; rounding it to an integer gives the subnormal
    // mantissa (1024 = the smallest normal, which has the same bit pattern).
    const float scaled = std::bit_cast<float>(a) * 16777216.0f;
    return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(std::nearbyint(scaled)));
  }
  a += 0xfffu + ((a >> 13) & 1u);  // round the 13 dropped bits to nearest even
  return static_cast<std::uint16_t>(sign | ((a >> 13) - (112u << 10)));
}

/// IEEE half bits -> fp32 (exact).
inline float fp16_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exp = (h >> 10) & 0x1fu;
  const std::uint32_t man = h & 0x3ffu;
  if (exp == 0) {  // zero or subnormal: man * 2^-24
    const float v = static_cast<float>(man) * 0x1p-24f;
    return sign ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7f800000u | (man << 13));
  return std::bit_cast<float>(sign | ((exp + 112u) << 23) | (man << 13));
}

/// fp32 -> bits of `t`.
inline std::uint16_t to_half_bits(float f, DType t) noexcept {
  return t == DType::bf16 ? float_to_bf16(f) : float_to_fp16(f);
}
/// Bits of `t` -> fp32.
inline float from_half_bits(std::uint16_t h, DType t) noexcept {
  return t == DType::bf16 ? bf16_to_float(h) : fp16_to_float(h);
}
/// f rounded to `t` and back: the value the device holds for f.
inline float round_to(float f, DType t) noexcept { return from_half_bits(to_half_bits(f, t), t); }

}  // namespace bosch::cuda
