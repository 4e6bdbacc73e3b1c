// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file tests/model/writers.hpp
/// Test utilities (header-only) that WRITE model files, so tests can create
/// tiny random-weight models themselves instead of shipping binaries:
///
///  - reference quantizers for the ggml block types (quantize()), written
///    from the block layouts in bosch/model/dequant.hpp;
///  - GgufWriter: any GGUF v2/v3 file (metadata of every type, tensors of
///    F32/F16/BF16/Q8_0/Q4_0/Q4_1/Q4_K/Q6_K from floats, or raw bytes);
///  - SafetensorsWriter: a safetensors file (F32/F16/BF16);
///  - random_model(): a tiny decoder (Config + Weights + byte-level BPE
///    TokenizerSpec) with seeded random weights, for llama/qwen2/qwen3 and
///    qwen3moe (experts in all layers but TinySpec::dense_layers);
///  - write_gguf() / write_hf(): that model as a GGUF file (llama/qwen2/qwen3/
///    qwen3moe metadata, 3-D expert tensors, tokenizer.ggml.*) or as a
///    Hugging Face directory (config.json, one tensor per expert,
///    a minimal byte-level BPE tokenizer.json, one safetensors file or
///    shards with model.safetensors.index.json);
///  - rope_rows_neox_to_interleaved(): the row permutation llama.cpp's
///    converter applies to Q/K of Llama models, so a test can write the SAME
///    function as an HF checkpoint (neox RoPE) and as a GGUF llama file
///    (interleaved RoPE).
///
/// Everything throws std::runtime_error on misuse (e.g. a quantized type for
/// a row length that is not a multiple of its block size). Randomness:
/// boost::random::mt19937_64 with boost distributions, explicitly seeded.

#include <bosch/model/config.hpp>
#include <bosch/model/dequant.hpp>
#include <bosch/model/tokenizer_spec.hpp>
#include <bosch/model/weights.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_real_distribution.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include <unistd.h>

namespace bosch::test::writers {

using Bytes = std::vector<std::byte>;

// ================================================================================================
// Little-endian byte appenders
// ================================================================================================

template <class T>
inline void put(Bytes& out, T v) {
  static_assert(std::is_trivially_copyable_v<T>);
  const auto* p = reinterpret_cast<const std::byte*>(&v);
  out.insert(out.end(), p, p + sizeof(T));
}

inline void put_string(Bytes& out, const std::string& s) {
  put<std::uint64_t>(out, s.size());
  const auto* p = reinterpret_cast<const std::byte*>(s.data());
  out.insert(out.end(), p, p + s.size());
}

/// Writes `bytes` to `path` (creating parent directories).
inline void write_file(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error("writers: cannot create " + path.string());
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("writers: cannot write " + path.string());
}

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  write_file(path, std::span(reinterpret_cast<const std::byte*>(text.data()), text.size()));
}

/// Reads a whole file (for tests that corrupt a written file).
inline Bytes read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("writers: cannot open " + path.string());
  in.seekg(0, std::ios::end);
  Bytes b(static_cast<std::size_t>(in.tellg()));
  in.seekg(0);
  in.read(reinterpret_cast<char*>(b.data()), static_cast<std::streamsize>(b.size()));
  return b;
}

// ================================================================================================
// Reference quantizers (simple, not llama.cpp's optimized search; their max
// errors are stated per type)
// ================================================================================================

namespace detail {
inline void put_half(Bytes& out, float v) { put<std::uint16_t>(out, model::fp32_to_fp16(v)); }
/// The fp16-rounded value of v (what the block actually stores).
inline float as_half(float v) { return model::fp16_to_fp32(model::fp32_to_fp16(v)); }
inline int clampi(long v, int lo, int hi) { return static_cast<int>(std::clamp<long>(v, lo, hi)); }
}  // namespace detail

/// Q8_0: per 32 values d = max|x| / 127, q = round(x / d). Max error d/2 (plus
/// the fp16 rounding of d, relative 2^-11 of |x|).
inline void quantize_q8_0_block(const float* x, Bytes& out) {
  float amax = 0;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::abs(x[j]));
  const float d = detail::as_half(amax / 127.0f);
  detail::put_half(out, d);
  for (int j = 0; j < 32; ++j)
    put<std::int8_t>(out, static_cast<std::int8_t>(d == 0 ? 0 : detail::clampi(std::lround(x[j] / d), -127, 127)));
}

/// Q4_0: per 32 values, m = the value of largest magnitude, d = m / -8,
/// q = clamp(round(x / d) + 8, 0, 15). Max error |d| (values of the other
/// sign than m clamp at +7; others d/2).
inline void quantize_q4_0_block(const float* x, Bytes& out) {
  float m = 0;
  for (int j = 0; j < 32; ++j)
    if (std::abs(x[j]) > std::abs(m)) m = x[j];
  const float d = detail::as_half(m / -8.0f);
  detail::put_half(out, d);
  auto q = [&](float v) { return d == 0 ? 8 : detail::clampi(std::lround(v / d) + 8, 0, 15); };
  for (int j = 0; j < 16; ++j)
    put<std::uint8_t>(out, static_cast<std::uint8_t>(q(x[j]) | (q(x[j + 16]) << 4)));
}

/// Q4_1: per 32 values, d = (max - min) / 15, m = min, q = round((x - m) / d).
/// Max error d/2 (plus fp16 rounding of d and m).
inline void quantize_q4_1_block(const float* x, Bytes& out) {
  float lo = x[0], hi = x[0];
  for (int j = 1; j < 32; ++j) lo = std::min(lo, x[j]), hi = std::max(hi, x[j]);
  const float d = detail::as_half((hi - lo) / 15.0f), m = detail::as_half(lo);
  detail::put_half(out, d);
  detail::put_half(out, m);
  auto q = [&](float v) { return d == 0 ? 0 : detail::clampi(std::lround((v - m) / d), 0, 15); };
  for (int j = 0; j < 16; ++j)
    put<std::uint8_t>(out, static_cast<std::uint8_t>(q(x[j]) | (q(x[j + 16]) << 4)));
}

