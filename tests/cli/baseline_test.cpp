// bosch baseline on the tiny real model: one ranking, one mask per ratio.
#include "cli_support.hpp"

#include <bosch/io/mask_io.hpp>

using namespace bosch::test::cli;

namespace {

std::vector<std::string> proxy(const std::string& m, const std::string& t) {
  return {"baseline", "-m", m, "--method", "PROXY", "--tasks", "copy", "--text-files", t, "--window", "32",
          "--context", "300", "--allow-long-context", "--samples", "1", "--threads", "1", "-q"};
}

}  // namespace

TEST_CASE("baseline --ratios: the masks of one ranking, each as --ratio makes it, named with the ratio") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  const Run multi = run(proxy(m, t) + std::vector<std::string>{"--ratios", "0.75,0.25", "-o", dir / "proxy.json",
                                                               "--svg", dir / "proxy.svg"},
                        dir);
  INFO(multi.err);
  REQUIRE(multi.status == 0);
  CHECK(!fs::exists(dir / "proxy.json"));
  for (const char* rho : {"0.25", "0.75"}) {
    const std::string name = std::string("proxy-") + rho;
    CAPTURE(name);
    REQUIRE(fs::exists(dir / (name + ".json")));
    CHECK(fs::exists(dir / (name + ".svg")));
    const Run single = run(proxy(m, t) + std::vector<std::string>{"--ratio", rho, "-o", dir / (name + "-alone.json")}, dir);
    INFO(single.err);
    REQUIRE(single.status == 0);
    const auto a = bosch::io::read_mask_json(dir / (name + ".json"));
    const auto b = bosch::io::read_mask_json(dir / (name + "-alone.json"));
    CHECK(a.mask == b.mask);  // the same ranking cut at the same ratio
    CHECK(a.metadata.at("target_ratio") == std::stod(rho));
    CHECK(a.metadata.at("ranking_ratios") == nlohmann::json::array({0.25, 0.75}));
    CHECK(a.metadata.at("forwards") == b.metadata.at("forwards"));  // one ranking's cost, not a share of it
  }
  const auto low = bosch::io::read_mask_json(dir / "proxy-0.25.json").mask;
  const auto high = bosch::io::read_mask_json(dir / "proxy-0.75.json").mask;
  CHECK(low.count() < high.count());
  for (std::size_t i = 0; i < low.size(); ++i)
    if (low.bits()[i]) CHECK(high.bits()[i]);  // a ranking's heads nest

  // The layer heuristics take --ratios too; --ratio with --ratios, and stdout, are errors before any work.
  const Run layers = run({"baseline", "-m", m, "--method", "BME", "--ratios", "0.5,0.25", "-o", dir / "bme.json"}, dir);
  INFO(layers.err);
  CHECK(layers.status == 0);
  CHECK(fs::exists(dir / "bme-0.25.json"));
  CHECK(fs::exists(dir / "bme-0.5.json"));
  const Run both = run(proxy(m, t) + std::vector<std::string>{"--ratio", "0.5", "--ratios", "0.25,0.5", "-o",
                                                              dir / "x.json"},
                       dir);
  CHECK(both.status == 2);
  CHECK(both.err.find("--ratio and --ratios") != std::string::npos);
  const Run out = run(proxy(m, t) + std::vector<std::string>{"--ratios", "0.25,0.5", "-o", "-"}, dir);
  CHECK(out.status == 2);
  CHECK(out.err.find("--ratios") != std::string::npos);
  const Run bad = run(proxy(m, t) + std::vector<std::string>{"--ratios", "0.25,1.5", "-o", dir / "x.json"}, dir);
  CHECK(bad.status == 2);
  CHECK(bad.err.find("--ratios") != std::string::npos);
  CHECK(!fs::exists(dir / "x-0.25.json"));
}
