// bosch --help, each command's --help, --version, unknown commands.
#include "cli_support.hpp"

#include <bosch/version.hpp>

#include <algorithm>

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
  for (const char* expected : {"inspect", "select", "evaluate", "convert"}) {
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
  };
  for (const auto& [cmd, options] : expected) {
    const Run r = run({cmd, "--help"}, dir);
    REQUIRE(r.status == 0);
    for (const auto& o : options) {
      INFO(cmd << " --help mentions " << o);
      CHECK(r.out.find(o) != std::string::npos);
    }
  }
  // Test hooks stay out of the help.
  CHECK(run({"select", "--help"}, dir).out.find("--stop-after") == std::string::npos);
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
