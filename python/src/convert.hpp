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

#include <limits>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
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

/// Raises TypeError "FIELD: expected EXPECTED, got TYPE".
[[noreturn]] void wrong_type(std::string_view field, const char* expected, nb::handle got);

/// A bool from a Python bool or a NumPy bool scalar (TypeError naming `field`
/// otherwise: 1 and "yes" are not booleans).
bool bool_from(nb::handle h, std::string_view field);

/// An integer of type T from an int or NumPy integer (not a bool or float:
/// TypeError naming `field`); bosch.InvalidArgument naming `field` when it
/// does not fit T.
template <class T>
T integer_from(nb::handle h, std::string_view field) {
  if (PyBool_Check(h.ptr()) || PyFloat_Check(h.ptr())) wrong_type(field, "an int", h);
  PyObject* index = PyNumber_Index(h.ptr());  // int, numpy integers
  if (!index) {
    PyErr_Clear();
    wrong_type(field, "an int", h);
  }
  nb::object i = nb::steal(index);
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(i.ptr(), &overflow);
  if (overflow == 0 && std::in_range<T>(v)) return static_cast<T>(v);
  if (overflow > 0) {
    const unsigned long long u = PyLong_AsUnsignedLongLong(i.ptr());
    if (!PyErr_Occurred() && std::in_range<T>(u)) return static_cast<T>(u);
    PyErr_Clear();
  }
  throw invalid_argument("must lie in [" + std::to_string(std::numeric_limits<T>::min()) + ", " +
                             std::to_string(std::numeric_limits<T>::max()) + "], got " +
                             nb::cast<std::string>(nb::repr(h)),
                         std::string(field));
}

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
