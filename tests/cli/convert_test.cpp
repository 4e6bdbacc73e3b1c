// bosch convert: round trips between JSON, TSV and the grid; layouts; stdin/stdout.
#include "cli_support.hpp"

#include <bosch/bosch.hpp>
#include <bosch/io/mask_io.hpp>

#include <boost/random/bernoulli_distribution.hpp>
#include <boost/random/mersenne_twister.hpp>

using namespace bosch::test::cli;

namespace {

bosch::HeadMask random_mask(bosch::HeadLayout layout, std::uint64_t seed) {
  boost::random::mt19937_64 rng(seed);
  boost::random::bernoulli_distribution<> coin(0.4);
  bosch::HeadMask m(layout);
  for (std::size_t i = 0; i < m.size(); ++i) m.set_flat(i, coin(rng));
  return m;
}

}  // namespace

TEST_CASE("convert: JSON -> TSV -> grid -> JSON gives the same mask") {
  TempDir dir;
  const bosch::HeadLayout layout{30, 9, 3};
  const bosch::HeadMask mask = random_mask(layout, bosch::test::seed(1));
  const nlohmann::json meta{{"model", "test"}, {"window", 1024}};
  bosch::io::write_mask_json(dir / "a.json", mask, meta);

  Run r = run({"convert", dir / "a.json", dir / "b.tsv"}, dir);
  REQUIRE(r.status == 0);
  CHECK(r.out.empty());
  CHECK(r.err.empty());
  // DuoAttention's convention: 1 = full attention.
  CHECK(slurp(dir / "b.tsv") == bosch::io::mask_to_tsv(mask));

  r = run({"convert", dir / "b.tsv", dir / "c.txt"}, dir);
  REQUIRE(r.status == 0);
  CHECK(slurp(dir / "c.txt") == bosch::to_grid(mask));

  r = run({"convert", "--layout", "30x9x3", dir / "c.txt", dir / "d.json"}, dir);
  REQUIRE(r.status == 0);
  const auto back = bosch::io::read_mask_json(dir / "d.json");
  CHECK(back.mask == mask);
  CHECK(back.mask.layout() == layout);

  // JSON -> JSON keeps the metadata.
  r = run({"convert", dir / "a.json", dir / "e.json"}, dir);
  REQUIRE(r.status == 0);
  CHECK(bosch::io::read_mask_json(dir / "e.json").metadata == meta);
}

TEST_CASE("convert: --from/--to override extensions; '-' is stdin/stdout") {
  TempDir dir;
  const bosch::HeadMask mask = random_mask({6, 8, 4}, bosch::test::seed(2));
  bosch::io::write_mask_json(dir / "mask.dat", mask);

  Run r = run({"convert", "--from", "json", "--to", "tsv", dir / "mask.dat", dir / "out.grid"}, dir);
  REQUIRE(r.status == 0);
  CHECK(slurp(dir / "out.grid") == bosch::io::mask_to_tsv(mask));

  r = run({"convert", "--from", "json", dir / "mask.dat", "-"}, dir);  // stdout: grid by default
  REQUIRE(r.status == 0);
  CHECK(r.out == bosch::to_grid(mask));

  r = run({"convert", "--from", "tsv", "--to", "json", "--layout", "6x8x4", "-", dir / "x.json"}, dir,
          dir / "out.grid");
  REQUIRE(r.status == 0);
  CHECK(bosch::io::read_mask_json(dir / "x.json").mask == mask);

  // Real-valued DuoAttention gates with a threshold.
  {
    std::ofstream g(dir / "gates.tsv");
    g << "0.9\t0.2\n0.45\t0.7\n";
  }
  r = run({"convert", "--threshold", "0.5", dir / "gates.tsv", "-"}, dir);
  REQUIRE(r.status == 0);
  CHECK(r.out == ".S\nS.\n");
  r = run({"convert", "--threshold", "0.4", dir / "gates.tsv", "-"}, dir);
  REQUIRE(r.status == 0);
  CHECK(r.out == ".S\n..\n");
}

TEST_CASE("convert: missing or mismatched layouts and corrupt files") {
  TempDir dir;
  const bosch::HeadMask mask = random_mask({4, 4, 2}, bosch::test::seed(3));
  bosch::io::write_mask_tsv(dir / "m.tsv", mask);
  bosch::io::write_mask_json(dir / "m.json", mask);

  Run r = run({"convert", dir / "m.tsv", dir / "m2.json"}, dir);  // no --layout
  CHECK(r.status == 2);
  CHECK(one_line(r.err));
  CHECK(r.err.find("bosch convert: --layout") != std::string::npos);
  CHECK(!fs::exists(dir / "m2.json"));

  r = run({"convert", "--layout", "4x6x3", dir / "m.tsv", dir / "m2.json"}, dir);  // KV heads differ
  CHECK(r.status == 1);
  CHECK(one_line(r.err));
  CHECK(r.err.find("expected 4 x 3") != std::string::npos);

  r = run({"convert", "--layout", "4x8x2", dir / "m.json", dir / "m3.tsv"}, dir);  // query heads differ
  CHECK(r.status == 1);
  CHECK(r.err.find("does not match") != std::string::npos);

  r = run({"convert", "--layout", "4x5x2", dir / "m.tsv", dir / "m2.json"}, dir);  // not a GQA layout
  CHECK(r.status == 2);
  CHECK(r.err.find("layout") != std::string::npos);

  {
    std::ofstream bad(dir / "bad.tsv");
    bad << "1\t0\n1\n";
  }
  r = run({"convert", dir / "bad.tsv", dir / "out.txt"}, dir);
  CHECK(r.status == 1);
  CHECK(one_line(r.err));
  CHECK(r.err.find("bad.tsv") != std::string::npos);
  CHECK(!fs::exists(dir / "out.txt"));

  {
    std::ofstream bad(dir / "bad.json");
    bad << slurp(dir / "m.json").substr(0, 40);  // truncated
  }
  r = run({"convert", dir / "bad.json", dir / "out.txt"}, dir);
  CHECK(r.status == 1);
  CHECK(r.err.find("not valid JSON") != std::string::npos);

  r = run({"convert", dir / "missing.json", dir / "out.txt"}, dir);
  CHECK(r.status == 1);
  CHECK(r.err.find("missing.json") != std::string::npos);

  r = run({"convert", dir / "m.json"}, dir);
  CHECK(r.status == 2);
  CHECK(r.err.find("IN and OUT") != std::string::npos);

  r = run({"convert", "--to", "xml", dir / "m.json", dir / "o"}, dir);
  CHECK(r.status == 2);
  CHECK(r.err.find("--to: unknown mask format 'xml'") != std::string::npos);
}
