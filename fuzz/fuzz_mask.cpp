// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: head-mask files in their three forms (bosch/io/mask_io.hpp:
// JSON, DuoAttention-style TSV, text grid). The input is written to a scratch
// file and read as each form through bosch::io::read_mask_* (which name the
// file in every error) and bosch::io::read_mask against a fixed layout; a
// mask read successfully must survive its writer and reader unchanged.

#include "fuzz_support.hpp"

#include <bosch/io/mask_io.hpp>

using namespace bosch;

namespace {

void round_trip_json(const io::MaskFile& f) {
  const io::MaskFile again = io::mask_from_json(io::mask_to_json(f.mask, f.metadata), "round trip");
  fuzz::require(again.mask == f.mask, "JSON mask changed in a write/read round trip");
}

void round_trip_text(const HeadMask& m) {
  const int hq = m.layout().num_query_heads;
  fuzz::require(io::mask_from_tsv(io::mask_to_tsv(m), hq) == m, "TSV mask changed in a round trip");
  fuzz::require(mask_from_grid(to_grid(m), hq) == m, "grid mask changed in a round trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const HeadLayout expected{2, 8, 4};
  for (const char* name : {"mask.json", "mask.tsv", "mask.txt"}) {
    const auto path = fuzz::write_scratch(name, data, size);
    const std::string p = path.string();
    const std::string ext = path.extension().string();
    fuzz::check(
        [&] {
          if (ext == ".json") {
            const io::MaskFile f = io::read_mask_json(path);
            round_trip_json(f);
            round_trip_text(f.mask);
          } else if (ext == ".tsv") {
            round_trip_text(io::read_mask_tsv(path));
            round_trip_text(io::read_mask_tsv(path, 8, 0.25));
          } else {
            round_trip_text(io::read_mask_grid(path));
          }
        },
        p);
    fuzz::check(
        [&] {
          const HeadMask m = io::read_mask(path, expected);
          fuzz::require(m.layout() == expected, "read_mask returned another layout");
        },
        p);
  }
  return 0;
}
