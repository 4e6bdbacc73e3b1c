// SPDX-License-Identifier: Apache-2.0
// Conversion of ggml tensor types to fp32 (see bosch/model/dequant.hpp for
// the block layouts, which follow ggml's definitions).

#include <bosch/error.hpp>
#include <bosch/model/dequant.hpp>

#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace bosch::model {

namespace {

constexpr int qk = 32;    // elements of a Q4_0/Q4_1/Q8_0 block
constexpr int qk_k = 256; // elements of a K-quant super-block

inline std::uint16_t read_u16(const std::byte* p) noexcept {
  std::uint16_t v;
  std::memcpy(&v, p, 2);
  if constexpr (std::endian::native == std::endian::big) v = static_cast<std::uint16_t>((v >> 8) | (v << 8));
  return v;
}

inline const std::uint8_t* u8(const std::byte* p) noexcept {
  return reinterpret_cast<const std::uint8_t*>(p);
}

/// All 65536 binary16 values as floats (one table shared by all threads).
const std::array<float, 65536>& half_table() {
  static const auto table = [] {
    std::array<float, 65536> t{};
    for (std::uint32_t h = 0; h < 65536; ++h) {
      const std::uint32_t sign = (h & 0x8000u) << 16;
      const std::uint32_t exp = (h >> 10) & 0x1fu;
      const std::uint32_t mant = h & 0x3ffu;
      float v;
      if (exp == 0) {
        v = std::ldexp(static_cast<float>(mant), -24);
        if (sign) v = -v;
      } else if (exp == 31) {
        v = std::bit_cast<float>(sign | 0x7f800000u | (mant << 13));
      } else {
        v = std::bit_cast<float>(sign | ((exp + 112u) << 23) | (mant << 13));
      }
      t[h] = v;
    }
    return t;
  }();
  return table;
}

inline float half(const std::byte* p, const std::array<float, 65536>& t) noexcept {
  return t[read_u16(p)];
}

void block_q8_0(const std::byte* b, float* y, const std::array<float, 65536>& t) noexcept {
  const float d = half(b, t);
  const auto* q = reinterpret_cast<const std::int8_t*>(b + 2);
  for (int j = 0; j < qk; ++j) y[j] = d * static_cast<float>(q[j]);
}

void block_q4_0(const std::byte* b, float* y, const std::array<float, 65536>& t) noexcept {
  const float d = half(b, t);
  const std::uint8_t* qs = u8(b + 2);
  for (int j = 0; j < qk / 2; ++j) {
    y[j] = d * static_cast<float>((qs[j] & 0x0f) - 8);
    y[j + qk / 2] = d * static_cast<float>((qs[j] >> 4) - 8);
  }
}

void block_q4_1(const std::byte* b, float* y, const std::array<float, 65536>& t) noexcept {
  const float d = half(b, t);
  const float m = half(b + 2, t);
  const std::uint8_t* qs = u8(b + 4);
  for (int j = 0; j < qk / 2; ++j) {
    y[j] = d * static_cast<float>(qs[j] & 0x0f) + m;
    y[j + qk / 2] = d * static_cast<float>(qs[j] >> 4) + m;
  }
}

inline std::uint32_t read_u32(const std::byte* p) noexcept {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

void block_q5_0(const std::byte* b, float* y, const std::array<float, 65536>& t) noexcept {
  const float d = half(b, t);
  const std::uint32_t qh = read_u32(b + 2);
  const std::uint8_t* qs = u8(b + 6);
  for (int j = 0; j < qk / 2; ++j) {
    const int hi0 = static_cast<int>((qh >> j) & 1u) << 4;
    const int hi1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
    y[j] = d * static_cast<float>(((qs[j] & 0x0f) | hi0) - 16);
    y[j + qk / 2] = d * static_cast<float>(((qs[j] >> 4) | hi1) - 16);
  }
}

void block_q5_1(const std::byte* b, float* y, const std::array<float, 65536>& t) noexcept {
  const float d = half(b, t);
  const float m = half(b + 2, t);
  const std::uint32_t qh = read_u32(b + 4);
  const std::uint8_t* qs = u8(b + 8);
  for (int j = 0; j < qk / 2; ++j) {
    const int hi0 = static_cast<int>((qh >> j) & 1u) << 4;
    const int hi1 = static_cast<int>((qh >> (j + 16)) & 1u) << 4;
    y[j] = d * static_cast<float>((qs[j] & 0x0f) | hi0) + m;
    y[j + qk / 2] = d * static_cast<float>((qs[j] >> 4) | hi1) + m;
  }
}

/// Scale and min of sub-block j (0..7) from Q4_K's 12 packed bytes: entries
/// 0-3 are the low 6 bits of bytes 0-3 (scales) and 4-7 (mins); entries 4-7
/// take their low 4 bits from bytes 8-11 and their top 2 bits from the top
/// bits of bytes 0-3 (scales) and 4-7 (mins).
inline void q4_k_scale_min(int j, const std::uint8_t* s, int& scale, int& min) noexcept {
  if (j < 4) {
    scale = s[j] & 63;
    min = s[j + 4] & 63;
  } else {
    scale = (s[j + 4] & 0x0f) | ((s[j - 4] >> 6) << 4);
    min = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
  }
}

/// Q4_K and Q5_K: d, dmin (fp16), 12 scale bytes, then for Q5_K qh[32]
/// holding each element's fifth bit (bit 2p of qh[l] for element l of
/// sub-block 2p, bit 2p+1 for 2p+1), then the low nibbles qs[128].
template <bool fifth_bit>
void block_q45_k(const std::byte* b, float* y, const std::array<float, 65536>& t) noexcept {
  const float d = half(b, t);
  const float dmin = half(b + 2, t);
  const std::uint8_t* scales = u8(b + 4);
  const std::uint8_t* qh = u8(b + 16);
  const std::uint8_t* q = u8(b + (fifth_bit ? 48 : 16));
  auto high = [&](int l, int bit) { return fifth_bit ? ((qh[l] >> bit) & 1) << 4 : 0; };
  for (int pair = 0; pair < 4; ++pair) {
    int sc0, m0, sc1, m1;
    q4_k_scale_min(2 * pair, scales, sc0, m0);
    q4_k_scale_min(2 * pair + 1, scales, sc1, m1);
    const float d0 = d * static_cast<float>(sc0), min0 = dmin * static_cast<float>(m0);
    const float d1 = d * static_cast<float>(sc1), min1 = dmin * static_cast<float>(m1);
    for (int l = 0; l < 32; ++l) y[l] = d0 * static_cast<float>((q[l] & 0x0f) | high(l, 2 * pair)) - min0;
    for (int l = 0; l < 32; ++l) y[32 + l] = d1 * static_cast<float>((q[l] >> 4) | high(l, 2 * pair + 1)) - min1;
    y += 64;
    q += 32;
  }
}

void block_q4_k(const std::byte* b, float* y, const std::array<float, 65536>& t) noexcept {
  block_q45_k<false>(b, y, t);
}
void block_q5_k(const std::byte* b, float* y, const std::array<float, 65536>& t) noexcept {
  block_q45_k<true>(b, y, t);
}

void block_q6_k(const std::byte* b, float* y, const std::array<float, 65536>& t) noexcept {
  const std::uint8_t* ql = u8(b);
  const std::uint8_t* qh = u8(b + 128);
  const auto* sc = reinterpret_cast<const std::int8_t*>(b + 192);
  const float d = half(b + 208, t);
  for (int half_block = 0; half_block < 2; ++half_block) {
    for (int l = 0; l < 32; ++l) {
      const int is = l / 16;
      const int q1 = ((ql[l] & 0x0f) | (((qh[l] >> 0) & 3) << 4)) - 32;
      const int q2 = ((ql[l + 32] & 0x0f) | (((qh[l] >> 2) & 3) << 4)) - 32;
      const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
      const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
      y[l] = d * static_cast<float>(sc[is] * q1);
      y[l + 32] = d * static_cast<float>(sc[is + 2] * q2);
      y[l + 64] = d * static_cast<float>(sc[is + 4] * q3);
      y[l + 96] = d * static_cast<float>(sc[is + 6] * q4);
    }
    y += 128;
    ql += 64;
    qh += 32;
    sc += 8;
  }
}

using BlockFn = void (*)(const std::byte*, float*, const std::array<float, 65536>&) noexcept;

void scalar_f32(const std::byte* b, float* y, const std::array<float, 65536>&) noexcept {
  std::memcpy(y, b, 4);
}
void scalar_f16(const std::byte* b, float* y, const std::array<float, 65536>& t) noexcept {
  *y = half(b, t);
}
void scalar_bf16(const std::byte* b, float* y, const std::array<float, 65536>&) noexcept {
  *y = bf16_to_fp32(read_u16(b));
}

}  // namespace

std::optional<BlockFormat> block_format(std::uint32_t id) noexcept {
  switch (static_cast<GgmlType>(id)) {
    case GgmlType::f32: return BlockFormat{1, 4};
    case GgmlType::f16: return BlockFormat{1, 2};
    case GgmlType::q4_0: return BlockFormat{32, 18};
    case GgmlType::q4_1: return BlockFormat{32, 20};
    case GgmlType::q5_0: return BlockFormat{32, 22};
    case GgmlType::q5_1: return BlockFormat{32, 24};
    case GgmlType::q8_0: return BlockFormat{32, 34};
    case GgmlType::q8_1: return BlockFormat{32, 36};
    case GgmlType::q2_k: return BlockFormat{256, 84};
    case GgmlType::q3_k: return BlockFormat{256, 110};
    case GgmlType::q4_k: return BlockFormat{256, 144};
    case GgmlType::q5_k: return BlockFormat{256, 176};
    case GgmlType::q6_k: return BlockFormat{256, 210};
    case GgmlType::q8_k: return BlockFormat{256, 292};
    case GgmlType::i8: return BlockFormat{1, 1};
    case GgmlType::i16: return BlockFormat{1, 2};
    case GgmlType::i32: return BlockFormat{1, 4};
    case GgmlType::i64: return BlockFormat{1, 8};
    case GgmlType::f64: return BlockFormat{1, 8};
    case GgmlType::bf16: return BlockFormat{1, 2};
  }
  return std::nullopt;
}

std::string type_name(std::uint32_t id) {
  switch (static_cast<GgmlType>(id)) {
    case GgmlType::f32: return "F32";
    case GgmlType::f16: return "F16";
    case GgmlType::q4_0: return "Q4_0";
    case GgmlType::q4_1: return "Q4_1";
    case GgmlType::q5_0: return "Q5_0";
    case GgmlType::q5_1: return "Q5_1";
    case GgmlType::q8_0: return "Q8_0";
    case GgmlType::q8_1: return "Q8_1";
    case GgmlType::q2_k: return "Q2_K";
    case GgmlType::q3_k: return "Q3_K";
    case GgmlType::q4_k: return "Q4_K";
    case GgmlType::q5_k: return "Q5_K";
    case GgmlType::q6_k: return "Q6_K";
    case GgmlType::q8_k: return "Q8_K";
    case GgmlType::i8: return "I8";
    case GgmlType::i16: return "I16";
    case GgmlType::i32: return "I32";
    case GgmlType::i64: return "I64";
    case GgmlType::f64: return "F64";
    case GgmlType::bf16: return "BF16";
  }
  return "type " + std::to_string(id);
}

bool can_dequantize(GgmlType type) noexcept {
  switch (type) {
    case GgmlType::f32:
    case GgmlType::f16:
    case GgmlType::bf16:
    case GgmlType::q8_0:
    case GgmlType::q4_0:
    case GgmlType::q4_1:
    case GgmlType::q4_k:
    case GgmlType::q6_k:
    case GgmlType::q5_0:
    case GgmlType::q5_1:
    case GgmlType::q5_k: return true;
    default: return false;
  }
}

std::optional<std::uint64_t> storage_bytes(std::uint32_t type, std::uint64_t elements) noexcept {
  const auto f = block_format(type);
  if (!f) return std::nullopt;
  const auto be = static_cast<std::uint64_t>(f->block_elements);
  if (elements % be != 0) return std::nullopt;
  const std::uint64_t blocks = elements / be;
  const auto bb = static_cast<std::uint64_t>(f->block_bytes);
  if (blocks > std::numeric_limits<std::uint64_t>::max() / bb) return std::nullopt;
  return blocks * bb;
}

void dequantize(GgmlType type, std::span<const std::byte> src, std::span<float> dst) {
  if (!can_dequantize(type))
    throw invalid_argument("cannot dequantize tensor type " +
                           type_name(static_cast<std::uint32_t>(type)));
  const auto need = storage_bytes(static_cast<std::uint32_t>(type), dst.size());
  if (!need || *need != src.size())
    throw invalid_argument("dequantize: " + std::to_string(src.size()) + " bytes of " +
                           type_name(static_cast<std::uint32_t>(type)) + " do not hold " +
                           std::to_string(dst.size()) + " elements");
  const BlockFormat f = *block_format(static_cast<std::uint32_t>(type));
  BlockFn fn = nullptr;
  switch (type) {
    case GgmlType::f32: fn = scalar_f32; break;
    case GgmlType::f16: fn = scalar_f16; break;
    case GgmlType::bf16: fn = scalar_bf16; break;
    case GgmlType::q8_0: fn = block_q8_0; break;
    case GgmlType::q4_0: fn = block_q4_0; break;
    case GgmlType::q4_1: fn = block_q4_1; break;
    case GgmlType::q4_k: fn = block_q4_k; break;
    case GgmlType::q6_k: fn = block_q6_k; break;
    case GgmlType::q5_0: fn = block_q5_0; break;
    case GgmlType::q5_1: fn = block_q5_1; break;
    case GgmlType::q5_k: fn = block_q5_k; break;
    default: break;
  }
  if (type == GgmlType::f32) {  // plain copy (the mapping may be unaligned for floats)
    if (!dst.empty()) std::memcpy(dst.data(), src.data(), src.size());
    return;
  }
  const auto& table = half_table();
  const auto blocks = static_cast<std::int64_t>(dst.size() / static_cast<std::size_t>(f.block_elements));
  const std::byte* s = src.data();
  float* y = dst.data();
  const auto be = static_cast<std::size_t>(f.block_elements);
  const auto bb = static_cast<std::size_t>(f.block_bytes);
#pragma omp parallel for schedule(static) if (dst.size() >= (1u << 18))
  for (std::int64_t i = 0; i < blocks; ++i)
    fn(s + static_cast<std::size_t>(i) * bb, y + static_cast<std::size_t>(i) * be, table);
}

float fp16_to_fp32(std::uint16_t h) noexcept { return half_table()[h]; }

std::uint16_t fp32_to_fp16(float f) noexcept {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  const auto sign = static_cast<std::uint16_t>((x >> 16) & 0x8000u);
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u)  // infinity or NaN (NaN keeps a set quiet bit)
    return static_cast<std::uint16_t>(sign | 0x7c00u | (x > 0x7f800000u ? 0x200u | ((x >> 13) & 0x3ffu) : 0u));
  if (x >= 0x477ff000u) return static_cast<std::uint16_t>(sign | 0x7c00u);  // rounds past 65504
  if (x < 0x38800000u) {  // below 2^-14: a binary16 subnormal (or zero)
    const float a = std::bit_cast<float>(x) * 16777216.0f;  // exact: scaling by 2^24
    return static_cast<std::uint16_t>(sign | static_cast<std::uint32_t>(std::nearbyint(a)));
  }
  x += 0xfffu + ((x >> 13) & 1u);  // round to nearest, ties to even
  x -= (127u - 15u) << 23;
  return static_cast<std::uint16_t>(sign | (x >> 13));
}

float bf16_to_fp32(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

std::uint16_t fp32_to_bf16(float f) noexcept {
  std::uint32_t x = std::bit_cast<std::uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<std::uint16_t>((x >> 16) | 0x40u);
  x += 0x7fffu + ((x >> 16) & 1u);
  return static_cast<std::uint16_t>(x >> 16);
}

}  // namespace bosch::model
