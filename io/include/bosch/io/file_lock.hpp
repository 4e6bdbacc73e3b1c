// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file file_lock.hpp
/// An exclusive lock that one process holds on a resumable output (a search
/// checkpoint, a comparison's results file) while it writes it. Two runs
/// writing the same file would each rewrite it from their own state and drop
/// what the other had finished; the second run is refused at once instead.
///
/// The lock is an advisory flock(2) on a small lock file beside the output.
/// The kernel releases it when the process ends, however it ends (SIGKILL
/// included), so a crashed run never leaves a stale lock that blocks --resume;
/// the holder removes the lock file when it lets go (only a killed process
/// leaves it behind, where it is harmless). Without POSIX I/O the
/// lock is a no-op.

#include <bosch/error.hpp>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <string>
#include <utility>

#if __has_include(<sys/file.h>) && __has_include(<unistd.h>)
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <unistd.h>
#define BOSCH_HAVE_FLOCK 1
#endif

namespace bosch::io {

/// The files a process must not leave behind even when a signal ends it (its
/// lock files): registered while they exist, removed by
/// remove_registered_files(), which is async-signal-safe (unlink only), for
/// a program's handler of a fatal signal to call before it dies.
namespace detail {
struct RegisteredFiles {
  static constexpr int slots = 64;
  static constexpr std::size_t max_path = 4096;
  char paths[slots][max_path] = {};
  volatile std::sig_atomic_t used[slots] = {};
};
inline RegisteredFiles& registered_files() {
  static RegisteredFiles r;
  return r;
}
}  // namespace detail

/// Registers `path` for remove_registered_files(); returns its slot (-1 when
/// all are taken or the path is too long: then it is not removed on a signal).
inline int register_file(const std::filesystem::path& path) noexcept {
  auto& r = detail::registered_files();
  std::error_code ec;
  const std::string s = std::filesystem::absolute(path, ec).string();
  if (ec) return -1;
  if (s.size() + 1 > detail::RegisteredFiles::max_path) return -1;
  for (int i = 0; i < detail::RegisteredFiles::slots; ++i)
    if (!r.used[i]) {
      std::memcpy(r.paths[i], s.c_str(), s.size() + 1);
      r.used[i] = 1;
      return i;
    }
  return -1;
}
/// Forgets a slot of register_file (-1: nothing).
inline void unregister_file(int slot) noexcept {
  if (slot >= 0 && slot < detail::RegisteredFiles::slots) detail::registered_files().used[slot] = 0;
}
/// Unlinks every registered file; async-signal-safe.
inline void remove_registered_files() noexcept {
#ifdef BOSCH_HAVE_FLOCK
  auto& r = detail::registered_files();
  for (int i = 0; i < detail::RegisteredFiles::slots; ++i)
    if (r.used[i]) ::unlink(r.paths[i]);
#endif
}

namespace detail {
/// Blocks SIGINT, SIGTERM and SIGHUP in the calling thread for its lifetime,
/// so that a stop signal cannot land between creating a lock file and
/// registering it (or between unregistering and removing it): a program's
/// handler, which removes the registered files, runs when the mask is
/// restored and finds the file registered.
class StopSignalsBlocked {
 public:
  StopSignalsBlocked() noexcept {
#ifdef BOSCH_HAVE_FLOCK
    sigset_t block;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    sigaddset(&block, SIGHUP);
    ok_ = ::pthread_sigmask(SIG_BLOCK, &block, &old_) == 0;
#endif
  }
  ~StopSignalsBlocked() {
#ifdef BOSCH_HAVE_FLOCK
    if (ok_) ::pthread_sigmask(SIG_SETMASK, &old_, nullptr);
#endif
  }
  StopSignalsBlocked(const StopSignalsBlocked&) = delete;
  StopSignalsBlocked& operator=(const StopSignalsBlocked&) = delete;

 private:
#ifdef BOSCH_HAVE_FLOCK
  sigset_t old_{};
  bool ok_ = false;
#endif
};
}  // namespace detail

/// Holds an exclusive lock on `lock_path` (created if missing) for its
/// lifetime. Throws bosch::file_error (where = lock_path) when another process
/// holds it ("<what> is in use by another process ...") or the lock file
/// cannot be created.
class FileLock {
 public:
  /// @param lock_path the lock file, e.g. "<output>.lock".
  /// @param what      what the lock protects, for the error message.
  FileLock(std::filesystem::path lock_path, const std::string& what) : path_(std::move(lock_path)) {
#ifdef BOSCH_HAVE_FLOCK
    const detail::StopSignalsBlocked blocked;  // created and registered as one step
    fd_ = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd_ < 0)
      throw file_error(std::string("cannot create lock file: ") + std::strerror(errno), path_.string());
    if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      const int err = errno;
      ::close(fd_);
      fd_ = -1;
      if (err == EWOULDBLOCK)
        throw file_error(what + " is in use by another process (wait for it to finish or stop it, then run again)",
                         path_.string());
      throw file_error(std::string("cannot lock: ") + std::strerror(err), path_.string());
    }
    slot_ = register_file(path_);  // removed even when a signal ends the process
#else
    (void)what;
#endif
  }

  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;

  /// Releases the lock and removes the lock file: only the outputs the user
  /// asked for remain, after a failure or an interrupt too.
  ~FileLock() { release(/*remove_file=*/true); }

  /// Releases the lock; with `remove_file`, deletes the lock file first (call
  /// it when the protected output is finished and nothing is left to resume).
  void release(bool remove_file = false) noexcept {
#ifdef BOSCH_HAVE_FLOCK
    if (fd_ < 0) return;
    const detail::StopSignalsBlocked blocked;  // unregistered and removed as one step
    unregister_file(slot_);
    slot_ = -1;
    if (remove_file) {
      std::error_code ec;
      std::filesystem::remove(path_, ec);
    }
    ::close(fd_);  // closing the last descriptor releases the flock
    fd_ = -1;
#else
    (void)remove_file;
#endif
  }

  const std::filesystem::path& path() const noexcept { return path_; }

 private:
  std::filesystem::path path_;
  int fd_ = -1;
  int slot_ = -1;
};

}  // namespace bosch::io
