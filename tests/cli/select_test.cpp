// bosch select on the tiny real model; bosch inspect and bosch evaluate on it.
#include "cli_support.hpp"
#include "model/writers.hpp"

#include <bosch/bosch.hpp>
#include <bosch/io/mask_io.hpp>
#include <bosch/io/options_json.hpp>
#include <bosch/model/model.hpp>

#include <cmath>
#include <fstream>

using namespace bosch::test::cli;

TEST_CASE("select writes a mask with the exact ratio, its metadata, the log and the head map") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  const Run r = run(small_select(m, t) + std::vector<std::string>{"-o", dir / "mask.json", "--log",
                                                                  dir / "log.jsonl", "--svg", dir / "mask.svg"},
                    dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(r.out.empty());  // results go to files; progress to stderr
  CHECK(r.err.find("bosch [") != std::string::npos);  // progress lines
  CHECK(r.err.find("ETA") != std::string::npos);

  const bosch::model::Model loaded = bosch::model::load(m);
  const bosch::HeadLayout layout = loaded.config.layout();
  const auto file = bosch::io::read_mask_json(dir / "mask.json");
  CHECK(file.mask.layout() == layout);
  CHECK(file.mask.count() == bosch::target_count(layout, 0.5));  // exactly 10 of 20

  const auto& meta = file.metadata;
  CHECK(meta.at("model_fingerprint") == loaded.fingerprint);
  CHECK(meta.at("model_file") == "stories260K.gguf");
  CHECK(meta.at("model") == loaded.config.name);
  CHECK(meta.at("architecture") == "llama");  // what the hf and gguf exports check
  CHECK(meta.at("layout") == "5x8x4");
  CHECK(meta.at("target_ratio").get<double>() == 0.5);
  CHECK(meta.at("ratio").get<double>() == 0.5);
  CHECK(meta.at("window") == 32);
  CHECK(meta.at("sinks") == 0);
  CHECK(meta.at("seed") == 7);
  CHECK(meta.at("variant") == "full");
  CHECK(meta.at("tasks") == "copy");
  CHECK(meta.at("context") == 300);
  CHECK(meta.at("bosch_version") == bosch::version_string);
  CHECK(meta.at("stopped") == false);
  // The cost in tokens: samples of at most 300 tokens, most of a sample's rows past its shared
  // prefix of at most the 32-token window.
  const double per_forward = meta.at("forward_tokens").get<double>() / meta.at("forwards").get<double>();
  CHECK(per_forward >= 240);
  CHECK(per_forward <= 300);

  // The log: one record per evaluation, in order, consistent with the metadata.
  const auto log = read_jsonl(dir / "log.jsonl");
  REQUIRE(log.size() == meta.at("evaluations").get<std::size_t>());
  REQUIRE(log.size() >= 3);
  std::string mask_bits(file.mask.size(), '0');
  for (std::size_t i = 0; i < file.mask.size(); ++i) mask_bits[i] = file.mask[i] ? '1' : '0';
  bool found = false;
  for (std::size_t i = 0; i < log.size(); ++i) {
    const auto& e = log[i];
    CHECK(e.at("index") == i);
    const std::string bits = e.at("mask");
    CHECK(bits.size() == layout.size());
    CHECK(e.at("swa") == static_cast<std::size_t>(std::count(bits.begin(), bits.end(), '1')));
    CHECK(std::isfinite(e.at("score").get<double>()));
    CHECK(e.at("seconds").get<double>() >= 0);
    if (bits == mask_bits) {
      found = true;
      CHECK(e.at("score").get<double>() == meta.at("score").get<double>());
    }
  }
  CHECK(found);  // the chosen mask was evaluated and its score recorded
  CHECK(log[0].at("stage") == "anchors");
  CHECK(log[0].at("swa") == 0);
  CHECK(log[1].at("swa") == 20);
  CHECK(log[0].at("score").get<double>() == meta.at("anchor_full").get<double>());

  // The SVG head map: one cell per KV head, labelled axes, both colours counted.
  const std::string svg = slurp(dir / "mask.svg");
  CHECK(svg.rfind("<?xml", 0) == 0);
  CHECK(svg.find("</svg>") != std::string::npos);
  CHECK(svg.find(">layer<") != std::string::npos);
  CHECK(svg.find(">KV head<") != std::string::npos);
  CHECK(svg.find("SWA (10)") != std::string::npos);
  CHECK(svg.find("full (10)") != std::string::npos);
  std::size_t cells = 0;
  for (std::size_t p = svg.find("<title>"); p != std::string::npos; p = svg.find("<title>", p + 1)) ++cells;
  CHECK(cells == layout.size());

  // The default checkpoint is removed after a successful run; no temp files stay.
  for (const auto& e : fs::directory_iterator(dir.path())) {
    const std::string name = e.path().filename().string();
    INFO(name);
    CHECK(name.find(".tmp.") == std::string::npos);
    CHECK(name.find("checkpoint") == std::string::npos);
  }
}

