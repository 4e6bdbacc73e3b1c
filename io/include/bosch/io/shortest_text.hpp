// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file io/shortest_text.hpp
/// bosch::io::shortest_text: the shortest decimal text that reads back as
/// exactly the same number (std::to_chars), the form every number bosch
/// writes for a reader takes (--help defaults, the reference tables, export
/// files).

#include <charconv>
#include <string>
#include <type_traits>

namespace bosch::io {

template <class T>
  requires std::is_arithmetic_v<T>
std::string shortest_text(T x) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, x);
  return std::string(buf, r.ptr);
}

}  // namespace bosch::io
