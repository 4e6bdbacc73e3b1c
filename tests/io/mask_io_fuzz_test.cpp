// SPDX-License-Identifier: Apache-2.0
// Regression cases for malformed mask files found by fuzz/fuzz_mask: each must
// raise a bosch::format_error naming the file (and field), never escape as
// another exception type or allocate without bound.
#include <doctest/doctest.h>

#include <bosch/io/mask_io.hpp>

#include "test_support.hpp"

#include <filesystem>
#include <string>

namespace fs = std::filesystem;

namespace {

fs::path scratch(const std::string& name) { return bosch::test::scratch_path("io_fuzzreg", name); }

/// where() of the format_error that read_mask_json raises on `text`.
std::string json_error_where(const std::string& text) {
  return bosch::test::error_where<bosch::format_error>(scratch("m.json"), text,
                                                       [](const fs::path& p) { return bosch::io::read_mask_json(p); });
}

}  // namespace

TEST_CASE("fuzz regression: a number that overflows a double is a format_error, not out_of_range") {
  // The fuzzer's input began "8394e373?": nlohmann reports the overflow as
  // json::out_of_range (406), which escaped read_mask_json (it caught only
  // parse_error).
  const fs::path p = scratch("m.json");
  CHECK(json_error_where("8394e373?   4") == p.string());
  CHECK(json_error_where(R"({"format": "bosch.head_mask", "version": 1e999})") == p.string());
  CHECK_THROWS_AS(bosch::io::read_mask(p, {2, 8, 4}), bosch::format_error);
  fs::remove_all(p.parent_path());
}

TEST_CASE("fuzz regression: a mask layout cannot make the reader allocate without bound") {
  // 1000 layers x 10^6 KV heads listed in a 3 kB document asked for 10^9 bytes.
  std::string swa = "[";
  for (int l = 0; l < 1000; ++l) swa += l ? ",[]" : "[]";
  swa += "]";
  const std::string doc = R"({"format": "bosch.head_mask", "version": 1, "layout": )"
                          R"({"num_layers": 1000, "num_query_heads": 1000000, "num_kv_heads": 1000000},)"
                          R"( "swa": )" +
                          swa + "}";
  const fs::path p = scratch("m.json");
  CHECK(json_error_where(doc) == p.string() + ": layout");
  // At the limit (2^20 heads) it still reads.
  std::string small = R"({"format": "bosch.head_mask", "version": 1, "layout": )"
                      R"({"num_layers": 2, "num_query_heads": 524288, "num_kv_heads": 524288},)"
                      R"( "swa": [[0], [524287]]})";
  CHECK(json_error_where(small) == "(accepted)");
  CHECK(bosch::io::read_mask_json(p).mask.count() == 2);
  fs::remove_all(p.parent_path());
}
