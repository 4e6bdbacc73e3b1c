// SPDX-License-Identifier: Apache-2.0
// bosch.Options and the option keywords, generated from bosch::for_each_option
// (see options.hpp for the rules).

#include "options.hpp"

#include <bosch/io/options_json.hpp>

#include <cstdint>
#include <limits>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

using namespace nb::literals;

namespace bosch::python {

namespace {

std::string repr_of(nb::handle h) { return nb::cast<std::string>(nb::repr(h)); }

/// The conversion of one option type. A field of a type without a
/// specialization below stops the build here: add one (to_py, from_py and
/// py_type, the annotation used in signatures and stubs), and a JSON form in
/// include/bosch/io/options_json.hpp if it lacks one.
template <class T, class = void>
struct option_traits {
  static_assert(sizeof(T) == 0,
                "bosch Python binding: an Options field has a type without a Python conversion; "
                "add an option_traits specialization in python/src/options.cpp");
};

template <>
struct option_traits<bool> {
  static std::string py_type() { return "bool"; }
  static nb::object to_py(bool v) { return nb::bool_(v); }
  static bool from_py(nb::handle h, std::string_view field) { return bool_from(h, field); }
};

template <class T>
struct option_traits<T, std::enable_if_t<std::is_integral_v<T> && !std::is_same_v<T, bool>>> {
  static std::string py_type() { return "int"; }
  static nb::object to_py(T v) { return nb::int_(v); }
  static T from_py(nb::handle h, std::string_view field) { return integer_from<T>(h, field); }
};

template <>
struct option_traits<double> {
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

template <class T>
struct option_traits<T, std::enable_if_t<std::is_enum_v<T>>> {
  static std::string py_type() {
    std::string s = "typing.Literal[";
    for (T v : enum_values<T>::values) s += (s.back() == '[' ? "'" : ", '") + std::string(to_string(v)) + "'";
    return s + "]";
  }
  static nb::object to_py(T v) { return nb::str(to_string(v)); }
  static T from_py(nb::handle h, std::string_view field) {
    if (!PyUnicode_Check(h.ptr())) wrong_type(field, ("one of the names " + enum_names<T>()).c_str(), h);
    return parse_enum<T>(nb::cast<std::string>(h), std::string(field).c_str());
  }
};

template <>
struct option_traits<std::vector<double>> {
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
    for (nb::handle x : nb::iter(h)) out.push_back(option_traits<double>::from_py(x, field));
    return out;
  }
};

template <>
struct option_traits<std::vector<HeadMask>> {
  static std::string py_type() {
    return "collections.abc.Sequence[numpy.typing.ArrayLike]";
  }
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

/// The Python spelling of a field name (see options.hpp).
std::string py_name(std::string_view name) {
  // Leaked on purpose: a static nb::object would be released after the
  // interpreter has shut down.
  static PyObject* iskeyword = nb::object(nb::module_::import_("keyword").attr("iskeyword")).release().ptr();
  std::string s(name);
  if (nb::cast<bool>(nb::handle(iskeyword)(nb::str(s.c_str())))) s += '_';
  return s;
}

/// Sets one field from Python, running its check.
template <class Field>
void set_field(Options& o, const Field& field, nb::handle value) {
  using T = typename Field::value_type;
  T v = option_traits<T>::from_py(value, field.name);
  if (field.check != nullptr) {
    const std::string msg = field.check(v);
    if (!msg.empty()) throw invalid_argument(msg, std::string(field.name));
  }
  o.*field.member = std::move(v);
}

nb::dict options_to_dict(const Options& o) {
  nb::dict d;
  for_each_option([&](const auto& field) {
    using T = typename std::decay_t<decltype(field)>::value_type;
    d[py_name(field.name).c_str()] = option_traits<T>::to_py(o.*field.member);
  });
  return d;
}

}  // namespace

void take_options(Options& o, nb::dict& kw) {
  for_each_option([&](const auto& field) {
    const std::string cpp(field.name), py = py_name(field.name);
    for (const std::string* key : {&py, &cpp}) {
      if (!kw.contains(key->c_str())) continue;
      set_field(o, field, kw[key->c_str()]);
      nb::del(kw[key->c_str()]);
      if (key == &py) break;  // both spellings given: the second one is then "unexpected"
    }
  });
}

const std::string& options_signature() {
  static const std::string sig = [] {
    const Options defaults;
    std::string s;
    for_each_option([&](const auto& field) {
      using T = typename std::decay_t<decltype(field)>::value_type;
      if (!s.empty()) s += ", ";
      s += py_name(field.name) + ": " + option_traits<T>::py_type() + " = " +
           repr_of(option_traits<T>::to_py(defaults.*field.member));
    });
    return s;
  }();
  return sig;
}

const std::string& options_docstring() {
  static const std::string doc = [] {
    const Options defaults;
    std::string s;
    for_each_option([&](const auto& field) {
      using T = typename std::decay_t<decltype(field)>::value_type;
      s += "    " + py_name(field.name) + " (default " +
           repr_of(option_traits<T>::to_py(defaults.*field.member)) + "): " + std::string(field.help) +
           (field.role == FieldRole::run ? " [run control: may change on resume]" : "") + "\n";
    });
    return s;
  }();
  return doc;
}

void adopt_layout(Options& o, const HeadLayout& layout) {
  for_each_option([&](const auto& field) {
    using T = typename std::decay_t<decltype(field)>::value_type;
    if constexpr (std::is_same_v<T, std::vector<HeadMask>>) {
      for (HeadMask& m : o.*field.member) {
        const HeadLayout& got = m.layout();
        if (got.num_layers != layout.num_layers || got.num_kv_heads != layout.num_kv_heads)
          throw invalid_argument("a mask of " + std::to_string(got.num_layers) + " x " +
                                     std::to_string(got.num_kv_heads) + " heads does not fit layout " +
                                     to_string(layout),
                                 std::string(field.name));
        HeadMask fitted(layout);
        for (std::size_t i = 0; i < m.size(); ++i) fitted.set_flat(i, m[i]);
        m = std::move(fitted);
      }
    }
  });
}

void bind_options(nb::module_& m) {
  auto cls = nb::class_<Options>(
      m, "Options",
      keep_string("Every knob of bosch.select (bosch::Options), generated from the C++ field table.\n\n"
           "Options(**fields) sets the given fields; the rest keep their defaults. Each field is\n"
           "an attribute; setting one checks its domain (bosch.InvalidArgument, a ValueError\n"
           "naming the field). A field whose name is a Python keyword ends in '_' (lambda_).\n\n"
           "Fields:\n" +
           options_docstring()));
  cls.def(
      "__init__",
      [](Options* self, nb::kwargs kw) {
        new (self) Options();
        nb::dict rest = nb::dict(kw);
        take_options(*self, rest);
        if (rest.size() > 0)
          throw nb::type_error(("Options() got an unexpected keyword argument " +
                                repr_of(nb::list(rest.keys())[0]))
                                   .c_str());
      },
      nb::sig(keep_string("def __init__(self, *, " + options_signature() + ") -> None")));
  cls.def(nb::init<const Options&>(), "other"_a, "A copy of `other`.");
  for_each_option([&](const auto& field) {
    using F = std::decay_t<decltype(field)>;
    using T = typename F::value_type;
    const std::string name = py_name(field.name);
    const F f = field;
    cls.def_prop_rw(
        keep_string(name),
        [f](const Options& o) { return option_traits<T>::to_py(o.*f.member); },
        [f](Options& o, nb::handle v) { set_field(o, f, v); },
        nb::for_getter(nb::sig(keep_string("def " + name + "(self, /) -> " + option_traits<T>::py_type()))),
        nb::for_setter(nb::sig(keep_string("def " + name + "(self, value: " + option_traits<T>::py_type() +
                                    ", /) -> None"))),
        keep_string(std::string(field.help)));
  });
  cls.def("to_dict", &options_to_dict,
          "Every field by its Python name, in table order (enums as their names).");
  cls.def(
      "to_json", [](const Options& o) { return options_to_json(o).dump(); },
      "The JSON text of every field (the form of checkpoints and mask metadata).");
  cls.def_static(
      "from_json", [](const std::string& text) {
        nlohmann::json j;
        try {
          j = nlohmann::json::parse(text);
        } catch (const nlohmann::json::exception& e) {
          throw format_error(std::string("not valid JSON: ") + e.what(), "options");
        }
        return options_from_json(j);
      },
      "text"_a, "Options from the JSON text of to_json() (absent fields keep their defaults).");
  cls.def("validate", [](const Options& o) { validate(o); },
          "Raises bosch.InvalidArgument naming the first field outside its domain.");
  cls.def_static(
      "fields",
      [] {
        const Options defaults;
        nb::list out;
        for_each_option([&](const auto& field) {
          using T = typename std::decay_t<decltype(field)>::value_type;
          nb::dict d;
          d["name"] = py_name(field.name);
          d["cpp_name"] = std::string(field.name);
          d["type"] = option_traits<T>::py_type();
          d["default"] = option_traits<T>::to_py(defaults.*field.member);
          d["help"] = std::string(field.help);
          d["role"] = field.role == FieldRole::run ? "run" : "search";
          out.append(d);
        });
        return out;
      },
      "One dict per field, in table order: name (Python), cpp_name, type (annotation), "
      "default, help, role ('search': part of a run's identity; 'run': may change on resume).");
  cls.def("__eq__", [](const Options& a, nb::handle b) {
    return nb::isinstance<Options>(b) && options_to_json(a) == options_to_json(nb::cast<const Options&>(b));
  });
  cls.def("__repr__", [](const Options& o) {
    const Options defaults;
    std::string s;
    for_each_option([&](const auto& field) {
      using T = typename std::decay_t<decltype(field)>::value_type;
      if (json_codec<T>::to(o.*field.member) == json_codec<T>::to(defaults.*field.member))
        return;
      s += (s.empty() ? "" : ", ") + py_name(field.name) + "=" +
           repr_of(option_traits<T>::to_py(o.*field.member));
    });
    return "Options(" + s + ")";
  });
  cls.attr("__hash__") = nb::none();
}

}  // namespace bosch::python
