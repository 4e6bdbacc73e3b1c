// SPDX-License-Identifier: Apache-2.0
// libFuzzer target: search checkpoint files (bosch/io/checkpoint.hpp).
//
// The input is written to a scratch file and read with read_checkpoint. Since
// almost every mutation breaks the document checksum, the input is also read a
// second time with its "checksum" recomputed (when it is a JSON object), so
// that the field checks behind the checksum get fuzzed too. A checkpoint that
// reads back must pass or fail check_resumable cleanly, its options must parse
// with options_from_json or fail naming the file, and writing it again must
// give the same records.

#include "fuzz_support.hpp"

#include <bosch/io/checkpoint.hpp>

#include <string>

using namespace bosch;

namespace {

void read_and_check(const std::filesystem::path& path) {
  const std::string p = path.string();
  CheckpointData d;
  if (!fuzz::check([&] { d = read_checkpoint(path); }, p)) return;
  fuzz::require(d.layout.valid(), "read_checkpoint accepted an invalid layout");
  for (std::size_t i = 0; i < d.log.size(); ++i) {
    fuzz::require(d.log[i].index == i, "records out of order");
    fuzz::require(d.log[i].mask.layout() == d.layout, "record mask of another layout");
  }
  Options o;
  o.seed = d.seed;
  fuzz::check([&] { check_resumable(d, d.layout, o, p); }, p);
  fuzz::check([&] { o = options_from_json(d.options, p + ": options"); }, p);
  const auto again = fuzz::scratch_dir() / "again.json";
  write_checkpoint(again, d.layout, o, d.log, d.complete);
  const CheckpointData e = read_checkpoint(again);
  fuzz::require(e.layout == d.layout && e.complete == d.complete && e.log.size() == d.log.size(),
                "checkpoint changed in a write/read round trip");
  for (std::size_t i = 0; i < e.log.size(); ++i)
    fuzz::require(e.log[i].mask == d.log[i].mask && e.log[i].stage == d.log[i].stage &&
                      e.log[i].score == d.log[i].score,
                  "record changed in a write/read round trip");
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  read_and_check(fuzz::write_scratch("checkpoint.json", data, size));
  nlohmann::json j = nlohmann::json::parse(data, data + size, nullptr, false);
  if (j.is_object()) {
    j["checksum"] = detail::document_checksum(j);
    const std::string text = detail::dump_text(j, 1);
    read_and_check(fuzz::write_scratch(
        "repaired.json", reinterpret_cast<const std::uint8_t*>(text.data()), text.size()));
  }
  return 0;
}
