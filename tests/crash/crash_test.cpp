// SPDX-License-Identifier: Apache-2.0
// Crash safety of searches (issue 8): a search killed with SIGKILL at random
// moments and resumed from its checkpoint loses no finished evaluation and
// ends with the same mask and evaluation log as an uninterrupted run; a torn
// or corrupt checkpoint is rejected whole, naming the file.
//
// The search runs in a child process (bosch_search_child, built from
// search_child.cpp): select() over a deterministic evaluator that sleeps a
// little per evaluation, with a Checkpoint callback writing after every
// evaluation and an "E <index>" line on stdout once that evaluation's
// checkpoint is in place.

#include "test_support.hpp"

#include <bosch/error.hpp>
#include <bosch/io/atomic_file.hpp>
#include <bosch/io/checkpoint.hpp>

#include <doctest/doctest.h>
#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include <sys/wait.h>
#include <unistd.h>

#ifndef BOSCH_SEARCH_CHILD
#error "BOSCH_SEARCH_CHILD (path of bosch_search_child) must be defined by the build"
#endif

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

fs::path temp_dir(const std::string& tag) {
  const fs::path d =
      fs::temp_directory_path() / ("bosch-crash-" + tag + "-" + std::to_string(::getpid()));
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

/// A running bosch_search_child with its stdout on a pipe.
class Child {
 public:
  explicit Child(const std::vector<std::string>& args) {
    int fds[2];
    REQUIRE(::pipe(fds) == 0);
    pid_ = ::fork();
    REQUIRE(pid_ >= 0);
    if (pid_ == 0) {
      ::dup2(fds[1], STDOUT_FILENO);
      ::close(fds[0]);
      ::close(fds[1]);
      std::vector<char*> argv;
      std::string prog = BOSCH_SEARCH_CHILD;
      argv.push_back(prog.data());
      std::vector<std::string> copy = args;
      for (auto& a : copy) argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execv(prog.c_str(), argv.data());
      std::perror("execv bosch_search_child");
      ::_exit(127);
    }
    ::close(fds[1]);
    out_ = ::fdopen(fds[0], "r");
    REQUIRE(out_ != nullptr);
  }
  ~Child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      wait();
    }
    if (out_) std::fclose(out_);
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;

  /// Reads one "E <index>" line; false at end of output.
  bool next(long& index) {
    char line[64];
    if (!std::fgets(line, sizeof line, out_)) return false;
    REQUIRE(std::sscanf(line, "E %ld", &index) == 1);
    return true;
  }
  /// Kills the child with SIGKILL and waits for it.
  void kill() {
    REQUIRE(::kill(pid_, SIGKILL) == 0);
    const int status = wait();
    CHECK((WIFSIGNALED(status) || WIFEXITED(status)));
  }
  /// Waits for the child; returns its wait status.
  int wait() {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    return status;
  }

 private:
  pid_t pid_ = -1;
  FILE* out_ = nullptr;
};

json read_json(const fs::path& p) { return json::parse(bosch::io::read_file(p)); }

/// Plain (not atomic, not fsync'ed) write of a damaged copy: thousands of them.
void write_plain(const fs::path& p, const std::string& content) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << content;
  REQUIRE(out.good());
}

/// Runs the child to completion without interruption; returns its result.
json run_uninterrupted(const fs::path& dir, const std::string& seed,
                       const std::string& variant = "full") {
  Child c({"--checkpoint", (dir / "ref.ckpt").string(), "--out", (dir / "ref.json").string(),
           "--sleep-us", "0", "--seed", seed, "--variant", variant});
  long index = 0;
  while (c.next(index)) {
  }
  const int status = c.wait();
  REQUIRE(WIFEXITED(status));
  REQUIRE(WEXITSTATUS(status) == 0);
  return read_json(dir / "ref.json");
}

/// The checkpoint's records must be a prefix of the reference log.
void check_prefix(const bosch::CheckpointData& d, const json& ref_log) {
  REQUIRE(d.log.size() <= ref_log.size());
  for (std::size_t i = 0; i < d.log.size(); ++i) {
    const auto& r = d.log[i];
    std::string bits(r.mask.size(), '0');
    for (std::size_t b = 0; b < r.mask.size(); ++b) bits[b] = r.mask[b] ? '1' : '0';
    INFO("record " << i);
    CHECK(bits == ref_log[i]["mask"].get<std::string>());
    CHECK(std::string(bosch::to_string(r.stage)) == ref_log[i]["stage"].get<std::string>());
    CHECK(r.score == ref_log[i]["score"].get<double>());  // exact: replayed from the file
  }
}

}  // namespace

