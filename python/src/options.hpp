// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file python/src/options.hpp
/// bosch.Options and the option keywords of bosch.select, generated from the
/// field table bosch::for_each_option (include/bosch/options.hpp): a field
/// added there appears here, in the signatures, docstrings and type stubs,
/// without code in this package.
///
/// Rules for the Python side of a field:
/// - name: the C++ name; a name that is a Python keyword ("lambda") is spelled
///   with a trailing underscore ("lambda_"), and the C++ name is accepted too
///   (`**{"lambda": 4}`);
/// - type: bool -> bool, integers -> int (range-checked), double -> float,
///   enums -> str (the names of bosch::to_string, parsed by
///   bosch::parse_enum), std::vector<double> -> list[float],
///   std::vector<HeadMask> -> list of bool arrays (layers, kv_heads). A field
///   of any other type is a compile-time error (field_traits.hpp, the one
///   set of conversions of both tables, says where to add it), so a field can
///   never be silently missing;
/// - checks: the field's own check runs when it is set (bosch.InvalidArgument,
///   a ValueError, whose `where` is the field's C++ name).

#include "convert.hpp"

#include <string>

namespace bosch::python {

/// Sets every option field named in `kw` on `o` and removes it from `kw`
/// (Python or C++ spelling). Raises TypeError for a wrongly typed value and
/// bosch.InvalidArgument for one outside the field's domain; does not look at
/// the other keys.
void take_options(Options& o, nb::dict& kw);

/// "target_ratio: float = 0.5, seed: int = 0, ..." for a signature's
/// keyword-only part, every field in table order.
const std::string& options_signature();

/// One line per field ("seed (int, default 0): search seed"), for docstrings.
const std::string& options_docstring();

/// Gives every std::vector<HeadMask> field's masks the query-head count of
/// `layout` (masks arrive from NumPy without one); bosch.InvalidArgument when
/// a mask's shape differs from the layout.
void adopt_layout(Options& o, const HeadLayout& layout);

/// Binds bosch.Options.
void bind_options(nb::module_& m);

}  // namespace bosch::python
