// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: Hugging Face config.json (bosch::model::parse_hf_config)
// and the loader's consistency check of the configuration it yields.

#include "fuzz_support.hpp"
#include "weight_plan.hpp"  // src/model: detail::check_config

#include <bosch/model/hf_config.hpp>

#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string where = "fuzz/config.json";
  bosch::fuzz::check(
      [&] {
        const auto hc = bosch::model::parse_hf_config(text, where);
        const auto& c = hc.config;
        bosch::fuzz::require(c.hidden_size > 0 && c.intermediate_size > 0 && c.num_layers > 0 &&
                                 c.num_heads > 0 && c.num_kv_heads > 0 && c.head_dim > 0 &&
                                 c.vocab_size > 0 && c.max_position > 0,
                             "parse_hf_config accepted a non-positive size");
        bosch::fuzz::require(c.num_heads % c.num_kv_heads == 0 && c.head_dim % 2 == 0,
                             "parse_hf_config accepted inconsistent heads");
        bosch::fuzz::require(c.rms_eps > 0 && c.rope_theta > 0 && c.rope_scaling.factor > 0,
                             "parse_hf_config accepted a non-positive constant");
        bosch::model::detail::check_config(c, where);
      },
      where);
  return 0;
}
