// SPDX-License-Identifier: Apache-2.0
// bosch::cpu precision dispatch: CPU feature detection (cpuid, masked by
// $BOSCH_CPU_DISABLE) and the rule that picks fp32 or bf16 (docs/precision.md).

#include <bosch/cpu/precision.hpp>
#include <bosch/error.hpp>

#include "bf16_kernels.hpp"

#include <cstdint>
#include <cstdlib>
#include <string>

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <cpuid.h>
#define BOSCH_X86_DETECT 1
#endif
#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

namespace bosch::cpu {

std::string_view to_string(Precision p) noexcept {
  switch (p) {
    case Precision::fp32: return "fp32";
    case Precision::bf16: return "bf16";
    case Precision::automatic: return "automatic";
  }
  return "?";
}

Precision parse_precision(std::string_view text, const std::string& where) {
  if (text == "fp32") return Precision::fp32;
  if (text == "bf16") return Precision::bf16;
  if (text == "automatic" || text == "auto") return Precision::automatic;
  throw invalid_argument("unknown precision '" + std::string(text) + "' (expected fp32, bf16 or automatic)", where);
}

std::string_view to_string(Bf16Kernel k) noexcept {
  switch (k) {
    case Bf16Kernel::amx: return "amx-bf16";
    case Bf16Kernel::avx512: return "avx512-bf16";
    case Bf16Kernel::emulated: return "emulated";
  }
  return "?";
}

namespace {

#if BOSCH_X86_DETECT
/// Whether the CPU has AMX-TILE and AMX-BF16 and the OS saves the tile
/// state (XCR0 bits 17 and 18); `note` says why not when the CPU has them.
bool amx_cpu_and_os(std::string& note) {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  if (!(d & (1u << 24)) || !(d & (1u << 22))) return false;  // AMX-TILE, AMX-BF16
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) {  // OSXSAVE
    note = "AMX present but XSAVE is not enabled by the OS";
    return false;
  }
  std::uint32_t lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  (void)hi;
  if ((lo & (3u << 17)) != (3u << 17)) {
    note = "AMX present but the OS does not enable its tile state (XCR0)";
    return false;
  }
  return true;
}
#endif

/// Asks Linux, once per process, for the AMX tile data permission
/// (arch_prctl ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA); without it the
/// first tile instruction would kill the process.
bool amx_permission() {
#if defined(__linux__) && defined(SYS_arch_prctl)
  static const bool granted = syscall(SYS_arch_prctl, 0x1023, 18) == 0;
  return granted;
#else
  return false;
#endif
}

}  // namespace

CpuFeatures disable_features(CpuFeatures f, std::string_view names, const std::string& where) {
  std::size_t i = 0;
  while (i <= names.size()) {
    std::size_t j = names.find(',', i);
    if (j == std::string_view::npos) j = names.size();
    std::string_view name = names.substr(i, j - i);
    while (!name.empty() && name.front() == ' ') name.remove_prefix(1);
    while (!name.empty() && name.back() == ' ') name.remove_suffix(1);
    if (!name.empty()) {
      if (name == "avx2") {
        f.avx2_fma = false;
      } else if (name == "avx512") {
        f.avx512 = f.avx512_bf16 = f.amx_bf16 = false;
      } else if (name == "avx512_bf16") {
        f.avx512_bf16 = f.amx_bf16 = false;
      } else if (name == "amx") {
        f.amx_bf16 = false;
      } else {
        throw invalid_argument("unknown CPU feature '" + std::string(name) +
                                   "' (expected a comma-separated list of avx2, avx512, avx512_bf16, amx)",
                               where);
      }
      if (!f.disabled.empty()) f.disabled += ",";
      f.disabled += name;
    }
    i = j + 1;
  }
  return f;
}

CpuFeatures detect_cpu_features() {
  CpuFeatures f;
#if BOSCH_X86_DETECT
  __builtin_cpu_init();
  // libgcc / compiler-rt check the OS saves the vector state (XCR0) before
  // reporting AVX/AVX-512 features.
  f.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  f.avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512vl");
  f.avx512_bf16 = __builtin_cpu_supports("avx512bf16");
  f.amx_bf16 = amx_cpu_and_os(f.amx_note);
#endif
  if (const char* names = std::getenv("BOSCH_CPU_DISABLE")) f = disable_features(f, names);
  // Ask for the AMX permission only when AMX would be used.
  if (f.amx_bf16 && f.avx512 && f.avx512_bf16 && bf16::amx_compiled() && !amx_permission()) {
    f.amx_bf16 = false;
    f.amx_note = "AMX present but the kernel refused the tile permission (arch_prctl ARCH_REQ_XCOMP_PERM)";
  }
  return f;
}

std::string PrecisionChoice::name() const {
  if (precision == Precision::fp32) return "fp32";
  return "bf16 (" + std::string(to_string(kernel)) + ")";
}

PrecisionChoice choose_precision(Precision requested, const CpuFeatures& cpu) {
  PrecisionChoice c;
  c.requested = requested;
  const bool native = cpu.avx512 && cpu.avx512_bf16 && bf16::avx512_compiled();
  const bool amx = native && cpu.amx_bf16 && bf16::amx_compiled();
  const Bf16Kernel kernel = amx ? Bf16Kernel::amx : native ? Bf16Kernel::avx512 : Bf16Kernel::emulated;
  std::string how;
  if (amx) {
    how = "AMX-BF16 tiles (TDPBF16PS)";
  } else if (native) {
    how = "AVX512_BF16 dot products (VDPBF16PS; no AMX: " +
          (cpu.amx_note.empty() ? std::string(cpu.amx_bf16 ? "not in this build" : "AMX-BF16 unavailable")
                                : cpu.amx_note) +
          (cpu.disabled.empty() ? "" : ", BOSCH_CPU_DISABLE=" + cpu.disabled) + ")";
  }
  std::string missing;
  if (!native) {
    if (!bf16::avx512_compiled())
      missing = "this build has no AVX-512 BF16 kernel (not an x86-64 GCC/Clang build)";
    else if (!cpu.avx512)
      missing = cpu.avx512_bf16 ? "the CPU lacks AVX512F/BW/VL" : "the CPU lacks AVX512F/BW/VL and AVX512_BF16";
    else
      missing = "the CPU lacks AVX512_BF16";
    if (!cpu.disabled.empty()) missing += " (BOSCH_CPU_DISABLE=" + cpu.disabled + ")";
  }
  switch (requested) {
    case Precision::fp32:
      c.precision = Precision::fp32;
      c.reason = "fp32 requested";
      break;
    case Precision::bf16:
      c.precision = Precision::bf16;
      c.kernel = kernel;
      c.reason = native ? "bf16 requested, on " + how
                        : "bf16 requested, emulated with fp32 FMAs because " + missing +
                              " (same numbers as the AVX512_BF16 kernel, slower than fp32)";
      break;
    case Precision::automatic:
      if (native) {
        c.precision = Precision::bf16;
        c.kernel = kernel;
        c.reason = "automatic: bf16 on " + how;
      } else {
        c.precision = Precision::fp32;
        c.reason = "automatic: fp32, because " + missing + " and emulated bf16 is slower than fp32";
      }
      break;
  }
  return c;
}

PrecisionChoice choose_precision(Precision requested) {
  // fp32 needs no detection: the default never depends on cpuid or the environment.
  if (requested == Precision::fp32) return choose_precision(requested, CpuFeatures{});
  return choose_precision(requested, detect_cpu_features());
}

}  // namespace bosch::cpu
