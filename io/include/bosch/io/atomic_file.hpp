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
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <istream>
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

/// "write failed: <why>" for the errno `err` of a failed write ("write failed:
/// No space left on device"), plain "write failed" when `err` is 0: the
/// message of every failed write, so that a full disk says so.
inline std::string write_failure(int err) {
  return err == 0 ? std::string("write failed") : std::string("write failed: ") + std::strerror(err);
}

/// The file a write to `path` lands in: `path` itself, or, when `path` is a
/// symbolic link (to a file that may not exist yet), the end of its chain of
/// links, so that writing "link.json" updates the link's target and keeps the
/// link. Throws bosch::file_error for a loop of links.
inline std::filesystem::path write_target(const std::filesystem::path& path) {
  std::filesystem::path p = path;
  for (int hops = 0;; ++hops) {
    std::error_code ec;
    if (!std::filesystem::is_symlink(std::filesystem::symlink_status(p, ec))) return p;
    if (hops == 40) throw file_error("too many levels of symbolic links", path.string());
    const std::filesystem::path next = std::filesystem::read_symlink(p, ec);
    if (ec) throw file_error("cannot read symbolic link: " + ec.message(), p.string());
    p = next.is_absolute() ? next : p.parent_path() / next;
  }
}

/// True when `a` and `b` name the same file: after symbolic links, "./" and
/// "..", or as two hard links to one file (std::filesystem::equivalent). "-"
/// (stdin/stdout), an empty path and a character device (/dev/null: reading
/// and writing it destroy nothing) are never the same file as anything. The
/// check that an output never overwrites an input.
inline bool same_file(const std::filesystem::path& a, const std::filesystem::path& b) {
  if (a.empty() || b.empty() || a == "-" || b == "-") return false;
  auto key = [](const std::filesystem::path& p) {
    std::error_code ec;
    std::filesystem::path t = p;
    try {
      t = write_target(p);
    } catch (const file_error&) {
    }
    std::filesystem::path k = std::filesystem::weakly_canonical(std::filesystem::absolute(t), ec);
    if (ec) k = std::filesystem::absolute(t).lexically_normal();
    return k;
  };
  std::error_code ec;
  if (std::filesystem::is_character_file(a, ec) || std::filesystem::is_character_file(b, ec)) return false;
  if (key(a) == key(b)) return true;
  ec.clear();
  const bool eq = std::filesystem::equivalent(a, b, ec);
  return !ec && eq;
}

/// Throws bosch::file_error (where = path) unless `path` can be read as a
/// file: it exists and is a regular file (after links). Checked before the
/// file is opened: opening a FIFO would block until a writer comes, and a
/// device such as /dev/zero never ends.
inline void check_input_file(const std::filesystem::path& path) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  using ft = std::filesystem::file_type;
  switch (st.type()) {
    case ft::regular: return;
    case ft::not_found: throw file_error("no such file", path.string());
    case ft::directory: throw file_error("is a directory, not a file", path.string());
    case ft::fifo: throw file_error("is a FIFO (named pipe), not a regular file", path.string());
    case ft::character:
    case ft::block: throw file_error("is a device, not a regular file", path.string());
    case ft::socket: throw file_error("is a socket, not a regular file", path.string());
    default:
      throw file_error(ec ? "cannot examine: " + ec.message() : std::string("is not a regular file"),
                       path.string());
  }
}

/// The most bytes each kind of input is read up to; a bigger input is refused
/// with the limit in the message, before anything is read.
inline constexpr std::uintmax_t max_config_bytes = std::uintmax_t{1} << 20;   ///< 1 MiB: --config files
inline constexpr std::uintmax_t max_mask_bytes = std::uintmax_t{64} << 20;    ///< 64 MiB: mask files
inline constexpr std::uintmax_t max_report_bytes = std::uintmax_t{256} << 20; ///< 256 MiB: evaluate reports
inline constexpr std::uintmax_t max_text_bytes = std::uintmax_t{256} << 20;   ///< 256 MiB: haystack texts
inline constexpr std::uintmax_t max_file_bytes = std::uintmax_t{4} << 30;     ///< 4 GiB: any other file

