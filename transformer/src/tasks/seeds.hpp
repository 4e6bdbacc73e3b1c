// SPDX-License-Identifier: Apache-2.0
// Internal to bosch::tasks: the seed mixing of every generator, so that each
// (kind, split, length, index) is a stream of its own on every platform.
#pragma once

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>

#include <cstddef>
#include <cstdint>

namespace bosch::tasks::detail {

inline std::uint64_t splitmix64(std::uint64_t x) {
  x += 0x9E3779B97F4A7C15ULL;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ULL;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBULL;
  return x ^ (x >> 31);
}
inline std::uint64_t mix(std::uint64_t h, std::uint64_t v) { return splitmix64(h ^ splitmix64(v)); }

using Rng = boost::random::mt19937_64;

/// Uniform in [0, n) (n > 0), the same on every platform (Boost.Random).
inline std::size_t uniform_index(Rng& rng, std::size_t n) {
  return boost::random::uniform_int_distribution<std::size_t>(0, n - 1)(rng);
}

/// Fisher-Yates with uniform_index: a platform-independent shuffle.
template <class V>
void shuffle(V& v, Rng& rng) {
  for (std::size_t i = v.size(); i > 1; --i) {
    const std::size_t j = uniform_index(rng, i);
    std::swap(v[i - 1], v[j]);
  }
}

}  // namespace bosch::tasks::detail
