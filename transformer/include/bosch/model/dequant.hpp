// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file model/dequant.hpp
/// Tensor element types of ggml/GGUF and their conversion to fp32.
///
/// Block layouts follow ggml (ggml-common.h / ggml-quants.c). Every block
/// stores its scales as IEEE binary16 ("half"); `QK` is the block's element
/// count, and element j of a block is written y[j]:
///  - Q8_0 (32 elements, 34 bytes): half d; int8 q[32]. y[j] = d * q[j].
///  - Q4_0 (32, 18): half d; uint8 qs[16]. y[j] = d * ((qs[j] & 15) - 8),
///    y[j + 16] = d * ((qs[j] >> 4) - 8), j < 16.
///  - Q4_1 (32, 20): half d, m; uint8 qs[16]. y[j] = d * (qs[j] & 15) + m,
///    y[j + 16] = d * (qs[j] >> 4) + m.
///  - Q5_0 (32, 22): half d; uint32 qh (fifth bits: bit j for y[j], bit j+16
///    for y[j+16]); uint8 qs[16] as Q4_0. y = d * (q - 16), q in [0, 31].
///  - Q5_1 (32, 24): half d, m; uint32 qh; uint8 qs[16]. y = d * q + m.
///  - Q4_K (256, 144): half d, dmin; uint8 scales[12] (eight 6-bit scales and
///    eight 6-bit mins, packed); uint8 qs[128]. Sub-block s (32 elements) is
///    y = d * sc[s] * q - dmin * mn[s]; the 64 elements of a pair of sub-blocks
///    share 32 bytes of qs (low nibbles first sub-block, high nibbles second).
///  - Q5_K (256, 176): as Q4_K with uint8 qh[32] between scales and qs; the
///    fifth bit of element l of sub-block s is bit s of qh[l].
///  - Q6_K (256, 210): uint8 ql[128] (low 4 bits), uint8 qh[64] (high 2 bits),
///    int8 scales[16] (one per 16 elements), half d. y = d * scale * (q - 32).
///  - F32, F16 (binary16), BF16 (upper half of a binary32): one element each.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace bosch::model {

/// ggml tensor type ids as stored in GGUF tensor infos (ggml.h `enum ggml_type`).
/// Listed are the types whose block layout this library knows; of those,
/// can_dequantize() says which it converts to fp32.
enum class GgmlType : std::uint32_t {
  f32 = 0,
  f16 = 1,
  q4_0 = 2,
  q4_1 = 3,
  q5_0 = 6,
  q5_1 = 7,
  q8_0 = 8,
  q8_1 = 9,
  q2_k = 10,
  q3_k = 11,
  q4_k = 12,
  q5_k = 13,
  q6_k = 14,
  q8_k = 15,
  i8 = 24,
  i16 = 25,
  i32 = 26,
  i64 = 27,
  f64 = 28,
  bf16 = 30,
};

/// Storage unit of a type: `block_elements` consecutive elements take `block_bytes`.
struct BlockFormat {
  int block_elements;
  int block_bytes;
};

/// The block format of ggml type id `id`, or nullopt for an id this library
/// does not know (the caller reports it as an unknown tensor type).
std::optional<BlockFormat> block_format(std::uint32_t id) noexcept;

/// ggml's name of a type id ("F32", "Q4_K", ...), or "type <id>" when unknown.
std::string type_name(std::uint32_t id);

/// True for the types dequantize() converts: F32, F16, BF16, Q8_0, Q4_0, Q4_1,
/// Q5_0, Q5_1, Q4_K, Q5_K, Q6_K.
bool can_dequantize(GgmlType type) noexcept;

/// Bytes taken by `elements` elements of `type` (elements must be a multiple
/// of the block size; nullopt when it is not, the type is unknown, or the
/// size overflows 64 bits).
std::optional<std::uint64_t> storage_bytes(std::uint32_t type, std::uint64_t elements) noexcept;

/// Converts `src`, holding exactly storage_bytes(type, dst.size()) bytes of
/// `type`, to fp32 in `dst`. Large tensors are split across OpenMP threads.
/// Throws bosch::invalid_argument when the type cannot be dequantized or the
/// sizes do not match (the readers check both before calling).
void dequantize(GgmlType type, std::span<const std::byte> src, std::span<float> dst);

/// IEEE binary16 bits to float (exact; subnormals, infinities and NaN kept).
float fp16_to_fp32(std::uint16_t h) noexcept;
/// Float to IEEE binary16 bits, round to nearest even (overflow to infinity).
std::uint16_t fp32_to_fp16(float f) noexcept;
/// bfloat16 bits to float (exact).
float bf16_to_fp32(std::uint16_t b) noexcept;
/// Float to bfloat16 bits, round to nearest even (NaN kept a NaN).
std::uint16_t fp32_to_bf16(float f) noexcept;

}  // namespace bosch::model
