// SPDX-License-Identifier: Apache-2.0
// Model fingerprints: XXH64 over every byte of every file (see loader.hpp).

#include <bosch/model/loader.hpp>
#include <bosch/model/mapped_file.hpp>

#include <cstdio>
#include <cstring>
#include <map>
#include <mutex>
#include <tuple>

namespace bosch::model {

namespace {

constexpr std::uint64_t p1 = 0x9E3779B185EBCA87ull, p2 = 0xC2B2AE3D27D4EB4Full, p3 = 0x165667B19E3779F9ull,
                        p4 = 0x85EBCA77C2B2AE63ull, p5 = 0x27D4EB2F165667C5ull;

constexpr std::uint64_t rotl(std::uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
std::uint64_t read64(const std::byte* p) {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | static_cast<std::uint64_t>(p[i]);
  return v;
}
std::uint64_t read32(const std::byte* p) {
  std::uint64_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | static_cast<std::uint64_t>(p[i]);
  return v;
}
std::uint64_t xround(std::uint64_t acc, std::uint64_t input) { return rotl(acc + input * p2, 31) * p1; }
std::uint64_t merge(std::uint64_t acc, std::uint64_t v) { return (acc ^ xround(0, v)) * p1 + p4; }

void put64(std::vector<std::byte>& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<std::byte>((v >> (8 * i)) & 0xff));
}

/// The XXH64 of one file's content, cached by (path, size, modification
/// time): a run loads its model once, but a process may load it again.
std::uint64_t file_digest(const std::filesystem::path& path) {
  static std::mutex mutex;
  static std::map<std::tuple<std::string, std::uintmax_t, std::int64_t>, std::uint64_t> cache;
  std::error_code ec;
  const std::string abs = std::filesystem::absolute(path, ec).string();
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  const auto mtime = std::filesystem::last_write_time(path, ec).time_since_epoch().count();
  const auto key = std::make_tuple(abs, size, static_cast<std::int64_t>(mtime));
  if (!ec) {
    std::lock_guard lock(mutex);
    if (const auto it = cache.find(key); it != cache.end()) return it->second;
  }
  MappedFile f(path);
  const std::uint64_t h = xxh64(f.bytes());
  if (!ec) {
    std::lock_guard lock(mutex);
    cache[key] = h;
  }
  return h;
}

}  // namespace

std::uint64_t xxh64(std::span<const std::byte> bytes, std::uint64_t seed) {
  const std::byte* p = bytes.data();
  const std::size_t n = bytes.size();
  const std::byte* const end = p + n;
  std::uint64_t h;
  if (n >= 32) {
    std::uint64_t v1 = seed + p1 + p2, v2 = seed + p2, v3 = seed, v4 = seed - p1;
    for (; end - p >= 32; p += 32) {
      v1 = xround(v1, read64(p));
      v2 = xround(v2, read64(p + 8));
      v3 = xround(v3, read64(p + 16));
      v4 = xround(v4, read64(p + 24));
    }
    h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
    h = merge(merge(merge(merge(h, v1), v2), v3), v4);
  } else {
    h = seed + p5;
  }
  h += static_cast<std::uint64_t>(n);
  for (; end - p >= 8; p += 8) h = rotl(h ^ xround(0, read64(p)), 27) * p1 + p4;
  if (end - p >= 4) {
    h = rotl(h ^ (read32(p) * p1), 23) * p2 + p3;
    p += 4;
  }
  for (; p < end; ++p) h = rotl(h ^ (static_cast<std::uint64_t>(*p) * p5), 11) * p1;
  h ^= h >> 33;
  h *= p2;
  h ^= h >> 29;
  h *= p3;
  h ^= h >> 32;
  return h;
}

std::string fingerprint(const std::vector<std::filesystem::path>& files) {
  std::vector<std::byte> records;
  for (const auto& path : files) {
    std::error_code ec;
    const std::uintmax_t size = std::filesystem::file_size(path, ec);
    const std::uint64_t digest = file_digest(path);
    put64(records, ec ? 0 : static_cast<std::uint64_t>(size));
    put64(records, digest);
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(xxh64(records)));
  return hex;
}

}  // namespace bosch::model
