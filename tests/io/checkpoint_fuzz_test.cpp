// SPDX-License-Identifier: Apache-2.0
// Regression cases for malformed checkpoints and options found by
// fuzz/fuzz_checkpoint and the crash tests: each is a bosch::format_error
// naming the file and the field (or where the caller said), never another
// exception type, undefined behaviour or a half-read checkpoint.
#include <doctest/doctest.h>

#include <bosch/io/checkpoint.hpp>

#include "test_support.hpp"

#include <filesystem>
#include <string>

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

fs::path scratch(const std::string& name) { return bosch::test::scratch_path("search_fuzzreg", name); }

/// where() of the format_error that read_checkpoint raises on `text`.
std::string read_error_where(const std::string& text) {
  return bosch::test::error_where<bosch::format_error>(scratch("c.json"), text,
                                                       [](const fs::path& p) { return bosch::read_checkpoint(p); });
}

/// A valid checkpoint document of three records, edited by `edit`, with its
/// document checksum recomputed (so the field checks, not the checksum, must
/// catch the damage).
template <class F>
std::string edited_checkpoint(F&& edit) {
  const bosch::HeadLayout lay{2, 4, 2};
  std::vector<bosch::EvaluationRecord> log;
  for (std::size_t i = 0; i < 3; ++i) {
    bosch::EvaluationRecord r;
    r.index = i;
    r.mask = bosch::HeadMask(lay);
    r.mask.set_flat(i, true);
    r.score = 0.5 - 0.1 * static_cast<double>(i);
    r.seconds = 0.25;
    log.push_back(r);
  }
  json j = bosch::checkpoint_json(lay, bosch::Options{}, log, false);
  edit(j);
  j["checksum"] = bosch::detail::document_checksum(j);
  return j.dump(1);
}

}  // namespace

TEST_CASE("fuzz regression: checkpoint numbers that overflow or have the wrong kind") {
  const std::string p = scratch("c.json").string();
  // nlohmann's out_of_range (406) escaped the parse_error handler.
  CHECK(read_error_where("8394e373") == p);
  CHECK(read_error_where(R"({"magic": "bosch.checkpoint", "format": 1e999})") == p);
  // get<int>() of 6e12 is undefined behaviour; get<uint64_t>() of -1 wraps.
  CHECK(read_error_where(edited_checkpoint([](json& j) { j["layout"]["num_layers"] = 6.0e12; })) ==
        p + ": layout.num_layers");
  CHECK(read_error_where(edited_checkpoint([](json& j) { j["layout"]["num_kv_heads"] = 1.5; })) ==
        p + ": layout.num_kv_heads");
  CHECK(read_error_where(edited_checkpoint([](json& j) { j["seed"] = -1; })) == p + ": seed");
  CHECK(read_error_where(edited_checkpoint([](json& j) { j["evaluations"][1]["index"] = -1; })) ==
        p + ": evaluations[1].index");
  CHECK(read_error_where(edited_checkpoint([](json& j) { j["evaluations"][0]["seconds"] = "1"; })) ==
        p + ": evaluations[0].seconds");
  CHECK(read_error_where(edited_checkpoint([](json& j) { j["complete"] = 1; })) == p + ": complete");
  CHECK(read_error_where(edited_checkpoint([](json& j) { j["evaluations"][2].erase("mask"); })) ==
        p + ": evaluations[2].mask");
  json typed = json::parse(edited_checkpoint([](json&) {}));
  typed["checksum"] = 7;
  CHECK(read_error_where(typed.dump()) == p + ": checksum");
  CHECK(read_error_where(edited_checkpoint([](json&) {})) == "(accepted)");
  fs::remove_all(fs::path(p).parent_path());
}

TEST_CASE("fuzz regression: a checksum over the whole checkpoint, not only the records") {
  // A changed timing, option or version kept the records' checksum valid and
  // was read as if intact.
  const std::string good = edited_checkpoint([](json&) {});
  const std::string p = scratch("c.json").string();
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"\"seconds\": 0.25", "\"seconds\": 0.26"},
        {"\"lambda\": 4", "\"lambda\": 5"},
        {"\"max_evaluations\": 0", "\"max_evaluations\": 9"},
        {"\"bosch_version\": \"", "\"bosch_version\": \"9"}}) {
    std::string bad = good;
    const auto at = bad.find(from);
    REQUIRE(at != std::string::npos);
    bad.replace(at, from.size(), to);
    CAPTURE(to);
    CHECK(read_error_where(bad) == p + ": checksum");
  }
  // A file without the document checksum is refused.
  json j = json::parse(good);
  j.erase("checksum");
  CHECK(read_error_where(j.dump()) == p + ": checksum");
  fs::remove_all(fs::path(p).parent_path());
}

TEST_CASE("fuzz regression: options_from_json names the field of every bad value") {
  auto where_of = [](const json& j) -> std::string {
    try {
      (void)bosch::options_from_json(j, "ck.json: options");
    } catch (const bosch::error& e) {
      return e.where();
    }
    return "(accepted)";
  };
  // An unknown enum name raised invalid_argument("group_init"), naming no file.
  CHECK(where_of({{"group_init", "stage0"}}) == "ck.json: options: group_init");
  CHECK_THROWS_AS(bosch::options_from_json({{"variant", "half"}}), bosch::format_error);
  // Floats and out-of-range integers for integer fields (UB or silent wrap in get<>()).
  CHECK(where_of({{"max_vars", 1e10}}) == "ck.json: options: max_vars");
  CHECK(where_of({{"lambda", 2.5}}) == "ck.json: options: lambda");
  CHECK(where_of({{"batch_size", -3}}) == "ck.json: options: batch_size");
  CHECK(where_of({{"seed", 18446744073709551615ull}}) == "(accepted)");
  CHECK(where_of({{"target_ratio", "0.5"}}) == "ck.json: options: target_ratio");
  // A bad value for validate() keeps its type and names the field too.
  CHECK_THROWS_AS(bosch::options_from_json({{"target_ratio", 1.5}}), bosch::invalid_argument);
  CHECK(where_of({{"target_ratio", 1.5}}) == "ck.json: options: target_ratio");
}
