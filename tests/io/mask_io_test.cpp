// Mask files: JSON, DuoAttention-style TSV, text grid; atomic writes; errors.
#include <doctest/doctest.h>

#include "test_support.hpp"

#include <bosch/io/atomic_file.hpp>
#include <bosch/io/mask_io.hpp>
#include <bosch/version.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>

#include <filesystem>
#include <fstream>
#include <unistd.h>

namespace fs = std::filesystem;
using bosch::HeadLayout;
using bosch::HeadMask;

namespace {

fs::path temp_dir(const std::string& name) {
  fs::path d =
      fs::temp_directory_path() / ("bosch_test_io_" + name + "_" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

using bosch::test::random_mask;

using bosch::test::write_text;

}  // namespace

TEST_CASE("JSON, TSV and grid round trips") {
  const fs::path dir = temp_dir("roundtrip");
  for (const HeadLayout lay : {HeadLayout{1, 1, 1}, HeadLayout{3, 12, 4}, HeadLayout{28, 16, 8}}) {
    const HeadMask m = random_mask(lay, bosch::test::seed(lay.size()));
    const nlohmann::json meta = {{"model", "toy"},
                                 {"ratio", m.ratio()},
                                 {"seed", 42},
                                 {"bosch_version", bosch::version_string}};
    bosch::io::write_mask(dir / "m.json", m, meta);
    bosch::io::write_mask(dir / "m.tsv", m);
    bosch::io::write_mask(dir / "m.txt", m);
    const auto j = bosch::io::read_mask_json(dir / "m.json");
    CHECK(j.mask == m);
    CHECK(j.metadata == meta);
    CHECK(bosch::io::read_mask(dir / "m.json", lay) == m);
    CHECK(bosch::io::read_mask(dir / "m.tsv", lay) == m);
    CHECK(bosch::io::read_mask(dir / "m.txt", lay) == m);
  }
  fs::remove_all(dir);
}

TEST_CASE("JSON form: format, version, layout, per-layer SWA indices") {
  HeadMask m(HeadLayout{2, 8, 4});
  m.set(0, 3, true);
  m.set(0, 0, true);
  m.set(1, 2, true);
  const auto j = bosch::io::mask_to_json(m, {{"score", 0.5}});
  CHECK(j["format"] == "bosch.head_mask");
  CHECK(j["version"] == 1);
  CHECK(j["layout"]["num_query_heads"] == 8);
  CHECK(j["swa"] == nlohmann::json::parse("[[0, 3], [2]]"));
  CHECK(j["metadata"]["score"] == 0.5);
}

TEST_CASE("TSV uses DuoAttention's convention: 1 = full attention") {
  HeadMask m(HeadLayout{2, 2, 2});
  m.set(0, 1, true);
  CHECK(bosch::io::mask_to_tsv(m) == "1\t0\n1\t1\n");
  // Real-valued gates are thresholded at 0.5 (>= 0.5 = full).
  const HeadMask g = bosch::io::mask_from_tsv("0.93\t0.12\n0.5\t0.49\n");
  CHECK_FALSE(g.swa(0, 0));
  CHECK(g.swa(0, 1));
  CHECK_FALSE(g.swa(1, 0));
  CHECK(g.swa(1, 1));
}

TEST_CASE("a mask of another shape is rejected naming the file") {
  const fs::path dir = temp_dir("shape");
  const HeadMask m(HeadLayout{4, 8, 4});
  for (const char* name : {"a.json", "a.tsv", "a.txt"}) {
    bosch::io::write_mask(dir / name, m);
    for (const HeadLayout other : {HeadLayout{5, 8, 4}, HeadLayout{4, 8, 8}, HeadLayout{4, 4, 4}}) {
      if (std::string(name) != "a.json" && other.num_layers == 4 && other.num_kv_heads == 4)
        continue;  // TSV/grid do not store the query-head count
      CHECK_THROWS_WITH_AS(bosch::io::read_mask(dir / name, other),
                           doctest::Contains((dir / name).string().c_str()),
                           bosch::invalid_argument);
    }
  }
  fs::remove_all(dir);
}

TEST_CASE("malformed files raise format_error with file and field") {
  const fs::path dir = temp_dir("malformed");
  const fs::path f = dir / "bad.json";
  auto expect = [&](const std::string& text, const std::string& field) {
    write_text(f, text);
    try {
      (void)bosch::io::read_mask_json(f);
      FAIL("accepted: " << text);
    } catch (const bosch::format_error& e) {
      CHECK(e.where().find(f.string()) != std::string::npos);
      CHECK(std::string(e.what()).find(field) != std::string::npos);
    }
  };
  const std::string lay = R"("layout": {"num_layers": 2, "num_query_heads": 4, "num_kv_heads": 2})";
  expect(R"({"format": "bosch.head_mask", "version": 1, )" + lay + R"(, "swa": [[0], [1]])",
         "not valid JSON");
  expect(R"({"format": "other", "version": 1, )" + lay + R"(, "swa": [[0], [1]]})", "format");
  expect(R"({"format": "bosch.head_mask", "version": 2, )" + lay + R"(, "swa": [[0], [1]]})",
         "version");
  expect(R"({"format": "bosch.head_mask", "version": 1, "layout": {"num_layers": 2}, "swa": []})",
         "layout.num_query_heads");
  expect(R"({"format": "bosch.head_mask", "version": 1, )" + lay + R"(, "swa": [[0]]})", "swa");
  expect(R"({"format": "bosch.head_mask", "version": 1, )" + lay + R"(, "swa": [[0], [2]]})",
         "swa[1]");
  expect(R"({"format": "bosch.head_mask", "version": 1, )" + lay + R"(, "swa": [[0, 0], []]})",
         "listed twice");
  expect(R"({"format": "bosch.head_mask", "version": 1, )" + lay +
             R"(, "swa": [[0], []], "metadata": 3})",
         "metadata");
  write_text(dir / "bad.tsv", "1\t0\n1\tx\n");
  CHECK_THROWS_WITH_AS(bosch::io::read_mask_tsv(dir / "bad.tsv"),
                       doctest::Contains("line 2, column 2"), bosch::format_error);
  write_text(dir / "bad.tsv", "1\t0\n1\n");
  CHECK_THROWS_WITH_AS(bosch::io::read_mask_tsv(dir / "bad.tsv"), doctest::Contains("line 2"),
                       bosch::format_error);
  write_text(dir / "bad.tsv", "1\t0\n\n1\t1\n");
  CHECK_THROWS_AS(bosch::io::read_mask_tsv(dir / "bad.tsv"), bosch::format_error);
  write_text(dir / "bad.tsv", "1\t1.5\n");
  CHECK_THROWS_AS(bosch::io::read_mask_tsv(dir / "bad.tsv"), bosch::format_error);
  write_text(dir / "bad.txt", "S.\nSS.\n");
  CHECK_THROWS_WITH_AS(bosch::io::read_mask_grid(dir / "bad.txt"),
                       doctest::Contains((dir / "bad.txt").string().c_str()), bosch::format_error);
  CHECK_THROWS_AS(bosch::io::read_mask_json(dir / "missing.json"), bosch::file_error);
  fs::remove_all(dir);
}

TEST_CASE("atomic writes replace the file whole and leave no temporary files") {
  const fs::path dir = temp_dir("atomic");
  const fs::path f = dir / "out.txt";
  bosch::io::write_file_atomic(f, "first");
  bosch::io::write_file_atomic(f, "second, longer content");
  CHECK(bosch::io::read_file(f) == "second, longer content");
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) {
    (void)e;
    ++n;
  }
  CHECK(n == 1);
  CHECK_THROWS_AS(bosch::io::write_file_atomic(dir / "no" / "such" / "dir.txt", "x"),
                  bosch::file_error);
  fs::remove_all(dir);
}