TEST_CASE("select: quiet prints nothing; verbose adds stage summaries and evaluation lines; TSV by extension") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  const Run q = run(small_select(m, t) + std::vector<std::string>{"-q", "-o", dir / "mask.tsv"}, dir);
  CHECK(q.status == 0);
  CHECK(q.err.empty());
  CHECK(q.out.empty());
  const bosch::HeadMask tsv = bosch::io::read_mask_tsv(dir / "mask.tsv", 8);
  CHECK(tsv.count() == 10);

  const Run v = run(small_select(m, t) + std::vector<std::string>{"-v", "-o", dir / "mask.json"}, dir);
  CHECK(v.status == 0);
  CHECK(v.err.find("end of stage probes") != std::string::npos);
  CHECK(v.err.find("bosch: eval {") != std::string::npos);
  // Same seed, same mask, whatever the output form.
  CHECK(bosch::io::read_mask_json(dir / "mask.json").mask == tsv);

  // '-' writes the mask to stdout.
  const Run s = run(small_select(m, t) + std::vector<std::string>{"-q", "-o", "-", "--format", "grid"}, dir);
  CHECK(s.status == 0);
  CHECK(s.out == bosch::to_grid(tsv));
}

TEST_CASE("options from a config file; the command line wins") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  {
    std::ofstream cfg(dir / "run.cfg");
    cfg << "# a select configuration\nratio = 0.25\nwindow = 16\nsinks = 2\n";
  }
  const Run r = run(without(small_select(m, t), "--ratio") +
                        std::vector<std::string>{"--config", dir / "run.cfg", "-q", "-o", dir / "mask.json"},
                    dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto f = bosch::io::read_mask_json(dir / "mask.json");
  CHECK(f.mask.count() == 5);             // ratio 0.25 of 20, from the file
  CHECK(f.metadata.at("sinks") == 2);     // from the file
  CHECK(f.metadata.at("window") == 32);   // the command line wins over the file
}

TEST_CASE("inspect prints the layout from the configuration") {
  const std::string m = model();
  if (m.empty()) return;
  TempDir dir;
  const Run r = run({"inspect", m}, dir);
  REQUIRE(r.status == 0);
  CHECK(r.out.find("layout:          5x8x4") != std::string::npos);
  CHECK(r.out.find("architecture:    llama") != std::string::npos);
  const bosch::model::Model loaded = bosch::model::load(m);
  CHECK(r.out.find("fingerprint:     " + loaded.fingerprint) != std::string::npos);

  const Run j = run({"inspect", "--json", m}, dir);
  REQUIRE(j.status == 0);
  const auto doc = nlohmann::json::parse(j.out);
  CHECK(doc.at("layout").at("num_layers") == 5);
  CHECK(doc.at("layout").at("num_query_heads") == 8);
  CHECK(doc.at("layout").at("num_kv_heads") == 4);
  // The count from the configuration equals the loaded weights' count.
  CHECK(doc.at("parameters") == loaded.parameter_count());
  CHECK(doc.at("context_length") == loaded.config.max_position);
  CHECK(doc.at("tokenizer").at("tokens") == 512);
  CHECK(doc.at("fingerprint") == loaded.fingerprint);
}

