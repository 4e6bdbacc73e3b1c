// SPDX-License-Identifier: Apache-2.0
// bosch.Options and the option keywords, generated from bosch::for_each_option
// (see options.hpp for the rules).

#include "options.hpp"

#include "field_traits.hpp"

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

/// The Python spelling of a field name (see options.hpp).
std::string py_name(std::string_view name) {
  // Leaked on purpose: a static nb::object would be released after the
  // interpreter has shut down.
  static PyObject* iskeyword = nb::object(nb::module_::import_("keyword").attr("iskeyword")).release().ptr();
  std::string s(name);
  if (nb::cast<bool>(nb::handle(iskeyword)(nb::str(s.c_str())))) s += '_';
  return s;
}

nb::dict options_to_dict(const Options& o) {
  nb::dict d;
  for_each_option([&](const auto& field) {
    using T = typename std::decay_t<decltype(field)>::value_type;
    d[py_name(field.name).c_str()] = field_traits<T>::to_py(o.*field.member);
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
      s += py_name(field.name) + ": " + field_traits<T>::py_type() + " = " +
           py_repr(defaults.*field.member);
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
      s += "    " + py_name(field.name) + " (default " +
           py_repr(defaults.*field.member) + "): " + std::string(field.help) +
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
        [f](const Options& o) { return field_traits<T>::to_py(o.*f.member); },
        [f](Options& o, nb::handle v) { set_field(o, f, v); },
        nb::for_getter(nb::sig(keep_string("def " + name + "(self, /) -> " + field_traits<T>::py_type()))),
        nb::for_setter(nb::sig(keep_string("def " + name + "(self, value: " + field_traits<T>::py_type() +
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
          d["type"] = field_traits<T>::py_type();
          d["default"] = field_traits<T>::to_py(defaults.*field.member);
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
           py_repr(o.*field.member);
    });
    return "Options(" + s + ")";
  });
  cls.attr("__hash__") = nb::none();
}

}  // namespace bosch::python
