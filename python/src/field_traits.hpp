// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file python/src/field_traits.hpp
/// The Python form of every value type of the two field tables (bosch::Field:
/// the search options of bosch.Options and bosch.select, the run settings of
/// bosch.TransformerEvaluator): its annotation (py_type, used in signatures
/// and stubs), its Python value (to_py, whose repr is the default a
/// signature shows) and its conversion from Python (from_py: TypeError for a
/// wrong type, bosch.InvalidArgument for a bad value, both naming the field).
/// A field of a type without a specialization is a compile-time error here.

#include "convert.hpp"

#include <bosch/options.hpp>
#include <bosch/run/settings.hpp>
#include <bosch/tasks/records.hpp>

#include <algorithm>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace bosch::python {

template <class T, class = void>
struct field_traits {
  static_assert(sizeof(T) == 0,
                "bosch Python binding: a table field has a type without a Python conversion; "
                "add a field_traits specialization in python/src/field_traits.hpp");
};

template <>
struct field_traits<bool> {
  static std::string py_type() { return "bool"; }
  static nb::object to_py(bool v) { return nb::bool_(v); }
  static bool from_py(nb::handle h, std::string_view field) { return bool_from(h, field); }
};

template <class T>
struct field_traits<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>> {
  static std::string py_type() { return "int"; }
  static nb::object to_py(T v) { return nb::int_(v); }
  static T from_py(nb::handle h, std::string_view field) { return integer_from<T>(h, field); }
};

template <>
struct field_traits<double> {
  static std::string py_type() { return "float"; }
  static nb::object to_py(double v) { return nb::float_(v); }
  static double from_py(nb::handle h, std::string_view field) {
    if (PyBool_Check(h.ptr()) || PyUnicode_Check(h.ptr()) || !PyNumber_Check(h.ptr()))
      wrong_type(field, "a float", h);
    const double v = PyFloat_AsDouble(h.ptr());
    if (v == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      wrong_type(field, "a float", h);
    }
    return v;
  }
};

/// Enums by name (bosch::enum_values, bosch::parse_enum).
template <class T>
struct field_traits<T, std::enable_if_t<std::is_enum_v<T>>> {
  static std::string py_type() {
    std::string s = "typing.Literal[";
    for (T v : enum_values<T>::values) s += (s.back() == '[' ? "'" : ", '") + std::string(to_string(v)) + "'";
    return s + "]";
  }
  static nb::object to_py(T v) { return nb::str(std::string(to_string(v)).c_str()); }
  static T from_py(nb::handle h, std::string_view field) {
    if (!PyUnicode_Check(h.ptr())) wrong_type(field, ("one of the names " + enum_names<T>()).c_str(), h);
    return parse_enum<T>(nb::cast<std::string>(h), std::string(field).c_str());
  }
};

template <>
struct field_traits<std::vector<double>> {
  static std::string py_type() { return "collections.abc.Sequence[float]"; }
  static nb::object to_py(const std::vector<double>& v) {
    nb::list l;
    for (double x : v) l.append(nb::float_(x));
    return l;
  }
  static std::vector<double> from_py(nb::handle h, std::string_view field) {
    if (PyUnicode_Check(h.ptr()) || !PySequence_Check(h.ptr()) && !nb::hasattr(h, "__array__"))
      wrong_type(field, "a sequence of floats", h);
    std::vector<double> out;
    for (nb::handle x : nb::iter(h)) out.push_back(field_traits<double>::from_py(x, field));
    return out;
  }
};

template <>
struct field_traits<std::vector<HeadMask>> {
  static std::string py_type() { return "collections.abc.Sequence[numpy.typing.ArrayLike]"; }
  static nb::object to_py(const std::vector<HeadMask>& v) {
    nb::list l;
    for (const auto& m : v) l.append(mask_to_numpy(m));
    return l;
  }
  static std::vector<HeadMask> from_py(nb::handle h, std::string_view field) {
    if (PyUnicode_Check(h.ptr())) wrong_type(field, "a sequence of bool arrays", h);
    std::vector<HeadMask> out;
    const std::string where(field);
    for (nb::handle x : nb::iter(h)) out.push_back(mask_from(x, std::nullopt, where.c_str()));
    return out;
  }
};

