// Interrupted runs (SIGINT, SIGTERM) write a checkpoint, exit 130/143, and
// --resume reaches the same mask and evaluation log as an uninterrupted run.
// The interruptions come from the test build of bosch (run_with_hooks:
// --stop-after N raises the signal, or waits for one, at evaluation N); the
// resumes run the shipped program.
#include "cli_support.hpp"

#include <bosch/bosch.hpp>
#include <bosch/io/mask_io.hpp>
#include <bosch/io/sha256.hpp>

using namespace bosch::test::cli;

namespace {

/// The log without wall times (replayed records keep the interrupted run's
/// times; fresh ones are measured again).
std::vector<nlohmann::json> without_seconds(std::vector<nlohmann::json> log) {
  for (auto& e : log) e.erase("seconds");
  return log;
}

/// N of "interrupted by SIG... after N evaluations" (0 when absent).
std::size_t stopped_after(const std::string& err, const std::string& signal) {
  const std::string key = "interrupted by " + signal + " after ";
  const auto p = err.find(key);
  if (p == std::string::npos) return 0;
  return std::stoul(err.substr(p + key.size()));
}

}  // namespace

TEST_CASE("an interrupted select resumes to the same mask and log as an uninterrupted one") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  const auto args = small_select(m, t);

  const Run whole = run(args + std::vector<std::string>{"-q", "-o", dir / "whole.json", "--log", dir / "whole.jsonl"},
                        dir);
  REQUIRE(whole.status == 0);
  const auto whole_mask = bosch::io::read_mask_json(dir / "whole.json");
  const auto whole_log = read_jsonl(dir / "whole.jsonl");
  REQUIRE(whole_log.size() > 12);

  // SIGINT after 12 evaluations (raised by the program itself at a known point).
  const std::vector<std::string> part_args =
      args + std::vector<std::string>{"-o", dir / "part.json", "--log", dir / "part.jsonl", "--checkpoint-every", "5"};
  const Run cut = run_with_hooks(part_args + std::vector<std::string>{"--stop-after", "12"}, dir);
  INFO(cut.err);
  CHECK(cut.status == 130);
  // The search stops after the batch under way (lambda = 4 proposals are
  // scored together), so at 12 or a few more evaluations.
  const std::size_t n = stopped_after(cut.err, "SIGINT");
  CHECK(n >= 12);
  CHECK(n < 12 + 4);
  CHECK(n < whole_log.size());
  CHECK(cut.err.find("resume with: ") != std::string::npos);
  CHECK(cut.err.find("--resume") != std::string::npos);
  CHECK(cut.err.find("--stop-after") == std::string::npos);  // test hook not repeated
  CHECK(!fs::exists(dir / "part.json"));                     // no mask from a partial run
  REQUIRE(fs::exists(dir / "part.json.checkpoint"));
  const auto ck = read_json(dir / "part.json.checkpoint");
  CHECK(ck.at("complete") == false);
  CHECK(ck.at("evaluations").size() == n);
  // The partial log holds the first n records of the whole run.
  const auto part_log = without_seconds(read_jsonl(dir / "part.jsonl"));
  REQUIRE(part_log.size() == n);
  const auto whole_plain = without_seconds(whole_log);
  for (std::size_t i = 0; i < n; ++i) CHECK(part_log[i] == whole_plain[i]);

  // Resume: same mask, same log (records replayed from the checkpoint first).
  const Run resumed = run(part_args + std::vector<std::string>{"--resume"}, dir);
  INFO(resumed.err);
  REQUIRE(resumed.status == 0);
  CHECK(resumed.err.find("(" + std::to_string(n) + " replayed)") != std::string::npos);
  const auto part_mask = bosch::io::read_mask_json(dir / "part.json");
  CHECK(part_mask.mask == whole_mask.mask);
  CHECK(part_mask.metadata.at("score") == whole_mask.metadata.at("score"));
  CHECK(part_mask.metadata.at("evaluations") == whole_mask.metadata.at("evaluations"));
  CHECK(without_seconds(read_jsonl(dir / "part.jsonl")) == without_seconds(whole_log));
  CHECK(!fs::exists(dir / "part.json.checkpoint"));  // default checkpoint removed after success
}

