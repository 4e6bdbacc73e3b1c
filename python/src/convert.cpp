// SPDX-License-Identifier: Apache-2.0
// Conversions shared by the extension module (see convert.hpp).

#include "convert.hpp"

#include <cstring>
#include <deque>
#include <memory>

using namespace nb::literals;

namespace bosch::python {

namespace {

// The package's exception classes (created once in register_errors; owned by
// the module, which lives as long as the process).
PyObject* g_error = nullptr;
PyObject* g_invalid = nullptr;
PyObject* g_format = nullptr;
PyObject* g_file = nullptr;
PyObject* g_device = nullptr;

void raise_as(PyObject* type, const bosch::error& e) {
  nb::object exc = nb::steal(PyObject_CallFunction(type, "s", e.what()));
  if (!exc.is_valid()) return;  // the constructor raised; that error stands
  nb::setattr(exc, "where", nb::str(e.where().c_str()));
  nb::setattr(exc, "message", nb::str(e.message().c_str()));
  PyErr_SetObject(type, exc.ptr());
}

PyObject* new_exception(nb::module_& m, const char* name, const char* doc, nb::handle bases) {
  // Named after this module (bosch._bosch, or _bosch when imported alone, as
  // the stub generator does); the package presents them as bosch.Name.
  const std::string full = nb::cast<std::string>(m.attr("__name__")) + "." + name;
  PyObject* type = PyErr_NewExceptionWithDoc(full.c_str(), doc, bases.ptr(), nullptr);
  if (!type) throw nb::python_error();
  m.attr(name) = nb::handle(type);
  return type;
}

template <class T>
nb::object array_from(const T* values, std::size_t n, std::initializer_list<std::size_t> shape) {
  auto* data = new T[n == 0 ? 1 : n];
  if (n) std::memcpy(data, values, n * sizeof(T));
  nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<T*>(p); });
  return nb::cast(nb::ndarray<nb::numpy, T>(data, shape.size(), shape.begin(), owner));
}

}  // namespace

const char* keep_string(std::string s) {
  static std::deque<std::string> strings;  // a deque never moves its elements
  strings.push_back(std::move(s));
  return strings.back().c_str();
}

nb::handle numpy() {
  static PyObject* np = [] {
    PyObject* m = PyImport_ImportModule("numpy");
    if (!m) throw nb::python_error();
    return m;
  }();
  return np;
}

nb::object mask_to_numpy(const HeadMask& m) {
  const auto& lay = m.layout();
  static_assert(sizeof(bool) == sizeof(std::uint8_t));
  // HeadMask stores 0/1 bytes, which are valid bools.
  return array_from(reinterpret_cast<const bool*>(m.bits().data()), m.size(),
                    {static_cast<std::size_t>(lay.num_layers), static_cast<std::size_t>(lay.num_kv_heads)});
}

nb::object masks_to_numpy(std::span<const HeadMask> ms, const HeadLayout& layout) {
  const std::size_t per = layout.size();
  auto* data = new bool[ms.empty() ? 1 : ms.size() * per];
  for (std::size_t i = 0; i < ms.size(); ++i)
    std::memcpy(data + i * per, ms[i].bits().data(), per);
  nb::capsule owner(data, [](void* p) noexcept { delete[] static_cast<bool*>(p); });
  const std::size_t shape[3] = {ms.size(), static_cast<std::size_t>(layout.num_layers),
                                static_cast<std::size_t>(layout.num_kv_heads)};
  return nb::cast(nb::ndarray<nb::numpy, bool>(data, 3, shape, owner));
}

nb::object doubles_to_numpy(const std::vector<double>& values) {
  return array_from(values.data(), values.size(), {values.size()});
}

nb::object ints_to_numpy(const std::vector<int>& values) {
  std::vector<std::int64_t> wide(values.begin(), values.end());
  return array_from(wide.data(), wide.size(), {wide.size()});
}

HeadLayout layout_from(nb::handle obj, const char* what) {
  if (nb::isinstance<HeadLayout>(obj)) return nb::cast<HeadLayout>(obj);
  if (nb::isinstance<nb::str>(obj)) {
    try {
      return parse_layout(nb::cast<std::string>(obj));
    } catch (const invalid_argument& e) {
      throw invalid_argument(e.message(), what);
    }
  }
  if (nb::isinstance<nb::tuple>(obj) || nb::isinstance<nb::list>(obj)) {
    std::vector<int> v;
    for (nb::handle x : obj) {
      if (!PyLong_Check(x.ptr()) || PyBool_Check(x.ptr()))
        throw invalid_argument("expected integers (layers, query_heads, kv_heads), got " +
                                   nb::cast<std::string>(nb::repr(obj)),
                               what);
      v.push_back(nb::cast<int>(x));
    }
    HeadLayout l;
    if (v.size() == 3)
      l = {v[0], v[1], v[2]};
    else if (v.size() == 2)
      l = {v[0], v[1], v[1]};
    else
      throw invalid_argument("expected (layers, query_heads, kv_heads) or (layers, kv_heads), got " +
                                 nb::cast<std::string>(nb::repr(obj)),
                             what);
    check_layout(l, what);
    return l;
  }
  throw invalid_argument("expected a bosch.HeadLayout, a string 'LxHqxHkv' or a tuple "
                         "(layers, query_heads, kv_heads), got " +
                             std::string(nb::type_name(obj.type()).c_str()),
                         what);
}