TEST_CASE("a search killed with SIGKILL at random moments resumes to the uninterrupted result") {
  boost::random::mt19937_64 rng(bosch::test::seed());
  // BOSCH (probes, ratios, grouped selection) and B-multi (a different Stage 3).
  for (const auto& [seed, variant] : {std::pair<std::string, std::string>{"3", "full"},
                                      std::pair<std::string, std::string>{"11", "multi"}}) {
    CAPTURE(seed);
    CAPTURE(variant);
    const fs::path dir = temp_dir("kill-" + seed);
    const json ref = run_uninterrupted(dir, seed, variant);
    const json& ref_log = ref["log"];
    const std::size_t total = ref_log.size();
    REQUIRE(total >= 40);  // enough evaluations to kill in every stage
    MESSAGE(variant << ", seed " << seed << ": uninterrupted run made " << total << " evaluations");

    const fs::path ck = dir / "run.ckpt", out = dir / "run.json";
    std::size_t on_disk = 0;  // records the checkpoint held after the last kill
    int kills = 0, finished_runs = 0;
    constexpr int max_kills = 10;
    while (true) {
      std::vector<std::string> args = {"--checkpoint", ck.string(), "--out",  out.string(),
                                       "--sleep-us",   "400",       "--seed", seed,
                                       "--variant",    variant};
      if (fs::exists(ck)) args.push_back("--resume");
      Child c(args);
      long index = -1, last = -1;
      if (kills < max_kills) {
        // Kill after a random number of announced evaluations (replays of a
        // resumed run included, so some kills land while it is replaying),
        // plus a random delay, so the kill hits an evaluation, a checkpoint
        // write or the rename at random.
        boost::random::uniform_int_distribution<long> lines(
            1, 2 * static_cast<long>(total) / max_kills);
        boost::random::uniform_int_distribution<int> delay_us(0, 1500);
        const long want = lines(rng);
        long seen = 0;
        while (seen < want && c.next(index)) ++seen, last = index;
        ::usleep(static_cast<useconds_t>(delay_us(rng)));
        c.kill();
        ++kills;
        while (c.next(index)) last = index;  // lines written before the kill still count
        INFO("kill " << kills << " after " << seen << " announced evaluations");
        // The checkpoint is never torn: it reads back whole.
        REQUIRE(fs::exists(ck));
        bosch::CheckpointData d;
        REQUIRE_NOTHROW(d = bosch::read_checkpoint(ck));
        // No evaluation finished (announced) before the kill is lost, nor any
        // that an earlier run had saved.
        CHECK(static_cast<long>(d.log.size()) >= last + 1);
        CHECK(d.log.size() >= on_disk);
        check_prefix(d, ref_log);
        on_disk = d.log.size();
        if (fs::exists(out)) break;  // the kill came after the search had finished
      } else {
        while (c.next(index)) last = index;
        const int status = c.wait();
        REQUIRE(WIFEXITED(status));
        REQUIRE(WEXITSTATUS(status) == 0);
        ++finished_runs;
        break;
      }
    }
    CHECK(kills >= 1);
    const json got = read_json(out);
    CHECK(got["mask"] == ref["mask"]);
    CHECK(got["score"] == ref["score"]);
    CHECK(got["evaluations"] == ref["evaluations"]);
    CHECK(got["log"] == ref_log);  // index, stage, mask, score of every evaluation
    if (finished_runs) {
      // The last run replayed what the checkpoint held and evaluated the rest.
      CHECK(got["replayed"].get<std::size_t>() == on_disk);
      CHECK(got["evaluator_calls"].get<std::size_t>() == total - on_disk);
    }
    // Stray temporary files of killed writers may remain; the checkpoint is complete.
    const auto final_ck = bosch::read_checkpoint(ck);
    CHECK(final_ck.complete);
    CHECK(final_ck.log.size() == total);
    fs::remove_all(dir);
  }
}

