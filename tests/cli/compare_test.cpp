// bosch select and bosch compare share one search-options group, generated
// from the Options field table (bosch::for_each_option).
#include "cli_support.hpp"

#include <bosch/bosch.hpp>
#include <bosch/io/options_json.hpp>

#include <map>
#include <set>
#include <sstream>
#include <type_traits>

using namespace bosch::test::cli;

namespace {

/// "--probe-budget" for probe_budget, the `cli` name for fields that have one.
template <class Field>
std::string option_of(const Field& f) {
  // The table's spelling is "long[,short]" ("ratio,r").
  std::string s = "--" + std::string(f.cli.empty() ? f.name : f.cli.substr(0, f.cli.find(',')));
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
    if (f.name == "initial_masks") {
      // Masks have their own options: select reads files (--init); compare
      // builds them per cell (--warm-start, --candidates); both take --candidates.
      CHECK(!lists(sel.out, option));
      CHECK(lists(sel.out, "--init"));
      CHECK(!lists(cmp.out, "--init"));
      for (const char* o : {"--candidates", "--ratio-order", "--warm-start"}) {
        CHECK(lists(sel.out, o));
        CHECK(lists(cmp.out, o));
      }
      return;
    }
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

TEST_CASE("compare: held-out sets at other contexts, intervals everywhere, ratio order and warm starts") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  const std::vector<std::string> base{"compare", m, "--tasks", "copy", "--text-files", t, "--context", "300",
                                      "--allow-long-context", "--window", "32", "--samples", "2",
                                      "--held-out-samples", "3", "--ratios", "0.25,0.5", "--methods", "BOSCH,RAND",
                                      "--probe-budget", "4", "--chunk-budget", "8", "--no-accuracy", "--threads", "1",
                                      "--seed", "7", "-q", "-o", dir / "cmp"};
  // Bad held-out contexts are usage errors before any work.
  for (const auto& [value, needle] : std::vector<std::pair<std::string, std::string>>{
           {"300", "is the calibration context"}, {"32", "window 32 plus 0 sinks must be less"},
           {"ten", "expected an integer"}, {"2000000", "at most"}}) {
    INFO(value);
    const Run bad = run(base + std::vector<std::string>{"--held-out-context", value}, dir);
    CHECK(bad.status == 2);
    CHECK(bad.err.find("--held-out-context: ") != std::string::npos);
    CHECK(bad.err.find(needle) != std::string::npos);
  }
  CHECK(run(base + std::vector<std::string>{"--candidates", "best"}, dir).status == 2);

  const Run r = run(base + std::vector<std::string>{"--held-out-context", "200"}, dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto results = read_json(dir / "cmp/results.json");
  CHECK(results.at("run").at("ratio_order") == "ascending");
  CHECK(results.at("run").at("warm_start") == true);
  REQUIRE(results.at("held_out_sets").size() == 2);
  CHECK(results.at("held_out_sets")[1].at("key") == "context=200");
  CHECK(results.at("references").at("at").contains("context=200"));
  std::size_t cells = 0;
  for (const auto& c : results.at("cells")) {
    ++cells;
    // Both sets, with the per-sample scores and intervals.
    const auto& q = c.at("quality");
    CHECK(q.at("all").at("samples") == 3);
    CHECK(q.at("samples").at("logprob").size() == 3);
    CHECK(q.at("all").at("logprob_ci").size() == 2);
    CHECK(c.at("quality_at").at("context=200").at("all").at("samples") == 3);
    if (c.at("method") == "BOSCH" && c.at("ratio") == 0.5) {
      // Run upward: 0.5 started also from BOSCH's mask at 0.25.
      CHECK(c.at("details").at("warm_starts") == nlohmann::json::array({"BOSCH at ratio 0.25"}));
      CHECK(c.at("details").at("warm_start").at("seeds") == 1);
    }
    if (c.at("method") == "BOSCH" && c.at("ratio") == 0.25) CHECK(!c.at("details").contains("warm_starts"));
  }
  CHECK(cells == 4);
  const std::string table = slurp(dir / "cmp/table.md");
  CHECK(table.find("## held-out, context 300 (the calibration context) (n = 3)") != std::string::npos);
  CHECK(table.find("## held-out, context 200 (n = 3)") != std::string::npos);
  CHECK(table.find("percentile bootstrap over the samples") != std::string::npos);
  CHECK(table.find("BOSCH minus the best method of another family") != std::string::npos);
  CHECK(table.find("| 0.5 | log-prob | RAND | ") != std::string::npos);
  const std::string csv = slurp(dir / "cmp/results.csv");
  CHECK(csv.rfind("held_out,method,family,ratio,swa_heads,samples,accuracy,accuracy_low,", 0) == 0);
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 1 + 2 * (2 + 4));
  CHECK(csv.find("context=200,BOSCH,BOSCH,0.5,10,3,") != std::string::npos);
  const std::string paired = slurp(dir / "cmp/paired.csv");
  CHECK(paired.find("context=200,0.25,logprob,BOSCH,RAND,3,") != std::string::npos);
  CHECK(paired.find("context=300,0.5,exact,BOSCH,RAND,3,") != std::string::npos);
  for (const char* f : {"logprob_vs_ratio.svg", "logprob_vs_ratio-context_200.svg", "accuracy_vs_ratio-context_200.svg"})
    CHECK_MESSAGE(fs::exists(dir.path() / "cmp" / f), f);

  // Another order is another run (BOSCH's cells depend on it) ...
  const Run down = run(base + std::vector<std::string>{"--ratio-order", "down"}, dir);
  CHECK(down.status == 2);
  CHECK(down.err.find("differing: ratio_order") != std::string::npos);
  // ... another held-out context is not: the stored masks are scored on it.
  const Run more = run(without(base, "-q", 0) + std::vector<std::string>{"--held-out-context", "200,400"}, dir);
  INFO(more.err);
  REQUIRE(more.status == 0);
  CHECK(more.err.find("0 cells computed, 4 resumed (4 scored on a new held-out set)") != std::string::npos);
  CHECK(read_json(dir / "cmp/results.json").at("cells")[0].at("quality_at").contains("context=400"));
  CHECK(fs::exists(dir / "cmp/logprob_vs_ratio-context_400.svg"));

  // Downward in a fresh directory: BOSCH at 0.5 runs first, as without warm starts.
  const Run d = run(without(base, "-o") + std::vector<std::string>{"--ratio-order", "down", "-o", dir / "down"}, dir);
  INFO(d.err);
  REQUIRE(d.status == 0);
  const Run cold =
      run(without(base, "-o") + std::vector<std::string>{"--warm-start=false", "-o", dir / "cold"}, dir);
  REQUIRE(cold.status == 0);
  auto cell = [](const nlohmann::json& doc, double rho) {
    for (const auto& c : doc.at("cells"))
      if (c.at("method") == "BOSCH" && c.at("ratio") == rho) return c;
    return nlohmann::json();
  };
  const auto dj = read_json(dir / "down/results.json"), cj = read_json(dir / "cold/results.json");
  CHECK(cell(dj, 0.5).at("mask") == cell(cj, 0.5).at("mask"));
  CHECK(cell(dj, 0.25).at("details").at("warm_starts") == nlohmann::json::array({"BOSCH at ratio 0.5"}));
  CHECK(!cell(cj, 0.5).at("details").contains("warm_starts"));
}

TEST_CASE("compare: the layer-granular BOSCH (BOSCH-layer) against head-level BOSCH and the layer heuristics") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  // stories260K: 5 layers x 4 KV heads; ratio 0.4 is 8 SWA heads, two whole layers.
  const std::vector<std::string> args{"compare", m, "--tasks", "copy", "--text-files", t, "--context", "300",
                                      "--allow-long-context", "--window", "32", "--samples", "2",
                                      "--held-out-samples", "2", "--ratios", "0.4", "--methods",
                                      "BOSCH,bosch-layer,RAND,BME,INTR", "--probe-budget", "4", "--chunk-budget",
                                      "8", "--no-accuracy", "--threads", "1", "--seed", "7", "-q", "-o",
                                      dir / "cmp"};
  const Run r = run(args, dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto results = read_json(dir / "cmp/results.json");
  std::map<std::string, nlohmann::json> cells;
  for (const auto& c : results.at("cells")) cells[c.at("method").get<std::string>()] = c;
  REQUIRE(cells.size() == 5);
  for (const char* name : {"BOSCH", "B-layer", "RAND", "BME", "INTR"}) REQUIRE_MESSAGE(cells.count(name), name);
  // The layer variant's mask is whole layers (each grid row all 'S' or all '.'), at the same head count.
  const std::string grid = cells["B-layer"].at("mask").get<std::string>();
  INFO(grid);
  int swa_layers = 0, rows = 0;
  std::istringstream lines(grid);
  for (std::string row; std::getline(lines, row);) {
    if (row.empty()) continue;
    ++rows;
    const auto s = std::count(row.begin(), row.end(), 'S');
    CHECK((s == 0 || s == static_cast<long>(row.size())));
    swa_layers += s > 0;
  }
  CHECK(rows == 5);
  CHECK(swa_layers == 2);
  const std::string bosch_grid = cells["BOSCH"].at("mask").get<std::string>();
  CHECK(std::count(bosch_grid.begin(), bosch_grid.end(), 'S') == 8);

  // paired.csv: B-layer minus BOSCH (the same ratio) and minus the best layer
  // heuristic, for both metrics; the log-prob differences are those of the
  // cells' means.
  const auto mean_logprob = [&](const std::string& name) {
    return cells[name].at("quality").at("all").at("mean_logprob").get<double>();
  };
  const std::string paired = slurp(dir / "cmp/paired.csv");
  INFO(paired);
  std::istringstream csv(paired);
  std::string line;
  std::getline(csv, line);
  CHECK(line == "held_out,ratio,metric,method,other,samples,difference,low,high");
  std::set<std::string> layer_rows;
  while (std::getline(csv, line)) {
    std::vector<std::string> f;
    std::istringstream fields(line);
    for (std::string x; std::getline(fields, x, ',');) f.push_back(x);
    REQUIRE(f.size() == 9);
    if (f[3] != "B-layer") {
      CHECK(f[3] == "BOSCH");
      continue;
    }
    CHECK(f[1] == "0.4");
    CHECK(f[5] == "2");
    const bool heuristic = f[4] == "RAND" || f[4] == "BME" || f[4] == "INTR";
    CHECK((f[4] == "BOSCH" || heuristic));
    layer_rows.insert(f[2] + " " + (heuristic ? "heuristic" : f[4]));
    if (f[2] == "logprob") {
      CHECK(std::stod(f[6]) == doctest::Approx(mean_logprob("B-layer") - mean_logprob(f[4])).epsilon(1e-6));
      CHECK(std::stod(f[7]) <= std::stod(f[6]));
      CHECK(std::stod(f[6]) <= std::stod(f[8]));
    }
    if (heuristic && f[2] == "logprob")  // the best heuristic by log-prob
      for (const char* h : {"RAND", "BME", "INTR"}) CHECK(mean_logprob(f[4]) >= mean_logprob(h));
  }
  CHECK(layer_rows == std::set<std::string>{"logprob BOSCH", "logprob heuristic", "exact BOSCH", "exact heuristic"});
  const std::string table = slurp(dir / "cmp/table.md");
  CHECK(table.find("### B-layer (whole layers, for engines that window only layers) against BOSCH (per KV head) "
                   "and the best layer heuristic") != std::string::npos);
  CHECK(table.find("| 0.4 | log-prob | BOSCH | ") != std::string::npos);

  // Without the layer variant there is no such section.
  const Run head_only = run(without(args, "--methods") + std::vector<std::string>{"--methods", "BOSCH,RAND"}, dir);
  INFO(head_only.err);
  REQUIRE(head_only.status == 0);
  CHECK(slurp(dir / "cmp/table.md").find("### B-layer") == std::string::npos);
}

TEST_CASE("compare --deploy-context: calibrates at the recipe's lengths and is held out at the deployment context") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  const Run r = run({"compare", m, "--tasks", "copy", "--text-files", t, "--deploy-context", "600",
                     "--allow-long-context", "--window", "32", "--samples", "1", "--held-out-samples", "2", "--ratios",
                     "0.5", "--methods", "RAND", "--no-accuracy", "--threads", "1", "-q", "-o", dir / "cmp"},
                    dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto results = read_json(dir / "cmp/results.json");
  REQUIRE(results.at("held_out_sets").size() == 2);
  CHECK(results.at("held_out_sets")[0].at("key") == "context=256,512");
  CHECK(results.at("held_out_sets")[1].at("key") == "context=600");
}
