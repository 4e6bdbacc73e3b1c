// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file model/gguf.hpp
/// Reader of GGUF files (versions 2 and 3, little-endian), the llama.cpp
/// model format: a header ("GGUF", version, tensor count, metadata count),
/// typed metadata key/value pairs, a tensor directory (name, dims fastest
/// first, ggml type, offset) and the tensor data, which starts at the end of
/// the directory rounded up to `general.alignment` (default 32) bytes.
///
/// The file is memory-mapped; opening parses and validates the header, all
/// metadata and the whole directory against the real file size (every count,
/// string length, offset and tensor size), so that tensor_data() never reads
/// out of bounds. Errors are bosch::format_error (malformed content) or
/// bosch::file_error (cannot open), with `where` naming the file and the
/// field or tensor.

#include <bosch/model/dequant.hpp>
#include <bosch/model/mapped_file.hpp>
#include <bosch/model/tokenizer_spec.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace bosch::model::gguf {

/// GGUF metadata value types (gguf.h `enum gguf_type`).
enum class ValueType : std::uint32_t {
  u8 = 0, i8 = 1, u16 = 2, i16 = 3, u32 = 4, i32 = 5, f32 = 6, boolean = 7,
  string = 8, array = 9, u64 = 10, i64 = 11, f64 = 12,
};

/// Name of a value type ("u32", "string", "array", ...).
const char* to_string(ValueType t) noexcept;

/// One metadata value. Scalars are widened: integer types and bool to
/// `integer` (u64 values above INT64_MAX are rejected on read), f32/f64 to
/// `real`; strings to `text`. Arrays keep their element type in
/// `element_type` and their elements in `integers`, `reals` or `strings`
/// (by the same widening). Arrays of arrays are rejected on read.
struct Value {
  ValueType type = ValueType::u8;
  ValueType element_type = ValueType::u8;  ///< arrays only
  std::int64_t integer = 0;
  double real = 0.0;
  std::string text;
  std::vector<std::int64_t> integers;
  std::vector<double> reals;
  std::vector<std::string> strings;

  bool is_integer() const noexcept;  ///< any integer type or bool
  bool is_real() const noexcept;     ///< f32 or f64
  bool is_string() const noexcept { return type == ValueType::string; }
  bool is_array() const noexcept { return type == ValueType::array; }
  /// Number of elements of an array (0 for a scalar).
  std::size_t array_size() const noexcept;
};

/// One entry of the tensor directory.
struct TensorInfo {
  std::string name;
  std::uint32_t type = 0;             ///< ggml type id (GgmlType when known)
  std::vector<std::uint64_t> shape;   ///< dims, fastest-varying first (ne0, ne1, ...)
  std::uint64_t offset = 0;           ///< absolute byte offset of the data in the file
  std::uint64_t size = 0;             ///< bytes of data
  std::uint64_t elements() const noexcept;  ///< product of shape (1 for no dims)
  GgmlType ggml_type() const noexcept { return static_cast<GgmlType>(type); }
};

class File {
 public:
  /// Opens, maps and parses `path`. Throws bosch::file_error when it cannot be
  /// opened, bosch::format_error for a wrong magic, an unsupported version
  /// (only 2 and 3), a truncated header or directory, an unknown value or
  /// tensor type, a duplicate key or tensor name, a bad alignment, or a tensor
  /// whose data lies beyond the end of the file.
  explicit File(const std::filesystem::path& path);

  const std::filesystem::path& path() const noexcept { return path_; }
  std::uint32_t version() const noexcept { return version_; }
  std::uint64_t alignment() const noexcept { return alignment_; }
  /// Absolute offset of the tensor data section.
  std::uint64_t data_offset() const noexcept { return data_offset_; }
  /// Size of the file in bytes.
  std::uint64_t file_size() const noexcept { return file_size_; }

  // ---- metadata --------------------------------------------------------------
  /// Keys in file order.
  const std::vector<std::string>& keys() const noexcept { return keys_; }
  /// The value of `key`, or nullptr.
  const Value* find(std::string_view key) const;
  bool contains(std::string_view key) const { return find(key) != nullptr; }
  /// The value of `key`; throws format_error ("missing metadata key") when absent.
  const Value& at(std::string_view key) const;
  /// Typed getters. Without a default they throw format_error naming the file
  /// and key when the key is missing; all throw when it has another type.
  /// Integer getters also check the value fits an int when asked via get_int32.
  std::int64_t get_int(std::string_view key) const;
  std::int64_t get_int(std::string_view key, std::int64_t fallback) const;
  int get_int32(std::string_view key) const;
  int get_int32(std::string_view key, int fallback) const;
  /// A real; an integer value is accepted and converted.
  double get_float(std::string_view key) const;
  double get_float(std::string_view key, double fallback) const;
  bool get_bool(std::string_view key) const;
  bool get_bool(std::string_view key, bool fallback) const;
  const std::string& get_string(std::string_view key) const;
  std::string get_string(std::string_view key, const std::string& fallback) const;
  /// Array getters (element type must match: string / integer or bool / real).
  const std::vector<std::string>& get_strings(std::string_view key) const;
  const std::vector<std::int64_t>& get_ints(std::string_view key) const;
  const std::vector<double>& get_floats(std::string_view key) const;

  // ---- tensors ---------------------------------------------------------------
  /// The directory in file order.
  const std::vector<TensorInfo>& tensors() const noexcept { return tensors_; }
  /// The tensor named `name`, or nullptr.
  const TensorInfo* find_tensor(std::string_view name) const;
  /// The bytes of a tensor of this file. Throws bosch::error when the mapping
  /// has been released.
  std::span<const std::byte> tensor_data(const TensorInfo& t) const;
  /// Unmaps the file: metadata and directory stay, tensor_data() throws.
  void release() noexcept { map_.close(); }
  bool mapped() const noexcept { return map_.is_open(); }

  /// "<path>: key '<key>'": the `where` of an error about a metadata field.
  std::string where_key(std::string_view key) const;
  /// "<path>: tensor '<name>'": the `where` of an error about a tensor.
  std::string where_tensor(std::string_view name) const;

 private:
  std::filesystem::path path_;
  MappedFile map_;
  std::uint32_t version_ = 0;
  std::uint64_t alignment_ = 32;
  std::uint64_t data_offset_ = 0;
  std::uint64_t file_size_ = 0;
  std::vector<std::string> keys_;
  std::unordered_map<std::string, Value> values_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, std::size_t> tensor_index_;
};

}  // namespace bosch::model::gguf

namespace bosch::model {

/// The tokenizer described by a GGUF file's `tokenizer.ggml.*` metadata:
///  - `model`: "llama" -> Kind::spm, "gpt2" -> Kind::byte_bpe (others: format_error);
///  - `tokens` (required), `scores`, `token_type` (lengths must equal tokens'),
///    `merges`, `pre` (default "default");
///  - `bos_token_id`, `eos_token_id`, `unknown_token_id`, `padding_token_id`
///    (-1 when absent or outside the vocabulary, as llama.cpp ignores such ids);
///  - `add_bos_token`, `add_space_prefix`. Defaults as llama.cpp: spm adds BOS
///    and a space prefix; byte_bpe adds no space prefix and adds BOS only for
///    the Llama-3 family pre-tokenizers ("llama3", "llama-v3", "llama-bpe",
///    "falcon3"), unless the keys say otherwise.
/// Throws bosch::format_error naming the file and key.
TokenizerSpec tokenizer_spec_from_gguf(const gguf::File& file);

}  // namespace bosch::model