TEST_CASE("inspect counts a Qwen3-MoE model's experts from the configuration as from the weights") {
  namespace w = bosch::test::writers;
  TempDir dir;
  w::TinySpec spec;
  spec.arch = bosch::model::Arch::qwen3moe;
  spec.layers = 3;
  spec.head_dim = 16;
  spec.dense_layers = {1};  // one dense FFN among the mixtures
  const auto m = w::random_model(spec, bosch::test::seed(73));
  w::write_gguf(m, dir / "moe.gguf");
  const Run config = run({"inspect", "--json", dir / "moe.gguf"}, dir);
  const Run loaded = run({"inspect", "--json", "--load", dir / "moe.gguf"}, dir);
  INFO(config.err << loaded.err);
  REQUIRE(config.status == 0);
  REQUIRE(loaded.status == 0);
  const auto a = nlohmann::json::parse(config.out), b = nlohmann::json::parse(loaded.out);
  CHECK(a.at("parameters_source") == "configuration");
  CHECK(b.at("parameters_source") == "weights");
  // Every expert counts, active or not: the fp32 elements the file holds.
  CHECK(a.at("parameters") == m.weights.bytes() / sizeof(float));
  CHECK(a.at("parameters") == b.at("parameters"));
}

TEST_CASE("evaluate scores a mask with the settings recorded in it") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  REQUIRE(run(small_select(m, t) + std::vector<std::string>{"-q", "-o", dir / "mask.json"}, dir).status == 0);
  const Run r = run({"evaluate", m, "--mask", dir / "mask.json", "--text-files", t, "--held-out-samples", "2",
                     "--threads", "1", "--references", "--json", "-q"},
                    dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto doc = nlohmann::json::parse(r.out);
  CHECK(doc.at("window") == 32);  // from the mask's metadata
  CHECK(doc.at("suite").at("tasks") == "copy");
  CHECK(doc.at("suite").at("context") == 300);
  CHECK(doc.at("swa_heads") == 10);
  const auto& all = doc.at("held_out").at("all");
  CHECK(all.at("samples") == 2);
  CHECK(all.at("mean_logprob").get<double>() < 0);
  CHECK(all.at("probability").get<double>() == doctest::Approx(std::exp(all.at("mean_logprob").get<double>())));
  const double acc = all.at("accuracy").get<double>();
  CHECK((acc >= 0 && acc <= 1));
  REQUIRE(doc.at("references").contains("all-full"));
  REQUIRE(doc.at("references").contains("all-SWA"));
  // The copy task's answer is a span seen 200+ tokens earlier: the all-SWA
  // model (window 32) cannot see it and scores below full attention (the
  // fixture README measures 3.97 vs 4.26 nats for this effect).
  CHECK(doc["references"]["all-full"]["all"]["mean_logprob"].get<double>() >
        doc["references"]["all-SWA"]["all"]["mean_logprob"].get<double>());

  // Overriding a recorded setting.
  const Run w = run({"evaluate", m, "--mask", dir / "mask.json", "--text-files", t, "--held-out-samples", "1",
                     "--threads", "1", "--window", "64", "--no-accuracy", "--json", "-q"},
                    dir);
  REQUIRE(w.status == 0);
  CHECK(nlohmann::json::parse(w.out).at("window") == 64);

  // The text table.
  const Run table = run({"evaluate", m, "--mask", dir / "mask.json", "--text-files", t, "--held-out-samples", "1",
                         "--threads", "1", "--no-accuracy"},
                        dir);
  REQUIRE(table.status == 0);
  CHECK(table.out.find("log-prob") != std::string::npos);
  CHECK(table.out.find("task copy") != std::string::npos);
}

