// Bad arguments and bad files: exit code 2 for usage errors, 1 for runtime
// errors, and one clear line "bosch <cmd>: ..." on stderr.
#include "cli_support.hpp"

#include <bosch/bosch.hpp>
#include <bosch/io/mask_io.hpp>
#include <bosch/io/file_lock.hpp>

using namespace bosch::test::cli;

namespace {

void check_error(const Run& r, int status, const std::string& cmd, const std::string& needle) {
  INFO("stderr: " << r.err);
  CHECK(r.status == status);
  CHECK(one_line(r.err));
  CHECK(r.err.rfind("bosch " + cmd + ": ", 0) == 0);
  CHECK(r.err.find(needle) != std::string::npos);
  CHECK(r.out.empty());
}

}  // namespace

TEST_CASE("select: usage errors exit 2 with one line naming the option") {
  // These are all rejected before the model is read, so a path that does not
  // exist shows that no file is touched.
  TempDir dir;
  const std::string m = dir / "never-read.gguf";
  auto sel = [&](std::vector<std::string> extra) {
    std::vector<std::string> args{"select", "--model", m, "-o", dir / "mask.json"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run(args, dir);
  };
  check_error(sel({"--bogus"}), 2, "select", "unrecognised option '--bogus'");
  check_error(sel({"--ratio"}), 2, "select", "--ratio");
  check_error(run({"select", "--ratio", "0.5"}, dir), 2, "select", "no model given");
  for (const char* ratio : {"0", "1", "1.5", "-0.25"}) {
    INFO("ratio " << ratio);
    check_error(sel({"--ratio", ratio}), 2, "select", "--ratio: SWA ratio must lie in (0, 1)");
  }
  check_error(sel({"--ratio", "half"}), 2, "select", "ratio");
  for (const char* window : {"0", "-8"}) {
    INFO("window " << window);
    check_error(sel({"--window", window}), 2, "select", "--window: window must be at least 1");
  }
  check_error(sel({"--sinks", "-1"}), 2, "select", "--sinks: sinks must be at least 0");
  check_error(sel({"--tasks", "passkey,nosuchtask"}), 2, "select", "--tasks: unknown");
  check_error(sel({"--tasks", ","}), 2, "select", "--tasks: no task given");
  check_error(sel({"--tasks", "passkey,niah_single_1,passkey"}), 2, "select", "--tasks: task passkey given twice");
  check_error(sel({"--ratios", "0.25,0.5,0.25"}), 2, "select", "--ratios: ratio 0.25 given twice");
  check_error(sel({"--variant", "best"}), 2, "select", "--variant: unknown value 'best'");
  check_error(sel({"--device", "tpu"}), 2, "select", "--device: unknown device 'tpu'");
  check_error(sel({"--max-evaluations", "2"}), 2, "select", "--max-evaluations");
  check_error(sel({"--probe-budget", "0"}), 2, "select", "--probe-budget");
  check_error(sel({"--samples", "0"}), 2, "select", "--samples");
  check_error(sel({"--level-spread", "-1"}), 2, "select", "--level-spread: must be >= 0");
  check_error(sel({"--format", "xml"}), 2, "select", "--format: unknown mask format");
  check_error(sel({"--threads", "-2"}), 2, "select", "--threads");
  if (!BOSCH_CLI_CUDA) check_error(sel({"--device", "cuda"}), 2, "select", {"--device", "this build has no CUDA backend"});
  CHECK(!fs::exists(dir / "mask.json"));
}

TEST_CASE("config files: bad values and unknown names are usage errors") {
  TempDir dir;
  {
    std::ofstream(dir / "a.cfg") << "ratio = 1.5\n";
    std::ofstream(dir / "b.cfg") << "no-such-option = 3\n";
  }
  check_error(run({"select", "-m", dir / "x.gguf", "--config", dir / "a.cfg"}, dir), 2, "select",
              "--ratio: SWA ratio must lie in (0, 1)");
  check_error(run({"select", "-m", dir / "x.gguf", "--config", dir / "b.cfg"}, dir), 2, "select",
              "no-such-option");
  check_error(run({"select", "-m", dir / "x.gguf", "--config", dir / "missing.cfg"}, dir), 2, "select",
              "--config: cannot read");
}

TEST_CASE("runtime errors exit 1: unreadable model, corrupt files, mismatched mask") {
  TempDir dir;
  check_error(run({"select", "-m", dir / "missing.gguf", "--threads", "1"}, dir), 1, "select",
              "missing.gguf: no such file or directory");
  {
    std::ofstream(dir / "garbage.gguf") << "this is not a GGUF file, just some text long enough to parse";
  }
  check_error(run({"select", "-m", dir / "garbage.gguf"}, dir), 1, "select", "garbage.gguf");
  check_error(run({"inspect", dir / "garbage.gguf"}, dir), 1, "inspect", "garbage.gguf");
  check_error(run({"inspect", dir / "missing.gguf"}, dir), 1, "inspect", "no such file");
  check_error(run({"inspect"}, dir), 2, "inspect", "no model given");

  const std::string m = model();
  if (m.empty()) return;
  // A mask of another model (6 layers instead of 5).
  bosch::io::write_mask_json(dir / "other.json", bosch::HeadMask::filled({6, 8, 4}, false));
  check_error(run({"evaluate", m, "--mask", dir / "other.json"}, dir), 1, "evaluate",
              "does not match the expected layout (5x8x4)");
  bosch::io::write_mask_tsv(dir / "other.tsv", bosch::HeadMask::filled({5, 2, 2}, true));
  check_error(run({"evaluate", m, "--mask", dir / "other.tsv"}, dir), 1, "evaluate", "expected 5 x 4");
  {
    std::ofstream(dir / "corrupt.json") << "{\"format\": \"bosch.head_mask\", \"version\": 1, \"layout\": ";
  }
  check_error(run({"evaluate", m, "--mask", dir / "corrupt.json"}, dir), 1, "evaluate", "not valid JSON");
  bosch::io::write_mask_json(dir / "ok.json", bosch::HeadMask::filled({5, 8, 4}, false));
  check_error(run({"evaluate", m}, dir), 2, "evaluate", "no mask given");
  check_error(run({"evaluate", m, "--mask", dir / "ok.json", "--window", "0"}, dir), 2, "evaluate", "--window");
  check_error(run({"evaluate", m, "--mask", dir / "ok.json", "--held-out-samples", "0"}, dir), 2, "evaluate",
              "--held-out-samples");

  // --resume without a checkpoint, and a corrupt checkpoint.
  const std::string t = text();
  if (t.empty()) return;
  check_error(run(small_select(m, t) + std::vector<std::string>{"-o", dir / "r.json", "--resume"}, dir), 1,
              "select", "no checkpoint");
  {
    std::ofstream(dir / "r.json.checkpoint") << "{\"magic\": \"bosch.checkpoint\", \"format\": 1, \"lay";
  }
  check_error(run(small_select(m, t) + std::vector<std::string>{"-q", "-o", dir / "r.json", "--resume"}, dir), 1,
              "select", "r.json.checkpoint");

  // A second select on a checkpoint a running select holds (the lock stands in
  // for that run) is refused before it writes anything.
  {
    bosch::io::FileLock running(dir / "busy.json.checkpoint.lock", "checkpoint");
    check_error(run(small_select(m, t) + std::vector<std::string>{"-q", "-o", dir / "busy.json"}, dir), 1,
                "select", "is in use by another process");
    CHECK(!fs::exists(dir / "busy.json"));
    CHECK(!fs::exists(dir / "busy.json.checkpoint.run.json"));
  }
}

TEST_CASE("sizes beyond their limits fail at once, naming the limit") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  // The tiny model was trained on 128 tokens. Before this check existed,
  // --context 99999999 generated text for minutes; now nothing is read but
  // the model's configuration.
  const auto sel = [&](std::vector<std::string> extra) {
    return run(std::vector<std::string>{"select", "-m", m, "--tasks", "copy", "--text-files", t, "-o", dir / "m.json"} +
                   extra,
               dir);
  };
  check_error(sel({"--context", "99999999"}), 2, "select",
              "--context: 99999999 tokens exceed the model's trained context of 128 tokens");
  check_error(sel({"--context", "300"}), 2, "select", "trained context of 128 tokens (--allow-long-context");
  // The override extrapolates, up to a fixed maximum.
  check_error(sel({"--context", "99999999", "--allow-long-context"}), 2, "select",
              "--context: at most 1048576 tokens, got 99999999");
  check_error(sel({"--context", "100", "--window", "100"}), 2, "select",
              "--window: window 100 plus 0 sinks must be less than --context 100");
  check_error(sel({"--context", "100", "--window", "90", "--sinks", "10"}), 2, "select",
              "must be less than --context 100");
  check_error(sel({"--context", "100", "--samples", "99999999"}), 2, "select",
              "--samples: at most 10000 per task, got 99999999");
  check_error(sel({"--context", "100", "--held-out-samples", "10001"}), 2, "select",
              "--held-out-samples: at most 10000 per task");
  // The same limits in the other commands that generate tasks.
  check_error(run({"compare", m, "--context", "99999999", "-o", dir / "cmp"}, dir), 2, "compare",
              "--context: 99999999 tokens exceed the model's trained context of 128 tokens");
  check_error(run({"baseline", m, "--method", "DCAM", "--context", "200000", "-o", dir / "b.json"}, dir), 2,
              "baseline", "trained context of 128 tokens");
  CHECK(!fs::exists(dir / "cmp"));
  CHECK(!fs::exists(dir / "b.json"));
  bosch::io::write_mask_json(dir / "ok.json", bosch::HeadMask::filled({5, 8, 4}, false));
  check_error(run({"evaluate", m, "--mask", dir / "ok.json", "--context", "4096"}, dir), 2, "evaluate",
              "--context: 4096 tokens exceed the model's trained context of 128 tokens");
}

