// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file cpu/precision.hpp
/// The arithmetic precision of the CPU backend's projections and FFN, and the
/// runtime CPU dispatch that picks it (docs/precision.md).
///
/// fp32 (the default) runs every product in fp32 with Eigen. bf16 rounds the
/// weights (once, when the backend is built) and each product's input
/// activations (per call) to bfloat16 and accumulates in fp32. The kernel
/// depends on the CPU: AMX tiles (TDPBF16PS) where the CPU and the OS allow
/// them, else AVX512_BF16 dot products (VDPBF16PS), else an emulation
/// (AVX2/FMA or scalar) that gives the AVX512_BF16 kernel's bits (up to
/// denormals, which the hardware flushes) but is slower than fp32. AMX
/// rounds its fp32 accumulation in its own way, so its results differ from
/// the other two at the fp32 level (cpu/bf16.hpp). `automatic` picks bf16
/// where AMX or AVX512_BF16 runs it, fp32 elsewhere, and says why.
///
/// The binary stays runnable on any x86-64-v3 CPU: the AVX-512 code is
/// compiled per function (target attributes) and only called after cpuid
/// says the instructions exist.

#include <string>
#include <string_view>

namespace bosch::cpu {

/// Precision of the projections and FFN products (attention, norms, RoPE and
/// the logits stay fp32 in every setting).
enum class Precision {
  fp32,       ///< fp32 weights and activations (Eigen)
  bf16,       ///< bf16 weights and activations, fp32 accumulation
  automatic,  ///< bf16 where the CPU runs it natively (AVX512_BF16), else fp32
};

/// "fp32", "bf16" or "automatic".
std::string_view to_string(Precision p) noexcept;

/// The inverse of to_string ("auto" is accepted for automatic). Throws
/// bosch::invalid_argument naming `where` for any other text.
Precision parse_precision(std::string_view text, const std::string& where = "precision");

/// The kernel that runs bf16 products.
enum class Bf16Kernel {
  amx,       ///< AMX-BF16 tiles (TDPBF16PS), with the avx512 kernel's rounding of the inputs
  avx512,    ///< VDPBF16PS / VCVTNE2PS2BF16 (AVX512_BF16 with AVX512F/BW/VL)
  emulated,  ///< the avx512 kernel's arithmetic with fp32 FMAs (AVX2 when compiled for it, else scalar)
};

/// "amx-bf16", "avx512-bf16" or "emulated".
std::string_view to_string(Bf16Kernel k) noexcept;

/// The CPU features the dispatch looks at.
struct CpuFeatures {
  bool avx2_fma = false;     ///< AVX2 and FMA
  bool avx512 = false;       ///< AVX512F, AVX512BW and AVX512VL
  bool avx512_bf16 = false;  ///< AVX512_BF16 (usable only together with avx512)
  /// AMX-TILE and AMX-BF16, enabled by the OS (XCR0) and granted to this
  /// process (Linux arch_prctl ARCH_REQ_XCOMP_PERM); used only together with
  /// avx512 and avx512_bf16, which every AMX CPU has.
  bool amx_bf16 = false;
  /// Why amx_bf16 is false on a CPU that has the instructions (the OS or
  /// the kernel refused them); empty otherwise.
  std::string amx_note;
  /// Features removed by $BOSCH_CPU_DISABLE (comma-separated names as it
  /// listed them), empty when it is unset.
  std::string disabled;
};

/// The features of the running CPU (cpuid via __builtin_cpu_supports),
/// minus those named in the environment variable BOSCH_CPU_DISABLE: a
/// comma-separated list of "avx2" (AVX2 and FMA), "avx512" (AVX512F/BW/VL,
/// which also removes AVX512_BF16 and AMX), "avx512_bf16" (also removes
/// AMX) and "amx". It lets a test or a user run the fallback paths on a CPU
/// that has the instructions. The AMX permission is requested (once per
/// process) only when AMX is not disabled. Throws
/// bosch::invalid_argument naming the variable for any other name. On a
/// non-x86 build every feature is false.
CpuFeatures detect_cpu_features();

/// `features` with the comma-separated `names` removed (the rule of
/// BOSCH_CPU_DISABLE; an empty list removes nothing). Throws
/// bosch::invalid_argument naming `where` for an unknown name.
CpuFeatures disable_features(CpuFeatures features, std::string_view names,
                             const std::string& where = "BOSCH_CPU_DISABLE");

/// What the dispatch chose and why.
struct PrecisionChoice {
  Precision requested = Precision::fp32;  ///< the setting asked for
  Precision precision = Precision::fp32;  ///< fp32 or bf16: what runs
  Bf16Kernel kernel = Bf16Kernel::emulated;  ///< the bf16 kernel (meaningful when precision is bf16)
  std::string reason;                     ///< one line for a log or the CLI
  /// "fp32", "bf16 (amx-bf16)", "bf16 (avx512-bf16)" or "bf16 (emulated)".
  std::string name() const;
};

/// The dispatch rule (docs/precision.md):
/// - fp32 runs fp32;
/// - bf16 runs bf16: on AMX when `cpu` has avx512, avx512_bf16 and
///   amx_bf16, else on the AVX512_BF16 kernel when it has avx512 and
///   avx512_bf16, else on the emulation (slower than fp32);
/// - automatic runs bf16 on AMX or AVX512_BF16 as above, and fp32 where
///   neither exists (the emulation would be slower than fp32).
/// The reason names the missing instructions when it falls back.
PrecisionChoice choose_precision(Precision requested, const CpuFeatures& cpu);

/// choose_precision(requested, detect_cpu_features()): what a Backend built
/// with Options::precision = requested runs on this machine. For fp32 it
/// detects nothing (so a bad BOSCH_CPU_DISABLE fails only bf16/automatic).
PrecisionChoice choose_precision(Precision requested);

}  // namespace bosch::cpu
