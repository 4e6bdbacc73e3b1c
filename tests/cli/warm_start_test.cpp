// bosch select's warm starts (--init, --candidates) and multi-ratio runs
// (--ratios, --ratio-order, --warm-start) on the tiny real model.
#include "cli_support.hpp"

#include <bosch/bosch.hpp>
#include <bosch/io/mask_io.hpp>
#include <bosch/io/options_json.hpp>

using namespace bosch::test::cli;

namespace {

/// The score of a mask in a JSON evaluation log (NaN when absent).
double logged_score(const std::vector<nlohmann::json>& log, const bosch::HeadMask& m) {
  std::string bits(m.size(), '0');
  for (std::size_t i = 0; i < m.size(); ++i) bits[i] = m[i] ? '1' : '0';
  for (const auto& e : log)
    if (e.at("mask") == bits) return e.at("score").get<double>();
  return std::nan("");
}

}  // namespace

TEST_CASE("select --init: the given masks are scored first and the result is never worse on the calibration set") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  // Two starting masks of other ratios, in two formats.
  REQUIRE(run(without(small_select(m, t), "--ratio") +
                  std::vector<std::string>{"--ratio", "0.25", "-q", "-o", dir / "quarter.json"},
              dir)
              .status == 0);
  const auto quarter = bosch::io::read_mask_json(dir / "quarter.json").mask;
  bosch::HeadMask last_layers(quarter.layout());
  for (int l = 3; l < 5; ++l)
    for (int h = 0; h < 4; ++h) last_layers.set(l, h, true);
  last_layers.set(2, 0, true);
  last_layers.set(2, 1, true);  // 10 of 20: the target count, scored as it is
  {
    std::ofstream grid(dir / "last.txt");
    grid << bosch::to_grid(last_layers);
  }
  const Run r = run(small_select(m, t) + std::vector<std::string>{"-q", "--init", dir / "quarter.json", dir / "last.txt",
                                                                  "-o", dir / "mask.json", "--log", dir / "log.jsonl"},
                    dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto file = bosch::io::read_mask_json(dir / "mask.json");
  CHECK(file.mask.count() == 10);
  const auto& meta = file.metadata;
  const auto& ws = meta.at("warm_start");
  CHECK(ws.at("init_files") == nlohmann::json::array({dir / "quarter.json", dir / "last.txt"}));
  CHECK(ws.at("initial_masks") == 2);
  CHECK(ws.at("candidates").empty());
  // Both masks are in the search options (the checkpoint identity), as given.
  const auto& im = meta.at("search_options").at("initial_masks");
  REQUIRE(im.size() == 2);
  CHECK(im[0] == bosch::detail::mask_text(quarter));
  CHECK(im[1] == bosch::detail::mask_text(last_layers));
  // The seeds were scored (last_layers has the target count: scored as is);
  // the result is at least as good as the best of them.
  const auto log = read_jsonl(dir / "log.jsonl");
  std::size_t seeds = 0;
  for (const auto& e : log) seeds += e.at("stage") == "seeds" ? 1 : 0;
  CHECK(seeds == 2);
  CHECK(ws.at("evaluated").size() == 2);
  const double seed_score = logged_score(log, last_layers);
  REQUIRE(std::isfinite(seed_score));
  CHECK(meta.at("score").get<double>() >= seed_score);
  CHECK(meta.at("score").get<double>() >= ws.at("best_seed_score").get<double>());
}

