// The comparison runner: every output on a cheap synthetic setup, resuming
// without recomputing finished cells or set-ups, refusing other settings; and
// the standard method set end to end on the planted model.
#include <bosch/cpu/backend.hpp>
#include <bosch/eval/compare.hpp>
#include <bosch/io/atomic_file.hpp>
#include <bosch/io/file_lock.hpp>

#include <doctest/doctest.h>

#include "eval/planted_model.hpp"
#include "test_support.hpp"

#include <filesystem>
#include <string>
#include <vector>

using namespace bosch;
using namespace bosch::eval;

namespace {

struct Counters {
  int setups = 0, selects = 0, scores = 0;
};

std::filesystem::path fresh_dir(const std::string& name) {
  const auto d = std::filesystem::path(BOSCH_BINARY_DIR) / "test-output" / name;
  std::filesystem::remove_all(d);
  return d;
}

/// Synthetic quality: each SWA head costs its weight; heads of layer 3 are expensive.
HeldOutReport synthetic_quality(const HeadMask& m) {
  double cost = 0;
  for (std::size_t i = 0; i < m.size(); ++i)
    if (m[i]) cost += i >= 6 ? 0.3 : 0.02 * static_cast<double>(i + 1);
  // Two samples per task around the cost; t1 exact, t2 not.
  const double acc = std::max(0.0, 1.0 - cost);
  return summarize_held_out({{"t1", -cost - 0.01, acc, 1.0},
                             {"t1", -cost + 0.01, acc, 1.0},
                             {"t2", -cost - 0.02, acc, 0.0},
                             {"t2", -cost + 0.02, acc, 0.0}});
}

std::vector<ComparisonMethod> synthetic_methods(Counters& n, const HeadLayout& lay) {
  std::vector<ComparisonMethod> ms;
  ComparisonMethod a;
  a.name = "RANKED";
  a.family = "ranking";
  a.setup = [&n] {
    ++n.setups;
    MethodSetup s;
    s.state = {{"scores", {8, 7, 6, 5, 4, 3, 2, 1}}};  // higher = more global: low indices stay full
    s.evaluations = 9;
    s.forwards = 4.5;
    return s;
  };
  a.select = [&n, lay](double rho, const nlohmann::json& st, const CellResult*) {
    ++n.selects;
    const auto sc = st.at("scores").get<std::vector<double>>();
    MethodCell c;
    c.mask = baselines::mask_from_scores(lay, sc, rho);
    return c;
  };
  ms.push_back(a);
  ComparisonMethod b;
  b.name = "BOSCH";
  b.family = "BOSCH";
  b.select = [&n, lay](double rho, const nlohmann::json&, const CellResult*) {
    ++n.selects;
    // Not nested: the cheapest heads (low indices), shifted by one at odd counts.
    const std::size_t t = target_count(lay, rho);
    HeadMask m(lay);
    for (std::size_t i = 0; i < t; ++i) m.set_flat((i + (t % 2)) % 8, true);
    MethodCell c;
    c.mask = m;
    c.evaluations = 10 * t;
    c.details = {{"t", t}};
    return c;
  };
  ms.push_back(b);
  ComparisonMethod l;
  l.name = "INTR";
  l.family = "layer";
  l.select = [&n, lay](double rho, const nlohmann::json&, const CellResult*) {
    ++n.selects;
    MethodCell c;
    c.mask = baselines::layer_intr(lay, rho);
    return c;
  };
  ms.push_back(l);
  return ms;
}

}  // namespace

