// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file python/src/convert.hpp
/// Conversions shared by the parts of the extension module: head layouts and
/// masks to and from NumPy, JSON to and from Python objects, and the mapping
/// of bosch::error to the package's exception classes.
///
/// Masks cross the boundary as NumPy bool arrays of shape (layers, kv_heads),
/// True = sliding-window (SWA) head, always a fresh array (the callee may keep
/// it). On the way in any array-like of that shape with a bool dtype, or an
/// integer dtype holding only 0 and 1, is accepted.

#include <bosch/bosch.hpp>

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>
#include <nlohmann/json.hpp>

#include <optional>
#include <span>
#include <string>
#include <vector>

namespace nb = nanobind;

namespace bosch::python {

/// A fresh NumPy bool array (layers, kv_heads) holding the bits of `m`.
nb::object mask_to_numpy(const HeadMask& m);
/// A fresh NumPy bool array (n, layers, kv_heads); all masks share one layout.
nb::object masks_to_numpy(std::span<const HeadMask> ms, const HeadLayout& layout);
/// A NumPy array of `values` (float64, int64 ...).
nb::object doubles_to_numpy(const std::vector<double>& values);
nb::object ints_to_numpy(const std::vector<int>& values);

/// A layout from a bosch.HeadLayout, a string "LxHqxHkv" / "LxHkv", or a
/// tuple (layers, query_heads, kv_heads) / (layers, kv_heads). Raises
/// bosch.InvalidArgument (a ValueError) naming `what` otherwise.
HeadLayout layout_from(nb::handle obj, const char* what = "layout");

/// A mask from an array-like of shape (layers, kv_heads) (see the file
/// comment). With `layout`, the shape must match it and the mask gets its
/// query-head count; without, the shape decides and the query heads equal the
/// KV heads. Raises TypeError / bosch.InvalidArgument naming `what`.
HeadMask mask_from(nb::handle obj, const std::optional<HeadLayout>& layout, const char* what = "mask");

/// JSON <-> Python (dict, list, str, int, float, bool, None) through the json
/// module (exact for every double: both sides print round-trip digits).
nb::object json_to_python(const nlohmann::json& j);
/// Raises bosch.InvalidArgument naming `what` for what JSON cannot hold
/// (NaN, infinity, sets, arbitrary objects).
nlohmann::json python_to_json(nb::handle obj, const char* what);

/// A path from str or os.PathLike.
std::string path_from(nb::handle obj, const char* what = "path");

/// Registers bosch.Error (RuntimeError), bosch.InvalidArgument (Error,
/// ValueError), bosch.FormatError (Error, ValueError), bosch.FileError (Error,
/// OSError) and bosch.DeviceError (Error) on `m`, and the translator that
/// raises them for the C++ exceptions; each carries the C++ `where` (the
/// field, option, file) as its `where` attribute.
void register_errors(nb::module_& m);

/// Keeps `s` for the life of the process and returns it (signatures and
/// docstrings handed to nanobind at module initialization).
const char* keep_string(std::string s);

/// The numpy module (imported once, kept for the life of the process).
nb::handle numpy();

}  // namespace bosch::python