TEST_CASE("select --init: a missing, malformed or other-layout file is refused before the search, naming it") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  auto sel = [&](const std::string& init) {
    return run(small_select(m, t) + std::vector<std::string>{"-q", "--init", init, "-o", dir / "mask.json"}, dir);
  };
  auto check_error = [&](const Run& r, const std::string& file, const std::string& needle) {
    INFO(r.err);
    CHECK(r.status == 1);
    CHECK(one_line(r.err));
    CHECK(r.err.find(file) != std::string::npos);
    CHECK(r.err.find(needle) != std::string::npos);
    CHECK(r.err.find("ETA") == std::string::npos);  // no search started
  };
  check_error(sel(dir / "missing.json"), dir / "missing.json", "");
  {
    std::ofstream bad(dir / "bad.json");
    bad << "{ \"mask\": [1, 0";
  }
  check_error(sel(dir / "bad.json"), dir / "bad.json", "");
  {
    // 5 layers x 3 KV heads: the model has 4 KV heads per layer.
    std::ofstream other(dir / "other.txt");
    other << bosch::to_grid(bosch::HeadMask(bosch::HeadLayout{5, 3, 3}));
  }
  check_error(sel(dir / "other.txt"), dir / "other.txt", "");
  {
    std::ofstream other(dir / "other.json");
    other << bosch::io::mask_to_json(bosch::HeadMask(bosch::HeadLayout{5, 8, 2})).dump();
  }
  check_error(sel(dir / "other.json"), dir / "other.json", "5x8x2");
  CHECK(!fs::exists(dir / "mask.json"));
}

TEST_CASE("select --candidates: cheap rankings start the search and are recorded with their cost") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  const Run bad = run(small_select(m, t) + std::vector<std::string>{"--candidates", "DCAM,ORACLE"}, dir);
  CHECK(bad.status == 2);
  CHECK(bad.err.find("--candidates: unknown candidate 'ORACLE'") != std::string::npos);

  const Run r = run(small_select(m, t) + std::vector<std::string>{"-q", "--candidates", "cheap,proxy,dcam", "-o",
                                                                  dir / "mask.json"},
                    dir);
  INFO(r.err);
  REQUIRE(r.status == 0);
  const auto meta = bosch::io::read_mask_json(dir / "mask.json").metadata;
  const auto& c = meta.at("warm_start").at("candidates");
  REQUIRE(c.size() == 5);  // DCAM, APL, QADA, RAZOR, PROXY (the second DCAM dropped)
  std::vector<std::string> names;
  for (const auto& e : c) names.push_back(e.at("name"));
  CHECK(names == std::vector<std::string>{"DCAM", "APL", "QADA", "RAZOR", "PROXY"});
  CHECK(c[0].at("forwards").get<double>() > 0);
  CHECK(c[0].at("evaluations") == 0);
  CHECK(c[4].at("evaluations") == 1 + 20);  // PROXY: all full + one per KV head
  CHECK(c[0].at("seconds").get<double>() >= 0);
  CHECK(meta.at("search_options").at("initial_masks").size() == 5);
  const auto& ws = meta.at("warm_start");
  CHECK(meta.at("score").get<double>() >= ws.at("best_seed_score").get<double>());
}

TEST_CASE("select --init: an interrupted run resumes to the same mask; other --init files are refused") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  bosch::HeadMask first_layers(bosch::HeadLayout{5, 8, 4});
  for (int l = 0; l < 3; ++l)
    for (int h = 0; h < 4; ++h)
      if (l * 4 + h < 10) first_layers.set(l, h, true);
  {
    std::ofstream tsv(dir / "init.tsv");
    tsv << bosch::io::mask_to_tsv(first_layers);
  }
  const auto args = small_select(m, t) + std::vector<std::string>{"-q", "--init", dir / "init.tsv"};
  REQUIRE(run(args + std::vector<std::string>{"-o", dir / "whole.json"}, dir).status == 0);

  const auto part = args + std::vector<std::string>{"-o", dir / "part.json"};
  const Run cut = run_with_hooks(part + std::vector<std::string>{"--stop-after", "5"}, dir);
  INFO(cut.err);
  REQUIRE(cut.status == 130);
  CHECK(cut.err.find("--init") != std::string::npos);  // the resume command repeats it
  REQUIRE(fs::exists(dir / "part.json.checkpoint"));

  // Another start mask: the checkpoint's search options differ.
  {
    std::ofstream tsv(dir / "other.tsv");
    tsv << bosch::io::mask_to_tsv(bosch::HeadMask::filled(first_layers.layout(), false));
  }
  const Run other = run(without(part, "--init") + std::vector<std::string>{"--init", dir / "other.tsv", "--resume"}, dir);
  CHECK(other.status == 2);
  CHECK(other.err.find("initial_masks") != std::string::npos);
  CHECK(one_line(other.err));
  const Run none = run(without(part, "--init") + std::vector<std::string>{"--resume"}, dir);
  CHECK(none.status == 2);
  CHECK(none.err.find("initial_masks") != std::string::npos);

  const Run resumed = run(part + std::vector<std::string>{"--resume"}, dir);
  INFO(resumed.err);
  REQUIRE(resumed.status == 0);
  const auto a = bosch::io::read_mask_json(dir / "whole.json"), b = bosch::io::read_mask_json(dir / "part.json");
  CHECK(a.mask == b.mask);
  CHECK(a.metadata.at("score") == b.metadata.at("score"));
  CHECK(a.metadata.at("evaluations") == b.metadata.at("evaluations"));
}

