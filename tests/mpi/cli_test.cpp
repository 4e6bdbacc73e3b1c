// The bosch program under mpirun (issue 13): 1, 2 and 3 ranks give the mask,
// the scores and the evaluation log of the program without MPI, in both
// parallel modes; a worker rank killed mid-search ends the job with a message
// naming it, and the run resumed with another rank count matches the
// uninterrupted one; a rank that fails alone ends the job naming it; a usage
// error is one line from rank 0; `bosch compare` under mpirun gives the cells
// of one process. POSIX only (fork/exec, /proc).
#include "cli/cli_support.hpp"

#include <bosch/bosch.hpp>
#include <bosch/io/mask_io.hpp>

#include <dirent.h>

using namespace bosch::test::cli;

namespace {

/// `mpirun -n N --oversubscribe [--allow-run-as-root]`.
std::vector<std::string> mpirun_launcher(int n) {
  std::vector<std::string> l{BOSCH_MPIEXEC, BOSCH_MPIEXEC_NUMPROC_FLAG, std::to_string(n), "--oversubscribe"};
  if (::geteuid() == 0) l.emplace_back("--allow-run-as-root");
  return l;
}

/// bosch ARGS under mpirun with N processes, to completion.
Run mpirun(int n, const std::vector<std::string>& args, const TempDir& dir) {
  // The test build: some runs use its hooks (--stop-after, --mpi-test-fail).
  Process p(args, dir.path(), {}, with_test_hooks, mpirun_launcher(n));
  return p.wait(300);
}

/// The log without wall times.
std::vector<nlohmann::json> without_seconds(std::vector<nlohmann::json> log) {
  for (auto& e : log) e.erase("seconds");
  return log;
}

/// The mask file's metadata without the wall time and, unless `with_cost`,
/// without the cost (the work done, which depends on how the residual caches
/// were split: Mode::masks, or a resume that starts them cold).
nlohmann::json metadata(const fs::path& p, bool with_cost = false) {
  auto meta = bosch::io::read_mask_json(p).metadata;
  // What this run measured of its own work: wall time and, unless asked for,
  // the forwards it computed (a resume replays for free; ranks cache their
  // own shares).
  meta.erase("search_seconds");
  if (!with_cost) meta.erase("forwards"), meta.erase("forward_tokens");
  return meta;
}

/// The pid of the process whose environment has OMPI_COMM_WORLD_RANK=`rank`
/// and whose command line contains `marker` (0 when none).
pid_t find_rank(int rank, const std::string& marker) {
  DIR* d = ::opendir("/proc");
  if (d == nullptr) return 0;
  pid_t found = 0;
  const std::string want = "OMPI_COMM_WORLD_RANK=" + std::to_string(rank);
  while (dirent* e = ::readdir(d)) {
    const std::string name = e->d_name;
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::string cmd = slurp("/proc/" + name + "/cmdline"), env = slurp("/proc/" + name + "/environ");
    for (auto& c : cmd) c = c == '\0' ? ' ' : c;
    if (cmd.find(marker) == std::string::npos || cmd.find(BOSCH_MPIEXEC) == 0) continue;
    std::size_t at = 0;
    bool hit = false;
    while (at < env.size()) {
      const std::size_t end = env.find('\0', at);
      if (env.compare(at, (end == std::string::npos ? env.size() : end) - at, want) == 0) hit = true;
      if (end == std::string::npos) break;
      at = end + 1;
    }
    if (hit) found = static_cast<pid_t>(std::stol(name));
  }
  ::closedir(d);
  return found;
}

/// The small search of the CLI tests with three calibration samples (so that
/// 2 ranks split them 2 + 1 and 3 ranks 1 + 1 + 1).
std::vector<std::string> select_args(const std::string& m, const std::string& t) {
  return without(small_select(m, t), "--samples") + std::vector<std::string>{"--samples", "3"};
}

std::size_t count(const std::string& s, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("1, 2 and 3 ranks give the mask, scores and log of one process, in both modes") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  const auto args = select_args(m, t);
  const Run plain = run(args + std::vector<std::string>{"-o", dir / "plain.json", "--log", dir / "plain.jsonl"}, dir);
  INFO(plain.err);
  REQUIRE(plain.status == 0);
  const auto plain_meta = metadata(dir / "plain.json", true);
  REQUIRE(plain_meta.at("forwards").get<double>() > 0);
  const auto plain_log = without_seconds(read_jsonl(dir / "plain.jsonl"));
  REQUIRE(plain_log.size() > 10);

  for (int n : {1, 2, 3})
    for (const std::string mode : {"samples", "masks"}) {
      const std::string tag = std::to_string(n) + "-" + mode;
      CAPTURE(tag);
      const Run r = mpirun(n, args + std::vector<std::string>{"--mpi-mode", mode, "-o", dir / (tag + ".json"), "--log",
                                                               dir / (tag + ".jsonl")},
                           dir);
      INFO(r.err);
      REQUIRE(r.status == 0);
      CHECK(bosch::io::read_mask_json(dir / (tag + ".json")).mask == bosch::io::read_mask_json(dir / "plain.json").mask);
      // Score, anchors, evaluations, ... (bitwise doubles), and in Mode::samples
      // the cost too: each sample is scored by one process whose cache sees
      // the requests one process's would.
      auto meta = metadata(dir / (tag + ".json"), true), want = plain_meta;
      if (mode == "masks")
        for (const char* cost : {"forwards", "forward_tokens"}) meta.erase(cost), want.erase(cost);
      CHECK(meta == want);
      CHECK(without_seconds(read_jsonl(dir / (tag + ".jsonl"))) == plain_log);
      // Rank 0 alone prints (one summary line) and writes (no checkpoint left, no second lock).
      CHECK(count(r.err, "wrote ") == 1);
      if (n > 1) CHECK(r.err.find("mpi: " + std::to_string(n) + " processes, " + mode + " mode") != std::string::npos);
      CHECK(!fs::exists(dir / (tag + ".json.checkpoint")));
    }
}

TEST_CASE("a worker rank killed mid-search ends the job; a resume with another rank count matches") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  const auto args = select_args(m, t);
  REQUIRE(run(args + std::vector<std::string>{"-q", "-o", dir / "whole.json", "--log", dir / "whole.jsonl"}, dir).status ==
          0);
  const auto whole_log = without_seconds(read_jsonl(dir / "whole.jsonl"));

