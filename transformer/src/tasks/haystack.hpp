// SPDX-License-Identifier: Apache-2.0
// Internal to bosch::tasks: the streams of haystack units.
#pragma once

#include <bosch/tasks/task.hpp>
#include <bosch/tasks/text.hpp>

#include <boost/random/mersenne_twister.hpp>

#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace bosch::tasks::detail {

/// RULER's noise haystack line and the passkey garbage (the same five sentences).
inline constexpr std::string_view kNoise =
    "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again.";

/// One haystack unit: a sentence, a noise line or a distractor needle line.
struct Unit {
  std::string text;
  int file = -1;             ///< natural text: file index, else -1
  std::size_t sentence = 0;  ///< natural text: sentence index in the file
};

class UnitSource {
 public:
  virtual ~UnitSource() = default;
  virtual Unit next() = 0;
};

/// Cycles through fixed strings, from the first.
class RepeatSource final : public UnitSource {
 public:
  explicit RepeatSource(std::vector<std::string> units);
  Unit next() override;

 private:
  std::vector<std::string> units_;
  std::size_t i_ = 0;
};

/// Lines produced by a function (RULER's needle haystack).
class GeneratedSource final : public UnitSource {
 public:
  explicit GeneratedSource(std::function<std::string()> make) : make_(std::move(make)) {}
  Unit next() override { return {make_(), -1, 0}; }

 private:
  std::function<std::string()> make_;
};

/// The sentences of a split's region of every corpus file, as one cyclic
/// stream (files in order), read from a random start position.
class TextSource final : public UnitSource {
 public:
  /// Throws bosch::format_error when the split's regions hold no sentence.
  TextSource(const Corpus& corpus, Split split, boost::random::mt19937_64& rng);
  Unit next() override;
  /// The first `count` words of the sentences right before the start position
  /// (cyclically), starting at a sentence start; the sentences used are
  /// reported through `used`. Throws bosch::format_error when the region is too
  /// short to hold them apart from a haystack.
  std::string words_before_start(int count, std::vector<Unit>& used) const;
  std::size_t size() const noexcept { return total_; }

 private:
  Unit at(std::size_t position) const;

  const Corpus& corpus_;
  struct Region {
    int file;
    std::size_t begin, end;
  };
  std::vector<Region> regions_;
  std::size_t total_ = 0;
  std::size_t start_ = 0;
  std::size_t pos_ = 0;
};

}  // namespace bosch::tasks::detail
