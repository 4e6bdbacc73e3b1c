// bosch select and bosch compare share one search-options group, generated
// from the Options field table (bosch::for_each_option).
#include "cli_support.hpp"

#include <bosch/bosch.hpp>
#include <bosch/io/options_json.hpp>

#include <type_traits>

using namespace bosch::test::cli;

namespace {

/// "--probe-budget" for probe_budget, the `cli` name for fields that have one.
template <class Field>
std::string option_of(const Field& f) {
  std::string s = "--" + std::string(f.cli.empty() ? f.name : f.cli);
  for (char& c : s)
    if (c == '_') c = '-';
  return s;
}

/// True when `help` lists `option` as an option (followed by a space or a value).
bool lists(const std::string& help, const std::string& option) {
  for (std::size_t p = help.find(option); p != std::string::npos; p = help.find(option, p + 1)) {
    const char next = p + option.size() < help.size() ? help[p + option.size()] : '\n';
    if (next == ' ' || next == '\n') return true;
  }
  return false;
}

}  // namespace

TEST_CASE("select and compare list every search field of the Options table") {
  TempDir dir;
  const Run sel = run({"select", "--help"}, dir);
  const Run cmp = run({"compare", "--help"}, dir);
  REQUIRE(sel.status == 0);
  REQUIRE(cmp.status == 0);
  std::size_t fields = 0;
  bosch::for_each_option([&](const auto& f) {
    ++fields;
    // Masks are not a command-line value: --init FILE... sets them.
    if (f.name == "initial_masks") return;
    const std::string option = option_of(f);
    INFO(option);
    CHECK(lists(sel.out, option));
    // compare sets the ratio (--ratios) and the variant (--methods) per cell.
    const bool per_cell = f.name == "target_ratio" || f.name == "variant";
    CHECK(lists(cmp.out, option) == !per_cell);
  });
  CHECK(fields >= 20);
  // The options the README tells users to raise at high ratios.
  for (const char* o : {"--group-rounds", "--level-spread", "--chunk-budget"}) {
    INFO(o);
    CHECK(lists(cmp.out, o));
  }
  CHECK(lists(cmp.out, "--ratios"));
  CHECK(!lists(cmp.out, "--ratio"));
}

TEST_CASE("compare: search option errors name the option; --ratios replaces --ratio") {
  TempDir dir;
  const std::string m = dir / "never-read.gguf";
  auto cmp = [&](std::vector<std::string> extra) {
    Run r = run(std::vector<std::string>{"compare", m, "-o", dir / "out"} + extra, dir);
    INFO(r.err);
    CHECK(r.status == 2);
    CHECK(one_line(r.err));
    return r.err;
  };
  CHECK(cmp({"--probe-budget", "0"}) == "bosch compare: --probe-budget: must be at least 1, got 0\n");
  CHECK(cmp({"--group-rounds", "0"}) == "bosch compare: --group-rounds: must be at least 1, got 0\n");
  CHECK(cmp({"--level-spread", "-1"}).find("--level-spread: must be >= 0") != std::string::npos);
  CHECK(cmp({"--inner-solver", "annealing"}).find("--inner-solver: unknown value 'annealing'") != std::string::npos);
  CHECK(cmp({"--ratio", "0.5"}).find("unrecognised option '--ratio'") != std::string::npos);
  CHECK(cmp({"--variant", "single"}).find("unrecognised option '--variant'") != std::string::npos);
  CHECK(cmp({"--ratios", "0.5,1.5"}).find("--ratios: SWA ratio must lie in (0, 1)") != std::string::npos);
  CHECK(cmp({"--ratios", "0.5,half"}).find("--ratios: expected a number, got 'half'") != std::string::npos);
  CHECK(!fs::exists(dir / "out"));
}

TEST_CASE("compare runs BOSCH with the shared search options and records them in its identity") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  const std::vector<std::string> args{"compare", m, "--tasks", "copy", "--text-files", t, "--context", "300",
                                      "--allow-long-context", "--window", "32", "--samples", "2",
                                      "--held-out-samples", "1", "--ratios", "0.5", "--methods", "BOSCH,RAND",
                                      "--probe-budget", "4", "--chunk-budget", "8", "--group-rounds", "2",
                                      "--level-spread", "1", "--accept-equal=false", "--no-accuracy", "--threads",
                                      "1", "--seed", "7", "-q", "-o", dir / "cmp"};
  const Run r = run(args, dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto results = read_json(dir / "cmp/results.json");
  // The run identity: every search field but the ratio, as options_to_json writes it.
  const bosch::Options expected = bosch::options_from_json({{"seed", 7},
                                                            {"probe_budget", 4},
                                                            {"chunk_budget", 8},
                                                            {"group_rounds", 2},
                                                            {"level_spread", 1},
                                                            {"accept_equal", false}});
  nlohmann::json identity = bosch::options_to_json(expected);
  identity.erase("target_ratio");
  const std::string dump = results.dump();
  INFO(dump.substr(0, 2000));
  REQUIRE(results.contains("run"));
  CHECK(results.at("run").at("search") == identity);

  // Resuming with another search option is refused (the identity differs);
  // with the same ones, nothing is recomputed.
  Run again = run(without(args, "--group-rounds") + std::vector<std::string>{"--group-rounds", "3"}, dir);
  CHECK(again.status == 2);
  CHECK(again.err.find("differing: search") != std::string::npos);
  again = run(without(args, "-q", 0), dir);
  INFO(again.err);
  CHECK(again.status == 0);
  CHECK(again.err.find(" 0 cells computed, 2 resumed") != std::string::npos);
}