TEST_CASE("a missing output directory is named, before any work") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  const std::string missing = dir / "no/such/dir";
  check_error(run(small_select(m, t) + std::vector<std::string>{"-o", missing + "/mask.json"}, dir), 1, "select",
              "--out: directory '" + missing + "' does not exist");
  for (const char* option : {"--log", "--svg", "--checkpoint"}) {
    INFO(option);
    check_error(run(small_select(m, t) + std::vector<std::string>{"-o", dir / "m.json", option, missing + "/f"}, dir),
                1, "select", std::string(option) + ": directory '" + missing + "' does not exist");
  }
  {
    std::ofstream(dir / "plain") << "a file, not a directory";
  }
  check_error(run(small_select(m, t) + std::vector<std::string>{"-o", dir / "plain/mask.json"}, dir), 1, "select",
              "--out: '" + (dir / "plain") + "' is not a directory");
  check_error(run({"baseline", m, "--method", "RAND", "-o", missing + "/r.json"}, dir), 1, "baseline",
              "--out: directory '" + missing + "' does not exist");
  bosch::io::write_mask_json(dir / "ok.json", bosch::HeadMask::filled({5, 8, 4}, false));
  check_error(run({"convert", dir / "ok.json", missing + "/ok.tsv"}, dir), 1, "convert",
              "OUT: directory '" + missing + "' does not exist");
  // Nothing was started: no checkpoint or lock beside the outputs that do exist.
  for (const auto& e : fs::directory_iterator(dir.path())) {
    const std::string name = e.path().filename().string();
    INFO(name);
    CHECK(name.find("checkpoint") == std::string::npos);
    CHECK(name.find(".lock") == std::string::npos);
  }
}

