// SPDX-License-Identifier: Apache-2.0
// bosch paired A.json B.json: mask A minus mask B on the same held-out
// samples, from two `bosch evaluate --json` reports, with the paired
// bootstrap interval of eval/bootstrap.hpp (resampled within task).

#include "command_line.hpp"
#include "commands.hpp"
#include "errors.hpp"
#include "files.hpp"
#include "held_out_report.hpp"

#include <bosch/eval/report.hpp>
#include <bosch/io/json_number.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <iostream>
#include <string>
#include <vector>

namespace bosch::cli {

namespace {

constexpr HeldOutMetric metrics[] = {HeldOutMetric::logprob, HeldOutMetric::accuracy, HeldOutMetric::exact,
                                     HeldOutMetric::match};

/// One side of the comparison: a report of an evaluate file, its mask or one
/// of its references ("FILE#all-full").
struct Side {
  std::string name;      ///< as given on the command line
  nlohmann::json file;   ///< the whole evaluate report
  HeldOutReport report;  ///< the chosen report, intervals recomputed
  std::string what;      ///< "mask" or the reference's name
};

Side read_side(const std::string& arg, const eval::BootstrapOptions& bootstrap) {
  Side s;
  s.name = arg;
  std::string path = arg, reference;
  // "FILE#NAME" picks a reference of the report, unless FILE#NAME is a file.
  if (const auto hash = arg.rfind('#'); hash != std::string::npos && hash > 0) {
    std::error_code ec;
    if (!std::filesystem::exists(arg, ec)) {
      path = arg.substr(0, hash);
      reference = arg.substr(hash + 1);
    }
  }
  const std::string text = read_input(path, io::max_report_bytes, "an evaluate report");
  try {
    s.file = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    throw format_error(std::string("not JSON (") + e.what() + "); expected the output of 'bosch evaluate --json'",
                       input_name(path));
  }
  if (!s.file.is_object() || !s.file.contains("held_out"))
    throw format_error("no \"held_out\" report; expected the output of 'bosch evaluate --json'", input_name(path));
  // The held-out set's identity: without it two reports cannot be checked to
  // hold the same samples.
  if (!s.file.contains("suite") || !s.file["suite"].is_object())
    throw format_error("no \"suite\" (the held-out set's identity), so it cannot be checked to hold the same "
                       "samples as the other report; score the mask again with 'bosch evaluate --json'",
                       input_name(path));
  const nlohmann::json* chosen = &s.file["held_out"];
  s.what = "mask";
  if (!reference.empty()) {
    const auto refs = s.file.find("references");
    if (refs == s.file.end() || !refs->is_object() || !refs->contains(reference)) {
      std::string have;
      if (refs != s.file.end() && refs->is_object())
        for (auto it = refs->begin(); it != refs->end(); ++it) have += (have.empty() ? "" : ", ") + it.key();
      throw format_error("no reference '" + reference + "' in the report (" +
                             (have.empty() ? std::string("it has none; run 'bosch evaluate --references'")
                                           : "it has " + have) +
                             ")",
                         input_name(path));
    }
    chosen = &(*refs)[reference];
    s.what = reference;
  }
  s.report = held_out_report_from_json(*chosen, input_name(path), bootstrap);
  if (s.report.samples.empty())
    throw format_error("the report keeps no per-sample scores (written by an older bosch); score the mask again "
                       "with 'bosch evaluate --json'",
                       input_name(path));
  return s;
}

/// The held-out set's description in a report ("suite"), empty when absent.
nlohmann::json suite_of(const Side& s) {
  const auto it = s.file.find("suite");
  return it == s.file.end() ? nlohmann::json() : *it;
}

/// Both reports must come from the same held-out set: same suite settings
/// (what generates the samples), and then the same task sequence
/// (paired_difference checks it).
void check_same_samples(const Side& a, const Side& b) {
  const nlohmann::json sa = suite_of(a), sb = suite_of(b);
  if (sa != sb) {
    std::string diff;
    for (auto it = sa.begin(); it != sa.end(); ++it)
      if (!sb.contains(it.key()) || sb[it.key()] != it.value())
        diff += (diff.empty() ? "" : "; ") + it.key() + " " + it.value().dump() + " in A, " +
                (sb.contains(it.key()) ? sb[it.key()].dump() : std::string("absent")) + " in B";
    for (auto it = sb.begin(); it != sb.end(); ++it)
      if (!sa.contains(it.key())) diff += (diff.empty() ? "" : "; ") + it.key() + " absent in A";
    throw runtime_failure("A and B were scored on different held-out sets (suite: " + diff +
                          "); a paired comparison needs the same samples");
  }
}

std::string describe(const Side& s) {
  const auto& f = s.file;
  std::string out = s.name + ": ";
  if (s.what != "mask") {
    out += s.what + " (a reference of the report)";
  } else if (f.contains("swa_heads") && f["swa_heads"].is_number() && f.contains("layout") && f["layout"].is_string()) {
    out += std::to_string(f["swa_heads"].get<long long>()) + " SWA KV heads of " + f["layout"].get<std::string>();
    if (f.contains("window") && f["window"].is_number()) out += ", window " + std::to_string(f["window"].get<long long>());
    if (f.contains("sinks") && f["sinks"].is_number()) out += ", sinks " + std::to_string(f["sinks"].get<long long>());
  } else {
    out += "mask";
  }
  if (f.contains("model") && f["model"].is_string()) out += "; model " + f["model"].get<std::string>();
  return out;
}

nlohmann::json to_json(const eval::PairedDifference& d) {
  using io::json_number;
  return {{"samples", d.samples}, {"mean", json_number(d.mean)}, {"ci", {json_number(d.ci.low), json_number(d.ci.high)}}};
}

}  // namespace

int run_paired(int argc, char** argv) {
  return run_command("paired", [&]() -> int {
    std::string a_arg, b_arg;
    bool json = false;
    eval::BootstrapOptions bootstrap;
    long long seed = 0, resamples = static_cast<long long>(bootstrap.resamples);
    CommandLine cl("paired", "bosch paired [options] A.json B.json",
                   "Mask A minus mask B on the same held-out samples: the mean difference of the\n"
                   "answer log-probability, greedy accuracy and exact match, overall and per task,\n"
                   "each with a paired percentile bootstrap interval (the per-sample differences\n"
                   "resampled within each task). A and B are reports of 'bosch evaluate --json'\n"
                   "scored on the same held-out set (same tasks, context, samples and seed; a\n"
                   "report of another set is refused). FILE#NAME takes the reference NAME\n"
                   "(all-full, all-SWA) of a report written with --references.");
    cl.options.add_options()("resamples", po::value(&resamples)->default_value(resamples)->value_name("B"),
                             "bootstrap resamples")(
        "level", number(&bootstrap.level)->value_name("P"),
        "coverage of the intervals, in (0, 1)")(
        "seed", po::value(&seed)->default_value(seed)->value_name("N"), "seed of the resampling streams")(
        "json", flag(&json), "print one JSON object on stdout instead of a table");
    cl.hidden.add_options()("a", po::value(&a_arg))("b", po::value(&b_arg));
    cl.positional.add("a", 1).add("b", 1);
    cl.epilog = "Examples:\n  bosch evaluate MODEL --mask bosch.json --references --json > bosch-report.json\n"
                "  bosch evaluate MODEL --mask proxy.json --json > proxy-report.json\n"
                "  bosch paired bosch-report.json proxy-report.json\n"
                "  bosch paired bosch-report.json bosch-report.json#all-full\n";
    po::variables_map vm;
    if (!cl.parse(argc, argv, vm)) return exit_success;
    if (a_arg.empty() || b_arg.empty()) throw usage_error("expected two reports, A and B");
    if (resamples < 1 || resamples > 1000000)
      throw bosch::invalid_argument("must lie in [1, 1000000], got " + std::to_string(resamples), "--resamples");
    bootstrap.resamples = static_cast<std::size_t>(resamples);
    if (seed < 0) throw bosch::invalid_argument("must be >= 0, got " + std::to_string(seed), "--seed");
    bootstrap.seed = static_cast<std::uint64_t>(seed);
    try {
      eval::validate(bootstrap);
    } catch (const bosch::invalid_argument& e) {
      throw bosch::invalid_argument(e.message(), "--" + e.where());
    }

    const Side a = read_side(a_arg, bootstrap), b = read_side(b_arg, bootstrap);
    check_same_samples(a, b);
    const std::string fa = a.file.value("model_fingerprint", std::string());
    const std::string fb = b.file.value("model_fingerprint", std::string());
    if (!fa.empty() && !fb.empty() && fa != fb)
      std::cerr << "bosch paired: note: A and B were scored on different model files (fingerprints " << fa << " and "
                << fb << "); the samples pair up only if the two share a tokenizer\n";

    // Every difference, overall first, then per task in the reports' order.
    std::vector<std::string> groups{"all"};
    for (const auto& t : a.report.per_task) groups.push_back(t.task);
    std::vector<std::vector<eval::PairedDifference>> diffs;
    for (const auto& g : groups) {
      std::vector<eval::PairedDifference> row;
      for (HeldOutMetric m : metrics) {
        try {
          row.push_back(paired_difference(a.report, b.report, m, g, bootstrap, "A and B"));
        } catch (const bosch::invalid_argument& e) {
          throw runtime_failure(e.what());
        }
      }
      diffs.push_back(std::move(row));
    }

    // File tasks: their normalized exact match too.
    bool with_match = false;
    for (const auto& sc : a.report.samples) with_match = with_match || std::isfinite(sc.match);
    if (json) {
      nlohmann::json j{{"a", a.name},
                       {"b", b.name},
                       {"bootstrap", {{"resamples", bootstrap.resamples}, {"level", bootstrap.level}, {"seed", seed}}},
                       {"suite", suite_of(a)}};
      nlohmann::json per_task = nlohmann::json::array();
      for (std::size_t g = 0; g < groups.size(); ++g) {
        nlohmann::json row{{"task", groups[g]}, {"samples", diffs[g][0].samples}};
        for (std::size_t m = 0; m < std::size(metrics); ++m)
          if (metrics[m] != HeldOutMetric::match || with_match) row[to_string(metrics[m])] = to_json(diffs[g][m]);
        if (g == 0)
          j["all"] = row;
        else
          per_task.push_back(row);
      }
      j["per_task"] = per_task;
      std::cout << j.dump(2) << "\n";
      return exit_success;
    }
    std::cout << "A  " << describe(a) << "\nB  " << describe(b) << "\n";
    const nlohmann::json suite = suite_of(a);
    if (suite.is_object() && suite.contains("context"))
      std::cout << "held-out set: context " << suite["context"].dump() << ", "
                << suite.value("held_out_samples", nlohmann::json()).dump() << " samples per task, task seed "
                << suite.value("task_seed", nlohmann::json()).dump() << "\n";
    char buf[400];
    // The last column unpadded, as before, unless match follows it.
    const char* last = with_match ? "%-26s" : "%s";
    std::snprintf(buf, sizeof buf, (std::string("\n  %-18s %7s  %-29s %-26s ") + last).c_str(), "A - B", "samples",
                  "log-prob (nats)", "accuracy", "exact");
    std::cout << buf << (with_match ? " match" : "") << "\n";
    for (std::size_t g = 0; g < groups.size(); ++g) {
      std::snprintf(buf, sizeof buf, (std::string("  %-18s %7d  %-29s %-26s ") + last).c_str(), groups[g].c_str(),
                    diffs[g][0].samples,
                    value_ci("%+.4f", diffs[g][0].mean, diffs[g][0].ci).c_str(), value_ci("%+.3f", diffs[g][1].mean, diffs[g][1].ci).c_str(),
                    value_ci("%+.3f", diffs[g][2].mean, diffs[g][2].ci).c_str());
      std::cout << buf;
      if (with_match) std::cout << " " << value_ci("%+.3f", diffs[g][3].mean, diffs[g][3].ci);
      std::cout << "\n";
    }
    std::snprintf(buf, sizeof buf,
                  "  [low, high]: %g%% paired percentile bootstrap interval of the per-sample differences (%zu "
                  "resamples, seed %lld; overall figures resampled within each task); A is ahead where it lies "
                  "above 0\n",
                  100.0 * bootstrap.level, bootstrap.resamples, seed);
    std::cout << buf;
    return exit_success;
  });
}

}  // namespace bosch::cli