/// Q4_K: per 256 values, eight sub-blocks of 32 with a 6-bit scale sc and a
/// 6-bit min mn under fp16 super-scales d, dmin: y = d*sc*q - dmin*mn. Each
/// sub-block's min is clamped to <= 0 (the format subtracts mins), its scale
/// rounded up so the range is covered. Max error per sub-block
/// d*sc/2 + dmin/2 (the rounding of the min).
inline void quantize_q4_k_block(const float* x, Bytes& out) {
  std::array<float, 8> scale{}, mins{};
  for (int s = 0; s < 8; ++s) {
    float lo = 0, hi = x[32 * s];
    for (int l = 0; l < 32; ++l) lo = std::min(lo, x[32 * s + l]), hi = std::max(hi, x[32 * s + l]);
    scale[s] = (hi - lo) / 15.0f;
    mins[s] = -lo;
  }
  const float max_scale = *std::max_element(scale.begin(), scale.end());
  const float max_min = *std::max_element(mins.begin(), mins.end());
  const float d = detail::as_half(max_scale / 63.0f), dmin = detail::as_half(max_min / 63.0f);
  std::array<int, 8> sc{}, mn{};
  for (int s = 0; s < 8; ++s) {
    sc[s] = d == 0 ? 0 : detail::clampi(static_cast<long>(std::ceil(scale[s] / d)), 0, 63);
    mn[s] = dmin == 0 ? 0 : detail::clampi(std::lround(mins[s] / dmin), 0, 63);
  }
  detail::put_half(out, d);
  detail::put_half(out, dmin);
  std::array<std::uint8_t, 12> packed{};
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      packed[static_cast<std::size_t>(j)] |= static_cast<std::uint8_t>(sc[j] & 63);
      packed[static_cast<std::size_t>(j + 4)] |= static_cast<std::uint8_t>(mn[j] & 63);
    } else {
      packed[static_cast<std::size_t>(j + 4)] = static_cast<std::uint8_t>((sc[j] & 0x0f) | ((mn[j] & 0x0f) << 4));
      packed[static_cast<std::size_t>(j - 4)] |= static_cast<std::uint8_t>((sc[j] >> 4) << 6);
      packed[static_cast<std::size_t>(j)] |= static_cast<std::uint8_t>((mn[j] >> 4) << 6);
    }
  }
  for (auto b : packed) put<std::uint8_t>(out, b);
  std::array<int, 256> q{};
  for (int s = 0; s < 8; ++s) {
    const float step = d * static_cast<float>(sc[s]), off = dmin * static_cast<float>(mn[s]);
    for (int l = 0; l < 32; ++l)
      q[static_cast<std::size_t>(32 * s + l)] =
          step == 0 ? 0 : detail::clampi(std::lround((x[32 * s + l] + off) / step), 0, 15);
  }
  for (int p = 0; p < 4; ++p)
    for (int l = 0; l < 32; ++l)
      put<std::uint8_t>(out, static_cast<std::uint8_t>(q[static_cast<std::size_t>(64 * p + l)] |
                                                       (q[static_cast<std::size_t>(64 * p + 32 + l)] << 4)));
}

/// Q6_K: per 256 values, sixteen sub-blocks of 16 with an int8 scale under an
/// fp16 super-scale d: y = d * sc * q, q in [-32, 31]. sc is rounded away
/// from zero so the range is covered. Max error per sub-block d*|sc|/2.
inline void quantize_q6_k_block(const float* x, Bytes& out) {
  std::array<float, 16> scale{};
  for (int s = 0; s < 16; ++s) {
    float amax = 0;
    for (int l = 0; l < 16; ++l) amax = std::max(amax, std::abs(x[16 * s + l]));
    scale[s] = amax / 31.0f;
  }
  const float d = detail::as_half(*std::max_element(scale.begin(), scale.end()) / 127.0f);
  std::array<int, 16> sc{};
  for (int s = 0; s < 16; ++s)
    sc[static_cast<std::size_t>(s)] = d == 0 ? 0 : detail::clampi(static_cast<long>(std::ceil(scale[s] / d)), 0, 127);
  std::array<int, 256> q{};  // unsigned 0..63 (value + 32)
  for (int i = 0; i < 256; ++i) {
    const float step = d * static_cast<float>(sc[static_cast<std::size_t>(i / 16)]);
    q[static_cast<std::size_t>(i)] = (step == 0 ? 0 : detail::clampi(std::lround(x[i] / step), -32, 31)) + 32;
  }
  std::array<std::uint8_t, 128> ql{};
  std::array<std::uint8_t, 64> qh{};
  for (int h = 0; h < 2; ++h)
    for (int l = 0; l < 32; ++l) {
      const auto b = static_cast<std::size_t>(128 * h + l);
      const int q1 = q[b], q2 = q[b + 32], q3 = q[b + 64], q4 = q[b + 96];
      ql[static_cast<std::size_t>(64 * h + l)] = static_cast<std::uint8_t>((q1 & 0x0f) | ((q3 & 0x0f) << 4));
      ql[static_cast<std::size_t>(64 * h + l + 32)] = static_cast<std::uint8_t>((q2 & 0x0f) | ((q4 & 0x0f) << 4));
      qh[static_cast<std::size_t>(32 * h + l)] =
          static_cast<std::uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
    }
  for (auto b : ql) put<std::uint8_t>(out, b);
  for (auto b : qh) put<std::uint8_t>(out, b);
  for (int s : sc) put<std::int8_t>(out, static_cast<std::int8_t>(s));
  detail::put_half(out, d);
}

/// `x` encoded as ggml type `type` (F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K,
/// Q6_K); x.size() must be a multiple of the block size.
inline Bytes quantize(model::GgmlType type, std::span<const float> x) {
  const auto f = model::block_format(static_cast<std::uint32_t>(type));
  if (!f || x.size() % static_cast<std::size_t>(f->block_elements) != 0)
    throw std::runtime_error("writers::quantize: " + model::type_name(static_cast<std::uint32_t>(type)) +
                             " cannot hold " + std::to_string(x.size()) + " values");
  Bytes out;
  out.reserve(x.size() / static_cast<std::size_t>(f->block_elements) * static_cast<std::size_t>(f->block_bytes));
  const std::size_t be = static_cast<std::size_t>(f->block_elements);
  for (std::size_t i = 0; i < x.size(); i += be) {
    const float* p = x.data() + i;
    switch (type) {
      case model::GgmlType::f32: put<float>(out, *p); break;
      case model::GgmlType::f16: put<std::uint16_t>(out, model::fp32_to_fp16(*p)); break;
      case model::GgmlType::bf16: put<std::uint16_t>(out, model::fp32_to_bf16(*p)); break;
      case model::GgmlType::q8_0: quantize_q8_0_block(p, out); break;
      case model::GgmlType::q4_0: quantize_q4_0_block(p, out); break;
      case model::GgmlType::q4_1: quantize_q4_1_block(p, out); break;
      case model::GgmlType::q4_k: quantize_q4_k_block(p, out); break;
      case model::GgmlType::q6_k: quantize_q6_k_block(p, out); break;
      default:
        throw std::runtime_error("writers::quantize: no quantizer for " +
                                 model::type_name(static_cast<std::uint32_t>(type)));
    }
  }
  return out;
}

// ================================================================================================
// GGUF
// ================================================================================================

/// Builds a GGUF file in memory: metadata in insertion order, then the tensor
/// directory, then the data, each tensor at an offset aligned to `alignment`.
class GgufWriter {
 public:
  /// GGUF value type ids (gguf.h).
  enum Type : std::uint32_t { u8 = 0, i8, u16, i16, u32, i32, f32, boolean, string, array, u64, i64, f64 };

