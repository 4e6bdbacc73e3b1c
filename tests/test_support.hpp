// Helpers shared by the test suites: the base seed, fixture and model paths.
#pragma once

#include <doctest/doctest.h>

#include <bosch/options.hpp>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace bosch::test {

/// Base seed for randomized tests (tests/main.cpp sets it from --seed).
extern std::uint64_t seed_value;
inline std::uint64_t seed(std::uint64_t offset = 0) { return seed_value + offset; }

/// True when running under CI (the CI variable is set): data that CI is
/// supposed to provide must then be present, and its absence fails the test.
inline bool in_ci() { return std::getenv("CI") != nullptr; }

/// Path of a file under ../shared/fixtures, or empty when the fixtures are not
/// present. Under CI a missing fixture is a failure, never a quiet skip.
inline std::filesystem::path fixture(const std::string& relative) {
  std::filesystem::path p = std::filesystem::path(BOSCH_FIXTURES_DIR) / relative;
  if (std::filesystem::exists(p)) return p;
  if (in_ci()) FAIL("fixture missing under CI: " << p.string());
  MESSAGE("SKIPPED: fixture not present: " << p.string());
  return {};
}

/// Path of the default real model (SmolLM2-135M-Instruct Q4_1 GGUF) as cached
/// by scripts/fetch-model, or empty when not fetched. $BOSCH_MODEL overrides.
/// Under CI (which runs scripts/fetch-model) a missing model is a failure.
inline std::filesystem::path default_model() {
  std::filesystem::path p;
  if (const char* env = std::getenv("BOSCH_MODEL")) {
    p = env;
  } else {
    const char* cache = std::getenv("BOSCH_CACHE");
    std::filesystem::path base = cache ? std::filesystem::path(cache)
                                       : std::filesystem::path(std::getenv("HOME") ? std::getenv("HOME") : "/tmp") / ".cache" / "bosch";
    p = base / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf";
  }
  if (std::filesystem::exists(p)) return p;
  if (in_ci()) FAIL("default model missing under CI (run scripts/fetch-model): " << p.string());
  MESSAGE("SKIPPED: default model not fetched (run scripts/fetch-model): " << p.string());
  return {};
}

/// Path `name` in a per-process scratch directory for `area` (created).
inline std::filesystem::path scratch_path(const std::string& area, const std::string& name) {
  const auto d = std::filesystem::temp_directory_path() /
                 ("bosch_" + area + "_" + std::to_string(::getpid()));
  std::filesystem::create_directories(d);
  return d / name;
}

/// Writes `text` to `path` (binary, truncating); the test fails if it cannot.
inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  REQUIRE(out.good());
}

/// Writes `text` to `path`, calls `read(path)` and returns where() of the
/// Error it raises, or "(accepted)" when it raises none.
template <class Error, class Read>
std::string error_where(const std::filesystem::path& path, const std::string& text, Read read) {
  write_text(path, text);
  try {
    (void)read(path);
  } catch (const Error& e) {
    return e.where();
  }
  return "(accepted)";
}

/// Two evaluation logs agree record for record (index, mask, score, stage).
inline bool same_log(const std::vector<EvaluationRecord>& a, const std::vector<EvaluationRecord>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].index != b[i].index || !(a[i].mask == b[i].mask) || a[i].score != b[i].score ||
        a[i].stage != b[i].stage)
      return false;
  return true;
}

}  // namespace bosch::test