/// "1 MiB", "256 MiB", "4 GiB": a limit as messages show it.
inline std::string limit_text(std::uintmax_t bytes) {
  if (bytes >= (std::uintmax_t{1} << 30) && bytes % (std::uintmax_t{1} << 30) == 0)
    return std::to_string(bytes >> 30) + " GiB";
  if (bytes >= (std::uintmax_t{1} << 20) && bytes % (std::uintmax_t{1} << 20) == 0)
    return std::to_string(bytes >> 20) + " MiB";
  return std::to_string(bytes) + " bytes";
}

/// The bosch::file_error of an input over its limit: "larger than the 1 MiB
/// limit of a config file".
inline file_error too_large(const std::string& where, std::uintmax_t max_bytes, std::string_view what) {
  return file_error("larger than the " + limit_text(max_bytes) + " limit of " + std::string(what), where);
}

/// Reads at most `max_bytes` from `in` (a stream already open), or throws
/// too_large naming `where` and `what`.
inline std::string read_bounded(std::istream& in, std::uintmax_t max_bytes, std::string_view what,
                                const std::string& where) {
  std::string out;
  char buf[1 << 16];
  while (in) {
    in.read(buf, sizeof buf);
    const auto n = static_cast<std::size_t>(in.gcount());
    if (out.size() + n > max_bytes) throw too_large(where, max_bytes, what);
    out.append(buf, n);
  }
  if (in.bad()) throw file_error("read failed", where);
  return out;
}

/// Reads a whole file of at most `max_bytes` (`what` names the kind in the
/// message: "a config file"). Throws bosch::file_error (where = path) when it
/// is missing, is not a regular file (checked before opening: a FIFO would
/// block), is bigger than the limit, or cannot be opened or read.
inline std::string read_file(const std::filesystem::path& path, std::uintmax_t max_bytes = max_file_bytes,
                             std::string_view what = "a file") {
  check_input_file(path);
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (!ec && size > max_bytes) throw too_large(path.string(), max_bytes, what);
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw file_error(std::string("cannot open for reading: ") + std::strerror(errno),
                     path.string());
  return read_bounded(in, max_bytes, what, path.string());  // bounded also if it grew
}

/// Removes the temporary files that write_file_atomic(path) leaves when a
/// process is killed between creating and renaming one
/// (".<name>.tmp.<pid>.<n>" beside the target). Call it only while no other
/// process writes `path` (the holder of its lock, after a successful run).
inline void remove_stale_temporaries(const std::filesystem::path& path) noexcept {
  try {
    const std::filesystem::path target = write_target(path);
    const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : ".";
    const std::string prefix = "." + target.filename().string() + ".tmp.";
    std::error_code ec;
    for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
      const std::string name = it->path().filename().string();
      if (name.size() > prefix.size() && name.compare(0, prefix.size(), prefix) == 0 &&
          name.find_first_not_of("0123456789.", prefix.size()) == std::string::npos) {
        std::error_code rm;
        std::filesystem::remove(it->path(), rm);
      }
    }
  } catch (...) {
  }
}

/// How write_file_atomic writes to a path.
enum class WriteMode {
  replace,   ///< a new regular file: temporary file + rename (atomic)
  in_place,  ///< an existing character device or FIFO (/dev/null, a pipe): written directly
};

