// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file fuzz/fuzz_support.hpp
/// Shared helpers of the libFuzzer targets (fuzz/fuzz_*.cpp).
///
/// Every target feeds its input to one reader of outside data and checks the
/// project's error contract on top of the sanitizers:
///  - the reader either succeeds or throws a bosch::error whose where() names
///    the file (or source) it was given: check() aborts on an error that does
///    not, and on any other exception (an escaped nlohmann::json exception,
///    std::out_of_range, std::bad_alloc, ...), so libFuzzer reports it as a
///    crash with the input saved;
///  - readers that take a path get the input written to a scratch file, in
///    $BOSCH_FUZZ_SCRATCH when set (scripts/fuzz sets it), else in /dev/shm
///    (tmpfs) when it exists, else the system temp directory; one directory
///    per process, removed at exit.

#include <bosch/error.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <system_error>
#include <typeinfo>

#include <unistd.h>

namespace bosch::fuzz {

namespace detail {
inline std::filesystem::path& scratch_root() {
  static std::filesystem::path dir;
  return dir;
}
inline void remove_scratch() {
  std::error_code ec;
  if (!scratch_root().empty()) std::filesystem::remove_all(scratch_root(), ec);
}
}  // namespace detail

/// This process's scratch directory (created on first use, removed at exit).
inline const std::filesystem::path& scratch_dir() {
  auto& dir = detail::scratch_root();
  if (dir.empty()) {
    std::filesystem::path base;
    if (const char* env = std::getenv("BOSCH_FUZZ_SCRATCH"); env && *env)
      base = env;
    else if (::access("/dev/shm", W_OK) == 0)
      base = "/dev/shm";
    else
      base = std::filesystem::temp_directory_path();
    dir = base / ("bosch-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    std::atexit(detail::remove_scratch);
  }
  return dir;
}

/// Writes `size` bytes to `name` in the scratch directory; returns its path.
inline std::filesystem::path write_scratch(const std::string& name, const std::uint8_t* data,
                                           std::size_t size) {
  const auto path = scratch_dir() / name;
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) {
    std::fprintf(stderr, "fuzz: cannot write scratch file %s\n", path.c_str());
    std::abort();
  }
  return path;
}

/// Runs `f`. Returns true when it completed; false when it threw a
/// bosch::error whose where() contains `must_name` (the file or source the
/// reader was given). Aborts (a finding) on a bosch::error that does not name
/// it and on any exception that is not a bosch::error.
template <class F>
bool check(F&& f, std::string_view must_name) {
  try {
    f();
    return true;
  } catch (const bosch::error& e) {
    if (e.where().find(must_name) == std::string::npos) {
      std::fprintf(stderr, "fuzz: error does not name '%.*s': %s\n",
                   static_cast<int>(must_name.size()), must_name.data(), e.what());
      std::abort();
    }
    return false;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: escaped non-bosch exception %s: %s\n", typeid(e).name(), e.what());
    std::abort();
  } catch (...) {
    std::fprintf(stderr, "fuzz: escaped unknown exception\n");
    std::abort();
  }
}

/// Aborts with `what` unless `ok` (a property the reader must keep).
inline void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz: property violated: %s\n", what);
    std::abort();
  }
}

}  // namespace bosch::fuzz
