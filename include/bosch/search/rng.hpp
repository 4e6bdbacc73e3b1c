// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file rng.hpp
/// Seeded randomness for the search: one master seed (Options::seed) and
/// child streams derived from it deterministically, one per sub-problem, so a
/// sub-problem's random choices do not depend on how much randomness earlier
/// ones consumed. Boost.Random only (mt19937_64 with Boost distributions): the
/// same seed gives the same streams on every platform and standard library.

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_01.hpp>
#include <boost/random/uniform_int_distribution.hpp>

#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

namespace bosch::search {

/// The engine used everywhere in the search.
using engine = boost::random::mt19937_64;

/// SplitMix64 finalizer: a bijective 64-bit mix.
inline constexpr std::uint64_t mix64(std::uint64_t z) noexcept {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

/// Seed of the child stream identified by `path` (e.g. {stage, layer}) under
/// `master`.
inline std::uint64_t derive_seed(std::uint64_t master, std::initializer_list<std::uint64_t> path) {
  std::uint64_t h = mix64(master);
  for (std::uint64_t p : path) h = mix64(h ^ mix64(p + 0x632be59bd9b4e019ull));
  return h;
}

/// An engine seeded with derive_seed(master, path).
inline engine make_engine(std::uint64_t master, std::initializer_list<std::uint64_t> path) {
  return engine(derive_seed(master, path));
}

/// Uniform integer in [lo, hi] (inclusive).
inline int uniform_int(engine& g, int lo, int hi) {
  boost::random::uniform_int_distribution<int> d(lo, hi);
  return d(g);
}

/// Uniform double in [0, 1).
inline double uniform01(engine& g) {
  boost::random::uniform_01<double> d;
  return d(g);
}

/// Fisher-Yates shuffle driven by `g` (std::shuffle's algorithm is not fixed
/// by the standard, so it is not used).
template <class T>
void shuffle(std::vector<T>& v, engine& g) {
  for (std::size_t i = v.size(); i > 1; --i) {
    const int j = uniform_int(g, 0, static_cast<int>(i) - 1);
    using std::swap;
    swap(v[i - 1], v[static_cast<std::size_t>(j)]);
  }
}

}  // namespace bosch::search