  void set_u8(const std::string& k, std::uint8_t v) { scalar(k, u8, v); }
  void set_i8(const std::string& k, std::int8_t v) { scalar(k, i8, v); }
  void set_u16(const std::string& k, std::uint16_t v) { scalar(k, u16, v); }
  void set_i16(const std::string& k, std::int16_t v) { scalar(k, i16, v); }
  void set_u32(const std::string& k, std::uint32_t v) {
    scalar(k, u32, v);
    if (k == "general.alignment") alignment_ = v;
  }
  void set_i32(const std::string& k, std::int32_t v) { scalar(k, i32, v); }
  void set_u64(const std::string& k, std::uint64_t v) { scalar(k, u64, v); }
  void set_i64(const std::string& k, std::int64_t v) { scalar(k, i64, v); }
  void set_f32(const std::string& k, float v) { scalar(k, f32, v); }
  void set_f64(const std::string& k, double v) { scalar(k, f64, v); }
  void set_bool(const std::string& k, bool v) { scalar(k, boolean, static_cast<std::uint8_t>(v)); }
  void set_string(const std::string& k, const std::string& v) {
    Bytes b;
    put_string(b, v);
    raw_kv(k, string, std::move(b));
  }
  void set_strings(const std::string& k, const std::vector<std::string>& v) {
    Bytes b;
    put<std::uint32_t>(b, string);
    put<std::uint64_t>(b, v.size());
    for (const auto& s : v) put_string(b, s);
    raw_kv(k, array, std::move(b));
  }
  void set_f32s(const std::string& k, std::span<const float> v) { array_of(k, f32, v); }
  void set_i32s(const std::string& k, std::span<const std::int32_t> v) { array_of(k, i32, v); }
  void set_u8s(const std::string& k, std::span<const std::uint8_t> v) { array_of(k, u8, v); }
  void set_f64s(const std::string& k, std::span<const double> v) { array_of(k, f64, v); }
  /// A key with an arbitrary type id and payload (for malformed-file tests).
  void raw_kv(const std::string& k, std::uint32_t type, Bytes payload) {
    kvs_.push_back({k, type, std::move(payload)});
  }

  /// A tensor from floats: `dims` fastest first (ne0 = row length, as GGUF
  /// lists them; a linear layer [out, in] is {in, out}); values row-major.
  void add_tensor(const std::string& name, model::GgmlType type, std::vector<std::uint64_t> dims,
                  std::span<const float> values) {
    std::uint64_t n = 1;
    for (auto d : dims) n *= d;
    if (n != values.size()) throw std::runtime_error("writers: tensor " + name + " has the wrong value count");
    add_raw_tensor(name, static_cast<std::uint32_t>(type), std::move(dims), quantize(type, values));
  }
  /// A tensor from raw bytes with any type id (for malformed-file tests).
  void add_raw_tensor(const std::string& name, std::uint32_t type, std::vector<std::uint64_t> dims, Bytes data) {
    tensors_.push_back({name, type, std::move(dims), std::move(data)});
  }

  /// Removes a metadata key / a tensor (no-op when absent); returns whether it was there.
  bool remove_key(const std::string& k) {
    const auto n = kvs_.size();
    std::erase_if(kvs_, [&](const Kv& kv) { return kv.key == k; });
    return kvs_.size() != n;
  }
  bool remove_tensor(const std::string& name) {
    const auto n = tensors_.size();
    std::erase_if(tensors_, [&](const Tensor& t) { return t.name == name; });
    return tensors_.size() != n;
  }

  std::uint64_t alignment() const noexcept { return alignment_; }

  /// The file's bytes. Tensor offsets are assigned in insertion order.
  Bytes bytes(std::uint32_t version = 3) const {
    Bytes out;
    out.insert(out.end(), {std::byte{'G'}, std::byte{'G'}, std::byte{'U'}, std::byte{'F'}});
    put<std::uint32_t>(out, version);
    put<std::uint64_t>(out, tensors_.size());
    put<std::uint64_t>(out, kvs_.size());
    for (const auto& kv : kvs_) {
      put_string(out, kv.key);
      put<std::uint32_t>(out, kv.type);
      out.insert(out.end(), kv.payload.begin(), kv.payload.end());
    }
    std::uint64_t offset = 0;
    std::vector<std::uint64_t> offsets;
    for (const auto& t : tensors_) {
      put_string(out, t.name);
      put<std::uint32_t>(out, static_cast<std::uint32_t>(t.dims.size()));
      for (auto d : t.dims) put<std::uint64_t>(out, d);
      put<std::uint32_t>(out, t.type);
      put<std::uint64_t>(out, offset);
      offsets.push_back(offset);
      offset = align(offset + t.data.size());
    }
    out.resize(static_cast<std::size_t>(align(out.size())));
    const std::size_t base = out.size();
    for (std::size_t i = 0; i < tensors_.size(); ++i) {
      out.resize(base + static_cast<std::size_t>(offsets[i]));
      out.insert(out.end(), tensors_[i].data.begin(), tensors_[i].data.end());
    }
    return out;
  }

  void write(const std::filesystem::path& path, std::uint32_t version = 3) const {
    write_file(path, bytes(version));
  }

 private:
  struct Kv {
    std::string key;
    std::uint32_t type;
    Bytes payload;
  };
  struct Tensor {
    std::string name;
    std::uint32_t type;
    std::vector<std::uint64_t> dims;
    Bytes data;
  };
  template <class T>
  void scalar(const std::string& k, Type t, T v) {
    Bytes b;
    put<T>(b, v);
    raw_kv(k, t, std::move(b));
  }
  template <class T>
  void array_of(const std::string& k, Type t, std::span<const T> v) {
    Bytes b;
    put<std::uint32_t>(b, t);
    put<std::uint64_t>(b, v.size());
    for (const T& x : v) put<T>(b, x);
    raw_kv(k, array, std::move(b));
  }
  std::uint64_t align(std::uint64_t x) const { return (x + alignment_ - 1) / alignment_ * alignment_; }

  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
  std::uint64_t alignment_ = 32;
};

// ================================================================================================
// safetensors
// ================================================================================================

