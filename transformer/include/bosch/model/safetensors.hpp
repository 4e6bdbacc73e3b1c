// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file model/safetensors.hpp
/// Reader of safetensors files (Hugging Face): an 8-byte little-endian header
/// length N, N bytes of JSON mapping each tensor name to
/// {"dtype", "shape" (slowest first, PyTorch order), "data_offsets": [begin, end]}
/// (offsets relative to the byte buffer after the header) plus an optional
/// "__metadata__" object of strings, then the byte buffer.
///
/// The file is memory-mapped; opening validates the header (size at most
/// 100 MB and within the file, well-formed JSON, known dtypes, shapes whose
/// byte size equals end - begin, every range inside the buffer, no two
/// ranges overlapping). Errors are bosch::format_error naming the file and
/// tensor, or bosch::file_error when it cannot be opened.

#include <bosch/model/mapped_file.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace bosch::model::safetensors {

/// Bytes per element of a safetensors dtype ("F32" -> 4, "BF16" -> 2,
/// "F8_E4M3" -> 1, ...), or 0 for a dtype this reader does not know.
std::size_t dtype_size(std::string_view dtype) noexcept;

/// True for the dtypes converted to fp32: F32, F16, BF16.
bool can_convert(std::string_view dtype) noexcept;

/// Converts `src` (exactly dst.size() elements of `dtype`) to fp32.
/// Throws bosch::invalid_argument for another dtype or a size mismatch.
void to_fp32(std::string_view dtype, std::span<const std::byte> src, std::span<float> dst);

struct TensorInfo {
  std::string name;
  std::string dtype;                 ///< "F32", "F16", "BF16", ...
  std::vector<std::uint64_t> shape;  ///< slowest first: a linear layer is [out, in]
  std::uint64_t offset = 0;          ///< absolute byte offset in the file
  std::uint64_t size = 0;            ///< bytes
  std::uint64_t elements() const noexcept;  ///< product of shape (1 for a scalar)
};

class File {
 public:
  /// Opens, maps and validates `path` (see the file comment).
  explicit File(const std::filesystem::path& path);

  const std::filesystem::path& path() const noexcept { return path_; }
  /// Tensors in ascending offset order.
  const std::vector<TensorInfo>& tensors() const noexcept { return tensors_; }
  /// The tensor named `name`, or nullptr.
  const TensorInfo* find_tensor(std::string_view name) const;
  /// The "__metadata__" strings (empty when absent).
  const std::map<std::string, std::string>& metadata() const noexcept { return metadata_; }
  /// The bytes of a tensor of this file; throws bosch::error after release().
  std::span<const std::byte> tensor_data(const TensorInfo& t) const;
  /// Unmaps the file (the directory stays).
  void release() noexcept { map_.close(); }
  /// "<path>: tensor '<name>'".
  std::string where_tensor(std::string_view name) const;

 private:
  std::filesystem::path path_;
  MappedFile map_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, std::size_t> index_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace bosch::model::safetensors