TEST_CASE("comparison runner: all outputs, then a resume that recomputes nothing, then only what is missing") {
  const HeadLayout lay{4, 4, 2};
  Counters n;
  const auto methods = synthetic_methods(n, lay);
  ComparisonOptions o;
  o.output_dir = fresh_dir("compare-synthetic");
  o.run = {{"model", "synthetic"}, {"window", 8}};
  o.title = "synthetic";
  MaskScorer score = [&n](const HeadMask& m) {
    ++n.scores;
    return synthetic_quality(m);
  };
  std::vector<std::string> messages;
  const auto r = run_comparison(methods, score, lay, o, [&](const std::string& s) { messages.push_back(s); });
  write_comparison_outputs(r, o);
  CHECK(n.setups == 1);
  CHECK(n.selects == 12);
  CHECK(n.scores == 2 + 12);
  CHECK(r.computed == 12);
  CHECK(r.resumed == 0);
  CHECK(!messages.empty());
  REQUIRE(r.cells.size() == 12);
  for (const auto& c : r.cells) CHECK(c.mask.count() == target_count(lay, c.ratio));
  CHECK(r.method_evaluations("RANKED") == 9);
  CHECK(r.method_forwards("RANKED") == doctest::Approx(4.5));
  CHECK(r.method_evaluations("BOSCH") == 10 * (2 + 4 + 6 + 7));
  CHECK(r.all_full.all.accuracy == 1.0);
  for (const char* f : {"results.json", "table.md", "results.csv", "turnover.csv", "jaccard.csv",
                        "accuracy_vs_ratio.svg", "logprob_vs_ratio.svg", "heads/RANKED.svg", "heads/BOSCH.svg",
                        "heads/INTR.svg"})
    CHECK_MESSAGE(std::filesystem::exists(o.output_dir / f), f);
  const auto table = io::read_file(o.output_dir / "table.md");
  CHECK(table.find("| RANKED |") != std::string::npos);
  CHECK(table.find("rho=0.875") != std::string::npos);
  CHECK(table.find("Jaccard distance of the SWA-head sets to BOSCH") != std::string::npos);
  const auto csv = io::read_file(o.output_dir / "results.csv");
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 1 + 2 + 12);
  CHECK(csv.find("accuracy_t2") != std::string::npos);
  const auto jac = io::read_file(o.output_dir / "jaccard.csv");
  CHECK(std::count(jac.begin(), jac.end(), '\n') == 1 + 4 * 3);
  const auto svg = io::read_file(o.output_dir / "heads/BOSCH.svg");
  CHECK(svg.rfind("<?xml", 0) == 0);
  CHECK(svg.find("</svg>") != std::string::npos);
  // The fixed ranking is nested (turnover 0); the shifted selection is not.
  const auto tv = io::read_file(o.output_dir / "turnover.csv");
  CHECK(tv.find("RANKED,0.25,0.5,0\n") != std::string::npos);
  CHECK(turnover(r.find("BOSCH", 0.75)->mask, r.find("BOSCH", 0.875)->mask) > 0.0);

  // Resume: nothing recomputed, identical results.
  const Counters before = n;
  const auto again = run_comparison(methods, score, lay, o);
  CHECK(n.setups == before.setups);
  CHECK(n.selects == before.selects);
  CHECK(n.scores == before.scores);
  CHECK(again.computed == 0);
  CHECK(again.resumed == 12);
  for (const auto& c : r.cells) {
    const auto* d = again.find(c.method, c.ratio);
    REQUIRE(d != nullptr);
    CHECK(d->mask == c.mask);
    CHECK(d->quality.all.mean_logprob == c.quality.all.mean_logprob);
    CHECK(d->quality.per_task.size() == 2);
    CHECK(d->evaluations == c.evaluations);
    CHECK(d->resumed);
  }
  CHECK(again.method_evaluations("RANKED") == 9);

  // Drop one cell from the file: only that cell is recomputed (the set-up state is stored).
  auto doc = nlohmann::json::parse(io::read_file(o.output_dir / "results.json"));
  auto& cells = doc["cells"];
  for (std::size_t i = 0; i < cells.size(); ++i)
    if (cells[i]["method"] == "RANKED" && cells[i]["ratio"] == 0.5) {
      cells.erase(i);
      break;
    }
  io::write_file_atomic(o.output_dir / "results.json", doc.dump());
  const auto third = run_comparison(methods, score, lay, o);
  CHECK(third.computed == 1);
  CHECK(n.setups == before.setups);
  CHECK(n.selects == before.selects + 1);
  CHECK(n.scores == before.scores + 1);
  CHECK(third.find("RANKED", 0.5)->mask == r.find("RANKED", 0.5)->mask);

  // A new ratio: only its cells.
  auto o2 = o;
  o2.ratios.push_back(0.125);
  const auto fourth = run_comparison(methods, score, lay, o2);
  CHECK(fourth.computed == 3);
  CHECK(fourth.resumed == 12);
  // Fewer methods keep the others' cells in the file.
  const auto fifth = run_comparison(std::span(methods).subspan(0, 1), score, lay, o2);
  CHECK(fifth.computed == 0);
  const auto kept = nlohmann::json::parse(io::read_file(o.output_dir / "results.json"));
  CHECK(kept["cells"].size() == 15);

  // Report only: nothing computed, the stored cells of the grid reported.
  auto o4 = o2;
  o4.compute_missing = false;
  o4.ratios = {0.5, 0.625};
  const Counters before_report = n;
  const auto report = run_comparison(methods, score, lay, o4);
  write_comparison_outputs(report, o4);
  CHECK(n.selects == before_report.selects);
  CHECK(n.scores == before_report.scores);
  CHECK(report.cells.size() == 3);  // 0.5 of each method; 0.625 was never run
  CHECK(report.all_full.all.accuracy == 1.0);
  CHECK(nlohmann::json::parse(io::read_file(o.output_dir / "results.json"))["cells"].size() == 15);
  CHECK(io::read_file(o.output_dir / "table.md").find("| RANKED | ") != std::string::npos);

  // A second run on a directory another run is filling is refused (its
  // results.json rewrite would drop the first run's cells); report-only is not.
  {
    io::FileLock running(o.output_dir / ".results.lock", "comparison output directory");
    CHECK_THROWS_WITH_AS(run_comparison(methods, score, lay, o),
                         doctest::Contains("in use by another process"), bosch::file_error);
    CHECK_NOTHROW(run_comparison(methods, score, lay, o4));
  }

  // Other settings are refused; a corrupt file is a format error.
  auto o3 = o;
  o3.run["window"] = 16;
  CHECK_THROWS_AS(run_comparison(methods, score, lay, o3), bosch::invalid_argument);
  CHECK_THROWS_AS(run_comparison(methods, score, HeadLayout{2, 4, 2}, o), bosch::invalid_argument);
  io::write_file_atomic(o.output_dir / "results.json", "{ not json");
  CHECK_THROWS_AS(run_comparison(methods, score, lay, o), bosch::format_error);
  // Bad input.
  auto dup = methods;
  dup.push_back(methods.front());
  CHECK_THROWS_AS(run_comparison(dup, score, lay, o), bosch::invalid_argument);
  auto bad = o;
  bad.ratios = {1.0};
  CHECK_THROWS_AS(run_comparison(methods, score, lay, bad), bosch::invalid_argument);
}

