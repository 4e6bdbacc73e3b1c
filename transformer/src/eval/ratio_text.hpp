// A SWA ratio as people write it, for the comparison's messages and tables.
#pragma once

#include <cstdio>
#include <string>

namespace bosch::eval::detail {

/// "%g": 0.5, not 0.500000.
inline std::string ratio_text(double rho) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", rho);
  return buf;
}

}  // namespace bosch::eval::detail
