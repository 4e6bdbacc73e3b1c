// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file io/options_json.hpp
/// The JSON form of bosch::Options, generated from the field table
/// (bosch::for_each_option): one key per field, enum fields by name. Used by
/// checkpoints, mask metadata and the comparison's run identity.

#include <bosch/error.hpp>
#include <bosch/mask.hpp>
#include <bosch/options.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

namespace bosch {

namespace detail {
/// An integer JSON value of type T; format_error (where = `where`) for a
/// non-integer (nlohmann's get<int>() would truncate a float, with undefined
/// behaviour when it is out of range) or a value outside T's range.
template <class T>
T json_integer(const nlohmann::json& v, const std::string& where) {
  if (v.is_number_unsigned()) {
    const auto u = v.get<std::uint64_t>();
    if (std::in_range<T>(u)) return static_cast<T>(u);
  } else if (v.is_number_integer()) {
    const auto x = v.get<std::int64_t>();
    if (std::in_range<T>(x)) return static_cast<T>(x);
  } else {
    throw format_error(std::string("expected an integer, found ") + v.type_name(), where);
  }
  throw format_error("integer " + v.dump() + " out of range", where);
}
/// A number (format_error naming `where` otherwise, e.g. null for a NaN).
inline double json_number(const nlohmann::json& v, const std::string& where) {
  if (!v.is_number())
    throw format_error(std::string("expected a number, found ") + v.type_name(), where);
  return v.get<double>();
}

/// A mask as "LxHqxHkv:bits" (layer-major, '1' = SWA).
inline std::string mask_text(const HeadMask& m) {
  std::string s = to_string(m.layout()) + ":";
  for (std::size_t i = 0; i < m.size(); ++i) s += m[i] ? '1' : '0';
  return s;
}
inline HeadMask mask_from_text(const std::string& text, const std::string& at) {
  const auto colon = text.find(':');
  if (colon == std::string::npos) throw format_error("expected LxHqxHkv:bits", at);
  HeadLayout lay;
  try {
    lay = parse_layout(std::string_view(text).substr(0, colon));
  } catch (const invalid_argument& e) {
    throw format_error(e.message(), at);
  }
  const std::string_view bits = std::string_view(text).substr(colon + 1);
  if (bits.size() != lay.size())
    throw format_error("mask has " + std::to_string(bits.size()) + " bits, layout " +
                           to_string(lay) + " needs " + std::to_string(lay.size()),
                       at);
  HeadMask m(lay);
  for (std::size_t i = 0; i < bits.size(); ++i) {
    if (bits[i] != '0' && bits[i] != '1') throw format_error("mask is not a bit string", at);
    m.set_flat(i, bits[i] == '1');
  }
  return m;
}

}  // namespace detail

/// The JSON form of a field value of type T, for every table of fields
/// (bosch::Field: the search options here, the run settings in
/// run/src/settings.cpp, which specializes it for its own types): enums by
/// name, masks as "LxHqxHkv:bits", numbers, booleans, strings and lists of
/// them as themselves. from() raises bosch::format_error (where = `at`) on a
/// wrongly typed value or an unknown name.
template <class T>
struct json_codec {
  static nlohmann::json to(const T& v) {
    if constexpr (std::is_enum_v<T>) {
      return std::string(to_string(v));
    } else if constexpr (std::is_same_v<T, std::vector<HeadMask>>) {
      nlohmann::json a = nlohmann::json::array();
      for (const auto& m : v) a.push_back(detail::mask_text(m));
      return a;
    } else {
      return v;
    }
  }
  static T from(const nlohmann::json& v, const std::string& at) {
    using detail::json_integer, detail::json_number;
    if constexpr (std::is_enum_v<T>) {
      if (!v.is_string()) throw format_error(std::string("expected a name, found ") + v.type_name(), at);
      try {
        return parse_enum<T>(v.get<std::string>(), at.c_str());
      } catch (const invalid_argument& e) {
        throw format_error(e.message(), at);
      }
    } else if constexpr (std::is_same_v<T, bool>) {
      if (!v.is_boolean()) throw format_error(std::string("expected true or false, found ") + v.type_name(), at);
      return v.get<bool>();
    } else if constexpr (std::is_integral_v<T>) {
      return json_integer<T>(v, at);
    } else if constexpr (std::is_floating_point_v<T>) {
      return static_cast<T>(json_number(v, at));
    } else if constexpr (std::is_same_v<T, std::string>) {
      if (!v.is_string()) throw format_error(std::string("expected a string, found ") + v.type_name(), at);
      return v.get<std::string>();
    } else if constexpr (std::is_same_v<T, std::vector<double>>) {
      if (!v.is_array()) throw format_error(std::string("expected an array, found ") + v.type_name(), at);
      T out;
      for (std::size_t i = 0; i < v.size(); ++i) out.push_back(json_number(v[i], at + "[" + std::to_string(i) + "]"));
      return out;
    } else if constexpr (std::is_same_v<T, std::vector<HeadMask>>) {
      if (!v.is_array()) throw format_error(std::string("expected an array, found ") + v.type_name(), at);
      T out;
      for (std::size_t i = 0; i < v.size(); ++i) {
        const std::string ai = at + "[" + std::to_string(i) + "]";
        if (!v[i].is_string()) throw format_error("expected a mask string", ai);
        out.push_back(detail::mask_from_text(v[i].get<std::string>(), ai));
      }
      return out;
    } else {
      static_assert(sizeof(T) == 0, "a field type without a JSON form: specialize bosch::json_codec");
    }
  }
};

/// Every Options field as JSON (enum fields by name), in table order.
inline nlohmann::json options_to_json(const Options& o) {
  nlohmann::json j = nlohmann::json::object();
  for_each_option([&](const auto& field) {
    j[std::string(field.name)] = json_codec<typename std::decay_t<decltype(field)>::value_type>::to(o.*field.member);
  });
  return j;
}

/// The fields that make a search what it is (FieldRole::identity), as JSON:
/// two runs with equal identities give the same mask and log on the same
/// evaluator. Checkpoints compare it on resume; reports record it.
inline nlohmann::json options_identity(const Options& o) {
  nlohmann::json j = options_to_json(o);
  for_each_option([&](const auto& field) {
    if (field.role != FieldRole::identity) j.erase(std::string(field.name));
  });
  return j;
}

/// Options from JSON: fields absent keep their defaults; unknown fields,
/// wrongly typed values and unknown enum names raise bosch::format_error
/// (where = `where` + field). The result is validated
/// (bosch::invalid_argument on a bad value, where = `where` + field).
inline Options options_from_json(const nlohmann::json& j, const std::string& where = "options") {
  if (!j.is_object()) throw format_error("options must be a JSON object", where);
  Options o;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& k = it.key();
    const std::string at = where + ": " + k;
    bool known = false;
    for_each_option([&](const auto& field) {
      if (known || field.name != k) return;
      known = true;
      using T = typename std::decay_t<decltype(field)>::value_type;
      o.*field.member = json_codec<T>::from(it.value(), at);
    });
    if (!known) throw format_error("unknown option field", at);
  }
  try {
    validate(o);
  } catch (const invalid_argument& e) {
    throw invalid_argument(e.message(), where + ": " + e.where());
  }
  return o;
}

}  // namespace bosch
