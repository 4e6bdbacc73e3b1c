// SPDX-License-Identifier: Apache-2.0
// Attention windows from the command line (see attention_options.hpp).

#include "attention_options.hpp"

#include "files.hpp"
#include "mask_files.hpp"

namespace bosch::cli {

po::options_description AttentionOptions::describe() {
  po::options_description d("Attention");
  d.add_options()("window,w", po::value(&window)->value_name("TOKENS"),
                  "sliding window W >= 1 of SWA heads (all heads, or the --mask heads)")(
      "sinks,s", po::value(&sinks)->value_name("TOKENS"), "sink tokens S >= 0 that SWA heads also see (default 0)")(
      "mask", po::value(&mask)->value_name("FILE"),
      "head mask (JSON, TSV or grid): which KV heads use the window; window and sinks default to "
      "those recorded in a JSON mask")(
      "mask-format", po::value(&mask_format)->value_name("json|tsv|grid"),
      "format of --mask (default: by extension)");
  return d;
}

void AttentionOptions::validate(const po::variables_map& vm) const {
  if (given(vm, "window") && window < 1)
    throw invalid_argument("must be at least 1, got " + std::to_string(window), "--window");
  if (given(vm, "sinks") && sinks < 0)
    throw invalid_argument("must be at least 0, got " + std::to_string(sinks), "--sinks");
  if (given(vm, "sinks") && !given(vm, "window") && mask.empty())
    throw usage_error("--sinks needs --window or --mask");
  if (!mask_format.empty()) (void)parse_mask_format(mask_format, "--mask-format");
}

AttentionWindows AttentionOptions::resolve(const po::variables_map& vm, const HeadLayout& layout,
                                           std::string& description) const {
  int w = given(vm, "window") ? window : 0;
  int s = given(vm, "sinks") ? sinks : -1;
  HeadMask heads = HeadMask::filled(layout, true);
  if (!mask.empty()) {
    const MaskFormat format =
        mask == "-" && mask_format.empty() ? MaskFormat::json : cli::mask_format(mask, mask_format, "--mask-format");
    const io::MaskFile f = read_mask_file(mask, format, layout);
    const auto& meta = f.metadata;
    if (w <= 0)
      if (const auto mw = metadata_int(meta, "window", input_name(mask))) {
        if (*mw < 1)
          throw format_error("metadata.window: must be at least 1, got " + std::to_string(*mw), input_name(mask));
        w = *mw;
      }
    if (s < 0)
      if (const auto ms = metadata_int(meta, "sinks", input_name(mask))) {
        if (*ms < 0)
          throw format_error("metadata.sinks: must be at least 0, got " + std::to_string(*ms), input_name(mask));
        s = *ms;
      }
    heads = f.mask;
    if (heads.count() > 0 && w <= 0)
      throw usage_error(input_name(mask) + ": the mask has SWA heads but no window size is recorded: pass --window");
  } else if (w <= 0) {
    description = "full (causal) attention in every head";
    return AttentionWindows::full();
  }
  if (s < 0) s = 0;
  if (heads.count() == 0) {
    description = "full (causal) attention in every head (the mask has no SWA head)";
    return AttentionWindows::full();
  }
  description = std::to_string(heads.count()) + " of " + std::to_string(heads.size()) +
                " KV heads sliding-window, w = " + std::to_string(w) + ", sinks = " + std::to_string(s);
  return AttentionWindows::from_mask(std::move(heads), w, s);
}

}  // namespace bosch::cli