TEST_CASE("SIGTERM from outside stops the search; an explicit checkpoint is kept") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  const auto args = small_select(m, t) + std::vector<std::string>{"-q", "-o", dir / "mask.json", "--checkpoint",
                                                                  dir / "run.ckpt"};
  // The program waits at evaluation 9 for a signal; send it from here once
  // the checkpoint (written every evaluation) holds 9 records.
  Process p(args + std::vector<std::string>{"--checkpoint-every", "1", "--stop-after", "9", "--stop-signal", "wait"},
            dir.path(), {}, with_test_hooks);
  bool ready = false;
  for (int i = 0; i < 6000 && !ready; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    try {
      ready = fs::exists(dir / "run.ckpt") && read_json(dir / "run.ckpt").at("evaluations").size() == 9;
    } catch (const std::exception&) {
      ready = false;  // between writes (the file is replaced atomically, so this is rare)
    }
  }
  REQUIRE(ready);
  ::kill(p.pid(), SIGTERM);
  const Run r = p.wait();
  INFO(r.err);
  CHECK(r.status == 143);
  const std::size_t n = stopped_after(r.err, "SIGTERM");
  CHECK(n >= 9);
  CHECK(n < 9 + 4);
  CHECK(!fs::exists(dir / "mask.json"));

  // Changing how masks are scored is refused on resume (the checkpoint's
  // scores would not mean the same); changing the search options too.
  Run bad = run(without(args, "--window") + std::vector<std::string>{"--window", "16", "--resume"}, dir);
  CHECK(bad.status == 2);
  CHECK(bad.err.find("window 32 -> 16") != std::string::npos);
  bad = run(without(args, "--seed") + std::vector<std::string>{"--seed", "8", "--resume"}, dir);
  CHECK(bad.status == 2);
  CHECK(bad.err.find("seed") != std::string::npos);

  const Run resumed = run(args + std::vector<std::string>{"--resume"}, dir);
  INFO(resumed.err);
  REQUIRE(resumed.status == 0);
  CHECK(fs::exists(dir / "mask.json"));
  REQUIRE(fs::exists(dir / "run.ckpt"));  // an explicit checkpoint stays, marked complete
  CHECK(read_json(dir / "run.ckpt").at("complete") == true);

  // The same mask as an uninterrupted run.
  REQUIRE(run(small_select(m, t) + std::vector<std::string>{"-q", "-o", dir / "whole.json"}, dir).status == 0);
  CHECK(bosch::io::read_mask_json(dir / "whole.json").mask == bosch::io::read_mask_json(dir / "mask.json").mask);
}

namespace {

/// Starts the hooks build waiting at evaluation `at` for a signal from
/// outside, and returns once the checkpoint holds `at` records.
void wait_for_checkpoint(const fs::path& ckpt, std::size_t at) {
  bool ready = false;
  for (int i = 0; i < 6000 && !ready; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    try {
      ready = fs::exists(ckpt) && read_json(ckpt).at("evaluations").size() == at;
    } catch (const std::exception&) {
      ready = false;
    }
  }
  REQUIRE(ready);
}

}  // namespace

TEST_CASE("signals leave nothing behind: SIGHUP stops like SIGTERM; a second SIGINT still removes the lock") {
  const std::string m = model(), t = text();
  TempDir dir;
  const auto args = small_select(m, t) + std::vector<std::string>{"-q", "-o", dir / "mask.json", "--checkpoint",
                                                                  dir / "run.ckpt", "--stop-after", "5",
                                                                  "--stop-signal", "wait"};
  {
    // Before: SIGHUP killed the program at once (no checkpoint of the last
    // evaluations, the lock file left behind).
    Process p(args, dir.path(), {}, with_test_hooks);
    wait_for_checkpoint(dir / "run.ckpt", 5);
    ::kill(p.pid(), SIGHUP);
    const Run r = p.wait();
    INFO(r.err);
    CHECK(r.status == 129);
    CHECK(stopped_after(r.err, "SIGHUP") >= 5);
    CHECK(r.err.find("resume with:") != std::string::npos);
    CHECK(fs::exists(dir / "run.ckpt"));
    CHECK_FALSE(fs::exists(dir / "run.ckpt.lock"));
  }
  {
    // Two SIGINTs back to back: the second ends the program during its
    // shutdown. Before: it died with the lock file in place.
    fs::remove(dir / "run.ckpt");
    fs::remove(dir / "run.ckpt.run.json");
    Process p(args, dir.path(), {}, with_test_hooks);
    wait_for_checkpoint(dir / "run.ckpt", 5);
    REQUIRE(fs::exists(dir / "run.ckpt.lock"));
    ::kill(p.pid(), SIGINT);
    ::kill(p.pid(), SIGINT);
    const Run r = p.wait();
    INFO(r.err);
    CHECK(r.status == 130);
    CHECK_FALSE(fs::exists(dir / "run.ckpt.lock"));
    CHECK_FALSE(fs::exists(dir / "mask.json"));
  }
}