/// How `path` (after write_target) would be written, or a bosch::file_error
/// (where = `option` when given, else the path) saying why it cannot be: an
/// empty path, a directory, a socket or block device, a missing or
/// non-directory parent, a file name too long for the file system, a parent
/// directory where no file can be created (tried with an empty probe file,
/// removed at once; `probe` false skips that). The check every
/// output gets before a long computation, so that a bad path fails at once.
inline WriteMode check_output_file(const std::filesystem::path& path, const std::string& option = {},
                                   bool probe = true) {
  // With an option the message names the path too, unless `why` names the
  // directory at fault already (with_path false).
  auto fail = [&](const std::string& why, const std::filesystem::path& p, bool with_path = true) {
    throw file_error(option.empty() || !with_path ? why : "'" + p.string() + "': " + why,
                     option.empty() ? p.string() : option);
  };
  if (path.empty()) fail("empty path", path);
  const std::filesystem::path target = write_target(path);
  std::error_code ec;
  const auto st = std::filesystem::status(target, ec);
  using ft = std::filesystem::file_type;
  switch (st.type()) {
    case ft::directory: fail("is a directory, not a file", target); break;
    case ft::character:
    case ft::fifo: return WriteMode::in_place;
    case ft::regular:
    case ft::not_found: break;
    case ft::none:  // status failed: a name too long is named below, other errors here
      if (ec == std::errc::filename_too_long) break;
      fail("cannot examine: " + ec.message(), target);
      break;
    default: fail("is not a regular file (a socket or block device); refusing to replace it", target);
  }
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : ".";
  const auto dst = std::filesystem::status(dir, ec);
  if (dst.type() == ft::not_found) fail("directory '" + dir.string() + "' does not exist", target, false);
  if (dst.type() != ft::directory) fail("'" + dir.string() + "' is not a directory", target, false);
#ifdef BOSCH_HAVE_POSIX_IO
  // The temporary file's name is the target's plus ".tmp.<pid>.<n>" (at most
  // 32 more bytes): it must fit the directory's file-name limit too.
  long name_max = ::pathconf(dir.c_str(), _PC_NAME_MAX);
  if (name_max <= 0) name_max = 255;
  if (static_cast<long>(target.filename().string().size()) + 32 > name_max)
    fail("file name too long (" + std::to_string(target.filename().string().size()) + " bytes; at most " +
             std::to_string(name_max - 32) + " here)",
         target);
  if (probe) {
    // Whether a file can be created there is known only by trying (root
    // passes permission checks, /proc refuses new files, a file system may be
    // read-only): create and remove an empty probe file.
    std::string probe_name(1, '.');
    probe_name += target.filename().string();
    probe_name += ".probe.";
    probe_name += std::to_string(static_cast<long>(::getpid()));
    const std::filesystem::path pp = dir / probe_name;
    const int fd = ::open(pp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
      const int err = errno;
      if (err != EEXIST) fail("cannot create a file in directory '" + dir.string() + "': " + std::strerror(err), target);
    } else {
      ::close(fd);
      ::unlink(pp.c_str());
    }
  }
#endif
  return WriteMode::replace;
}

/// Writes `content` to `path` atomically (temporary file + rename), so that
/// readers see the old file or the new one, never a torn one. A symbolic link
/// is followed: its target is replaced and the link kept (write_target). A
/// character device or FIFO (/dev/null, /dev/stdout, a named pipe) is written
/// in place; a directory, socket or block device is refused, never replaced.
/// An existing file's permissions are kept. Creates no directories. Throws
/// bosch::file_error (where = path) on failure, after removing the temporary
/// file.
inline void write_file_atomic(const std::filesystem::path& path, std::string_view content) {
  static std::atomic<unsigned long> counter{0};
  const std::filesystem::path target = write_target(path);
  if (check_output_file(path, {}, /*probe=*/false) == WriteMode::in_place) {
    std::ofstream out(target, std::ios::binary | std::ios::out);
    if (!out) throw file_error(std::string("cannot open for writing: ") + std::strerror(errno), path.string());
    errno = 0;
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    if (!out) throw file_error(write_failure(errno), path.string());
    return;
  }
  const std::filesystem::path dir = target.has_parent_path() ? target.parent_path() : ".";
#ifdef BOSCH_HAVE_POSIX_IO
  const long pid = static_cast<long>(::getpid());
#else
  const long pid = 0;
#endif
  std::string name(1, '.');  // built piecewise (GCC 12 warns on "." + std::string)
  name += target.filename().string();
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
    errno = 0;
    out.write(content.data(), static_cast<std::streamsize>(content.size()));
    out.flush();
    const int err = errno;
    out.close();
    if (!out) fail(write_failure(err != 0 ? err : errno));
  }
  {
    std::error_code ec;
    const auto old = std::filesystem::status(target, ec);
    if (!ec && old.type() == std::filesystem::file_type::regular)
      std::filesystem::permissions(tmp, old.permissions(), ec);  // best effort
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
  std::filesystem::rename(tmp, target, ec);
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
