// SPDX-License-Identifier: Apache-2.0
// POSIX memory mapping of model files (see bosch/model/mapped_file.hpp).

#include <bosch/error.hpp>
#include <bosch/model/mapped_file.hpp>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace bosch::model {

namespace {

std::string errno_text(int e) { return std::strerror(e); }

/// Closes a descriptor on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

MappedFile::MappedFile(const std::filesystem::path& path) : path_(path) {
  const std::string where = path.string();
  // Checked before opening: opening a FIFO blocks until a writer comes.
  if (struct stat pre {}; ::stat(path.c_str(), &pre) == 0 && !S_ISREG(pre.st_mode))
    throw file_error(S_ISDIR(pre.st_mode) ? "is a directory, not a file" : "not a regular file", where);
  Fd f;
  f.fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (f.fd < 0) throw file_error("cannot open: " + errno_text(errno), where);
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) throw file_error("cannot stat: " + errno_text(errno), where);
  if (!S_ISREG(st.st_mode)) throw file_error("not a regular file", where);
  if (st.st_size < 0) throw file_error("negative file size", where);
  size_ = static_cast<std::size_t>(st.st_size);
  if (size_ > 0) {
    void* p = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, f.fd, 0);
    if (p == MAP_FAILED) {
      size_ = 0;
      throw file_error("cannot memory-map: " + errno_text(errno), where);
    }
    // Readers walk the file front to back (dequantization is sequential).
    ::madvise(p, size_, MADV_SEQUENTIAL);
    data_ = static_cast<const std::byte*>(p);
  }
  open_ = true;
}

MappedFile::~MappedFile() { close(); }

MappedFile::MappedFile(MappedFile&& other) noexcept
    : path_(std::move(other.path_)),
      data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      open_(std::exchange(other.open_, false)) {}

MappedFile& MappedFile::operator=(MappedFile&& other) noexcept {
  if (this != &other) {
    close();
    path_ = std::move(other.path_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    open_ = std::exchange(other.open_, false);
  }
  return *this;
}

void MappedFile::close() noexcept {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
  data_ = nullptr;
  size_ = 0;
  open_ = false;
}

std::span<const std::byte> MappedFile::region(std::uint64_t offset, std::uint64_t size, const char* what,
                                              const std::string& where) const {
  if (!open_) throw error("file no longer mapped (released)", where);
  if (offset > size_ || size > size_ - offset)
    throw format_error(std::string(what) + " beyond the end of the file", where);
  return bytes().subspan(static_cast<std::size_t>(offset), static_cast<std::size_t>(size));
}

}  // namespace bosch::model
