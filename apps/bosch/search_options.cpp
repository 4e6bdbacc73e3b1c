// SPDX-License-Identifier: Apache-2.0
// The search options generated from the Options field table (see search_options.hpp).

#include "search_options.hpp"

#include "field_text.hpp"

#include <algorithm>
#include <charconv>
#include <type_traits>

namespace bosch::cli {


SearchOptions::SearchOptions(std::vector<std::string_view> skip) : skip_(std::move(skip)) {}

bool SearchOptions::skipped(std::string_view field) const {
  return std::find(skip_.begin(), skip_.end(), field) != skip_.end();
}

std::string SearchOptions::option_of(std::string_view field) {
  return option_in([](auto&& visit) { for_each_option(visit); }, field);
}

po::options_description SearchOptions::describe(const std::string& title) {
  po::options_description d(title);
  const Options defaults;
  for_each_option([&](const auto& f) {
    using T = typename std::decay_t<decltype(f)>::value_type;
    if constexpr (cli_expressible<T>) {
      if (!skipped(f.name)) add_field_option(d, f, defaults.*f.member, Numbers::text);
    }
  });
  return d;
}

Options SearchOptions::resolve(const po::variables_map& vm) const {
  Options o;
  for_each_option([&](const auto& f) {
    using T = typename std::decay_t<decltype(f)>::value_type;
    if constexpr (cli_expressible<T>) {
      if (skipped(f.name) || !vm.count(long_name(f))) return;
      o.*f.member = read_field_option(vm, f);
    }
  });
  try {
    validate(o);  // rules across fields, if the table gains any
  } catch (const invalid_argument& e) {
    throw invalid_argument(e.message(), option_of(e.where()));
  }
  return o;
}

void SearchOptions::check_ratio(double ratio, const std::string& option) {
  for_each_option([&](const auto& f) {
    using T = typename std::decay_t<decltype(f)>::value_type;
    if constexpr (std::is_same_v<T, double>) {
      if (f.name != "target_ratio" || f.check == nullptr) return;
      const std::string msg = f.check(ratio);
      if (!msg.empty()) throw invalid_argument(msg, option);
    }
  });
}

std::vector<double> SearchOptions::parse_ratios(std::string_view list, const std::string& option) {
  std::vector<double> out;
  for (const auto& item : split_list(list)) {
    out.push_back(parse_number<double>(item, option));
    check_ratio(out.back(), option);
    if (std::find(out.begin(), out.end() - 1, out.back()) != out.end() - 1)
      throw invalid_argument("ratio " + std::string(item) + " given twice", option);
  }
  if (out.empty()) throw invalid_argument("no ratio given", option);
  return out;
}

}  // namespace bosch::cli
