// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/mask_files.hpp
/// Mask files in any of the three forms (io/mask_io.hpp), from and to files
/// or stdin/stdout, with the form chosen by --format-style options.

#include <bosch/io/mask_io.hpp>
#include <bosch/mask.hpp>

#include <nlohmann/json.hpp>

#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

namespace bosch::cli {

using io::MaskFormat;

const char* to_string(MaskFormat f) noexcept;
/// "json", "tsv", "grid" (also "txt" for grid); bosch::invalid_argument naming
/// `option` otherwise.
MaskFormat parse_mask_format(std::string_view name, const std::string& option);
/// `explicit_format` when non-empty, else by extension (io::mask_format_of).
MaskFormat mask_format(const std::filesystem::path& path, const std::string& explicit_format,
                       const std::string& option);

/// Reads a mask file of the given form with io::parse_mask; "-" reads stdin.
/// `layout` supplies the query-head count TSV and grid files lack (their
/// layers and KV heads must agree with it, a JSON file's whole layout);
/// without it those files get as many query heads as KV heads. Errors:
/// bosch::file_error, bosch::format_error, and runtime_failure for a layout
/// mismatch (all exit 1).
io::MaskFile read_mask_file(const std::filesystem::path& path, MaskFormat format,
                            const std::optional<HeadLayout>& layout = std::nullopt,
                            double tsv_threshold = 0.5);

/// Writes a mask file atomically ("-" writes to stdout); metadata only in JSON.
void write_mask_file(const std::filesystem::path& path, MaskFormat format, const HeadMask& mask,
                     const nlohmann::json& metadata = nlohmann::json::object());

/// An int field of a mask file's metadata ("window", "sinks"); nullopt when
/// absent or null. A value that is no integer of int's range is refused
/// (bosch::format_error "FILE: metadata.KEY: expected an integer, got V"),
/// never read as absent: a recorded sinks of 2.5 must not become 0.
std::optional<int> metadata_int(const nlohmann::json& metadata, const char* key, const std::string& file);

}  // namespace bosch::cli