  // Every rank waits at evaluation 9 (test hook); rank 0 has checkpointed it.
  const std::string out = dir / "part.json";
  const auto part = args + std::vector<std::string>{"-o", out, "--log", dir / "part.jsonl"};
  Process job(part + std::vector<std::string>{"--stop-after", "9", "--stop-signal", "wait"}, dir.path(), {},
              with_test_hooks, mpirun_launcher(2));
  pid_t worker = 0;
  bool ready = false;
  for (int i = 0; i < 6000 && !ready; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    try {
      ready = fs::exists(out + ".checkpoint") && read_json(out + ".checkpoint").at("evaluations").size() == 9;
    } catch (const std::exception&) {
      ready = false;
    }
  }
  REQUIRE(ready);
  worker = find_rank(1, out);
  REQUIRE(worker > 0);
  ::kill(worker, SIGKILL);
  const Run killed = job.wait(300);
  INFO(killed.err);
  CHECK(killed.status != 0);
  CHECK(killed.err.find("rank 1") != std::string::npos);  // the launcher names the dead rank
  CHECK(!fs::exists(out));

  // Resume with 3 ranks: the same mask and log as the uninterrupted run.
  const Run resumed = mpirun(3, part + std::vector<std::string>{"--resume"}, dir);
  INFO(resumed.err);
  REQUIRE(resumed.status == 0);
  CHECK(resumed.err.find("(9 replayed)") != std::string::npos);
  CHECK(bosch::io::read_mask_json(out).mask == bosch::io::read_mask_json(dir / "whole.json").mask);
  CHECK(metadata(out) == metadata(dir / "whole.json"));
  CHECK(without_seconds(read_jsonl(dir / "part.jsonl")) == whole_log);
}

TEST_CASE("a rank that fails alone ends the job with a line naming it") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  const Run r = mpirun(3, select_args(m, t) + std::vector<std::string>{"-o", dir / "mask.json", "--mpi-test-fail", "2:5"},
                       dir);
  INFO(r.err);
  CHECK(r.status == 1);
  CHECK(r.err.find("bosch: rank 2 failed: bosch select: failure requested by --mpi-test-fail after 5 evaluations") !=
        std::string::npos);
  CHECK(!fs::exists(dir / "mask.json"));
}

TEST_CASE("a usage error under mpirun is reported once, by rank 0, with status 2") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  const Run r = mpirun(2, without(select_args(m, t), "--ratio") + std::vector<std::string>{"--ratio", "1.5"}, dir);
  INFO(r.err);
  CHECK(r.status == 2);
  CHECK(count(r.err, "bosch select: --ratio") == 1);
  CHECK(r.err.find("rank 1 failed") == std::string::npos);
}

TEST_CASE("bosch compare under mpirun gives the cells of one process") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  const std::vector<std::string> args{"compare", m,         "--tasks",  "copy",  "--text-files", t,   "--context",
                                      "300",     "--samples", "3",      "--held-out-samples", "2", "--window",
                                      "32",      "--ratios", "0.5",     "--methods", "BOSCH,PROXY,RAND",
                                      "--probe-budget", "4", "--chunk-budget", "8", "--threads", "1", "--no-accuracy", "-q",
                                      "--allow-long-context"};
  const Run plain = run(args + std::vector<std::string>{"-o", dir / "plain"}, dir);
  INFO(plain.err);
  REQUIRE(plain.status == 0);
  const Run par = mpirun(2, args + std::vector<std::string>{"-o", dir / "mpi"}, dir);
  INFO(par.err);
  REQUIRE(par.status == 0);
  const auto a = read_json(dir.path() / "plain" / "results.json"), b = read_json(dir.path() / "mpi" / "results.json");
  REQUIRE(a.at("cells").size() == b.at("cells").size());
  for (std::size_t i = 0; i < a.at("cells").size(); ++i) {
    const auto& x = a.at("cells")[i];
    const auto& y = b.at("cells")[i];
    CHECK(x.at("method") == y.at("method"));
    CHECK(x.at("mask") == y.at("mask"));
    CHECK(x.at("evaluations") == y.at("evaluations"));
    CHECK(x.at("forwards") == y.at("forwards"));
    CHECK(x.at("quality") == y.at("quality"));
  }
  CHECK(a.at("methods").at("PROXY").at("state").at("scores") == b.at("methods").at("PROXY").at("state").at("scores"));
  CHECK(fs::exists(dir.path() / "mpi" / "table.md"));
}
