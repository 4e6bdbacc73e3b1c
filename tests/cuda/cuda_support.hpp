// Helpers of the CUDA test suite: device detection with a visible SKIPPED
// message, and llm.c-style closeness checks (|got - ref| <= atol + rtol |ref|)
// that report the largest error and how much of its threshold it used.
#pragma once

#include <bosch/cuda/backend.hpp>

#include <doctest/doctest.h>

#include "test_support.hpp"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

namespace bosch::test {

/// True when a CUDA device is usable. Otherwise prints
/// "SKIPPED: no CUDA device: <reason>" (the test then returns and passes:
/// machines without a GPU, CI included, still compile and link the suite),
/// or, in a build with BOSCH_REQUIRE_CUDA=ON (scripts/device-check), fails the
/// test: a device check must not pass on skips.
inline bool cuda_device() {
  std::string why;
  if (cuda::device_available(&why)) return true;
#if defined(BOSCH_REQUIRE_CUDA) && BOSCH_REQUIRE_CUDA
  FAIL("no CUDA device (" << why << "), and this build requires one (BOSCH_REQUIRE_CUDA=ON)");
#endif
  MESSAGE("SKIPPED: no CUDA device: " << why);
  return false;
}

/// A tolerance |got - ref| <= atol + rtol * |ref| and the reason for it.
struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

/// The worst element of a comparison.
struct Closeness {
  double max_abs_error = 0;   ///< max |got - ref|
  double worst_fraction = 0;  ///< max |got - ref| / (atol + rtol |ref|): <= 1 passes
  std::size_t worst_index = 0;
  std::size_t non_finite = 0; ///< got values that are NaN or inf
  std::size_t count = 0;
};

template <class A, class B>
Closeness closeness(std::span<const A> got, std::span<const B> ref, Tolerance t) {
  Closeness c;
  c.count = std::min(got.size(), ref.size());
  for (std::size_t i = 0; i < c.count; ++i) {
    const double g = static_cast<double>(got[i]);
    const double r = static_cast<double>(ref[i]);
    if (!std::isfinite(g)) {
      ++c.non_finite;
      continue;
    }
    const double e = std::abs(g - r);
    const double f = e / (t.atol + t.rtol * std::abs(r));
    c.max_abs_error = std::max(c.max_abs_error, e);
    if (f > c.worst_fraction) {
      c.worst_fraction = f;
      c.worst_index = i;
    }
  }
  return c;
}

/// Checks got against ref elementwise and reports the worst case.
template <class A, class B>
void check_close(const std::string& what, const std::vector<A>& got, const std::vector<B>& ref,
                 Tolerance t) {
  REQUIRE(got.size() == ref.size());
  const Closeness c = closeness(std::span<const A>(got), std::span<const B>(ref), t);
  MESSAGE(what << ": " << c.count << " values, max |err| " << c.max_abs_error << ", worst "
               << 100.0 * c.worst_fraction << "% of threshold (atol " << t.atol << ", rtol "
               << t.rtol << ") at index " << c.worst_index);
  CHECK(c.non_finite == 0);
  CHECK(c.worst_fraction <= 1.0);
}

/// Root mean square of a vector.
template <class A>
double rms(const std::vector<A>& v) {
  double s = 0;
  for (const auto& x : v) s += static_cast<double>(x) * static_cast<double>(x);
  return v.empty() ? 0.0 : std::sqrt(s / static_cast<double>(v.size()));
}

}  // namespace bosch::test