TEST_CASE("select --ratios: one mask per ratio, each warm-started from its neighbour, with the turnover") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  const auto base = without(small_select(m, t), "--ratio");
  // Usage errors first (nothing read).
  Run e = run(small_select(m, t) + std::vector<std::string>{"--ratios", "0.25,0.5"}, dir);
  CHECK(e.status == 2);
  CHECK(e.err.find("--ratio and --ratios exclude each other") != std::string::npos);
  e = run(base + std::vector<std::string>{"--ratios", "0.25,0.5", "-o", "-"}, dir);
  CHECK(e.status == 2);
  e = run(base + std::vector<std::string>{"--ratios", "0.25,1"}, dir);
  CHECK(e.status == 2);
  CHECK(e.err.find("--ratios: SWA ratio must lie in (0, 1)") != std::string::npos);
  e = run(base + std::vector<std::string>{"--ratios", "0.25,0.5", "--ratio-order", "sideways"}, dir);
  CHECK(e.status == 2);
  CHECK(e.err.find("--ratio-order") != std::string::npos);

  const Run up = run(base + std::vector<std::string>{"-q", "--ratios", "0.5,0.25", "-o", dir / "up.json", "--svg",
                                                     dir / "up.svg", "--log", dir / "up.jsonl"},
                     dir);
  INFO(up.err);
  REQUIRE(up.status == 0);
  for (const char* f : {"up-0.25.json", "up-0.5.json", "up-0.25.svg", "up-0.5.svg", "up-0.25.jsonl", "up-0.5.jsonl"})
    CHECK_MESSAGE(fs::exists(dir / f), f);
  const auto low = bosch::io::read_mask_json(dir / "up-0.25.json"), high = bosch::io::read_mask_json(dir / "up-0.5.json");
  CHECK(low.mask.count() == 5);
  CHECK(high.mask.count() == 10);
  // Run up: 0.25 first (no neighbour), then 0.5 from 0.25's mask.
  CHECK(low.metadata.at("warm_start").at("previous_ratio").is_null());
  CHECK(low.metadata.at("search_options").at("initial_masks").empty());
  CHECK(high.metadata.at("warm_start").at("previous_ratio") == 0.25);
  CHECK(high.metadata.at("search_options").at("initial_masks") ==
        nlohmann::json::array({bosch::detail::mask_text(low.mask)}));
  const auto& rr = high.metadata.at("ratio_run");
  CHECK(rr.at("order") == "up");
  CHECK(rr.at("ratios") == nlohmann::json::array({0.25, 0.5}));
  CHECK(rr.at("turnover_from_previous").get<double>() == doctest::Approx(bosch::turnover(low.mask, high.mask)));
  // The summary on stdout: one line per ratio, the turnover from the lower one.
  CHECK(up.out.find("turnover") != std::string::npos);
  char line[64];
  std::snprintf(line, sizeof line, "%.3f", bosch::turnover(low.mask, high.mask));
  CHECK(up.out.find(line) != std::string::npos);
  // The default checkpoints are gone after the last ratio.
  for (const auto& f : fs::directory_iterator(dir.path())) CHECK(f.path().string().find("checkpoint") == std::string::npos);

  // Run down: 0.5 first (as a single run at 0.5 would), then 0.25 from it.
  const Run down = run(base + std::vector<std::string>{"-q", "--ratios", "0.25,0.5", "--ratio-order", "down", "-o",
                                                       dir / "down.json"},
                       dir);
  INFO(down.err);
  REQUIRE(down.status == 0);
  const auto d_low = bosch::io::read_mask_json(dir / "down-0.25.json");
  const auto d_high = bosch::io::read_mask_json(dir / "down-0.5.json");
  CHECK(d_high.metadata.at("warm_start").at("previous_ratio").is_null());
  CHECK(d_low.metadata.at("warm_start").at("previous_ratio") == 0.5);
  REQUIRE(run(small_select(m, t) + std::vector<std::string>{"-q", "-o", dir / "single.json"}, dir).status == 0);
  CHECK(bosch::io::read_mask_json(dir / "single.json").mask == d_high.mask);
  // Without warm starts, 0.5 of an upward run is the single run's mask too.
  const Run cold = run(base + std::vector<std::string>{"-q", "--ratios", "0.25,0.5", "--warm-start=false", "-o",
                                                       dir / "cold.json"},
                       dir);
  REQUIRE(cold.status == 0);
  CHECK(bosch::io::read_mask_json(dir / "cold-0.5.json").mask == d_high.mask);
  CHECK(bosch::io::read_mask_json(dir / "cold-0.5.json").metadata.at("search_options").at("initial_masks").empty());
}