/// Builds a safetensors file: JSON header (padded with spaces to a multiple
/// of 8 bytes) then the tensors back to back in insertion order.
class SafetensorsWriter {
 public:
  /// A tensor from floats, converted to `dtype` ("F32", "F16" or "BF16");
  /// `shape` slowest first (a linear layer is {out, in}).
  void add(const std::string& name, const std::string& dtype, std::vector<std::uint64_t> shape,
           std::span<const float> values) {
    Bytes b;
    for (float v : values) {
      if (dtype == "F32") put<float>(b, v);
      else if (dtype == "F16") put<std::uint16_t>(b, model::fp32_to_fp16(v));
      else if (dtype == "BF16") put<std::uint16_t>(b, model::fp32_to_bf16(v));
      else throw std::runtime_error("writers: unsupported safetensors dtype " + dtype);
    }
    add_raw(name, dtype, std::move(shape), std::move(b));
  }
  /// A tensor with any dtype string and raw bytes (for malformed-file tests).
  void add_raw(const std::string& name, const std::string& dtype, std::vector<std::uint64_t> shape, Bytes data) {
    tensors_.push_back({name, dtype, std::move(shape), std::move(data)});
  }
  void set_metadata(const std::string& k, const std::string& v) { metadata_[k] = v; }
  std::vector<std::string> names() const {
    std::vector<std::string> n;
    for (const auto& t : tensors_) n.push_back(t.name);
    return n;
  }

  /// The header JSON (before padding); tests may edit and re-encode it with bytes_with_header.
  nlohmann::json header() const {
    nlohmann::json h = nlohmann::json::object();
    if (!metadata_.empty()) h["__metadata__"] = metadata_;
    std::uint64_t off = 0;
    for (const auto& t : tensors_) {
      h[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {off, off + t.data.size()}}};
      off += t.data.size();
    }
    return h;
  }
  /// The file's bytes with an explicit header text.
  Bytes bytes_with_header(std::string header_text) const {
    while (header_text.size() % 8 != 0) header_text += ' ';
    Bytes out;
    put<std::uint64_t>(out, header_text.size());
    const auto* p = reinterpret_cast<const std::byte*>(header_text.data());
    out.insert(out.end(), p, p + header_text.size());
    for (const auto& t : tensors_) out.insert(out.end(), t.data.begin(), t.data.end());
    return out;
  }
  Bytes bytes() const { return bytes_with_header(header().dump()); }
  void write(const std::filesystem::path& path) const { write_file(path, bytes()); }

 private:
  struct Tensor {
    std::string name, dtype;
    std::vector<std::uint64_t> shape;
    Bytes data;
  };
  std::vector<Tensor> tensors_;
  std::map<std::string, std::string> metadata_;
};

// ================================================================================================
// Tiny random models
// ================================================================================================

/// GPT-2's byte -> printable code point map (bytes_to_unicode), UTF-8 encoded:
/// the 256 base tokens of a byte-level BPE vocabulary.
inline std::string byte_level_char(std::uint8_t b) {
  unsigned cp = b;
  const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
  if (!printable) {
    unsigned n = 0;  // index among the non-printable bytes
    for (unsigned c = 0; c < b; ++c) {
      const bool p = (c >= 33 && c <= 126) || (c >= 161 && c <= 172) || (c >= 174);
      if (!p) ++n;
    }
    cp = 256 + n;
  }
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else {
    s += static_cast<char>(0xc0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3f));
  }
  return s;
}

/// A small byte-level BPE vocabulary (Kind::byte_bpe, pre "gpt2"): the 256
/// byte tokens (ids 0-255), a few English merges ("Ġ t" -> "Ġt", "h e" ->
/// "he", ...), then the control tokens <|endoftext|> (bos = eos),
/// <|im_start|>, <|im_end|> (token type 3).
inline model::TokenizerSpec tiny_byte_bpe_vocab() {
  model::TokenizerSpec s;
  s.kind = model::TokenizerSpec::Kind::byte_bpe;
  s.pre = "gpt2";
  for (int b = 0; b < 256; ++b) s.tokens.push_back(byte_level_char(static_cast<std::uint8_t>(b)));
  s.token_types.assign(256, 1);
  const std::string sp = byte_level_char(' ');  // "Ġ"
  const std::vector<std::pair<std::string, std::string>> merges = {
      {"h", "e"}, {sp, "t"}, {sp, "a"}, {"i", "n"}, {sp + "t", "he"}, {"e", "r"}, {"o", "n"},
      {sp, "s"},  {"e", "d"}, {sp, "w"}, {"n", "d"}, {"i", "s"},       {sp + "a", "nd"}, {"o", "u"}};
  for (const auto& [a, b] : merges) {
    s.merges.push_back(a + " " + b);
    s.tokens.push_back(a + b);
    s.token_types.push_back(1);
  }
  for (const char* special : {"<|endoftext|>", "<|im_start|>", "<|im_end|>"}) {
    s.tokens.push_back(special);
    s.token_types.push_back(3);
  }
  s.bos = s.eos = static_cast<int>(s.tokens.size()) - 3;
  s.add_bos = false;
  s.add_space_prefix = false;
  return s;
}

/// The shape of a tiny model. head_dim 0 means hidden / heads.
struct TinySpec {
  model::Arch arch = model::Arch::llama;
  int hidden = 32;
  int intermediate = 64;
  int layers = 2;
  int heads = 4;
  int kv_heads = 2;
  int head_dim = 0;
  int context = 256;
  double rope_theta = 10000.0;
  double rms_eps = 1e-5;
  bool tie_embeddings = false;
  /// Extra rows of the embedding beyond the tokenizer's vocabulary (padding,
  /// as Qwen checkpoints have); the config's vocab_size counts them.
  int extra_vocab = 0;
  // qwen3moe only: the mixture of experts (model::MoeConfig).
  int experts = 4;                 ///< experts per sparse layer
  int experts_used = 2;            ///< top-k
  int expert_intermediate = 16;    ///< inner size of one expert
  bool norm_topk_prob = true;
  std::vector<int> dense_layers;   ///< layers that keep the dense FFN (mlp_only_layers)
};

/// A model held in memory, ready to be written.
struct TinyModel {
  model::Config config;
  model::Weights weights;
  model::TokenizerSpec tokenizer;
};

namespace detail {
inline std::vector<float> uniform(boost::random::mt19937_64& rng, std::size_t n, double lo, double hi) {
  boost::random::uniform_real_distribution<double> u(lo, hi);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(u(rng));
  return v;
}
inline model::Matrix matrix(boost::random::mt19937_64& rng, int rows, int cols) {
  const double a = std::sqrt(3.0 / cols);  // unit-variance inputs keep unit scale
  model::Matrix m;
  m.rows = rows;
  m.cols = cols;
  m.data = uniform(rng, static_cast<std::size_t>(rows) * static_cast<std::size_t>(cols), -a, a);
  return m;
}
}  // namespace detail

