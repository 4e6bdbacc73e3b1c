// SPDX-License-Identifier: Apache-2.0
// Mask files (see mask_files.hpp).

#include "mask_files.hpp"

#include "errors.hpp"
#include "files.hpp"

#include <cstdint>
#include <limits>

namespace bosch::cli {

const char* to_string(MaskFormat f) noexcept {
  switch (f) {
    case MaskFormat::json: return "json";
    case MaskFormat::tsv: return "tsv";
    case MaskFormat::grid: return "grid";
  }
  return "?";
}

MaskFormat parse_mask_format(std::string_view name, const std::string& option) {
  if (name == "json") return MaskFormat::json;
  if (name == "tsv") return MaskFormat::tsv;
  if (name == "grid" || name == "txt") return MaskFormat::grid;
  throw invalid_argument("unknown mask format '" + std::string(name) + "' (expected json, tsv or grid)",
                         option);
}

MaskFormat mask_format(const std::filesystem::path& path, const std::string& explicit_format,
                       const std::string& option) {
  if (!explicit_format.empty()) return parse_mask_format(explicit_format, option);
  return io::mask_format_of(path);
}

io::MaskFile read_mask_file(const std::filesystem::path& path, MaskFormat format,
                            const std::optional<HeadLayout>& layout, double tsv_threshold) {
  const std::string text = read_input(path, io::max_mask_bytes, "a mask file");
  try {
    return io::parse_mask(text, format, input_name(path), layout, tsv_threshold);
  } catch (const bosch::invalid_argument& e) {
    throw runtime_failure(e.what());  // a valid mask of another model: not a usage error
  }
}

void write_mask_file(const std::filesystem::path& path, MaskFormat format, const HeadMask& mask,
                     const nlohmann::json& metadata) {
  std::string text;
  switch (format) {
    case MaskFormat::json: text = io::mask_to_json(mask, metadata).dump(2) + "\n"; break;
    case MaskFormat::tsv: text = io::mask_to_tsv(mask); break;
    case MaskFormat::grid: text = to_grid(mask); break;
  }
  write_output(path, text);
}

std::optional<int> metadata_int(const nlohmann::json& meta, const char* key, const std::string& file) {
  if (!meta.is_object() || !meta.contains(key) || meta[key].is_null()) return std::nullopt;
  const nlohmann::json& v = meta[key];
  constexpr auto int_max = static_cast<std::int64_t>(std::numeric_limits<int>::max());
  if (v.is_number_unsigned()) {
    if (v.get<std::uint64_t>() <= static_cast<std::uint64_t>(int_max)) return v.get<int>();
  } else if (v.is_number_integer()) {
    const auto x = v.get<std::int64_t>();
    if (x >= -int_max - 1 && x <= int_max) return static_cast<int>(x);
  }
  throw format_error(std::string("metadata.") + key + ": expected an integer, got " + v.dump(), file);
}

}  // namespace bosch::cli
