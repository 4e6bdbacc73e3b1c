// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file model/mapped_file.hpp
/// A read-only memory mapping of a whole file (POSIX mmap), RAII. The model
/// readers parse and dequantize straight out of the mapping, so the weights
/// are never held twice in anonymous memory; the mapping ends with the object
/// (or an explicit close()).

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <span>
#include <string>

namespace bosch::model {

/// The element count of a tensor shape: the product of its dimensions (1 for
/// no dimensions). The readers check the product against overflow on reading.
inline std::uint64_t element_count(std::span<const std::uint64_t> shape) noexcept {
  std::uint64_t n = 1;
  for (auto d : shape) n *= d;
  return n;
}

class MappedFile {
 public:
  /// An empty mapping (size() == 0, is_open() false).
  MappedFile() noexcept = default;
  /// Maps `path` read-only. Throws bosch::file_error naming the path when it
  /// does not exist, is not a regular file, or cannot be opened or mapped. An
  /// empty file maps to an empty span (is_open() true, size() == 0).
  explicit MappedFile(const std::filesystem::path& path);
  ~MappedFile();

  MappedFile(MappedFile&& other) noexcept;
  MappedFile& operator=(MappedFile&& other) noexcept;
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  /// The mapped bytes (empty after close()).
  std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }
  /// First byte of the mapping (nullptr when empty).
  const std::byte* data() const noexcept { return data_; }
  /// Size of the file in bytes as mapped.
  std::size_t size() const noexcept { return size_; }
  /// The path it was opened from.
  const std::filesystem::path& path() const noexcept { return path_; }
  /// True from a successful open until close().
  bool is_open() const noexcept { return open_; }
  /// Unmaps the file; bytes() becomes empty. Idempotent.
  void close() noexcept;

  /// The `size` bytes at `offset`, e.g. a tensor's data. Throws bosch::error
  /// "file no longer mapped" after close(), and bosch::format_error when the
  /// range reaches beyond the end of the file; both at `where` (e.g.
  /// "model.gguf: tensor 'x'"), the message naming `what`.
  std::span<const std::byte> region(std::uint64_t offset, std::uint64_t size, const char* what,
                                    const std::string& where) const;

 private:
  std::filesystem::path path_;
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
  bool open_ = false;
};

}  // namespace bosch::model