/// A tiny decoder with random weights: matrices uniform with variance
/// 1/in_features, norm gains 1 +- 0.2, biases +- 0.1 (qwen2), Q/K norms
/// 1 +- 0.2 (qwen3, qwen3moe). Config: RoPE style interleaved for llama (as a
/// GGUF llama file is read), neox otherwise; qkv_bias for qwen2; qk_norm for
/// qwen3 and qwen3moe; for qwen3moe the spec's experts, each sparse layer
/// with a router and stacked expert matrices (model::LayerWeights) instead
/// of the dense FFN. Same seed, same model.
inline TinyModel random_model(const TinySpec& spec, std::uint64_t seed) {
  TinyModel m;
  m.tokenizer = tiny_byte_bpe_vocab();
  model::Config& c = m.config;
  c.arch = spec.arch;
  c.name = std::string("tiny-") + model::to_string(spec.arch);
  c.vocab_size = static_cast<int>(m.tokenizer.tokens.size()) + spec.extra_vocab;
  c.hidden_size = spec.hidden;
  c.intermediate_size = spec.intermediate;
  c.num_layers = spec.layers;
  c.num_heads = spec.heads;
  c.num_kv_heads = spec.kv_heads;
  c.head_dim = spec.head_dim > 0 ? spec.head_dim : spec.hidden / spec.heads;
  c.max_position = spec.context;
  c.rms_eps = spec.rms_eps;
  c.rope_theta = spec.rope_theta;
  c.rope_style = spec.arch == model::Arch::llama ? model::RopeStyle::interleaved : model::RopeStyle::neox;
  c.tie_embeddings = spec.tie_embeddings;
  c.qkv_bias = spec.arch == model::Arch::qwen2;
  c.qk_norm = spec.arch == model::Arch::qwen3 || spec.arch == model::Arch::qwen3moe;
  if (spec.arch == model::Arch::qwen3moe) {
    c.moe.num_experts = spec.experts;
    c.moe.num_experts_used = spec.experts_used;
    c.moe.expert_intermediate_size = spec.expert_intermediate;
    c.moe.norm_topk_prob = spec.norm_topk_prob;
    c.moe.sparse_layers.assign(static_cast<std::size_t>(spec.layers), true);
    for (int l : spec.dense_layers) c.moe.sparse_layers.at(static_cast<std::size_t>(l)) = false;
  }

  boost::random::mt19937_64 rng(seed);
  model::Weights& w = m.weights;
  const int q = c.num_heads * c.head_dim, kv = c.num_kv_heads * c.head_dim;
  auto gain = [&](int n) { return detail::uniform(rng, static_cast<std::size_t>(n), 0.8, 1.2); };
  w.embedding = detail::matrix(rng, c.vocab_size, c.hidden_size);
  for (int l = 0; l < c.num_layers; ++l) {
    model::LayerWeights L;
    L.attn_norm = gain(c.hidden_size);
    L.wq = detail::matrix(rng, q, c.hidden_size);
    L.wk = detail::matrix(rng, kv, c.hidden_size);
    L.wv = detail::matrix(rng, kv, c.hidden_size);
    L.wo = detail::matrix(rng, c.hidden_size, q);
    if (c.qkv_bias) {
      L.bq = detail::uniform(rng, static_cast<std::size_t>(q), -0.1, 0.1);
      L.bk = detail::uniform(rng, static_cast<std::size_t>(kv), -0.1, 0.1);
      L.bv = detail::uniform(rng, static_cast<std::size_t>(kv), -0.1, 0.1);
    }
    if (c.qk_norm) {
      L.q_norm = gain(c.head_dim);
      L.k_norm = gain(c.head_dim);
    }
    L.ffn_norm = gain(c.hidden_size);
    if (c.is_sparse_layer(l)) {
      const int E = c.moe.num_experts, F = c.moe.expert_intermediate_size;
      L.router = detail::matrix(rng, E, c.hidden_size);
      L.gate_exps = detail::matrix(rng, E * F, c.hidden_size);
      L.up_exps = detail::matrix(rng, E * F, c.hidden_size);
      L.down_exps = detail::matrix(rng, E * c.hidden_size, F);
    } else {
      L.w_gate = detail::matrix(rng, c.intermediate_size, c.hidden_size);
      L.w_up = detail::matrix(rng, c.intermediate_size, c.hidden_size);
      L.w_down = detail::matrix(rng, c.hidden_size, c.intermediate_size);
    }
    w.layers.push_back(std::move(L));
  }
  w.final_norm = gain(c.hidden_size);
  if (!c.tie_embeddings) w.lm_head = detail::matrix(rng, c.vocab_size, c.hidden_size);
  return m;
}

/// llama.cpp's converter permutation of the rows of Q or K for Llama models:
/// within each head of size d, HF row (half * d/2 + i) becomes row (2i + half),
/// so that rotating adjacent pairs (interleaved RoPE) on the result equals
/// rotating halves (neox RoPE) on the input. `heads` is the number of heads
/// the rows hold (num_heads for Q, num_kv_heads for K). Works on a Matrix and,
/// with cols = 1, on a bias vector.
inline model::Matrix rope_rows_neox_to_interleaved(const model::Matrix& m, int heads) {
  const int d = m.rows / heads;
  if (heads <= 0 || m.rows % heads != 0 || d % 2 != 0)
    throw std::runtime_error("writers: rows not divisible into heads of even size");
  model::Matrix out = m;
  for (int h = 0; h < heads; ++h)
    for (int half = 0; half < 2; ++half)
      for (int i = 0; i < d / 2; ++i) {
        const float* src = m.row(h * d + half * d / 2 + i);
        std::copy(src, src + m.cols, out.row(h * d + 2 * i + half));
      }
  return out;
}
/// The inverse permutation (GGUF llama rows back to the HF layout).
inline model::Matrix rope_rows_interleaved_to_neox(const model::Matrix& m, int heads) {
  const int d = m.rows / heads;
  if (heads <= 0 || m.rows % heads != 0 || d % 2 != 0)
    throw std::runtime_error("writers: rows not divisible into heads of even size");
  model::Matrix out = m;
  for (int h = 0; h < heads; ++h)
    for (int half = 0; half < 2; ++half)
      for (int i = 0; i < d / 2; ++i) {
        const float* src = m.row(h * d + 2 * i + half);
        std::copy(src, src + m.cols, out.row(h * d + half * d / 2 + i));
      }
  return out;
}

/// Options of write_gguf.
struct GgufOptions {
  std::uint32_t version = 3;
  std::uint32_t alignment = 32;  ///< written as general.alignment when not 32
  model::GgmlType matrix_type = model::GgmlType::f32;     ///< Q/K/V/O and FFN matrices
  model::GgmlType embedding_type = model::GgmlType::f32;  ///< token_embd (and output)
  model::GgmlType vector_type = model::GgmlType::f32;     ///< norms and biases
  model::GgmlType router_type = model::GgmlType::f32;     ///< qwen3moe ffn_gate_inp (llama.cpp keeps it F32)
  /// Write the model's Q/K rows through rope_rows_neox_to_interleaved (for
  /// llama): use when `model`'s weights are in the HF (neox) layout and the
  /// file should compute the same function under interleaved RoPE.
  bool permute_qk = false;
  bool write_vocab_size = true;  ///< <arch>.vocab_size (else derived from the token list)
  std::vector<std::string> omit;  ///< tensor names not to write (missing-tensor tests)
};