TEST_CASE("the shipped program has no test hooks") {
  TempDir dir;
  const std::string m = dir / "never-read.gguf";
  check_error(run({"select", "-m", m, "--stop-after", "3"}, dir), 2, "select", "unrecognised option '--stop-after'");
  check_error(run({"select", "-m", m, "--stop-signal", "wait"}, dir), 2, "select",
              "unrecognised option '--stop-signal'");
  // The test build has them (and checks their values).
  check_error(run_with_hooks({"select", "-m", m, "--stop-signal", "usr1"}, dir), 2, "select",
              "--stop-signal: expected int, term or wait");
}

TEST_CASE("--report's held-out samples are built before the work: one that cannot be built fails first") {
  const std::string m = model();
  if (m.empty()) return;
  TempDir dir;
  // Sentences split into halves by count: the calibration half is long
  // sentences, the held-out half "Hi." alone, too short for a copy span.
  {
    std::ofstream text(dir / "skewed.txt");
    for (int i = 0; i < 30; ++i) text << "Tom had a big red ball and he liked to play with it in the park every day. ";
    text << "\n";
    for (int i = 0; i < 30; ++i) text << "Hi. ";
  }
  const std::vector<std::string> run_settings{"--model", m,      "--tasks",   "copy", "--text-files", dir / "skewed.txt",
                                              "--context", "300", "--samples", "1",   "--window",     "32",
                                              "--threads", "1",   "--allow-long-context"};
  for (const char* cmd : {"select", "baseline"}) {
    INFO(cmd);
    std::vector<std::string> args{cmd};
    args.insert(args.end(), run_settings.begin(), run_settings.end());
    args.insert(args.end(), {"--ratio", "0.5", "--report", "-v", "-o", dir / (std::string(cmd) + ".json")});
    if (std::string(cmd) == "baseline") args.insert(args.end(), {"--method", "INTR"});
    const Run r = run(args, dir);
    INFO(r.err);
    CHECK(r.status == 1);
    CHECK(r.err.find("text too short for a copy span") != std::string::npos);
    CHECK(r.err.find("stage anchors") == std::string::npos);  // no search ran
    CHECK(r.err.find("held-out: scoring") == std::string::npos);
    CHECK(!fs::exists(dir / (std::string(cmd) + ".json")));
  }
  // Without --report the same settings run (the calibration half is long enough).
  std::vector<std::string> args{"select"};
  args.insert(args.end(), run_settings.begin(), run_settings.end());
  args.insert(args.end(), {"--ratio", "0.5", "--max-evaluations", "3", "-o", dir / "ok.json"});
  const Run ok = run(args, dir);
  INFO(ok.err);
  CHECK(ok.status == 0);
}