TEST_CASE("evaluate reads a mask searched in bf16: the recorded kernel name, fp32 for the report") {
  const std::string m = model(), t = text();
  REQUIRE(!m.empty());
  REQUIRE(!t.empty());
  TempDir dir;
  REQUIRE(run(small_select(m, t) + std::vector<std::string>{"-q", "--precision", "bf16", "-o", dir / "mask.json"}, dir)
              .status == 0);
  const auto meta = bosch::io::read_mask_json(dir / "mask.json").metadata;
  // What ran: "bf16 (avx512-bf16)", "bf16 (amx-bf16)" or "bf16 (emulated)", by CPU.
  REQUIRE(meta.at("precision").get<std::string>().rfind("bf16 (", 0) == 0);
  const Run r = run({"evaluate", m, "--mask", dir / "mask.json", "--text-files", t, "--held-out-samples", "1",
                     "--threads", "1", "--no-accuracy", "--json", "-q"},
                    dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  CHECK(nlohmann::json::parse(r.out).at("window") == 32);
}

TEST_CASE("select --shared-prefix: the same search, and its forwards count the prefix passes") {
  const std::string m = model(), t = text();
  REQUIRE_MESSAGE(!m.empty(), "the stories260K fixture is missing (scripts/fetch-test-data)");
  REQUIRE(!t.empty());
  TempDir dir;
  auto select = [&](const char* shared, const std::string& name) {
    const Run r = run(small_select(m, t) + std::vector<std::string>{"-q", "--precision", "fp32", "--max-evaluations",
                                                                    "8", "--shared-prefix=" + std::string(shared),
                                                                    "--log", dir / (name + ".jsonl"), "-o",
                                                                    dir / (name + ".json")},
                      dir);
    INFO(r.err);
    REQUIRE(r.status == 0);
    return bosch::io::read_mask_json(dir / (name + ".json"));
  };
  const auto with = select("true", "with"), without = select("false", "without");
  // fp32 rounding only: the same masks in the same order, hence the same work
  // but for the two samples' prefix passes (P = 32 of ~300 rows through 5
  // layers: ceil(32 * 5 / n) = 1 layer application each, 2 / 5 of a forward).
  auto logged_masks = [&](const std::string& file) {
    std::vector<std::string> masks;
    std::ifstream in(dir / file);
    for (std::string line; std::getline(in, line);)
      if (!line.empty()) masks.push_back(nlohmann::json::parse(line).at("mask").get<std::string>());
    return masks;
  };
  const auto masks = logged_masks("with.jsonl");
  REQUIRE(masks.size() >= 3);
  REQUIRE(masks == logged_masks("without.jsonl"));
  CHECK(with.mask == without.mask);
  CHECK(with.metadata.at("shared_prefix").get<bool>());
  CHECK_FALSE(without.metadata.at("shared_prefix").get<bool>());
  CHECK(with.metadata.at("forwards").get<double>() - without.metadata.at("forwards").get<double>() ==
        doctest::Approx(0.4));
}

TEST_CASE("a boolean set in a config file is switched off on the command line") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  {
    // As scripts/main-job.cfg: the held-out report on.
    std::ofstream cfg(dir / "job.cfg");
    cfg << "report = true\nheld-out-samples = 1\n";
  }
  const auto args = small_select(m, t) + std::vector<std::string>{"--config", dir / "job.cfg", "-q"};
  const Run on = run(args + std::vector<std::string>{"-o", dir / "on.json"}, dir);
  INFO(on.err);
  REQUIRE(on.status == 0);
  CHECK(on.out.find("held-out (") != std::string::npos);  // from the file
  CHECK(bosch::io::read_mask_json(dir / "on.json").metadata.contains("held_out"));

  for (const char* off : {"--report=false", "--report=no", "--report=0"}) {
    INFO(off);
    const Run r = run(args + std::vector<std::string>{"-o", dir / "off.json", off}, dir);
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK(r.out.empty());  // the command line wins over the file
    CHECK(!bosch::io::read_mask_json(dir / "off.json").metadata.contains("held_out"));
  }
  // --report=true and the bare flag on the command line, without the file.
  const Run bare = run(small_select(m, t) + std::vector<std::string>{"-q", "--held-out-samples", "1", "--report",
                                                                     "-o", dir / "bare.json"},
                       dir);
  REQUIRE(bare.status == 0);
  CHECK(bare.out.find("held-out (") != std::string::npos);
  CHECK(run(small_select(m, t) + std::vector<std::string>{"--report=maybe"}, dir).status == 2);
}

