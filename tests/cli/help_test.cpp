// bosch --help, each command's --help, --version, unknown commands.
#include "cli_support.hpp"

#include <bosch/bosch.hpp>
#include <bosch/io/mask_io.hpp>
#include <bosch/version.hpp>

#include <algorithm>
#include <regex>
#include <sstream>

using namespace bosch::test::cli;

namespace {

/// The command names `bosch --help` lists (lines "  name  summary" under "Commands:").
std::vector<std::string> listed_commands(const std::string& help) {
  std::vector<std::string> names;
  std::istringstream in(help);
  bool in_list = false;
  for (std::string line; std::getline(in, line);) {
    if (line == "Commands:") {
      in_list = true;
      continue;
    }
    if (in_list) {
      if (line.size() < 3 || line.rfind("  ", 0) != 0) break;
      std::istringstream w(line);
      std::string name;
      w >> name;
      names.push_back(name);
    }
  }
  return names;
}

}  // namespace

TEST_CASE("bosch --help lists the commands; every command has --help") {
  TempDir dir;
  const Run top = run({"--help"}, dir);
  REQUIRE(top.status == 0);
  CHECK(top.out.find("Usage: bosch <command>") != std::string::npos);
  const auto names = listed_commands(top.out);
  for (const char* expected : {"inspect", "select", "evaluate", "convert", "baseline", "compare", "paired", "generate", "logits"}) {
    INFO(expected);
    CHECK(std::find(names.begin(), names.end(), expected) != names.end());
  }
  for (const auto& name : names) {
    INFO("bosch " << name << " --help");
    const Run r = run({name, "--help"}, dir);
    CHECK(r.status == 0);
    CHECK(r.out.find("Usage: bosch " + name) != std::string::npos);
    CHECK(r.out.find("--help") != std::string::npos);
    CHECK(r.out.find("--config") != std::string::npos);
    CHECK(r.err.empty());
    // Defaults read as they were written: "(=0.05)", never the double's
    // digits "(=0.050000000000000003)" (Boost's default rendering).
    static const std::regex long_number(R"(\(=-?[0-9]*\.[0-9]{7,})");
    std::smatch m;
    CHECK_MESSAGE(!std::regex_search(r.out, m, long_number), "bosch " << name << " --help shows " << m.str());
    // `bosch help NAME` prints the same.
    const Run h = run({"help", name}, dir);
    CHECK(h.status == 0);
    CHECK(h.out == r.out);
  }
}

TEST_CASE("each command's help names its options") {
  TempDir dir;
  const std::vector<std::pair<std::string, std::vector<std::string>>> expected{
      {"inspect", {"--model", "--json", "--load"}},
      {"select",
       {"--model", "--ratio", "--window", "--sinks", "--tasks", "--context", "--samples",
        "--probe-budget", "--chunk-budget", "--max-evaluations", "--seed", "--variant", "--device",
        "--threads", "--out", "--format", "--checkpoint", "--resume", "--log", "--svg", "--quiet",
        "--verbose"}},
      {"evaluate", {"--model", "--mask", "--json", "--window", "--held-out-samples", "--device"}},
      {"convert", {"--from", "--to", "--layout", "--threshold"}},
      {"compare", {"--ratios", "--methods", "--group-rounds", "--level-spread", "--probe-budget", "--allow-long-context"}},
      {"paired", {"--resamples", "--level", "--seed", "--json", "FILE#NAME"}},
      {"generate", {"--model", "--prompt", "--tokens", "--window", "--sinks", "--mask", "--device", "--allow-long-context", "--stats"}},
      {"logits", {"--model", "--window", "--sinks", "--mask", "--device", "TOKEN_ID"}},
  };
  for (const auto& [cmd, options] : expected) {
    const Run r = run({cmd, "--help"}, dir);
    REQUIRE(r.status == 0);
    for (const auto& o : options) {
      INFO(cmd << " --help mentions " << o);
      CHECK(r.out.find(o) != std::string::npos);
    }
  }
  // Test hooks stay out of the help (also of the test build's).
  CHECK(run({"select", "--help"}, dir).out.find("--stop-after") == std::string::npos);
  CHECK(run_with_hooks({"select", "--help"}, dir).out.find("--stop-after") == std::string::npos);
}

TEST_CASE("version, missing and unknown commands") {
  TempDir dir;
  const Run v = run({"--version"}, dir);
  CHECK(v.status == 0);
  CHECK(v.out == std::string("bosch ") + bosch::version_string + "\n");

  const Run none = run({}, dir);
  CHECK(none.status == 2);
  CHECK(none.err.find("Usage: bosch") != std::string::npos);

  const Run bad = run({"frobnicate"}, dir);
  CHECK(bad.status == 2);
  CHECK(one_line(bad.err));
  CHECK(bad.err.find("unknown command 'frobnicate'") != std::string::npos);
}

TEST_CASE("flags: --flag, --flag=true|false, grouped short flags; a flag never takes the next word") {
  TempDir dir;
  const bosch::HeadMask mask = bosch::HeadMask::filled({2, 4, 2}, true);
  bosch::io::write_mask_json(dir / "a.json", mask);
  // --verbose before the positional arguments leaves them alone.
  Run r = run({"convert", "--verbose", dir / "a.json", dir / "b.txt"}, dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.err.find("bosch convert: ") != std::string::npos);  // the verbose line
  CHECK(bosch::test::cli::slurp(dir / "b.txt") == bosch::to_grid(mask));
  r = run({"convert", "--verbose=false", dir / "a.json", dir / "c.txt"}, dir);
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  r = run({"convert", "-v", dir / "a.json", dir / "d.txt"}, dir);
  CHECK(r.err.find("bosch convert: ") != std::string::npos);
  // -qv: quiet wins over verbose.
  r = run({"convert", "-qv", dir / "a.json", dir / "e.txt"}, dir);
  REQUIRE(r.status == 0);
  CHECK(r.err.empty());
  r = run({"convert", "--verbose=maybe", dir / "a.json", dir / "f.txt"}, dir);
  CHECK(r.status == 2);
  CHECK(r.err.find("'--verbose'") != std::string::npos);
  // Option names are exact: no abbreviations.
  r = run({"convert", "--verb", dir / "a.json", dir / "g.txt"}, dir);
  CHECK(r.status == 2);
  CHECK(r.err.find("unrecognised option '--verb'") != std::string::npos);
}