TEST_CASE("a mask written to a device keeps its checkpoint in the working directory, never beside the device") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty() || !fs::exists("/dev/full")) return;
  TempDir dir;
  // Run in `dir`: the checkpoint goes to the working directory.
  const std::vector<std::string> in_dir{"/bin/sh", "-c", "cd \"$0\" && exec \"$@\"", dir.path().string()};
  const Run r = Process(small_select(m, t) + std::vector<std::string>{"--max-evaluations", "3", "-o", "/dev/full"},
                        dir.path(), {}, shipped, in_dir)
                    .wait();
  INFO(r.err);
  CHECK(r.status == 1);
  CHECK(r.err.find("/dev/full: write failed: No space left on device") != std::string::npos);
  CHECK(r.err.find("the search is kept in 'bosch-select.checkpoint'") != std::string::npos);
  CHECK(!fs::exists("/dev/full.checkpoint"));
  CHECK(!fs::exists("/dev/full.checkpoint.run.json"));
  CHECK(fs::exists(dir / "bosch-select.checkpoint"));
  // The message's way out: resume that checkpoint into a file.
  const Run again = run(small_select(m, t) + std::vector<std::string>{"--max-evaluations", "3", "-o", dir / "m.json",
                                                                      "--resume", "--checkpoint",
                                                                      dir / "bosch-select.checkpoint"},
                        dir);
  INFO(again.err);
  CHECK(again.status == 0);
  CHECK(again.err.find("(3 replayed)") != std::string::npos);
  CHECK(fs::exists(dir / "m.json"));
}
