// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file io/json_number.hpp
/// Numbers in bosch's JSON files: a NaN or infinite double (a score not
/// computed, an interval without samples) is written as null, since JSON has
/// no NaN, and null reads back as NaN. Finite doubles round-trip bitwise
/// (nlohmann writes the shortest text that reads back the same value).

#include <nlohmann/json.hpp>

#include <cmath>
#include <limits>

namespace bosch::io {

/// `v` as JSON: the number, or null when it is not finite.
inline nlohmann::json json_number(double v) { return std::isfinite(v) ? nlohmann::json(v) : nlohmann::json(nullptr); }

/// The inverse of json_number: null is NaN, a number its value (nlohmann's
/// type_error for anything else).
inline double json_double(const nlohmann::json& j) {
  return j.is_null() ? std::numeric_limits<double>::quiet_NaN() : j.get<double>();
}

}  // namespace bosch::io