TEST_CASE("select --ratios: interrupted in the second ratio, --resume finishes both as an uninterrupted run") {
  const std::string m = model(), t = text();
  if (m.empty() || t.empty()) return;
  TempDir dir;
  const auto args = without(small_select(m, t), "--ratio") + std::vector<std::string>{"-q", "--ratios", "0.25,0.5"};
  REQUIRE(run(args + std::vector<std::string>{"-o", dir / "whole.json"}, dir).status == 0);
  const std::size_t first = bosch::io::read_mask_json(dir / "whole-0.25.json").metadata.at("evaluations");
  const std::size_t second = bosch::io::read_mask_json(dir / "whole-0.5.json").metadata.at("evaluations");
  const auto part = args + std::vector<std::string>{"-o", dir / "part.json"};
  // The hook counts the evaluations of each search (replayed ones included):
  // at 3 the run stops in the first ratio ...
  Run cut = run_with_hooks(part + std::vector<std::string>{"--stop-after", "3"}, dir);
  INFO(cut.err);
  REQUIRE(cut.status == 130);
  CHECK(cut.err.find("at ratio 0.25") != std::string::npos);
  CHECK(!fs::exists(dir / "part-0.25.json"));
  // ... and after more than the first ratio's evaluations, in the second one,
  // once the resume has finished the first.
  REQUIRE(first + 1 < second);
  cut = run_with_hooks(part + std::vector<std::string>{"--resume", "--stop-after", std::to_string(first + 1)}, dir);
  INFO(cut.err);
  REQUIRE(cut.status == 130);
  CHECK(cut.err.find("at ratio 0.5") != std::string::npos);
  CHECK(fs::exists(dir / "part-0.25.json"));
  CHECK(fs::exists(dir / "part-0.25.json.checkpoint"));  // kept until the last ratio is done
  const Run resumed = run(part + std::vector<std::string>{"--resume"}, dir);
  INFO(resumed.err);
  REQUIRE(resumed.status == 0);
  for (const char* r : {"0.25", "0.5"}) {
    INFO(r);
    const auto a = bosch::io::read_mask_json(dir / ("whole-" + std::string(r) + ".json"));
    const auto b = bosch::io::read_mask_json(dir / ("part-" + std::string(r) + ".json"));
    CHECK(a.mask == b.mask);
    CHECK(a.metadata.at("evaluations") == b.metadata.at("evaluations"));
  }
  CHECK(!fs::exists(dir / "part-0.25.json.checkpoint"));
}
