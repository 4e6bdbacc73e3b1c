// bosch: training-free selection of sliding-window attention heads (BOSCH).
// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file version.hpp
/// Library version. CMake reads the three numbers below, so keep their form.

#define BOSCH_VERSION_MAJOR 0
#define BOSCH_VERSION_MINOR 1
#define BOSCH_VERSION_PATCH 0

namespace bosch {
/// The library version as "MAJOR.MINOR.PATCH"; written into every mask file
/// and checkpoint so a result can be traced to the code that produced it.
inline constexpr const char* version_string = "0.1.0";
}  // namespace bosch