TEST_CASE("search options from the field table: defaults, booleans and enums") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  // Every search field lands in the mask's metadata (search_options): set a
  // few of each kind, including a boolean switched off and a list.
  const Run r = run(small_select(m, t) + std::vector<std::string>{"-q", "-o", dir / "m.json", "--accept-equal=false",
                                                                  "--ratio-levels", "0.25, 0.5,0.75", "--group-init",
                                                                  "random", "--alpha", "2.5", "--group-rounds", "2"},
                    dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto meta = bosch::io::read_mask_json(dir / "m.json").metadata;
  const auto& so = meta.at("search_options");
  CHECK(so.at("accept_equal") == false);
  CHECK(so.at("ratio_levels") == nlohmann::json::array({0.25, 0.5, 0.75}));
  CHECK(so.at("group_init") == "random");
  CHECK(so.at("alpha") == 2.5);
  CHECK(so.at("group_rounds") == 2);
  CHECK(so.at("probe_budget") == 4);          // from small_select
  CHECK(so.at("return_best_seen") == true);   // the default
  // Every field not given keeps the Options default.
  const nlohmann::json defaults = bosch::options_to_json(bosch::Options{});
  for (const char* key : {"max_vars", "lambda", "max_swaps", "restart_after", "inner_solver", "penalty_scope"}) {
    INFO(key);
    CHECK(so.at(key) == defaults.at(key));
  }
}

TEST_CASE("select --deploy-context: calibrates at the recipe's lengths, records it; evaluate reports there") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  const auto args = without(small_select(m, t), "--context") +
                    std::vector<std::string>{"--deploy-context", "600", "-o", dir / "mask.json"};
  const Run r = run(args, dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  // 600 / 4 rounded down to 256 tokens is 0, raised to the floor of 512, halved: 256 and 512.
  CHECK(r.err.find("calibration contexts 256,512: the recipe for a mask deployed at 600 tokens with window 32") !=
        std::string::npos);
  CHECK(r.err.find("bosch evaluate") != std::string::npos);
  const auto meta = bosch::io::read_mask_json(dir / "mask.json").metadata;
  CHECK(meta.at("context") == nlohmann::json::array({256, 512}));
  CHECK(meta.at("deploy_context") == 600);
  // Samples of 256 and 512 tokens: the tokens per forward lie between (less the 32-token prefix).
  const double per_forward = meta.at("forward_tokens").get<double>() / meta.at("forwards").get<double>();
  CHECK(per_forward > 256 - 32);
  CHECK(per_forward < 512);
  CHECK(per_forward > 300);  // both lengths count, not only the shorter

  // evaluate --mask reports at the deployment context; --context still wins.
  const std::vector<std::string> eval{"evaluate", m, "--mask", dir / "mask.json", "--text-files", t,
                                      "--held-out-samples", "1", "--threads", "1", "--no-accuracy", "--json", "-q"};
  const Run at = run(eval, dir);
  INFO(at.err);
  REQUIRE(at.status == 0);
  CHECK(nlohmann::json::parse(at.out).at("suite").at("context") == 600);
  const Run given = run(eval + std::vector<std::string>{"--context", "300", "--allow-long-context"}, dir);
  INFO(given.err);
  REQUIRE(given.status == 0);
  CHECK(nlohmann::json::parse(given.out).at("suite").at("context") == 300);

  // A baseline for the same deployment: the same calibration lengths, and evaluate reports at L too.
  const Run base = run({"baseline", "-m", m, "--method", "PROXY", "--ratio", "0.5", "--tasks", "copy", "--text-files", t,
                        "--window", "32", "--deploy-context", "600", "--allow-long-context", "--threads", "1", "-q",
                        "-o", dir / "proxy.json"},
                       dir);
  INFO(base.err);
  REQUIRE(base.status == 0);
  const auto base_meta = bosch::io::read_mask_json(dir / "proxy.json").metadata;
  CHECK(base_meta.at("context") == nlohmann::json::array({256, 512}));
  CHECK(base_meta.at("deploy_context") == 600);

  // Both on one command line: the one error, before any work.
  const Run both = run(small_select(m, t) + std::vector<std::string>{"--deploy-context", "600", "-o", dir / "other.json"}, dir);
  INFO(both.err);
  CHECK(both.status == 2);
  CHECK(both.err.find("--deploy-context") != std::string::npos);
  CHECK(both.err.find("not both") != std::string::npos);
  CHECK(!fs::exists(dir / "other.json"));
  // A deployment context the window covers.
  const Run covered = run(without(without(args, "--deploy-context"), "-o") +
                              std::vector<std::string>{"--deploy-context", "32", "-o", dir / "other.json"},
                          dir);
  INFO(covered.err);
  CHECK(covered.status == 2);
  CHECK(covered.err.find("--deploy-context") != std::string::npos);
  CHECK(!fs::exists(dir / "other.json"));
}