/// A GgufWriter holding `m`: general.architecture/name, <arch>.* hyper-
/// parameters (key_length when head_dim != hidden/heads; for qwen3moe
/// expert_count, expert_used_count, expert_feed_forward_length, and
/// expert_weights_norm when norm_topk_prob is false), tokenizer.ggml.*
/// ("gpt2" model with tokens, token_type, merges, bos/eos, add_bos_token,
/// pre), and the tensors under llama.cpp's names (output.weight only when
/// untied). Tests may edit it (remove_key, remove_tensor, add ...) before
/// writing; write_gguf writes it directly.
inline GgufWriter gguf_writer(const TinyModel& m, const GgufOptions& opt = {}) {
  const model::Config& c = m.config;
  GgufWriter g;
  const std::string a = model::to_string(c.arch);
  g.set_string("general.architecture", a);
  g.set_string("general.name", c.name);
  if (opt.alignment != 32) g.set_u32("general.alignment", opt.alignment);
  g.set_u32(a + ".block_count", static_cast<std::uint32_t>(c.num_layers));
  g.set_u32(a + ".context_length", static_cast<std::uint32_t>(c.max_position));
  g.set_u32(a + ".embedding_length", static_cast<std::uint32_t>(c.hidden_size));
  g.set_u32(a + ".feed_forward_length", static_cast<std::uint32_t>(c.intermediate_size));
  g.set_u32(a + ".attention.head_count", static_cast<std::uint32_t>(c.num_heads));
  g.set_u32(a + ".attention.head_count_kv", static_cast<std::uint32_t>(c.num_kv_heads));
  if (c.head_dim * c.num_heads != c.hidden_size) {
    g.set_u32(a + ".attention.key_length", static_cast<std::uint32_t>(c.head_dim));
    g.set_u32(a + ".attention.value_length", static_cast<std::uint32_t>(c.head_dim));
  }
  g.set_u32(a + ".rope.dimension_count", static_cast<std::uint32_t>(c.head_dim));
  g.set_f32(a + ".rope.freq_base", static_cast<float>(c.rope_theta));
  g.set_f32(a + ".attention.layer_norm_rms_epsilon", static_cast<float>(c.rms_eps));
  if (c.rope_scaling.type == "linear") {
    g.set_string(a + ".rope.scaling.type", "linear");
    g.set_f32(a + ".rope.scaling.factor", static_cast<float>(c.rope_scaling.factor));
  }
  if (opt.write_vocab_size) g.set_u32(a + ".vocab_size", static_cast<std::uint32_t>(c.vocab_size));
  if (c.moe.num_experts > 0) {
    g.set_u32(a + ".expert_count", static_cast<std::uint32_t>(c.moe.num_experts));
    g.set_u32(a + ".expert_used_count", static_cast<std::uint32_t>(c.moe.num_experts_used));
    g.set_u32(a + ".expert_feed_forward_length", static_cast<std::uint32_t>(c.moe.expert_intermediate_size));
    if (!c.moe.norm_topk_prob) g.set_bool(a + ".expert_weights_norm", false);
  }
  const model::TokenizerSpec& t = m.tokenizer;
  g.set_string("tokenizer.ggml.model", t.kind == model::TokenizerSpec::Kind::spm ? "llama" : "gpt2");
  g.set_string("tokenizer.ggml.pre", t.pre);
  std::vector<std::string> tokens = t.tokens;
  std::vector<std::int32_t> types(t.token_types.begin(), t.token_types.end());
  // The token list covers the embedding's padding rows, as converters write them.
  for (int i = static_cast<int>(tokens.size()); i < c.vocab_size; ++i) {
    tokens.push_back("[PAD" + std::to_string(i) + "]");
    types.push_back(5);
  }
  g.set_strings("tokenizer.ggml.tokens", tokens);
  if (!types.empty()) g.set_i32s("tokenizer.ggml.token_type", types);
  if (!t.scores.empty()) g.set_f32s("tokenizer.ggml.scores", t.scores);
  if (!t.merges.empty()) g.set_strings("tokenizer.ggml.merges", t.merges);
  if (t.bos >= 0) g.set_u32("tokenizer.ggml.bos_token_id", static_cast<std::uint32_t>(t.bos));
  if (t.eos >= 0) g.set_u32("tokenizer.ggml.eos_token_id", static_cast<std::uint32_t>(t.eos));
  if (t.unk >= 0) g.set_u32("tokenizer.ggml.unknown_token_id", static_cast<std::uint32_t>(t.unk));
  if (t.pad >= 0) g.set_u32("tokenizer.ggml.padding_token_id", static_cast<std::uint32_t>(t.pad));
  g.set_bool("tokenizer.ggml.add_bos_token", t.add_bos);
  g.set_bool("tokenizer.ggml.add_space_prefix", t.add_space_prefix);

  auto skip = [&](const std::string& n) { return std::find(opt.omit.begin(), opt.omit.end(), n) != opt.omit.end(); };
  auto mat = [&](const std::string& n, const model::Matrix& x, model::GgmlType type) {
    if (!skip(n))
      g.add_tensor(n, type, {static_cast<std::uint64_t>(x.cols), static_cast<std::uint64_t>(x.rows)}, x.data);
  };
  auto vec = [&](const std::string& n, const std::vector<float>& x) {
    if (!skip(n)) g.add_tensor(n, opt.vector_type, {x.size()}, x);
  };
  auto rows_vec = [](const std::vector<float>& v) {
    model::Matrix x;
    x.rows = static_cast<int>(v.size());
    x.cols = 1;
    x.data = v;
    return x;
  };
  const model::Weights& w = m.weights;
  mat("token_embd.weight", w.embedding, opt.embedding_type);
  vec("output_norm.weight", w.final_norm);
  if (!w.lm_head.empty()) mat("output.weight", w.lm_head, opt.embedding_type);
  for (int l = 0; l < c.num_layers; ++l) {
    const auto& L = w.layers[static_cast<std::size_t>(l)];
    const std::string p = "blk." + std::to_string(l) + ".";
    const bool perm = opt.permute_qk;
    vec(p + "attn_norm.weight", L.attn_norm);
    mat(p + "attn_q.weight", perm ? rope_rows_neox_to_interleaved(L.wq, c.num_heads) : L.wq, opt.matrix_type);
    mat(p + "attn_k.weight", perm ? rope_rows_neox_to_interleaved(L.wk, c.num_kv_heads) : L.wk, opt.matrix_type);
    mat(p + "attn_v.weight", L.wv, opt.matrix_type);
    mat(p + "attn_output.weight", L.wo, opt.matrix_type);
    if (!L.bq.empty()) vec(p + "attn_q.bias", perm ? rope_rows_neox_to_interleaved(rows_vec(L.bq), c.num_heads).data : L.bq);
    if (!L.bk.empty()) vec(p + "attn_k.bias", perm ? rope_rows_neox_to_interleaved(rows_vec(L.bk), c.num_kv_heads).data : L.bk);
    if (!L.bv.empty()) vec(p + "attn_v.bias", L.bv);
    if (!L.q_norm.empty()) vec(p + "attn_q_norm.weight", L.q_norm);
    if (!L.k_norm.empty()) vec(p + "attn_k_norm.weight", L.k_norm);
    vec(p + "ffn_norm.weight", L.ffn_norm);
    if (c.is_sparse_layer(l)) {
      // 3-D: dims fastest first, so [E, F, hidden] slowest first is {hidden, F, E}.
      const auto E = static_cast<std::uint64_t>(c.moe.num_experts),
                 F = static_cast<std::uint64_t>(c.moe.expert_intermediate_size),
                 D = static_cast<std::uint64_t>(c.hidden_size);
      mat(p + "ffn_gate_inp.weight", L.router, opt.router_type);
      if (!skip(p + "ffn_gate_exps.weight")) g.add_tensor(p + "ffn_gate_exps.weight", opt.matrix_type, {D, F, E}, L.gate_exps.data);
      if (!skip(p + "ffn_up_exps.weight")) g.add_tensor(p + "ffn_up_exps.weight", opt.matrix_type, {D, F, E}, L.up_exps.data);
      if (!skip(p + "ffn_down_exps.weight")) g.add_tensor(p + "ffn_down_exps.weight", opt.matrix_type, {F, D, E}, L.down_exps.data);
    } else {
      mat(p + "ffn_gate.weight", L.w_gate, opt.matrix_type);
      mat(p + "ffn_up.weight", L.w_up, opt.matrix_type);
      mat(p + "ffn_down.weight", L.w_down, opt.matrix_type);
    }
  }
  return g;
}