TEST_CASE("comparison runner: ratio order, the previous cell, set-ups announced, several held-out sets") {
  const HeadLayout lay{4, 4, 2};
  // A method that records which previous cell each select saw.
  std::vector<std::pair<double, double>> seen;  // (rho, previous rho or -1)
  std::vector<std::string> announced;
  ComparisonMethod chain;
  chain.name = "CHAIN";
  chain.family = "BOSCH";
  chain.setup = [] {
    MethodSetup s;
    s.state = {{"k", 1}};
    s.seconds = 12.5;  // reported instead of the measured time
    return s;
  };
  chain.on_setup = [&](const nlohmann::json& st) { announced.push_back(st.dump()); };
  chain.select = [&seen, lay](double rho, const nlohmann::json&, const CellResult* previous) {
    seen.emplace_back(rho, previous ? previous->ratio : -1.0);
    MethodCell c;
    c.mask = baselines::mask_from_scores(lay, std::vector<double>{8, 7, 6, 5, 4, 3, 2, 1}, rho);
    return c;
  };
  ComparisonMethod other;
  other.name = "OTHER";
  other.family = "layer";
  other.select = [lay](double rho, const nlohmann::json&, const CellResult*) {
    MethodCell c;
    c.mask = baselines::layer_intr(lay, rho);
    return c;
  };
  const std::vector<ComparisonMethod> methods{chain, other};
  int scored_b = 0;
  std::vector<HeldOutSet> sets{{"a", "set A", synthetic_quality},
                               {"b", "set B", [&scored_b](const HeadMask& m) {
                                  ++scored_b;
                                  auto q = synthetic_quality(m);
                                  for (auto& s : q.samples) s.logprob -= 1.0;
                                  return summarize_held_out(q.samples);
                                }}};
  ComparisonOptions o;
  o.output_dir = fresh_dir("compare-order");
  o.ratios = {0.25, 0.75, 0.5};
  o.ratio_order = RatioOrder::descending;
  o.run = {{"model", "synthetic"}};
  const auto r = run_comparison(methods, std::span(sets).subspan(0, 1), lay, o);
  CHECK(seen == std::vector<std::pair<double, double>>{{0.75, -1.0}, {0.5, 0.75}, {0.25, 0.5}});
  CHECK(announced.size() == 1);  // the computed set-up
  CHECK(r.method_seconds("CHAIN") == doctest::Approx(12.5));
  CHECK(r.held_out_sets.size() == 1);
  CHECK(r.find("CHAIN", 0.5)->quality_at.empty());

  // Resume with a second set: nothing selected again, every stored mask and
  // both references scored on it; the stored set-up is announced first.
  seen.clear();
  announced.clear();
  const auto r2 = run_comparison(methods, sets, lay, o);
  CHECK(seen.empty());
  CHECK(announced == std::vector<std::string>{"{\"k\":1}"});
  CHECK(r2.resumed == 6);
  CHECK(r2.rescored == 6);
  CHECK(scored_b == 2 + 6);
  const auto* c = r2.find("CHAIN", 0.5);
  REQUIRE(c != nullptr);
  REQUIRE(c->report("b", "a") != nullptr);
  CHECK(c->report("b", "a")->all.mean_logprob == doctest::Approx(c->quality.all.mean_logprob - 1.0));
  CHECK(c->report("a", "a") == &c->quality);
  CHECK(r2.reference(true, "b")->all.mean_logprob == doctest::Approx(-1.0));
  // Every figure has its interval; the paired comparisons cover both sets and metrics.
  CHECK(c->quality.all.logprob_ci.valid());
  const auto paired = paired_comparisons(r2, [&] {
    auto p = o;
    p.reference_method = "CHAIN";
    return p;
  }());
  CHECK(paired.size() == 2 * 2 * 3);  // sets x metrics x ratios
  for (const auto& p : paired) {
    CHECK(p.other == "OTHER");
    CHECK(p.difference.samples == 4);
    CHECK(p.difference.ci.valid());
    const auto* a = r2.find("CHAIN", p.ratio)->report(p.held_out, "a");
    const auto* b = r2.find("OTHER", p.ratio)->report(p.held_out, "a");
    if (p.metric == HeldOutMetric::logprob)
      CHECK(p.difference.mean == doctest::Approx(a->all.mean_logprob - b->all.mean_logprob));
  }
  auto out = o;
  out.reference_method = "CHAIN";
  write_comparison_outputs(r2, out);
  for (const char* f : {"logprob_vs_ratio.svg", "logprob_vs_ratio-b.svg", "accuracy_vs_ratio-b.svg", "paired.csv"})
    CHECK_MESSAGE(std::filesystem::exists(o.output_dir / f), f);
  const auto table = io::read_file(o.output_dir / "table.md");
  CHECK(table.find("## set B (n = 4 (2 per task x 2 tasks))") != std::string::npos);
  CHECK(table.find("CHAIN minus the best method of another family") != std::string::npos);
  const auto csv = io::read_file(o.output_dir / "results.csv");
  CHECK(std::count(csv.begin(), csv.end(), '\n') == 1 + 2 * (2 + 6));
  // A third run: everything stored, nothing scored.
  const int before = scored_b;
  const auto r3 = run_comparison(methods, sets, lay, o);
  CHECK(r3.rescored == 0);
  CHECK(scored_b == before);
  CHECK(r3.find("OTHER", 0.75)->report("b", "a")->all.logprob_ci.low ==
        r2.find("OTHER", 0.75)->report("b", "a")->all.logprob_ci.low);
  // Bad sets.
  std::vector<HeldOutSet> dup{sets[0], sets[0]};
  CHECK_THROWS_AS(run_comparison(methods, dup, lay, o), bosch::invalid_argument);
  CHECK_THROWS_AS(run_comparison(methods, std::span<const HeldOutSet>(), lay, o), bosch::invalid_argument);
}

