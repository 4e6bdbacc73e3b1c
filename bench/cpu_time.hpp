// Process CPU time for the benchmarks that report rates per CPU-second.
#pragma once

#include <sys/resource.h>

namespace bosch::bench {

/// User + system seconds of this process so far (all threads).
inline double process_cpu_seconds() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

}  // namespace bosch::bench
