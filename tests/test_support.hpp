// Helpers shared by the test suites: the base seed, fixture and model paths.
#pragma once

#include <doctest/doctest.h>

#include <bosch/options.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_int_distribution.hpp>

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

/// The cache that scripts/fetch-model and scripts/fetch-test-data fill:
/// $BOSCH_CACHE, else ~/.cache/bosch.
inline std::filesystem::path cache_dir() {
  if (const char* cache = std::getenv("BOSCH_CACHE")) return cache;
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home ? home : "/tmp") / ".cache" / "bosch";
}

/// Path of a test data file (tests/data/README.md): `relative` under the
/// committed tests/data, else under the cache that scripts/fetch-test-data
/// fills (texts, tokenizer vocabularies). A missing file fails the test: the
/// suite never passes with a section that asserted nothing.
inline std::filesystem::path fixture(const std::string& relative) {
  const std::filesystem::path committed = std::filesystem::path(BOSCH_TEST_DATA_DIR) / relative;
  if (std::filesystem::exists(committed)) return committed;
  const std::filesystem::path fetched = cache_dir() / relative;
  if (std::filesystem::exists(fetched)) return fetched;
  FAIL("test data missing: " << relative << " (looked in " << committed.string() << " and "
                             << fetched.string() << "; run scripts/fetch-test-data)");
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
    p = cache_dir() / "models" / "SmolLM2-135M-Instruct.Q4_1.gguf";
  }
  if (std::filesystem::exists(p)) return p;
  FAIL("default model missing (run scripts/fetch-model): " << p.string());
  return {};
}

/// Path of the second real model, Qwen2.5-Coder-0.5B-Instruct (Q4_K_M GGUF,
/// 491 MB), as cached by `scripts/fetch-model --model qwen2.5-coder-0.5b`
/// (which scripts/test and CI run), or empty when not fetched: then the test
/// fails, as for the default model. $BOSCH_QWEN_MODEL overrides. Tests read
/// only its header, tokenizer and a few rows (memory-mapped); no forward.
inline std::filesystem::path qwen_model() {
  std::filesystem::path p;
  if (const char* env = std::getenv("BOSCH_QWEN_MODEL")) {
    p = env;
  } else {
    p = cache_dir() / "models" / "Qwen2.5-Coder-0.5B-Instruct.Q4_K_M.gguf";
  }
  if (std::filesystem::exists(p)) return p;
  FAIL("Qwen2.5-Coder model missing (run scripts/fetch-model --model qwen2.5-coder-0.5b): " << p.string());
  return {};
}

/// A mask of `layout` with each bit a fair coin of the seeded Boost
/// mt19937_64 (the same masks on every platform).
inline HeadMask random_mask(const HeadLayout& layout, std::uint64_t seed) {
  boost::random::mt19937_64 g(seed);
  boost::random::uniform_int_distribution<int> bit(0, 1);
  HeadMask m(layout);
  for (std::size_t i = 0; i < m.size(); ++i) m.set_flat(i, bit(g) == 1);
  return m;
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