TEST_CASE("layer comparisons: the layer method minus the head-level reference and the best layer heuristic") {
  const HeadLayout lay{4, 4, 2};
  Counters n;
  auto methods = synthetic_methods(n, lay);
  ComparisonMethod layer;  // whole layers from the top: layer 3 (the expensive one) first
  layer.name = "B-layer";
  layer.family = "BOSCH";
  layer.select = [lay](double rho, const nlohmann::json&, const CellResult*) {
    HeadMask m(lay);
    const std::size_t t = target_count(lay, rho);
    for (std::size_t i = 0; i < t; ++i) m.set_flat(7 - i, true);
    MethodCell c;
    c.mask = m;
    return c;
  };
  methods.push_back(layer);
  ComparisonMethod bme;
  bme.name = "BME";
  bme.family = "layer";
  bme.select = [lay](double rho, const nlohmann::json&, const CellResult*) {
    MethodCell c;
    c.mask = baselines::layer_bme(lay, rho);
    return c;
  };
  methods.push_back(bme);
  ComparisonOptions o;
  o.output_dir = fresh_dir("compare-layer");
  o.ratios = {0.25, 0.5};
  o.run = {{"model", "synthetic"}};
  const auto r = run_comparison(methods, [](const HeadMask& m) { return synthetic_quality(m); }, lay, o);
  const auto layered = layer_comparisons(r, o);
  REQUIRE(layered.size() == 2 * 2 * 2);  // (BOSCH, best heuristic) x metrics x ratios
  for (const auto& p : layered) {
    INFO(p.other << " at " << p.ratio);
    CHECK(p.method == "B-layer");
    CHECK(p.difference.samples == 4);
    const auto& mine = r.find("B-layer", p.ratio)->quality.all;
    const auto& other = r.find(p.other, p.ratio)->quality.all;
    if (p.other != "BOSCH") {
      CHECK(r.family(p.other) == "layer");
      const double best = std::max(r.find("INTR", p.ratio)->quality.all.mean_logprob,
                                   r.find("BME", p.ratio)->quality.all.mean_logprob);
      if (p.metric == HeldOutMetric::logprob) CHECK(other.mean_logprob == best);
    }
    if (p.metric == HeldOutMetric::logprob) {
      CHECK(p.difference.mean == doctest::Approx(mine.mean_logprob - other.mean_logprob));
      CHECK(p.difference.mean < 0);  // windowing layer 3 first is the worst choice here
    }
  }
  // The head-level reference is never paired with its own family's layer variant.
  for (const auto& p : paired_comparisons(r, o)) CHECK(p.other != "B-layer");
  write_comparison_outputs(r, o);
  const auto table = io::read_file(o.output_dir / "table.md");
  CHECK(table.find("### B-layer (whole layers, for engines that window only layers) against BOSCH") !=
        std::string::npos);
  const auto csv = io::read_file(o.output_dir / "paired.csv");
  CHECK(csv.find(",0.5,logprob,B-layer,BOSCH,4,") != std::string::npos);
  // No layer method, or the layer method as the reference: nothing.
  auto none = o;
  none.layer_method.clear();
  CHECK(layer_comparisons(r, none).empty());
  none = o;
  none.reference_method = "B-layer";
  CHECK(layer_comparisons(r, none).empty());
  // Without the head-level reference in the run, only the heuristic rows.
  auto other_ref = o;
  other_ref.reference_method = "MISSING";
  const auto only = layer_comparisons(r, other_ref);
  CHECK(only.size() == 2 * 2);
  for (const auto& p : only) CHECK(r.family(p.other) == "layer");
}

