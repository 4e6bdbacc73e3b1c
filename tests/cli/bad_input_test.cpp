// Bad inputs that used to exit 0 with a wrong result, fail only after the
// work, or say the wrong thing: one TEST_CASE per class (the numbered groups of
// docs/cli.md's "Bad input" section). Each asserts the exit code, that the
// message names the option and the path, that no output or temporary file is
// left, and, where it matters, that the check came before the model loaded
// (the model path does not exist, so a later check could not be reached).
#include "cli_support.hpp"

#include <bosch/bosch.hpp>
#include <bosch/io/mask_io.hpp>

#include <sys/stat.h>
#include <sys/types.h>

using namespace bosch::test::cli;

namespace {

void check_error(const Run& r, int status, const std::string& cmd, const std::vector<std::string>& needles) {
  INFO("stderr: " << r.err);
  CHECK(r.status == status);
  CHECK(one_line(r.err));
  CHECK(r.err.rfind("bosch " + cmd + ": ", 0) == 0);
  for (const auto& n : needles) CHECK_MESSAGE(r.err.find(n) != std::string::npos, "missing: " << n);
}

/// The names in `dir` (files left behind), sorted.
std::vector<std::string> names(const fs::path& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename().string();
    if (n.rfind("stdout.", 0) == 0 || n.rfind("stderr.", 0) == 0) continue;  // the harness's own
    out.push_back(n);
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string good_mask(const TempDir& dir) {
  bosch::HeadMask m(bosch::HeadLayout{2, 4, 2});
  m.set(0, 1, true);
  const std::string p = dir / "good.json";
  bosch::io::write_mask_json(p, m);
  return p;
}

}  // namespace

TEST_CASE("1: an output that is a symlink is written through it; a device is written in place, never replaced") {
  TempDir dir;
  const std::string good = good_mask(dir);
  fs::create_directory(dir / "real");
  fs::create_symlink(fs::path("real") / "target.grid", dir / "link.grid");  // dangling, relative
  Run r = run({"convert", good, dir / "link.grid"}, dir);
  INFO(r.err);
  CHECK(r.status == 0);
  CHECK(fs::is_symlink(dir / "link.grid"));
  CHECK(fs::is_regular_file((dir.path() / "real" / "target.grid")));
  CHECK(slurp((dir.path() / "real" / "target.grid")).find('S') != std::string::npos);
  // Written again: the link stays, the target is replaced.
  r = run({"convert", good, dir / "link.grid", "--to", "tsv"}, dir);
  CHECK(r.status == 0);
  CHECK(fs::is_symlink(dir / "link.grid"));
  CHECK(slurp((dir.path() / "real" / "target.grid")).find('\t') != std::string::npos);
  CHECK(names(dir.path() / "real") == std::vector<std::string>{"target.grid"});

  // A character device: written in place (/dev/null stays a device, also
  // through a link to it).
  fs::create_symlink("/dev/null", dir / "mynull");
  r = run({"convert", good, dir / "mynull", "--to", "grid"}, dir);
  CHECK(r.status == 0);
  CHECK(fs::is_symlink(dir / "mynull"));
  CHECK(fs::is_character_file("/dev/null"));
  r = run({"convert", good, "/dev/null", "--to", "grid"}, dir);
  CHECK(r.status == 0);
  CHECK(fs::is_character_file("/dev/null"));

  // A FIFO is written in place for its reader.
  REQUIRE(::mkfifo((dir / "pipe").c_str(), 0600) == 0);
  Process writer({"convert", good, dir / "pipe", "--to", "grid"}, dir.path());
  const std::string piped = slurp(dir / "pipe");  // opens the read end: the writer proceeds
  CHECK(writer.wait().status == 0);
  CHECK(piped.find('S') != std::string::npos);
  CHECK(fs::is_fifo(dir / "pipe"));
}

TEST_CASE("2: two outputs on one path are refused before the model loads, naming both options") {
  TempDir dir;
  const std::string m = dir / "never-read.gguf";
  auto sel = [&](std::vector<std::string> extra) {
    return run(std::vector<std::string>{"select", "--model", m} + extra, dir);
  };
  check_error(sel({"-o", dir / "s.json", "--log", dir / "s.json"}), 2, "select",
              {"--out and --log name the same file", "s.json"});
  check_error(sel({"-o", dir / "s.json", "--checkpoint", dir / "s.json"}), 2, "select",
              {"--out and --checkpoint name the same file"});
  check_error(sel({"-o", dir / "s.json", "--svg", dir / "s.json"}), 2, "select", {"--out and --svg"});
  // The same file by another name (a symlink, "./") is the same file.
  fs::create_symlink("s.json", dir / "alias.json");
  check_error(sel({"-o", dir / "s.json", "--log", dir / "alias.json"}), 2, "select", {"--out and --log"});
  check_error(sel({"-o", dir / "s.json", "--log", dir / "./s.json"}), 2, "select", {"--out and --log"});
  check_error(run({"baseline", "--model", m, "--method", "PROXY", "-o", dir / "b.json", "--scores", dir / "b.json"},
                  dir),
              2, "baseline", {"--out and --scores"});
  CHECK(names(dir.path()) == std::vector<std::string>{"alias.json"});
}

TEST_CASE("3: a directory where a file is expected is named at once, before any work") {
  TempDir dir;
  fs::create_directory(dir / "d.cfg");
  fs::create_directory(dir / "outdir");
  const std::string m = dir / "never-read.gguf";
  check_error(run({"select", "--model", m, "--config", dir / "d.cfg"}, dir), 2, "select",
              {"--config", "d.cfg", "is a directory"});
  check_error(run({"select", "--model", m, "-o", dir / "outdir"}, dir), 1, "select",
              {"--out", "outdir", "is a directory"});
  check_error(run({"select", "--model", m, "--log", dir / "outdir"}, dir), 1, "select",
              {"--log", "outdir", "is a directory"});
  check_error(run({"select", "--model", m, "--checkpoint", dir / "outdir"}, dir), 1, "select",
              {"--checkpoint", "outdir", "is a directory"});
  check_error(run({"select", "--model", m, "--text-files", dir / "outdir"}, dir), 1, "select",
              {"--text-files", "outdir", "is a directory"});
  // (A directory given as IN is read as a kvpress pattern: its missing file is named.)
  check_error(run({"convert", dir / "outdir", dir / "x.grid"}, dir), 1, "convert", {"outdir", "config.json"});
  check_error(run({"convert", good_mask(dir), dir / "outdir"}, dir), 1, "convert", {"outdir", "is a directory"});
  // A checkpoint that is a directory, on resume.
  check_error(run({"select", "--model", m, "--checkpoint", dir / "outdir", "--resume"}, dir), 1, "select",
              {"outdir", "is a directory"});
  CHECK(fs::is_directory(dir / "outdir"));
  CHECK(fs::is_empty(dir / "outdir"));
}

TEST_CASE("4: text files are checked whatever the tasks: missing, and not UTF-8 text, with the byte offset") {
  TempDir dir;
  const std::string m = dir / "never-read.gguf";
  check_error(run({"select", "--model", m, "--tasks", "passkey", "--text-files", dir / "nope.txt"}, dir), 1,
              "select", {"--text-files", "nope.txt", "no such file"});
  {
    std::ofstream bin(dir / "bin.txt", std::ios::binary);
    bin << "Some text first.\n";
    bin.put(static_cast<char>(0xff));
    bin << "rest";
  }
  check_error(run({"select", "--model", m, "--text-files", dir / "bin.txt"}, dir), 1, "select",
              {"--text-files", "bin.txt", "not UTF-8 text", "byte offset 17"});
  {
    std::ofstream nul(dir / "nul.txt", std::ios::binary);
    nul << "A";
    nul.put('\0');
  }
  check_error(run({"select", "--model", m, "--text-files", dir / "nul.txt"}, dir), 1, "select",
              {"nul.txt", "NUL byte", "byte offset 1"});
}

TEST_CASE("5: negative values of unsigned options and ratios that leave nothing to choose are refused") {
  TempDir dir;
  const std::string m = dir / "never-read.gguf";
  check_error(run({"select", "--model", m, "--task-seed", "-1"}, dir), 2, "select",
              {"--task-seed", "expected a non-negative integer, got '-1'"});
  check_error(run({"select", "--model", m, "--task-seed=-7"}, dir), 2, "select", {"--task-seed", "'-7'"});
  check_error(run({"select", "--model", m, "--checkpoint-every", "-1"}, dir), 2, "select", {"--checkpoint-every"});
  {
    std::ofstream cfg(dir / "neg.cfg");
    cfg << "task-seed = -3\n";
  }
  check_error(run({"select", "--model", m, "--config", dir / "neg.cfg"}, dir), 2, "select",
              {"neg.cfg", "--task-seed", "'-3'"});
  // stories260K: 5 layers x 4 KV heads = 20 heads.
  const std::string model = bosch::test::cli::model();
  check_error(run({"select", "--model", model, "--ratio", "1e-9", "-o", dir / "m.json"}, dir), 2, "select",
              {"--ratio", "gives 0 of 20 KV heads", "0.05 (1 head)", "0.95 (19 heads)"});
  check_error(run({"select", "--model", model, "--ratio", "0.99", "-o", dir / "m.json"}, dir), 2, "select",
              {"--ratio", "gives 20 of 20 KV heads"});
  check_error(run({"baseline", "--model", model, "--method", "RAND", "--ratio", "0.99", "-o", dir / "m.json"}, dir),
              2, "baseline", {"--ratio", "gives 20 of 20"});
  CHECK(!fs::exists(dir / "m.json"));
}

TEST_CASE("6 and 11: an earlier checkpoint is never discarded silently; only the files asked for remain") {
  TempDir dir;
  const std::string model = bosch::test::cli::model(), text = bosch::test::cli::text();
  const auto args = small_select(model, text) + std::vector<std::string>{"-o", dir / "m.json"};
  // Interrupted: the checkpoint stays (to resume), the lock file does not.
  Run cut = run_with_hooks(args + std::vector<std::string>{"--stop-after", "5"}, dir);
  REQUIRE(cut.status == 130);
  CHECK(fs::exists(dir / "m.json.checkpoint"));
  CHECK(!fs::exists(dir / "m.json.checkpoint.lock"));
  // The same command again without --resume: refused, naming the checkpoint and both ways on.
  check_error(run(args, dir), 2, "select", {"m.json.checkpoint", "--resume", "--fresh"});
  CHECK(fs::exists(dir / "m.json.checkpoint"));
  check_error(run(args + std::vector<std::string>{"--resume", "--fresh"}, dir), 2, "select", {"exclude each other"});
  // --fresh discards it and starts over; afterwards only the mask remains.
  Run fresh = run(args + std::vector<std::string>{"--fresh"}, dir);
  INFO(fresh.err);
  REQUIRE(fresh.status == 0);
  CHECK(names(dir.path()) == std::vector<std::string>{"m.json"});

  // An explicit --checkpoint stays after success, with the run identity that
  // a later --resume is checked against; its lock does not.
  const auto named = small_select(model, text) +
                     std::vector<std::string>{"-o", dir / "n.json", "--checkpoint", dir / "n.ckpt"};
  REQUIRE(run(named, dir).status == 0);
  CHECK(names(dir.path()) == std::vector<std::string>{"m.json", "n.ckpt", "n.ckpt.run.json", "n.json"});
  // ... and is then an earlier run's checkpoint like any other.
  check_error(run(named, dir), 2, "select", {"n.ckpt", "--resume"});
}

TEST_CASE("7: more threads than the hardware has are capped, with a warning") {
  TempDir dir;
  const Run r = run({"logits", bosch::test::cli::model(), "1", "2", "--threads", "10000"}, dir);
  INFO(r.err);
  CHECK(r.status == 0);
  CHECK(r.err.find("warning: 10000 threads asked for; using the ") != std::string::npos);
}

TEST_CASE("8 and 9: empty, unwritable and overlong output paths are refused before the model loads") {
  TempDir dir;
  const std::string m = dir / "never-read.gguf";
  check_error(run({"select", "--model", m, "-o", ""}, dir), 2, "select", {"--out", "empty path"});
  check_error(run({"select", "--model", m, "--log", ""}, dir), 2, "select", {"--log", "empty path"});
  check_error(run({"select", "--model", m, "-o", "/proc/x"}, dir), 1, "select", {"--out", "/proc/x"});
  check_error(run({"select", "--model", m, "-o", dir / std::string(300, 'a')}, dir), 1, "select",
              {"--out", "file name too long"});
  check_error(run({"select", "--model", m, "-o", dir / "m.json", "--svg", dir / "no/such/dir/m.svg"}, dir), 1,
              "select", {"--svg", "does not exist"});
  check_error(run({"baseline", "--model", m, "--method", "PROXY", "--scores", dir / "no/s.json"}, dir), 1,
              "baseline", {"--scores", "does not exist"});
  fs::create_directory(dir.path() / "ro");
  {
    std::ofstream f(dir.path() / "ro" / "file");
  }
  check_error(run({"compare", "--model", m, "-o", (dir.path() / "ro" / "file" / "sub").string()}, dir), 1, "compare",
              {"--out", "is not a directory"});
  CHECK(names(dir.path()) == std::vector<std::string>{"ro"});
}

TEST_CASE("10: messages say what is wrong") {
  TempDir dir;
  const std::string model = bosch::test::cli::model();
  check_error(run({"logits", model, "1", "-1"}, dir), 2, "logits", {"token id -1 outside the vocabulary [0, 512)"});
  check_error(run({"convert", "--layout", "5x8x3", dir / "x.tsv", dir / "y.json"}, dir), 2, "convert",
              {"--layout", "8 query heads are not a multiple of 3 KV heads"});
  // A mask whose metadata asks for an impossible context: the note says where it came from.
  bosch::HeadMask mask(bosch::HeadLayout{5, 8, 4});
  mask.set(0, 0, true);
  bosch::io::write_mask_json(dir / "big.json", mask, nlohmann::json{{"context", 2000000}});
  check_error(run({"evaluate", model, "--mask", dir / "big.json"}, dir), 2, "evaluate",
              {"--context", "(from the mask's metadata)"});
}

TEST_CASE("12: an export refuses a window or sink count in the mask's metadata that is no integer") {
  TempDir dir;
  bosch::HeadMask mask(bosch::HeadLayout{4, 4, 2});
  mask.set(1, 0, true);
  bosch::io::write_mask_json(dir / "sinks.json", mask, nlohmann::json{{"window", 64}, {"sinks", 2.5}});
  bosch::io::write_mask_json(dir / "window.json", mask, nlohmann::json{{"window", "64"}});
  // Before: read as absent, so the pattern said sink_size 0 (exit 0).
  check_error(run({"convert", dir / "sinks.json", "--to", "kvpress", "-o", dir / "pattern"}, dir), 1, "convert",
              {"sinks.json", "metadata.sinks: expected an integer, got 2.5"});
  CHECK_FALSE(fs::exists(dir / "pattern"));
  // Before: "the mask's metadata records no window", though it records one.
  check_error(run({"convert", dir / "window.json", "--to", "kvpress", "-o", dir / "pattern"}, dir), 1, "convert",
              {"window.json", "metadata.window: expected an integer, got \"64\""});
  // generate and logits read the same metadata: refused likewise, and a
  // window below 1 named as the metadata's (before: "no window size is recorded").
  const std::string model = bosch::test::cli::model();
  const bosch::HeadLayout layout{5, 8, 4};  // stories260K
  bosch::HeadMask small(layout);
  small.set(0, 0, true);
  bosch::io::write_mask_json(dir / "s.json", small, nlohmann::json{{"window", 8}, {"sinks", 2.5}});
  bosch::io::write_mask_json(dir / "w.json", small, nlohmann::json{{"window", -5}});
  check_error(run({"logits", model, "--mask", dir / "s.json", "1", "2"}, dir), 1, "logits",
              {"s.json", "metadata.sinks: expected an integer, got 2.5"});
  check_error(run({"generate", model, "--mask", dir / "w.json", "--prompt", "a", "--tokens", "1"}, dir), 1,
              "generate", {"w.json", "metadata.window: must be at least 1, got -5"});
  // An explicit --window / --sinks still wins over the metadata.
  const Run r = run({"convert", dir / "sinks.json", "--to", "kvpress", "--sinks", "4", "-o", dir / "pattern"}, dir);
  CHECK(r.status == 0);
  CHECK(nlohmann::json::parse(slurp(dir / "pattern/config.json"))["sink_size"] == 4);
}

TEST_CASE("13: an output never names an input: refused before any work, naming both options, input untouched") {
  TempDir dir;
  // Inputs with content that no command could read as what it expects: a
  // check after reading would fail otherwise (exit 1, another message).
  const std::string m = dir / "model.gguf";
  const std::string init = dir / "init.json";
  const std::string cfg = dir / "run.cfg";
  const std::string txt = dir / "t.txt";
  for (const auto& p : {m, init}) std::ofstream(p) << "precious\n";
  std::ofstream(cfg) << "window = 32\n";
  std::ofstream(txt) << "The text is read. It has sentences.\n";
  auto check_untouched = [&] {
    for (const auto& p : {m, init}) CHECK(slurp(p) == "precious\n");
    CHECK(slurp(cfg) == "window = 32\n");
    CHECK(slurp(txt) == "The text is read. It has sentences.\n");
  };
  auto sel = [&](std::vector<std::string> extra) {
    return run(std::vector<std::string>{"select", "--model", m} + extra, dir);
  };
  auto sel2 = [&](const std::string& model_path, std::vector<std::string> extra) {
    return run(std::vector<std::string>{"select", "--model", model_path} + extra, dir);
  };
  // Before: the model was replaced by the mask, the warm start by the log.
  check_error(sel({"-o", m}), 2, "select", {"--out names the same file as --model", "model.gguf"});
  check_error(sel({"-o", dir / "./model.gguf"}), 2, "select", {"--out", "--model"});
  fs::create_symlink("model.gguf", dir / "alias.gguf");
  check_error(sel({"-o", dir / "alias.gguf"}), 2, "select", {"--out", "--model"});
  fs::create_hard_link(m, dir / "hard.gguf");
  check_error(sel({"--svg", dir / "hard.gguf"}), 2, "select", {"--svg", "--model"});
  check_error(sel({"--init", init, "--log", init}), 2, "select", {"--log names the same file as --init", "init.json"});
  check_error(sel({"--config", cfg, "--checkpoint", cfg}), 2, "select", {"--checkpoint", "--config", "run.cfg"});
  check_error(sel({"--text-files", txt, "--svg", txt}), 2, "select", {"--svg", "--text-files", "t.txt"});
  // The default checkpoint (OUT.checkpoint) is an output too.
  check_error(run({"select", "--model", dir / "x.json.checkpoint", "-o", dir / "x.json"}, dir), 2, "select",
              {"--out's checkpoint", "--model"});
  check_error(run({"baseline", "--model", m, "--method", "PROXY", "--scores", m}, dir), 2, "baseline",
              {"--scores", "--model"});
  check_error(run({"convert", init, init}, dir), 2, "convert", {"OUT names the same file as IN", "init.json"});
  check_error(run({"convert", init, "--to", "gguf", "--model", m, "-o", m}, dir), 2, "convert", {"OUT", "--model"});
  std::ofstream(dir / "results.json") << "window = 32\n";
  check_error(run({"compare", m, "--config", dir / "results.json", "-o", dir.path().string()}, dir), 2, "compare",
              {"--out", "--config", "results.json"});
  check_untouched();
  CHECK_FALSE(fs::exists(dir / "x.json.checkpoint"));
  // A Hugging Face model directory: each file in it is an input.
  fs::create_directory(dir / "hf");
  for (const char* f : {"config.json", "tokenizer.json", "model.safetensors"})
    std::ofstream(dir / ("hf/" + std::string(f))) << "precious\n";
  check_error(sel2(dir / "hf", {"-o", dir / "hf/config.json"}), 2, "select", {"--out", "--model", "config.json"});
  check_error(sel2(dir / "hf", {"--log", dir / "hf/model.safetensors"}), 2, "select", {"--log", "model.safetensors"});
  for (const char* f : {"config.json", "tokenizer.json", "model.safetensors"})
    CHECK(slurp(dir / ("hf/" + std::string(f))) == "precious\n");
}

TEST_CASE("14: every write is checked, standard output included: a full disk is named, never exit 0") {
  TempDir dir;
  const std::string model = bosch::test::cli::model();
  const std::string good = good_mask(dir);
  auto full = [&](const std::string& cmd, const std::vector<std::string>& args) {
    INFO(cmd);
    check_error(run_stdout_to("/dev/full", args, dir), 1, cmd, {"<stdout>", "No space left on device"});
  };
  // Before: exit 0, nothing written, nothing said.
  full("logits", {"logits", model, "1", "2", "-q"});
  full("inspect", {"inspect", model});
  full("inspect", {"inspect", model, "--json"});
  bosch::HeadMask m(bosch::HeadLayout{5, 8, 4});  // stories260K
  m.set(0, 1, true);
  bosch::io::write_mask_json(dir / "m.json", m);
  full("evaluate", {"evaluate", model, "--mask", dir / "m.json", "--json", "--tasks", "copy", "--text-files",
                    bosch::test::cli::text(), "--context", "300", "--allow-long-context", "--held-out-samples", "1",
                    "--window", "32", "--threads", "1", "-q"});
  // These said "write failed" without the reason.
  full("convert", {"convert", good, "-", "--to", "grid"});
  full("generate", {"generate", model, "--prompt", "a", "--tokens", "2", "-q"});
  check_error(run({"convert", good, "/dev/full", "--to", "grid"}, dir), 1, "convert",
              {"/dev/full", "No space left on device"});
  // A working standard output still works.
  const Run r = run({"inspect", model}, dir);
  CHECK(r.status == 0);
  CHECK(r.out.find("fingerprint:") != std::string::npos);
}

TEST_CASE("15: every enumeration and number is validated where it is read") {
  TempDir dir;
  const std::string m = dir / "never-read.gguf";
  // Before: accepted (only an MPI run ever parsed it).
  check_error(run({"select", "--model", m, "--mpi-mode", "bogus"}, dir), 2, "select",
              {"--mpi-mode", "unknown mode 'bogus'", "samples, masks or auto"});
  check_error(run({"compare", m, "--mpi-mode", "rows", "-o", dir / "c"}, dir), 2, "compare", {"--mpi-mode", "'rows'"});
  // Before: empty tables, exit 0, and an empty folder created.
  check_error(run({"compare", m, "--report-only", "-o", dir / "nothing"}, dir), 1, "compare",
              {"--report-only", "no results.json", "nothing"});
  CHECK_FALSE(fs::exists(dir / "nothing"));
  fs::create_directory(dir / "empty");
  check_error(run({"compare", m, "--report-only", "-o", dir / "empty"}, dir), 1, "compare",
              {"no results.json", "empty"});
  CHECK(fs::is_empty(dir / "empty"));
}

TEST_CASE("16: every read is bounded and never blocks; config errors name the file and line") {
  TempDir dir;
  const std::string m = dir / "never-read.gguf";
  auto timed = [&](const std::vector<std::string>& args) {
    Process p(args, dir.path());
    return p.wait(30);  // before: blocked forever on opening the FIFO
  };
  REQUIRE(::mkfifo((dir / "fifo").c_str(), 0600) == 0);
  check_error(timed({"select", "--model", m, "--config", dir / "fifo"}), 2, "select", {"--config", "fifo", "FIFO"});
  check_error(timed({"select", "--model", m, "--text-files", dir / "fifo"}), 1, "select",
              {"--text-files", "fifo", "FIFO"});
  check_error(timed({"convert", dir / "fifo", dir / "x.grid", "--from", "json"}), 1, "convert", {"fifo", "FIFO"});
  check_error(timed({"paired", dir / "fifo", dir / "fifo"}), 1, "paired", {"fifo", "FIFO"});
  check_error(timed({"inspect", dir / "fifo"}), 1, "inspect", {"fifo", "not a regular file"});
  // The files of a Hugging Face directory too (before: blocked on config.json).
  fs::create_directory(dir / "hf");
  REQUIRE(::mkfifo((dir / "hf/config.json").c_str(), 0600) == 0);
  check_error(timed({"inspect", dir / "hf"}), 1, "inspect", {"config.json", "FIFO"});
  // Before: /dev/zero was read (2.2 GB) and the run went on with the config ignored.
  check_error(timed({"select", "--model", m, "--config", "/dev/zero"}), 2, "select",
              {"--config", "/dev/zero", "is a device"});
  // Size caps, named in the message, checked before reading (sparse files).
  auto sparse = [&](const std::string& name, std::uintmax_t bytes) {
    std::ofstream(dir / name) << "x";
    fs::resize_file(dir / name, bytes);
    return dir / name;
  };
  check_error(run({"select", "--model", m, "--config", sparse("big.cfg", (1u << 20) + 1)}, dir), 2, "select",
              {"--config", "big.cfg", "larger than the 1 MiB limit of a config file"});
  check_error(run({"convert", sparse("big.json", (64u << 20) + 1), dir / "x.grid"}, dir), 1, "convert",
              {"big.json", "larger than the 64 MiB limit of a mask file"});
  check_error(run({"select", "--model", m, "--text-files", sparse("big.txt", (256u << 20) + 1)}, dir), 1, "select",
              {"big.txt", "larger than the 256 MiB limit of a text file"});
  check_error(run({"paired", sparse("big-report.json", (256u << 20) + 1), dir / "b.json"}, dir), 1, "paired",
              {"big-report.json", "larger than the 256 MiB limit of an evaluate report"});
  // A UTF-8 byte-order mark is accepted (before: "unrecognised option 'ratio'");
  // each error names the file and the line.
  auto cfg = [&](const std::string& name, const std::string& text) {
    std::ofstream(dir / name, std::ios::binary) << text;
    return dir / name;
  };
  check_error(run({"select", "--model", m, "--config", cfg("bom.cfg", "\xEF\xBB\xBFratio = 0.5\nbogus = 3\n")}, dir),
              2, "select", {"bom.cfg:2: unrecognised option 'bogus'"});
  const std::string neg = cfg("neg.cfg", "\xEF\xBB\xBF# every\n\ncheckpoint-every = -1\n");
  check_error(run({"select", "--model", m, "--config", neg}, dir), 2, "select", {"neg.cfg:3: --checkpoint-every", "expected a non-negative integer"});
  check_error(run({"select", "--model", m, "--config", cfg("type.cfg", "ratio = 0.5\nwindow = abc\n")}, dir), 2,
              "select", {"type.cfg:2:", "window", "abc"});
  check_error(run({"select", "--model", m, "--config", cfg("noeq.cfg", "ratio = 0.5\n\nwindow 32\n")}, dir), 2,
              "select", {"noeq.cfg:3: expected 'name = value', got 'window 32'"});
}