HeadMask mask_from(nb::handle obj, const std::optional<HeadLayout>& layout, const char* what) {
  nb::handle np = numpy();
  nb::object arr = np.attr("asarray")(obj);
  const std::string kind = nb::cast<std::string>(arr.attr("dtype").attr("kind"));
  const nb::tuple shape = nb::cast<nb::tuple>(arr.attr("shape"));
  const std::string shape_text = nb::cast<std::string>(nb::repr(shape));
  if (shape.size() != 2)
    throw invalid_argument("expected an array of shape (layers, kv_heads), got shape " + shape_text, what);
  const int L = nb::cast<int>(shape[0]), H = nb::cast<int>(shape[1]);
  if (layout && (L != layout->num_layers || H != layout->num_kv_heads))
    throw invalid_argument("shape " + shape_text + " does not match layout " + to_string(*layout) +
                               " (expected (" + std::to_string(layout->num_layers) + ", " +
                               std::to_string(layout->num_kv_heads) + "))",
                           what);
  if (kind == "i" || kind == "u") {
    nb::object ok = np.attr("all")(np.attr("logical_or")(arr.attr("__eq__")(0), arr.attr("__eq__")(1)));
    const int binary = PyObject_IsTrue(ok.ptr());  // a numpy.bool_
    if (binary < 0) throw nb::python_error();
    if (!binary) throw invalid_argument("an integer mask must hold only 0 and 1 (1 = SWA)", what);
  } else if (kind != "b") {
    throw nb::type_error((std::string(what) + ": expected a bool array (True = SWA head), got dtype " +
                          nb::cast<std::string>(arr.attr("dtype").attr("name")))
                             .c_str());
  }
  const HeadLayout lay = layout ? *layout : HeadLayout{L, H, H};
  check_layout(lay, what);
  nb::object bytes = np.attr("ascontiguousarray")(arr, "dtype"_a = np.attr("uint8"));
  const auto view = nb::cast<nb::ndarray<const std::uint8_t, nb::ndim<2>, nb::c_contig>>(bytes);
  HeadMask m(lay);
  for (std::size_t i = 0; i < m.size(); ++i) m.set_flat(i, view.data()[i] != 0);
  return m;
}

nb::object json_to_python(const nlohmann::json& j) {
  static PyObject* loads = [] {
    nb::object json = nb::module_::import_("json");
    return nb::object(json.attr("loads")).release().ptr();
  }();
  return nb::handle(loads)(nb::str(j.dump().c_str()));
}

nlohmann::json python_to_json(nb::handle obj, const char* what) {
  static PyObject* dumps = [] {
    nb::object json = nb::module_::import_("json");
    return nb::object(json.attr("dumps")).release().ptr();
  }();
  std::string text;
  try {
    text = nb::cast<std::string>(nb::handle(dumps)(obj, "allow_nan"_a = false));
  } catch (const nb::python_error& e) {
    throw invalid_argument(std::string("cannot be written as JSON: ") + e.what(), what);
  }
  return nlohmann::json::parse(text);
}

void wrong_type(std::string_view field, const char* expected, nb::handle got) {
  throw nb::type_error(
      (std::string(field) + ": expected " + expected + ", got " + nb::type_name(got.type()).c_str()).c_str());
}

bool bool_from(nb::handle h, std::string_view field) {
  if (PyBool_Check(h.ptr())) return h.ptr() == Py_True;
  if (nb::hasattr(h, "dtype") && nb::cast<std::string>(h.attr("dtype").attr("kind")) == "b" &&
      nb::cast<std::size_t>(h.attr("ndim")) == 0)
    return nb::cast<bool>(nb::bool_(h));
  wrong_type(field, "a bool", h);
}

std::string path_from(nb::handle obj, const char* what) {
  nb::object p;
  try {
    p = nb::module_::import_("os").attr("fspath")(obj);
  } catch (const nb::python_error&) {
    throw nb::type_error((std::string(what) + ": expected a str or os.PathLike, got " +
                          nb::type_name(obj.type()).c_str())
                             .c_str());
  }
  if (!nb::isinstance<nb::str>(p))
    throw nb::type_error((std::string(what) + ": expected a str path").c_str());
  return nb::cast<std::string>(p);
}

void register_errors(nb::module_& m) {
  g_error = new_exception(m, "Error",
                          "Base of the errors bosch raises; `where` names the field, option or "
                          "file, `message` is the text without it.",
                          PyExc_RuntimeError);
  g_invalid = new_exception(m, "InvalidArgument",
                            "An argument or option outside its domain (also a ValueError).",
                            nb::make_tuple(nb::handle(g_error), nb::handle(PyExc_ValueError)));
  g_format = new_exception(m, "FormatError",
                           "A file whose content is malformed, truncated or inconsistent (also a "
                           "ValueError).",
                           nb::make_tuple(nb::handle(g_error), nb::handle(PyExc_ValueError)));
  g_file = new_exception(m, "FileError", "A file that cannot be read or written (also an OSError).",
                         nb::make_tuple(nb::handle(g_error), nb::handle(PyExc_OSError)));
  g_device = new_exception(m, "DeviceError", "A failure of an accelerator runtime, or no device.",
                           g_error);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const bosch::invalid_argument& e) {
      raise_as(g_invalid, e);
    } catch (const bosch::format_error& e) {
      raise_as(g_format, e);
    } catch (const bosch::file_error& e) {
      raise_as(g_file, e);
    } catch (const bosch::device_error& e) {
      raise_as(g_device, e);
    } catch (const bosch::error& e) {
      raise_as(g_error, e);
    }
  });
}

}  // namespace bosch::python
