// The bf16 kernels this CPU runs, for the tests of every bf16 path.
#pragma once

#include <bosch/cpu/precision.hpp>

#include <vector>

namespace bosch::test {

/// The kernels this CPU runs (the emulation always; AVX512_BF16 and AMX
/// where detect_cpu_features finds them, less $BOSCH_CPU_DISABLE).
inline std::vector<cpu::Bf16Kernel> bf16_kernels() {
  const auto f = cpu::detect_cpu_features();
  std::vector<cpu::Bf16Kernel> k{cpu::Bf16Kernel::emulated};
  if (f.avx512 && f.avx512_bf16) k.push_back(cpu::Bf16Kernel::avx512);
  if (f.avx512 && f.avx512_bf16 && f.amx_bf16) k.push_back(cpu::Bf16Kernel::amx);
  return k;
}

}  // namespace bosch::test
