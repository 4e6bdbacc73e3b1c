// SPDX-License-Identifier: Apache-2.0
// Model fingerprints: FNV-1a 64 over sizes and sampled content (see loader.hpp).

#include <bosch/model/loader.hpp>
#include <bosch/model/mapped_file.hpp>

#include <algorithm>
#include <cstdio>

namespace bosch::model {

namespace {

constexpr std::uint64_t fnv_offset = 0xcbf29ce484222325ull;
constexpr std::uint64_t fnv_prime = 0x100000001b3ull;

void fnv(std::uint64_t& h, std::span<const std::byte> bytes) {
  for (std::byte b : bytes) {
    h ^= static_cast<std::uint64_t>(b);
    h *= fnv_prime;
  }
}

}  // namespace

std::string fingerprint(const std::vector<std::filesystem::path>& files) {
  constexpr std::size_t whole = 1u << 20, edge = 64u << 10, block = 4u << 10;
  constexpr int samples = 32;
  std::uint64_t h = fnv_offset;
  for (const auto& path : files) {
    MappedFile f(path);
    const std::size_t n = f.size();
    std::byte size_bytes[8];
    for (int i = 0; i < 8; ++i) size_bytes[i] = static_cast<std::byte>((static_cast<std::uint64_t>(n) >> (8 * i)) & 0xff);
    fnv(h, size_bytes);
    const auto all = f.bytes();
    if (n <= whole) {
      fnv(h, all);
      continue;
    }
    fnv(h, all.first(edge));
    for (int k = 0; k < samples; ++k) {
      const std::size_t off = (n - block) / (samples - 1) * static_cast<std::size_t>(k);
      fnv(h, all.subspan(off, block));
    }
    fnv(h, all.last(edge));
  }
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(h));
  return hex;
}

}  // namespace bosch::model