TEST_CASE("torn, truncated or bit-flipped checkpoints are rejected whole, naming the file") {
  const fs::path dir = temp_dir("corrupt");
  (void)run_uninterrupted(dir, "5");
  const fs::path ck = dir / "ref.ckpt";
  const std::string text = bosch::io::read_file(ck);
  const bosch::CheckpointData good = bosch::read_checkpoint(ck);
  REQUIRE(good.log.size() >= 40);
  // Thousands of damaged copies: on tmpfs when there is one (rewriting a
  // truncated file on ext4 flushes it on close, seconds in all on a busy disk).
  const fs::path bad_dir =
      ::access("/dev/shm", W_OK) == 0
          ? fs::path("/dev/shm") / ("bosch-crash-" + std::to_string(::getpid()))
          : dir;
  fs::create_directories(bad_dir);
  const fs::path bad = bad_dir / "bad.ckpt";

  // Either a format_error naming the file, or (when the damage did not change
  // any value: the trailing newline cut, 'e' -> 'E' in an exponent) the
  // same data. Never anything in between.
  std::size_t rejected = 0, same = 0;
  auto expect_whole_or_rejected = [&](const std::string& content, const std::string& what) {
    write_plain(bad, content);
    try {
      const bosch::CheckpointData d = bosch::read_checkpoint(bad);
      INFO(what);
      REQUIRE(d.log.size() == good.log.size());
      for (std::size_t i = 0; i < d.log.size(); ++i) {
        REQUIRE(d.log[i].mask == good.log[i].mask);
        REQUIRE(d.log[i].score == good.log[i].score);
        REQUIRE(d.log[i].stage == good.log[i].stage);
        REQUIRE(d.log[i].seconds == good.log[i].seconds);
      }
      REQUIRE(d.layout == good.layout);
      REQUIRE(d.seed == good.seed);
      REQUIRE(d.options == good.options);
      REQUIRE(d.complete == good.complete);
      ++same;
    } catch (const bosch::format_error& e) {
      INFO(what << ": " << e.what());
      REQUIRE(e.where().find(bad.string()) == 0);
      ++rejected;
    }
  };
  // Every truncation (a torn write).
  for (std::size_t n = 0; n < text.size(); ++n)
    expect_whole_or_rejected(text.substr(0, n), "truncated to " + std::to_string(n) + " bytes");
  CHECK(same <= 1);  // only the cut of the final newline keeps the document
  // One random bit flipped in every byte.
  boost::random::mt19937_64 rng(bosch::test::seed());
  boost::random::uniform_int_distribution<int> bit(0, 7);
  for (std::size_t i = 0; i < text.size(); ++i) {
    std::string flipped = text;
    const int b = bit(rng);
    flipped[i] = static_cast<char>(flipped[i] ^ (1 << b));
    expect_whole_or_rejected(flipped, "bit " + std::to_string(b) + " of byte " + std::to_string(i));
  }
  MESSAGE(text.size() << "-byte checkpoint: " << rejected << " damaged copies rejected, " << same
                      << " read back unchanged");
  CHECK(rejected + same == 2 * text.size());
  CHECK(same <= text.size() / 100);  // a few 'e' -> 'E' flips in exponents of "seconds"

  // Wrong magic, format or layout with a VALID checksum: the field checks
  // themselves reject them, naming the field.
  auto edited = [&](auto&& edit) {
    json j = json::parse(text);
    edit(j);
    j["checksum"] = bosch::detail::document_checksum(j);
    write_plain(bad, j.dump(1));
  };
  auto where_of = [&]() -> std::string {
    try {
      (void)bosch::read_checkpoint(bad);
    } catch (const bosch::format_error& e) {
      return e.where();
    }
    return "(accepted)";
  };
  edited([](json& j) { j["magic"] = "bosch.checkpoinT"; });
  CHECK(where_of() == bad.string() + ": magic");
  edited([](json& j) { j["format"] = 2; });
  CHECK(where_of() == bad.string() + ": format");
  edited([](json& j) { j["layout"]["num_kv_heads"] = 3; });  // 8 query heads do not split into 3
  CHECK(where_of() == bad.string() + ": layout");
  edited([](json& j) { j["layout"]["num_layers"] = 5; });  // masks have 6 x 4 bits
  CHECK(where_of() == bad.string() + ": evaluations[0].mask");
  edited([](json& j) { j["layout"]["num_layers"] = 6.0e12; });
  CHECK(where_of() == bad.string() + ": layout.num_layers");
  edited([](json& j) { j["evaluations"][3]["index"] = 4; });
  CHECK(where_of() == bad.string() + ": evaluations[3]");
  edited([](json& j) { j["evaluations"][2]["score"] = nullptr; });
  CHECK(where_of() == bad.string() + ": evaluations[2].score");
  edited([](json& j) { j["evaluations"][2]["stage"] = "probe"; });
  CHECK(where_of() == bad.string() + ": evaluations[2].stage");
  edited([](json& j) {
    j["evaluations"][2]["score"] = 0.5;
  });  // both checksums valid only for the old score
  CHECK(where_of() == bad.string() + ": log_checksum");
  edited([](json& j) { j.erase("log_checksum"); });
  CHECK(where_of() == bad.string() + ": log_checksum");
  // A layout that differs from the evaluator's is refused at resume.
  bosch::HeadLayout other = good.layout;
  other.num_layers += 1;
  bosch::Options o = bosch::options_from_json(good.options);
  CHECK_THROWS_WITH_AS(bosch::check_resumable(good, other, o, ck.string()),
                       doctest::Contains("layout"), bosch::invalid_argument);
  fs::remove_all(bad_dir);
  fs::remove_all(dir);
}
