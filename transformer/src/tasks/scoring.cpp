// SPDX-License-Identifier: Apache-2.0
// Scores: teacher-forced answer log-probability, RULER string match, passkey,
// greedy decoding through a callback.
#include <bosch/error.hpp>
#include <bosch/tasks/scoring.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <string>

namespace bosch::tasks {
namespace {

char lower(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

std::string lowered(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = lower(c);
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }

}  // namespace

double log_softmax(std::span<const float> row, int id) {
  if (row.empty()) throw invalid_argument("empty logits row", "log_softmax");
  if (id < 0 || static_cast<std::size_t>(id) >= row.size())
    throw invalid_argument("token id " + std::to_string(id) + " outside a row of " +
                               std::to_string(row.size()) + " logits",
                           "log_softmax");
  double max = -std::numeric_limits<double>::infinity();
  for (float x : row) max = std::max(max, static_cast<double>(x));
  double sum = 0;
  for (float x : row) sum += std::exp(static_cast<double>(x) - max);
  return static_cast<double>(row[static_cast<std::size_t>(id)]) - max - std::log(sum);
}

int argmax(std::span<const float> row) noexcept {
  if (row.empty()) return -1;
  return static_cast<int>(std::max_element(row.begin(), row.end()) - row.begin());
}

AnswerScore answer_logprob(std::span<const float> logits, int vocab, std::span<const int> answer) {
  if (answer.empty()) throw invalid_argument("empty answer", "answer_logprob");
  if (vocab <= 0) throw invalid_argument("vocab must be positive", "answer_logprob");
  const std::size_t v = static_cast<std::size_t>(vocab);
  if (logits.size() != answer.size() * v)
    throw invalid_argument("expected " + std::to_string(answer.size()) + " x " +
                               std::to_string(vocab) + " logits, got " +
                               std::to_string(logits.size()),
                           "answer_logprob");
  AnswerScore s;
  for (std::size_t i = 0; i < answer.size(); ++i)
    s.sum_logprob += log_softmax(logits.subspan(i * v, v), answer[i]);
  s.tokens = static_cast<int>(answer.size());
  s.mean_logprob = s.sum_logprob / static_cast<double>(answer.size());
  s.probability = std::exp(s.mean_logprob);
  return s;
}

TeacherForcing teacher_forcing(std::span<const int> prompt, std::span<const int> answer) {
  if (prompt.empty()) throw invalid_argument("empty prompt", "teacher_forcing");
  if (answer.empty()) throw invalid_argument("empty answer", "teacher_forcing");
  TeacherForcing t;
  t.tokens.reserve(prompt.size() + answer.size() - 1);
  t.tokens.assign(prompt.begin(), prompt.end());
  t.tokens.insert(t.tokens.end(), answer.begin(), answer.end() - 1);
  const int p = static_cast<int>(prompt.size());
  for (int i = 0; i < static_cast<int>(answer.size()); ++i) t.positions.push_back(p - 1 + i);
  return t;
}

TeacherForcing teacher_forcing(const Sample& sample) {
  return teacher_forcing(sample.prompt, sample.answer);
}

double string_match_all(std::string_view prediction, std::span<const std::string> references) {
  if (references.empty()) return 0;
  const std::string p = lowered(prediction);
  std::size_t found = 0;
  for (const auto& r : references)
    if (p.find(lowered(r)) != std::string::npos) ++found;
  return static_cast<double>(found) / static_cast<double>(references.size());
}

double string_match_part(std::string_view prediction, std::span<const std::string> references) {
  const std::string p = lowered(prediction);
  for (const auto& r : references)
    if (p.find(lowered(r)) != std::string::npos) return 1;
  return 0;
}

bool passkey_match(std::string_view prediction, std::string_view key) {
  const auto b = std::find_if(prediction.begin(), prediction.end(), is_digit);
  if (b == prediction.end()) return false;
  const auto e = std::find_if_not(b, prediction.end(), is_digit);
  return std::string_view(&*b, static_cast<std::size_t>(e - b)) == key;
}

std::string normalize_answer(std::string_view text) {
  // Lowercase, punctuation out, then words without the articles, one space apart.
  std::string cleaned;
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (u < 128 && std::ispunct(u)) continue;
    cleaned += lower(c);
  }
  std::string out;
  std::size_t pos = 0;
  auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
  while (pos < cleaned.size()) {
    while (pos < cleaned.size() && is_space(cleaned[pos])) ++pos;
    std::size_t end = pos;
    while (end < cleaned.size() && !is_space(cleaned[end])) ++end;
    const std::string_view word(cleaned.data() + pos, end - pos);
    if (!word.empty() && word != "a" && word != "an" && word != "the") {
      if (!out.empty()) out += ' ';
      out += word;
    }
    pos = end;
  }
  return out;
}

std::string_view first_line(std::string_view prediction) {
  std::size_t pos = 0;
  while (pos < prediction.size()) {
    std::size_t end = prediction.find('\n', pos);
    if (end == std::string_view::npos) end = prediction.size();
    const std::string_view l = prediction.substr(pos, end - pos);
    if (l.find_first_not_of(" \t\r\f\v") != std::string_view::npos) return l;
    pos = end + 1;
  }
  return {};
}

double token_f1(std::string_view prediction, std::string_view gold) {
  auto words = [](const std::string& s) {
    std::map<std::string, int> count;
    std::size_t pos = 0;
    while (pos < s.size()) {
      std::size_t end = s.find(' ', pos);
      if (end == std::string::npos) end = s.size();
      ++count[s.substr(pos, end - pos)];
      pos = end + 1;
    }
    return count;
  };
  const std::string p = normalize_answer(prediction), g = normalize_answer(gold);
  if (p.empty() || g.empty()) return 0;
  const auto pw = words(p), gw = words(g);
  int common = 0, np = 0, ng = 0;
  for (const auto& [w, n] : pw) {
    np += n;
    if (auto it = gw.find(w); it != gw.end()) common += std::min(n, it->second);
  }
  for (const auto& [w, n] : gw) ng += n;
  if (common == 0) return 0;
  const double precision = static_cast<double>(common) / np, recall = static_cast<double>(common) / ng;
  return 2 * precision * recall / (precision + recall);
}

bool exact_match(std::string_view prediction, std::string_view gold) {
  return normalize_answer(prediction) == normalize_answer(gold);
}

double answer_match(const Sample& sample, std::string_view prediction) {
  if (sample.kind != TaskKind::file || sample.references.empty()) return std::nan("");
  return exact_match(first_line(prediction), sample.references.front()) ? 1 : 0;
}

double accuracy(const Sample& sample, std::string_view prediction) {
  if (sample.kind == TaskKind::file)
    return sample.references.empty() ? 0 : token_f1(first_line(prediction), sample.references.front());
  if (sample.kind == TaskKind::passkey)
    return !sample.references.empty() && passkey_match(prediction, sample.references.front()) ? 1
                                                                                               : 0;
  return string_match_all(prediction, sample.references);
}

std::vector<int> greedy_generate(const NextToken& next_token, std::span<const int> prompt,
                                 int max_new, int eos) {
  if (max_new < 0) throw invalid_argument("max_new must be >= 0", "greedy_generate");
  if (!next_token) throw invalid_argument("no next_token callback", "greedy_generate");
  std::vector<int> seq(prompt.begin(), prompt.end());
  seq.reserve(prompt.size() + static_cast<std::size_t>(max_new));
  std::vector<int> out;
  for (int i = 0; i < max_new; ++i) {
    const int t = next_token(seq);
    if (eos >= 0 && t == eos) break;
    seq.push_back(t);
    out.push_back(t);
  }
  return out;
}

}  // namespace bosch::tasks