/// Task lists: "passkey,file:qa.jsonl", or a sequence whose items are task
/// names, "file:PATH.jsonl", or records in memory: a list of dicts (one task;
/// a flat list of dicts is one task too), written once to bosch's cache
/// under a name from their content (tasks::write_records).
template <>
struct field_traits<std::vector<tasks::TaskSource>> {
  static std::string py_type() {
    return "str | collections.abc.Sequence[str | collections.abc.Mapping[str, str] | "
           "collections.abc.Sequence[collections.abc.Mapping[str, str]]]";
  }
  static nb::object to_py(const std::vector<tasks::TaskSource>& v) { return nb::str(task_list_string(v).c_str()); }
  static std::vector<tasks::TaskSource> from_py(nb::handle h, std::string_view field) {
    const std::string where(field);
    if (PyUnicode_Check(h.ptr())) return parse_task_list(nb::cast<std::string>(h));
    if (PyDict_Check(h.ptr())) wrong_type(field, "task names or lists of record dicts", h);
    std::vector<nb::handle> items;
    for (nb::handle t : nb::iter(h)) items.push_back(t);
    const bool flat_records =
        !items.empty() && std::all_of(items.begin(), items.end(), [](nb::handle t) { return PyDict_Check(t.ptr()); });
    if (flat_records) return {records_task(h, where)};
    std::vector<tasks::TaskSource> out;
    for (std::size_t i = 0; i < items.size(); ++i) {
      const nb::handle t = items[i];
      if (PyUnicode_Check(t.ptr())) {
        try {
          out.push_back(tasks::parse_task_source(nb::cast<std::string>(t)));
        } catch (const error& e) {
          throw invalid_argument(e.message(), where);
        }
      } else if (!PyDict_Check(t.ptr()) && nb::hasattr(t, "__iter__")) {
        out.push_back(records_task(t, where + "[" + std::to_string(i) + "]"));
      } else {
        wrong_type(field, "task names, file:PATH.jsonl or lists of record dicts", t);
      }
    }
    if (out.empty()) throw invalid_argument("no task given", where);
    return out;
  }

 private:
  /// A list of record dicts as a file task (JSON through Python's json module).
  static tasks::TaskSource records_task(nb::handle records, const std::string& where) {
    const nb::object dumps = nb::module_::import_("json").attr("dumps");
    std::vector<std::string> lines;
    for (nb::handle r : nb::iter(records)) {
      if (!PyDict_Check(r.ptr())) wrong_type(where, "a record dict", r);
      lines.push_back(nb::cast<std::string>(dumps(r, nb::arg("ensure_ascii") = false)));
    }
    return {tasks::TaskKind::file, tasks::write_records(lines, where)};
  }
};

/// Context lengths: one int, or a sequence of them.
template <>
struct field_traits<std::vector<int>> {
  static std::string py_type() { return "int | collections.abc.Sequence[int]"; }
  static nb::object to_py(const std::vector<int>& v) {
    if (v.size() == 1) return nb::int_(v.front());
    nb::list l;
    for (int x : v) l.append(nb::int_(x));
    return nb::tuple(l);
  }
  static std::vector<int> from_py(nb::handle h, std::string_view field) {
    if (PyLong_Check(h.ptr()) || nb::hasattr(h, "__index__")) return {integer_from<int>(h, field)};
    std::vector<int> out;
    for (nb::handle x : nb::iter(h)) out.push_back(integer_from<int>(x, field));
    return out;
  }
};

/// File lists: None, one path, or a sequence of paths.
template <>
struct field_traits<std::vector<std::string>> {
  static std::string py_type() { return "collections.abc.Sequence[str | os.PathLike[str]] | None"; }
  static nb::object to_py(const std::vector<std::string>& v) {
    if (v.empty()) return nb::none();
    nb::list l;
    for (const auto& x : v) l.append(nb::str(x.c_str()));
    return l;
  }
  static std::vector<std::string> from_py(nb::handle h, std::string_view field) {
    if (h.is_none()) return {};
    const std::string what(field);
    if (PyUnicode_Check(h.ptr()) || nb::hasattr(h, "__fspath__")) return {path_from(h, what.c_str())};
    std::vector<std::string> out;
    for (nb::handle x : nb::iter(h)) out.push_back(path_from(x, what.c_str()));
    return out;
  }
};

/// A value as a signature shows it (Python's repr of to_py).
template <class T>
std::string py_repr(const T& v) {
  return nb::cast<std::string>(nb::repr(field_traits<T>::to_py(v)));
}

/// Field `field` of `owner` from Python, running the field's own check
/// (bosch.InvalidArgument naming the field).
template <class Owner, class T>
void set_field(Owner& owner, const Field<Owner, T>& field, nb::handle value) {
  T v = field_traits<T>::from_py(value, field.name);
  if (field.check != nullptr) {
    const std::string msg = field.check(v);
    if (!msg.empty()) throw invalid_argument(msg, std::string(field.name));
  }
  owner.*field.member = std::move(v);
}

}  // namespace bosch::python