TEST_CASE("compare removes its results lock when SIGINT ends it") {
  const std::string m = model(), t = text();
  TempDir dir;
  const std::vector<std::string> args{"compare", m, "--tasks", "copy", "--text-files", t, "--context", "300",
                                      "--allow-long-context", "--window", "32", "--samples", "2",
                                      "--held-out-samples", "1", "--ratios", "0.25,0.5,0.75", "--methods",
                                      "BOSCH,RAND", "--probe-budget", "4", "--chunk-budget", "8", "--no-accuracy",
                                      "--threads", "1", "-q", "-o", dir / "cmp"};
  Process p(args, dir.path());
  bool locked = false;
  for (int i = 0; i < 60000 && !locked; ++i) {
    locked = fs::exists(dir / "cmp/.results.lock");
    if (!locked) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  REQUIRE(locked);
  ::kill(p.pid(), SIGINT);
  const Run r = p.wait();
  CHECK(r.status == 130);
  // Before: .results.lock stayed in the output directory.
  CHECK_FALSE(fs::exists(dir / "cmp/.results.lock"));
}

TEST_CASE("a successful run removes stray temporary files of its checkpoint; a named checkpoint keeps its identity") {
  const std::string m = model(), t = text();
  TempDir dir;
  // Left by earlier runs killed while writing (write_file_atomic's temporaries).
  for (const char* stray : {".m.json.checkpoint.tmp.99999.0", ".m.json.checkpoint.run.json.tmp.99999.3",
                            ".n.ckpt.tmp.4242.17"})
    std::ofstream(dir / stray) << "{";
  std::ofstream(dir / ".unrelated.tmp.1.2") << "kept";
  REQUIRE(run(small_select(m, t) + std::vector<std::string>{"-q", "-o", dir / "m.json"}, dir).status == 0);
  const auto named = small_select(m, t) + std::vector<std::string>{"-q", "-o", dir / "n.json", "--checkpoint",
                                                                   dir / "n.ckpt"};
  REQUIRE(run(named, dir).status == 0);
  std::vector<std::string> left;
  for (const auto& e : fs::directory_iterator(dir.path())) {
    const std::string n = e.path().filename().string();
    if (n.rfind("stdout.", 0) != 0 && n.rfind("stderr.", 0) != 0) left.push_back(n);
  }
  std::sort(left.begin(), left.end());
  // Before: the strays stayed, and the named checkpoint lost its identity.
  CHECK(left == std::vector<std::string>{".unrelated.tmp.1.2", "m.json", "n.ckpt", "n.ckpt.run.json", "n.json"});
  // So a --resume of the finished run with another window is refused, not
  // merely warned about (before: "n.ckpt.run.json is missing", exit 0).
  const Run bad = run(without(named, "--window") + std::vector<std::string>{"--window", "16", "--resume"}, dir);
  INFO(bad.err);
  CHECK(bad.status == 2);
  CHECK(bad.err.find("window 32 -> 16") != std::string::npos);
  // And with the same settings it replays to the same mask.
  const Run again = run(named + std::vector<std::string>{"--resume"}, dir);
  CHECK(again.status == 0);
}

TEST_CASE("a select on a file task resumes to the same mask and log, and records the file's sha256") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  // Records of the user's own kind: a passage of the novel and the words that
  // follow it (the plain form), longer than the context, so they are cut.
  const std::string novel = slurp(t);
  std::string records;
  for (int i = 0; i < 8; ++i) {
    const std::size_t at = 20000 + static_cast<std::size_t>(i) * 7919;
    const std::size_t end = novel.find(' ', at + 1500);
    const std::size_t next = novel.find(' ', end + 1);
    records += nlohmann::json{{"prompt", novel.substr(at, end - at)}, {"answer", novel.substr(end + 1, next - end - 1)}}.dump() + "\n";
  }
  const fs::path file = dir / "mine.jsonl";
  {
    std::ofstream out(file);
    out << records;
  }
  auto args = without(small_select(m, t), "--tasks") + std::vector<std::string>{"--tasks", "file:" + file.string()};
  const Run whole = run(args + std::vector<std::string>{"-q", "-o", dir / "whole.json", "--log", dir / "whole.jsonl"}, dir);
  INFO(whole.err);
  REQUIRE(whole.status == 0);
  const auto whole_mask = bosch::io::read_mask_json(dir / "whole.json");
  const auto& meta = whole_mask.metadata;
  REQUIRE(meta.contains("task_files"));
  CHECK(meta.at("task_files").at(0).at("sha256") == bosch::io::sha256_hex(records));
  CHECK(meta.at("task_files").at(0).at("calibration_records") == 4);
  CHECK(meta.at("tasks") == "file:" + file.string());
  const auto whole_log = read_jsonl(dir / "whole.jsonl");
  REQUIRE(whole_log.size() > 8);

  const std::vector<std::string> part_args = args + std::vector<std::string>{"-o", dir / "part.json", "--log", dir / "part.jsonl"};
  const Run cut = run_with_hooks(part_args + std::vector<std::string>{"--stop-after", "8"}, dir);
  INFO(cut.err);
  CHECK(cut.status == 130);
  CHECK(cut.err.find("2 cut in the middle") != std::string::npos);  // the run says what it cut
  const Run resumed = run(part_args + std::vector<std::string>{"--resume"}, dir);
  INFO(resumed.err);
  REQUIRE(resumed.status == 0);
  const auto part_mask = bosch::io::read_mask_json(dir / "part.json");
  CHECK(part_mask.mask == whole_mask.mask);
  CHECK(part_mask.metadata.at("score") == meta.at("score"));
  CHECK(without_seconds(read_jsonl(dir / "part.jsonl")) == without_seconds(whole_log));

  // evaluate takes the recorded file task and its split, and says how many records it cut.
  const Run ev = run({"evaluate", m, "--mask", dir / "whole.json", "--json", "--held-out-samples", "2", "-q"}, dir);
  INFO(ev.err);
  REQUIRE(ev.status == 0);
  const auto report = nlohmann::json::parse(ev.out);
  CHECK(report.at("cut_samples").at("file:mine.jsonl") == 2);
  CHECK(report.at("held_out").at("all").contains("match"));

  // A bad record stops the run before the model loads, naming file and line.
  {
    std::ofstream out(file, std::ios::app);
    out << "{\"prompt\": \"no answer\"}\n";
  }
  const Run bad = run(args + std::vector<std::string>{"-q", "-o", dir / "bad.json"}, dir);
  CHECK(bad.status != 0);
  CHECK(bad.err.find("mine.jsonl:9: no field 'answer'") != std::string::npos);
  CHECK(!fs::exists(dir / "bad.json"));
}

