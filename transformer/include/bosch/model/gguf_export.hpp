// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file model/gguf_export.hpp
/// A copy of a GGUF model with per-layer sliding windows in its metadata, the
/// way llama.cpp and the `gguf` Python package spell them
/// (docs/deployment.md):
///
///     <arch>.attention.sliding_window          u32, the window w
///     <arch>.attention.sliding_window_pattern  array of bool, one per layer,
///                                              true = the layer slides
///
/// Every other metadata pair, the tensor directory and the tensor data are
/// copied byte for byte (a key already present is replaced in place, new keys
/// go last); only the data section's start moves, to the next multiple of the
/// file's alignment, and tensor offsets are relative to it. The copy is
/// written atomically (io::write_file_atomic).
///
/// llama.cpp reads the keys only for architectures with sliding-window
/// attention (gemma2/3, cohere2, llama4, ...), none of those bosch runs, so
/// `bosch convert --to gguf` and write_mask(format="gguf") refuse before
/// calling the writer (io::check_export_engine); bosch reads the keys back
/// (gguf_windows) but does not run with them.

#include <bosch/io/mask_export.hpp>
#include <bosch/mask.hpp>
#include <bosch/model/gguf.hpp>

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace bosch::model {

/// One metadata pair to set in a GGUF copy, already encoded: its type and
/// the bytes of its value as GGUF stores them (little-endian).
struct GgufPair {
  std::string key;
  gguf::ValueType type = gguf::ValueType::u32;
  std::vector<std::byte> value;

  static GgufPair u32(std::string key, std::uint32_t v);
  static GgufPair bool_array(std::string key, const std::vector<bool>& v);
};

/// The bytes of a copy of `source` (opened from `bytes`, its whole content)
/// with `set` applied: each pair replaces the pair of that key in place, or
/// is appended after the last one.
std::string gguf_with_metadata(const gguf::File& source, std::span<const std::byte> bytes,
                               const std::vector<GgufPair>& set);

/// The windows a GGUF file declares: `window` from
/// <arch>.attention.sliding_window; `swa` per layer from
/// <arch>.attention.sliding_window_pattern (a bool array, one per layer; or
/// llama.cpp's integer period n: layer i slides unless i % n == n - 1; n = 0:
/// all slide). Without the pattern key but with a window, every layer
/// slides. nullopt when the file has no sliding_window. bosch::format_error
/// naming the file and key for a pattern of the wrong length or type.
struct GgufWindows {
  int window = 0;
  std::vector<bool> swa;
};
std::optional<GgufWindows> gguf_windows(const gguf::File& file);

/// Writes a copy of the GGUF model `model` to `out` with `mask`'s layers as
/// sliding-window layers of window `w.window`. The mask must have the
/// model's layout (bosch::invalid_argument naming the model and both
/// layouts) and be layer-granular (io::check_layer_mask), and w.sinks must be
/// 0 (llama.cpp's windows keep no sink tokens); all checked before any bytes
/// are copied. `out` may be `model` itself (the copy replaces it).
void write_gguf_windows(const std::filesystem::path& model, const std::filesystem::path& out, const HeadMask& mask,
                        const io::ExportWindows& w);

}  // namespace bosch::model
