// SPDX-License-Identifier: Apache-2.0
// Files and summary of multi-ratio selects (see ratio_runs.hpp).

#include "ratio_runs.hpp"

#include "errors.hpp"
#include "files.hpp"
#include "search_options.hpp"

#include <bosch/run/selection.hpp>

#include <bosch/mask.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <system_error>

namespace bosch::cli {

std::string ratio_text(double rho) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", rho);
  return buf;
}

std::vector<double> requested_ratios(const po::variables_map& vm, double ratio, const std::string& ratios_text,
                                     const std::string& out) {
  if (!given(vm, "ratios")) return {ratio};
  if (given(vm, "ratio")) throw usage_error("--ratio and --ratios exclude each other");
  std::vector<double> ratios = SearchOptions::parse_ratios(ratios_text, "--ratios");
  std::sort(ratios.begin(), ratios.end());
  ratios.erase(std::unique(ratios.begin(), ratios.end()), ratios.end());
  if (out == "-") throw usage_error("--ratios writes one mask file per ratio: give --out FILE, not '-'");
  return ratios;
}

std::string with_ratio(const std::string& path, double rho) {
  if (path.empty()) return path;
  const std::filesystem::path p(path);
  return (p.parent_path() / (p.stem().string() + "-" + ratio_text(rho) + p.extension().string())).string();
}

/// True when `path` names an existing character device or FIFO (written in
/// place, not replaced through a temporary file).
static bool writes_in_place(const std::string& path) {
  std::error_code ec;
  const auto type = std::filesystem::status(path, ec).type();
  return type == std::filesystem::file_type::character || type == std::filesystem::file_type::fifo;
}

std::vector<RatioFiles> ratio_files(const std::vector<double>& ratios, bool several, const std::string& out,
                                    const std::string& checkpoint, const std::string& log, const std::string& svg,
                                    const std::vector<OutputPath>& inputs) {
  std::vector<RatioFiles> runs;
  std::vector<OutputPath> outputs;
  for (double rho : ratios) {
    auto name = [&](const std::string& p) { return several ? with_ratio(p, rho) : p; };
    RatioFiles f;
    f.rho = rho;
    f.out = name(out);
    f.log = name(log);
    f.svg = name(svg);
    f.default_checkpoint = checkpoint.empty();
    // A mask written to standard output, a device or a FIFO (/dev/stdout,
    // /dev/full) gets its checkpoint in the current directory, never beside
    // the device.
    if (f.default_checkpoint) {
      f.checkpoint = f.out == "-" || writes_in_place(f.out) ? "bosch-select" : f.out;
      f.checkpoint.append(".checkpoint");  // (not operator+: GCC 12 warns, -Wrestrict)
    } else {
      f.checkpoint = name(checkpoint);
    }
    f.identity = identity_path(f.checkpoint);
    outputs.push_back({"--out", f.out});
    outputs.push_back({f.default_checkpoint ? "--out's checkpoint" : "--checkpoint", f.checkpoint});
    outputs.push_back({"--log", f.log});
    outputs.push_back({"--svg", f.svg});
    runs.push_back(std::move(f));
  }
  check_outputs(outputs, inputs);
  return runs;
}

void finish_files(RatioFiles& f) {
  std::error_code ec;
  // The run identity lives as long as its checkpoint: a --checkpoint the user
  // named stays, and so does the identity that a --resume checks it against.
  if (f.default_checkpoint) {
    std::filesystem::remove(f.checkpoint, ec);
    std::filesystem::remove(f.identity, ec);
  }
  // Temporary files of earlier runs killed while writing (this run holds the lock).
  io::remove_stale_temporaries(f.checkpoint);
  io::remove_stale_temporaries(f.identity);
  if (f.lock) f.lock->release(/*remove_file=*/true);
}

void print_ratio_summary(std::ostream& out, std::vector<std::pair<double, const Result*>> results,
                         const std::string& order, bool warm_start) {
  std::sort(results.begin(), results.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  out << "ratios (run " << order << ", warm starts " << (warm_start ? "on" : "off")
      << "): turnover and Jaccard distance to the next lower ratio\n";
  char buf[200];
  std::snprintf(buf, sizeof buf, "  %-7s %5s %12s %11s %9s %8s %8s\n", "ratio", "SWA", "score", "evaluations",
                "seconds", "turnover", "jaccard");
  out << buf;
  for (std::size_t i = 0; i < results.size(); ++i) {
    const Result& r = *results[i].second;
    char t[32] = "-", j[32] = "-";
    if (i > 0) {
      std::snprintf(t, sizeof t, "%.3f", turnover(results[i - 1].second->mask, r.mask));
      std::snprintf(j, sizeof j, "%.3f", jaccard_distance(results[i - 1].second->mask, r.mask));
    }
    std::snprintf(buf, sizeof buf, "  %-7s %5zu %12.5f %11zu %9.1f %8s %8s\n", ratio_text(results[i].first).c_str(),
                  r.mask.count(), r.score, r.evaluations, r.seconds, t, j);
    out << buf;
  }
}

}  // namespace bosch::cli
