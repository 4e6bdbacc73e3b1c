// SPDX-License-Identifier: Apache-2.0
// bosch convert IN OUT: a mask between JSON, DuoAttention-style TSV and the text grid.

#include "commands.hpp"
#include "files.hpp"
#include "mask_files.hpp"
#include "output_options.hpp"

#include <iostream>

namespace bosch::cli {

int run_convert(int argc, char** argv) {
  return run_command("convert", [&]() -> int {
    OutputOptions oo;
    std::string in, out, from, to, layout_text;
    double threshold = 0.5;
    CommandLine cl("convert", "bosch convert [options] IN OUT",
                   "Convert a head mask between the three forms ('-' = stdin/stdout):\n"
                   "  json  bosch mask file: layout, SWA KV heads per layer, metadata\n"
                   "  tsv   DuoAttention-style: one row per layer, one value per KV head,\n"
                   "        1 = full attention, 0 = SWA (real-valued gates: >= --threshold is full)\n"
                   "  grid  one line per layer, one character per KV head: S = SWA, . = full\n"
                   "Forms are chosen by extension (.json, .tsv, anything else the grid) or\n"
                   "--from/--to. TSV and grid files do not record the query-head count, so\n"
                   "converting them to JSON needs --layout. JSON metadata is kept JSON to JSON.");
    cl.options.add_options()("from", po::value(&from)->value_name("json|tsv|grid"), "form of IN")(
        "to", po::value(&to)->value_name("json|tsv|grid"), "form of OUT")(
        "layout", po::value(&layout_text)->value_name("LxHqxHkv"),
        "layers x query heads x KV heads (e.g. 30x9x3); checked against IN")(
        "threshold", po::value(&threshold)->default_value(threshold)->value_name("T"),
        "TSV input: values >= T mean full attention");
    cl.options.add(oo.describe());
    cl.hidden.add_options()("input", po::value(&in))("output", po::value(&out));
    cl.positional.add("input", 1).add("output", 1);
    cl.epilog = "Examples:\n  bosch convert mask.json full_attention_heads.tsv\n"
                "  bosch convert --layout 30x9x3 heads.tsv mask.json\n"
                "  bosch convert mask.json - --to grid\n";
    po::variables_map vm;
    if (!cl.parse(argc, argv, vm)) return exit_success;
    if (in.empty() || out.empty()) throw usage_error("expected two arguments, IN and OUT");
    if (!(threshold > 0.0 && threshold <= 1.0))
      throw bosch::invalid_argument("must lie in (0, 1], got " + std::to_string(threshold), "--threshold");
    const MaskFormat src = in == "-" && from.empty() ? MaskFormat::json : mask_format(in, from, "--from");
    const MaskFormat dst = out == "-" && to.empty() ? MaskFormat::grid : mask_format(out, to, "--to");
    std::optional<HeadLayout> layout;
    if (!layout_text.empty()) layout = for_option("--layout", [&] { return parse_layout(layout_text); });
    if (src != MaskFormat::json && dst == MaskFormat::json && !layout)
      throw usage_error("--layout LxHqxHkv is needed: a " + std::string(to_string(src)) +
                        " file does not record the query-head count");
    check_output_path(out, "OUT");
    const io::MaskFile f = read_mask_file(in, src, layout, threshold);
    write_mask_file(out, dst, f.mask, src == MaskFormat::json ? f.metadata : nlohmann::json::object());
    oo.detail() << "bosch convert: " << input_name(in) << " (" << to_string(src) << ") -> "
              << (out == "-" ? "<stdout>" : out) << " (" << to_string(dst) << "): "
              << to_string(f.mask.layout()) << ", " << f.mask.count() << " of " << f.mask.size()
              << " KV heads SWA\n";
    return exit_success;
  });
}

}  // namespace bosch::cli