TEST_CASE("standard methods on the planted model: every method runs, BOSCH keeps the copy head full") {
  const auto model = test::planted_model(test::seed(50));
  const cpu::Backend backend(model);
  const auto calib = test::planted_copy_tasks(2, 100, test::seed(51));
  const auto held = test::planted_copy_tasks(2, 100, test::seed(52));
  TransformerEvaluatorOptions eo;
  eo.window = 8;
  TransformerEvaluator<cpu::Backend> evaluator(backend, calib, eo);
  StandardMethodsOptions so;
  so.variants = {Variant::full, Variant::single};
  so.search.seed = test::seed(53);
  so.warm_start = true;
  so.candidates = {Method::dcam, Method::proxy};
  so.scores.razor_block = 24;
  std::vector<std::string> progress_lines;
  so.search_progress = [&progress_lines](const std::string& line) { progress_lines.push_back(line); };
  so.progress_every = 1;
  const auto methods = standard_methods(backend, evaluator, so);
  std::vector<std::string> names;
  for (const auto& m : methods) names.push_back(m.name);
  CHECK(names == std::vector<std::string>{"BOSCH", "B-single", "DCAM", "APL", "RAZOR", "QADA", "PROXY", "FISHER",
                                          "RETRIEVAL", "RAND", "BME", "INTR"});
  ReportOptions ro;
  ro.accuracy = false;  // the planted model has no tokenizer to decode with
  const auto scorer = held_out_scorer(backend, model.tokenizer, held, eo.window, eo.sinks, ro);
  ComparisonOptions o;
  o.ratios = {0.25, 0.5, 0.75};
  o.output_dir = fresh_dir("compare-planted");
  o.run = {{"model", "planted"}};
  const std::size_t calls_before = evaluator.stats().evaluations;
  const auto r = run_comparison(methods, scorer, evaluator.layout(), o);
  write_comparison_outputs(r, o);
  CHECK(r.cells.size() == names.size() * 3);
  // Warm-start candidates: computed once, in BOSCH's set-up, and shared with
  // B-single and the DCAM and PROXY rankings, each charged the same cost.
  std::size_t search_calls = 0;
  for (const auto& c : r.cells) search_calls += c.evaluations;
  CHECK(evaluator.stats().evaluations - calls_before == 5 + search_calls);  // PROXY's 5 once
  const MethodSummary* bosch_setup = nullptr;
  const MethodSummary* dcam_setup = nullptr;
  for (const auto& m : r.methods) {
    if (m.name == "BOSCH") bosch_setup = &m;
    if (m.name == "DCAM") dcam_setup = &m;
  }
  REQUIRE(bosch_setup != nullptr);
  REQUIRE(dcam_setup != nullptr);
  CHECK(bosch_setup->setup.evaluations == 5);
  CHECK(bosch_setup->setup.state.at("candidates").at("DCAM") == dcam_setup->setup.state);
  CHECK(r.method_evaluations("BOSCH") >= 5);
  CHECK(r.find("BOSCH", 0.25)->details.at("warm_starts") == nlohmann::json::array({"DCAM", "PROXY"}));
  CHECK(r.find("BOSCH", 0.5)->details.at("warm_starts") ==
        nlohmann::json::array({"DCAM", "PROXY", "BOSCH at ratio 0.25"}));
  CHECK(r.find("B-single", 0.75)->details.at("warm_starts") ==
        nlohmann::json::array({"DCAM", "PROXY", "B-single at ratio 0.5"}));
  // Never worse on the calibration set than the best warm start.
  for (const auto& c : r.cells)
    if (c.details.contains("warm_start"))
      CHECK(c.details.at("search_score").get<double>() >= c.details.at("warm_start").at("best_seed_score").get<double>());
  for (const auto& c : r.cells) CHECK(c.mask.count() == target_count(evaluator.layout(), c.ratio));
  // Progress lines: one per evaluation of every BOSCH search; before an
  // exact-count mask exists (the anchors of the first ratio) the best is "-", never nan;
  // ratios as people write them.
  CHECK(progress_lines.size() >= search_calls);
  bool dash_seen = false;
  for (const auto& line : progress_lines) {
    INFO(line);
    CHECK(line.find("nan") == std::string::npos);
    CHECK(line.find("00000") == std::string::npos);
    dash_seen = dash_seen || line.find("best -,") != std::string::npos;
  }
  CHECK(dash_seen);
  // Three of the four KV heads are free to localize: BOSCH finds that at 0.75, and
  // its held-out log-prob equals the all-full model's (the zero-output heads change
  // nothing, the previous-token head loses only ~e^-20 of mass).
  const auto* b = r.find("BOSCH", 0.75);
  REQUIRE(b != nullptr);
  CHECK_FALSE(b->mask.swa(1, 1));
  CHECK(b->quality.all.mean_logprob == doctest::Approx(r.all_full.all.mean_logprob).epsilon(1e-4));
  CHECK(b->evaluations > 0);
  CHECK(r.method_evaluations("PROXY") == 5);
  CHECK(r.method_forwards("FISHER") > 0);
  // Rankings are nested across ratios.
  for (const auto& m : {"DCAM", "FISHER", "PROXY"})
    CHECK(turnover(r.find(m, 0.25)->mask, r.find(m, 0.5)->mask) == 0.0);
  CHECK(std::filesystem::exists(o.output_dir / "heads" / "RETRIEVAL.svg"));
  // No greedy accuracy computed: the tables fall back to the greedy exact match and say so.
  const auto table = io::read_file(o.output_dir / "table.md");
  CHECK(table.find("greedy exact match (%)") != std::string::npos);
  CHECK(table.find("| BOSCH | 100.0 [100.0, 100.0] | 100.0 [100.0, 100.0] | 100.0 [100.0, 100.0] |") !=
        std::string::npos);
}
