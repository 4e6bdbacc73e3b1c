// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file atomic_file.hpp
/// Whole-file reads and atomic writes. A write goes to a temporary file in the
/// target's directory, is flushed, closed and fsync'ed (POSIX), then renamed
/// over the target, and the directory is fsync'ed, so readers see either the
/// old file or the complete new one, never a torn one -- also after the
/// writing process is killed (SIGKILL) at any moment or the machine loses
/// power -- and a failed write leaves no half-written output. A process killed
/// between creating and renaming the temporary file leaves that file
/// (".<name>.tmp.<pid>.<n>") behind; the target is untouched.

#include <bosch/error.hpp>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <system_error>

#if __has_include(<unistd.h>)
#include <fcntl.h>
#include <unistd.h>
#define BOSCH_HAVE_POSIX_IO 1
#endif

namespace bosch::io {

/// Reads a whole file. Throws bosch::file_error (where = path) when it
/// cannot be opened or read.
inline std::string read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw file_error(std::string("cannot open for reading: ") + std::strerror(errno),
                     path.string());
  std::ostringstream ss;
  ss << in.rdbuf();
  if (in.bad()) throw file_error("read failed", path.string());
  return ss.str();
}

/// Writes `content` to `path` atomically (temporary file + rename). Creates
/// no directories. Throws bosch::file_error (where = path) on failure, after
/// removing the temporary file.
inline void write_file_atomic(const std::filesystem::path& path, std::string_view content) {
  static std::atomic<unsigned long> counter{0};
  const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : ".";
#ifdef BOSCH_HAVE_POSIX_IO
  const long pid = static_cast<long>(::getpid());
#else
  const long pid = 0;
#endif
  std::string name(1, '.');  // built piecewise (GCC 12 warns on "." + std::string)
  name += path.filename().string();
  name += ".tmp.";
  name += std::to_string(pid);
  name += '.';
  name += std::to_string(counter.fetch_add(1));
  const std::filesystem::path tmp = dir / name;
  auto fail = [&](const std::string& why) {
    std::error_code ec;
    std::filesystem::remove(tmp, ec);
    throw file_error(why, path.string());
  };
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(std::string("cannot create temporary file: ") + std::strerror(errno));
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    out.close();
    if (!out) fail("write failed");
  }
#ifdef BOSCH_HAVE_POSIX_IO
  {
    // The data must be on disk before the rename makes it the target.
    const int fd = ::open(tmp.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) fail(std::string("cannot reopen temporary file: ") + std::strerror(errno));
    const int rc = ::fsync(fd);
    const int err = errno;
    ::close(fd);
    if (rc != 0) fail(std::string("fsync failed: ") + std::strerror(err));
  }
#endif
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) fail("cannot rename temporary file into place: " + ec.message());
#ifdef BOSCH_HAVE_POSIX_IO
  {
    // Make the rename itself durable. Best effort: the new file is already in
    // place for every reader, and some file systems refuse fsync on a directory.
    const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
      (void)::fsync(dfd);
      ::close(dfd);
    }
  }
#endif
}

}  // namespace bosch::io