TEST_CASE("an interrupted evaluate resumes from its per-sample checkpoint to the uninterrupted report") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  bosch::HeadMask mask(bosch::HeadLayout{5, 8, 4});  // stories260K
  mask.set(0, 1, true);
  mask.set(3, 2, true);
  bosch::io::write_mask_json(dir / "m.json", mask);
  const std::vector<std::string> args{"evaluate", m, "--mask", dir / "m.json", "--json", "--tasks", "copy,passkey",
                                      "--text-files", t, "--context", "300", "--allow-long-context",
                                      "--held-out-samples", "4", "--window", "32", "--threads", "1", "--references"};
  const Run plain = run(args, dir);
  INFO(plain.err);
  REQUIRE(plain.status == 0);
  const fs::path ck = dir / "eval.ckpt";
  const Run whole = run(args + std::vector<std::string>{"--checkpoint", ck}, dir);
  REQUIRE(whole.status == 0);
  CHECK(whole.out == plain.out);  // a checkpoint changes nothing
  std::vector<std::string> lines;
  {
    std::istringstream in(slurp(ck));
    for (std::string l; std::getline(in, l);) lines.push_back(l);
  }
  REQUIRE(lines.size() == 1 + 3 * 8);  // identity, then 8 samples of 3 rows

  // Killed after 11 samples while writing the 12th (kill -9 leaves a torn line).
  {
    std::ofstream out(ck, std::ios::binary | std::ios::trunc);
    for (std::size_t i = 0; i < 12; ++i) out << lines[i] << "\n";
    out << lines[12].substr(0, lines[12].size() / 2);
  }
  const Run resumed = run(args + std::vector<std::string>{"--checkpoint", ck}, dir);
  INFO(resumed.err);
  REQUIRE(resumed.status == 0);
  CHECK(resumed.err.find("11 samples scored") != std::string::npos);
  CHECK(resumed.out == plain.out);  // bitwise the same report
  std::size_t records = 0;
  {
    std::istringstream in(slurp(ck));
    for (std::string l; std::getline(in, l);) ++records;
  }
  CHECK(records == lines.size());  // the torn line replaced, nothing scored twice

  // Another evaluation is refused, naming what differs.
  const Run other = run(without(args, "--window") + std::vector<std::string>{"--window", "16", "--checkpoint", ck}, dir);
  CHECK(other.status != 0);
  CHECK(other.err.find("another evaluation (its window differs)") != std::string::npos);
}