/// Writes `m` as a GGUF file (see gguf_writer); returns the bytes written.
inline Bytes write_gguf(const TinyModel& m, const std::filesystem::path& path, const GgufOptions& opt = {}) {
  Bytes bytes = gguf_writer(m, opt).bytes(opt.version);
  write_file(path, bytes);
  return bytes;
}

/// A minimal Hugging Face tokenizer.json for a byte-level BPE spec: model
/// "BPE" with vocab and merges ("a b" strings), ByteLevel pre-tokenizer
/// (add_prefix_space false, use_regex true) and decoder, and the control
/// tokens (token type 3) as special added_tokens.
inline std::string tokenizer_json(const model::TokenizerSpec& t) {
  if (t.kind != model::TokenizerSpec::Kind::byte_bpe)
    throw std::runtime_error("writers::tokenizer_json: only byte-level BPE specs");
  nlohmann::json vocab = nlohmann::json::object();
  nlohmann::json added = nlohmann::json::array();
  for (std::size_t i = 0; i < t.tokens.size(); ++i) {
    vocab[t.tokens[i]] = i;
    if (i < t.token_types.size() && t.token_types[i] == 3)
      added.push_back({{"id", i}, {"content", t.tokens[i]}, {"single_word", false}, {"lstrip", false},
                       {"rstrip", false}, {"normalized", false}, {"special", true}});
  }
  const nlohmann::json byte_level = {
      {"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}};
  nlohmann::json j = {{"version", "1.0"},
                      {"truncation", nullptr},
                      {"padding", nullptr},
                      {"added_tokens", added},
                      {"normalizer", nullptr},
                      {"pre_tokenizer", byte_level},
                      {"post_processor", byte_level},
                      {"decoder", byte_level},
                      {"model",
                       {{"type", "BPE"},
                        {"dropout", nullptr},
                        {"unk_token", nullptr},
                        {"continuing_subword_prefix", nullptr},
                        {"end_of_word_suffix", nullptr},
                        {"fuse_unk", false},
                        {"byte_fallback", false},
                        {"vocab", vocab},
                        {"merges", t.merges}}}};
  return j.dump(1);
}

/// A config.json for `c` (architectures, model_type, sizes, head_dim,
/// rms_norm_eps, rope_theta, rope_scaling when not "none",
/// tie_word_embeddings, max_position_embeddings, vocab_size, and for the
/// tokenizer's bos/eos; for qwen3moe num_experts, num_experts_per_tok,
/// moe_intermediate_size, norm_topk_prob, decoder_sparse_step 1 and the
/// dense layers as mlp_only_layers).
inline nlohmann::json config_json(const model::Config& c, const model::TokenizerSpec& t) {
  static const char* const arch_names[] = {"LlamaForCausalLM", "Qwen2ForCausalLM", "Qwen3ForCausalLM",
                                           "Qwen3MoeForCausalLM"};
  static const char* const model_types[] = {"llama", "qwen2", "qwen3", "qwen3_moe"};
  nlohmann::json j = {{"architectures", {arch_names[static_cast<int>(c.arch)]}},
                      {"model_type", model_types[static_cast<int>(c.arch)]},
                      {"hidden_size", c.hidden_size},
                      {"intermediate_size", c.intermediate_size},
                      {"num_hidden_layers", c.num_layers},
                      {"num_attention_heads", c.num_heads},
                      {"num_key_value_heads", c.num_kv_heads},
                      {"head_dim", c.head_dim},
                      {"rms_norm_eps", c.rms_eps},
                      {"rope_theta", c.rope_theta},
                      {"rope_scaling", nullptr},
                      {"tie_word_embeddings", c.tie_embeddings},
                      {"max_position_embeddings", c.max_position},
                      {"vocab_size", c.vocab_size},
                      {"hidden_act", "silu"},
                      {"torch_dtype", "float32"}};
  if (c.rope_scaling.type == "linear") j["rope_scaling"] = {{"rope_type", "linear"}, {"factor", c.rope_scaling.factor}};
  if (c.rope_scaling.type == "llama3")
    j["rope_scaling"] = {{"rope_type", "llama3"},
                         {"factor", c.rope_scaling.factor},
                         {"low_freq_factor", c.rope_scaling.low_freq_factor},
                         {"high_freq_factor", c.rope_scaling.high_freq_factor},
                         {"original_max_position_embeddings", c.rope_scaling.original_max_position}};
  if (t.bos >= 0) j["bos_token_id"] = t.bos;
  if (t.eos >= 0) j["eos_token_id"] = t.eos;
  if (c.moe.num_experts > 0) {
    j["num_experts"] = c.moe.num_experts;
    j["num_experts_per_tok"] = c.moe.num_experts_used;
    j["moe_intermediate_size"] = c.moe.expert_intermediate_size;
    j["norm_topk_prob"] = c.moe.norm_topk_prob;
    j["decoder_sparse_step"] = 1;
    nlohmann::json dense = nlohmann::json::array();
    for (int l = 0; l < c.num_layers; ++l)
      if (!c.is_sparse_layer(l)) dense.push_back(l);
    j["mlp_only_layers"] = dense;
    j["router_aux_loss_coef"] = 0.001;  // training only: ignored by readers
    j["output_router_logits"] = false;
  }
  return j;
}

/// Values of one tensor of hf_tensors: the model's own vector (not owned) or
/// a copy (one expert's rows of a stacked matrix).
using TensorValues = std::shared_ptr<const std::vector<float>>;

/// The tensors of `m` under Hugging Face names, in checkpoint order, as
/// (name, shape slowest first, values); the stacked expert matrices of a
/// qwen3moe layer become one tensor per expert (mlp.experts.E.*_proj).
inline std::vector<std::tuple<std::string, std::vector<std::uint64_t>, TensorValues>> hf_tensors(
    const TinyModel& m) {
  std::vector<std::tuple<std::string, std::vector<std::uint64_t>, TensorValues>> out;
  auto borrow = [](const std::vector<float>& v) { return TensorValues(std::shared_ptr<void>(), &v); };
  auto mat = [&](const std::string& n, const model::Matrix& x) {
    out.emplace_back(n, std::vector<std::uint64_t>{static_cast<std::uint64_t>(x.rows), static_cast<std::uint64_t>(x.cols)},
                     borrow(x.data));
  };
  auto vec = [&](const std::string& n, const std::vector<float>& x) {
    if (!x.empty()) out.emplace_back(n, std::vector<std::uint64_t>{x.size()}, borrow(x));
  };
  // Expert e of a stacked matrix of `experts` blocks.
  auto expert = [&](const std::string& n, const model::Matrix& x, int experts, int e) {
    const std::size_t rows = static_cast<std::size_t>(x.rows / experts), cols = static_cast<std::size_t>(x.cols);
    const auto first = x.data.begin() + static_cast<std::ptrdiff_t>(static_cast<std::size_t>(e) * rows * cols);
    out.emplace_back(n, std::vector<std::uint64_t>{rows, cols},
                     std::make_shared<const std::vector<float>>(first, first + static_cast<std::ptrdiff_t>(rows * cols)));
  };
  const model::Weights& w = m.weights;
  mat("model.embed_tokens.weight", w.embedding);
  for (std::size_t l = 0; l < w.layers.size(); ++l) {
    const auto& L = w.layers[l];
    const std::string p = "model.layers." + std::to_string(l) + ".";
    vec(p + "input_layernorm.weight", L.attn_norm);
    mat(p + "self_attn.q_proj.weight", L.wq);
    mat(p + "self_attn.k_proj.weight", L.wk);
    mat(p + "self_attn.v_proj.weight", L.wv);
    mat(p + "self_attn.o_proj.weight", L.wo);
    vec(p + "self_attn.q_proj.bias", L.bq);
    vec(p + "self_attn.k_proj.bias", L.bk);
    vec(p + "self_attn.v_proj.bias", L.bv);
    vec(p + "self_attn.q_norm.weight", L.q_norm);
    vec(p + "self_attn.k_norm.weight", L.k_norm);
    vec(p + "post_attention_layernorm.weight", L.ffn_norm);
    if (m.config.is_sparse_layer(static_cast<int>(l))) {
      const int E = m.config.moe.num_experts;
      mat(p + "mlp.gate.weight", L.router);
      for (int e = 0; e < E; ++e) {
        const std::string q = p + "mlp.experts." + std::to_string(e) + ".";
        expert(q + "gate_proj.weight", L.gate_exps, E, e);
        expert(q + "up_proj.weight", L.up_exps, E, e);
        expert(q + "down_proj.weight", L.down_exps, E, e);
      }
    } else {
      mat(p + "mlp.gate_proj.weight", L.w_gate);
      mat(p + "mlp.up_proj.weight", L.w_up);
      mat(p + "mlp.down_proj.weight", L.w_down);
    }
  }
  vec("model.norm.weight", w.final_norm);
  if (!w.lm_head.empty()) mat("lm_head.weight", w.lm_head);
  return out;
}

/// Options of write_hf.
struct HfOptions {
  std::string dtype = "F32";  ///< "F32", "F16" or "BF16"
  /// 1: model.safetensors. n > 1: model-0000i-of-0000n.safetensors (tensors
  /// dealt round-robin by checkpoint order) plus model.safetensors.index.json.
  int shards = 1;
  bool write_tokenizer = true;    ///< tokenizer.json (from the model's byte-level BPE spec)
  std::vector<std::string> omit;  ///< tensor names not to write
};

/// Writes `m` as a Hugging Face checkpoint directory `dir` (created):
/// config.json, tokenizer.json, safetensors. The weights are written as
/// they are (HF checkpoints use neox RoPE: when `m` came from random_model
/// for llama, its Config says interleaved, but the loader will read the HF
/// directory as neox; use rope_rows_* to relate the two layouts).
inline void write_hf(const TinyModel& m, const std::filesystem::path& dir, const HfOptions& opt = {}) {
  std::filesystem::create_directories(dir);
  write_text(dir / "config.json", config_json(m.config, m.tokenizer).dump(2));
  if (opt.write_tokenizer) write_text(dir / "tokenizer.json", tokenizer_json(m.tokenizer));
  const auto tensors = hf_tensors(m);
  const int n = std::max(1, opt.shards);
  std::vector<SafetensorsWriter> shards(static_cast<std::size_t>(n));
  nlohmann::json weight_map = nlohmann::json::object();
  auto shard_name = [&](int i) {
    if (n == 1) return std::string("model.safetensors");
    char buf[64];
    std::snprintf(buf, sizeof buf, "model-%05d-of-%05d.safetensors", i + 1, n);
    return std::string(buf);
  };
  std::size_t k = 0;
  for (const auto& [name, shape, values] : tensors) {
    if (std::find(opt.omit.begin(), opt.omit.end(), name) != opt.omit.end()) continue;
    const int s = static_cast<int>(k++ % static_cast<std::size_t>(n));
    shards[static_cast<std::size_t>(s)].add(name, opt.dtype, shape, *values);
    weight_map[name] = shard_name(s);
  }
  for (int i = 0; i < n; ++i) shards[static_cast<std::size_t>(i)].write(dir / shard_name(i));
  if (n > 1) {
    nlohmann::json index = {{"metadata", {{"total_size", 0}}}, {"weight_map", weight_map}};
    write_text(dir / "model.safetensors.index.json", index.dump(2));
  }
}

/// A fresh, empty temporary directory for a test (under the system temp dir,
/// named after `tag` and the process id); removed by the destructor.
class TempDir {
 public:
  explicit TempDir(const std::string& tag) {
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("bosch-test-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
    std::filesystem::remove_all(path_);
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const noexcept { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

}  // namespace bosch::test::writers
