// SPDX-License-Identifier: Apache-2.0
// Warm-start options (see warm_start_options.hpp).

#include "warm_start_options.hpp"

#include "errors.hpp"
#include "mask_files.hpp"

#include <cmath>

namespace bosch::cli {

const char* const candidates_help =
    "warm-start candidates computed before the search and scored like any mask after the anchors "
    "(the result is never worse on the calibration set than the best): none, cheap (= DCAM,APL,QADA,RAZOR: "
    "at most one forward pass per calibration sample) or a comma list of rankings; PROXY costs 1 + L*Hkv "
    "calibration evaluations, FISHER a partial forward per KV head and sample, RETRIEVAL greedy decoding "
    "per sample (costly)";

po::options_description WarmStartOptions::describe(bool with_init, const std::string& ratio_help) {
  po::options_description d("Warm starts");
  if (with_init)
    d.add_options()("init", po::value(&init_files)->multitoken()->value_name("FILE..."),
                    "start the search also from these masks (JSON, TSV or grid by extension; any SWA count: "
                    "another count is resized with the Stage-1 head values); each is scored on the calibration "
                    "set and the result is never worse on it than the best");
  d.add_options()("candidates", po::value(&candidates)->default_value(candidates)->value_name("LIST"),
                  candidates_help)(
      "ratio-order", po::value(&ratio_order)->default_value(ratio_order)->value_name("up|down"),
      ("run the ratios from the lowest up or the highest down" + ratio_help).c_str())(
      "warm-start", flag(&warm_start),
      ("start each ratio's search also from the mask of the previous ratio in --ratio-order" + ratio_help).c_str());
  return d;
}

std::vector<eval::Method> WarmStartOptions::resolved_candidates() const {
  return eval::parse_candidates(candidates, "--candidates");
}

eval::RatioOrder WarmStartOptions::resolved_order() const {
  return for_option("--ratio-order", [&] { return eval::parse_ratio_order(ratio_order); });
}

std::vector<WarmStart> WarmStartOptions::read_init(const HeadLayout& layout) const {
  std::vector<WarmStart> out;
  for (const auto& f : init_files) {
    // A mask of another model is a runtime failure naming the file (read_mask_file).
    io::MaskFile m = read_mask_file(f, f == "-" ? MaskFormat::json : mask_format(f, "", "--init"), layout);
    out.push_back({f, std::move(m.mask)});
  }
  return out;
}

}  // namespace bosch::cli
