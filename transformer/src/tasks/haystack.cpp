// SPDX-License-Identifier: Apache-2.0
// The streams of haystack units.
#include "haystack.hpp"

#include <bosch/error.hpp>

#include <boost/random/uniform_int_distribution.hpp>

#include <algorithm>

namespace bosch::tasks::detail {

RepeatSource::RepeatSource(std::vector<std::string> units) : units_(std::move(units)) {
  if (units_.empty()) throw invalid_argument("empty haystack", "tasks::generate");
}

Unit RepeatSource::next() {
  Unit u{units_[i_], -1, 0};
  i_ = (i_ + 1) % units_.size();
  return u;
}

TextSource::TextSource(const Corpus& corpus, Split split, boost::random::mt19937_64& rng)
    : corpus_(corpus) {
  for (std::size_t f = 0; f < corpus.sentences.size(); ++f) {
    const SentenceRange r = split_region(corpus.sentences[f].size(), split);
    if (r.end > r.begin) {
      regions_.push_back({static_cast<int>(f), r.begin, r.end});
      total_ += r.end - r.begin;
    }
  }
  if (total_ == 0) {
    std::string where;
    for (const auto& f : corpus.files) where += (where.empty() ? "" : ", ") + f.string();
    throw format_error("no sentence in the " + std::string(to_string(split)) +
                           " half of the text files",
                       where);
  }
  start_ = boost::random::uniform_int_distribution<std::size_t>(0, total_ - 1)(rng);
  pos_ = start_;
}

Unit TextSource::at(std::size_t p) const {
  for (const auto& r : regions_) {
    const std::size_t n = r.end - r.begin;
    if (p < n) {
      const std::size_t s = r.begin + p;
      return {corpus_.sentences[static_cast<std::size_t>(r.file)][s], r.file, s};
    }
    p -= n;
  }
  return {};  // unreachable: p < total_
}

Unit TextSource::next() {
  Unit u = at(pos_);
  pos_ = (pos_ + 1) % total_;
  return u;
}

std::string TextSource::words_before_start(int count, std::vector<Unit>& used) const {
  // Walk back sentence by sentence until they hold `count` words; use at most a
  // quarter of the stream so the span stays apart from the haystack after it.
  std::vector<Unit> back;
  int words = 0;
  std::size_t p = start_;
  while (words < count) {
    if (back.size() + 1 > total_ / 4)
      throw format_error("text too short for a copy span of " + std::to_string(count) + " words",
                         "tasks::generate");
    p = (p + total_ - 1) % total_;
    back.push_back(at(p));
    const auto& t = back.back().text;
    words += static_cast<int>(std::count(t.begin(), t.end(), ' ')) + 1;
  }
  std::string out;
  int taken = 0;
  for (auto it = back.rbegin(); it != back.rend() && taken < count; ++it) {
    used.push_back(*it);
    std::size_t b = 0;
    const std::string& t = it->text;
    while (b <= t.size() && taken < count) {
      std::size_t e = t.find(' ', b);
      if (e == std::string::npos) e = t.size();
      if (!out.empty()) out += ' ';
      out.append(t, b, e - b);
      ++taken;
      b = e + 1;
    }
  }
  return out;
}

}  // namespace bosch::tasks::detail
