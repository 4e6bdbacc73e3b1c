// Scoring: log-softmax and teacher-forced answer log-probability against naive
// computations, RULER string match, passkey rule, greedy decoding.
#include <bosch/error.hpp>
#include <bosch/tasks/scoring.hpp>

#include "test_support.hpp"

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/uniform_real_distribution.hpp>

#include <cmath>
#include <string>
#include <vector>

using namespace bosch::tasks;

namespace {
// Naive log-softmax in long double, without the max shift: exact enough for
// logits in [-20, 20] (exp stays far from overflow).
long double naive_log_softmax(const std::vector<float>& row, int id) {
  long double sum = 0;
  for (float x : row) sum += std::exp(static_cast<long double>(x));
  return std::log(std::exp(static_cast<long double>(row[static_cast<std::size_t>(id)])) / sum);
}
}  // namespace

TEST_CASE("tasks scoring: log_softmax matches a naive computation and is stable") {
  boost::random::mt19937_64 rng(bosch::test::seed(1));
  boost::random::uniform_real_distribution<float> u(-20.f, 20.f);
  for (int trial = 0; trial < 20; ++trial) {
    std::vector<float> row(97);
    for (float& x : row) x = u(rng);
    for (int id : {0, 13, 96}) {
      // Both sums in >= double precision over 97 terms: agree to ~1e-13 relative.
      CHECK(log_softmax(row, id) ==
            doctest::Approx(static_cast<double>(naive_log_softmax(row, id))).epsilon(1e-12));
    }
  }
  // Large logits overflow a naive exp in float/double; the shifted form is exact:
  // log softmax([1000, 1001])[1] = -log(1 + e^-1).
  const std::vector<float> big = {1000.f, 1001.f};
  CHECK(log_softmax(big, 1) == doctest::Approx(-std::log1p(std::exp(-1.0))).epsilon(1e-15));
  CHECK(log_softmax(big, 0) == doctest::Approx(-1 - std::log1p(std::exp(-1.0))).epsilon(1e-15));
  CHECK_THROWS_AS(log_softmax(big, 2), bosch::invalid_argument);
  CHECK_THROWS_AS(log_softmax(std::vector<float>{}, 0), bosch::invalid_argument);
  CHECK(argmax(big) == 1);
  CHECK(argmax(std::vector<float>{3.f, 5.f, 5.f}) == 1);
}

TEST_CASE("tasks scoring: answer_logprob on a hand-computed case") {
  // Row 0: uniform over 3 -> p(1) = 1/3. Row 1: logits [0, ln 3, 0] -> p(1) = 3/5.
  const float ln3 = static_cast<float>(std::log(3.0));
  const std::vector<float> logits = {0.f, 0.f, 0.f, 0.f, ln3, 0.f};
  const std::vector<int> answer = {1, 1};
  const AnswerScore s = answer_logprob(logits, 3, answer);
  // ln3 is rounded to float: p(1) of row 1 is off by ~1e-8 relative.
  CHECK(s.tokens == 2);
  CHECK(s.sum_logprob == doctest::Approx(std::log(1.0 / 3) + std::log(0.6)).epsilon(1e-7));
  CHECK(s.mean_logprob == doctest::Approx((std::log(1.0 / 3) + std::log(0.6)) / 2).epsilon(1e-7));
  CHECK(s.probability == doctest::Approx(std::sqrt(0.2)).epsilon(1e-7));
  // Answer token 0 of row 1: p = 1/5.
  const std::vector<int> other = {1, 0};
  CHECK(answer_logprob(logits, 3, other).sum_logprob ==
        doctest::Approx(std::log(1.0 / 3) + std::log(0.2)).epsilon(1e-7));
  CHECK_THROWS_AS(answer_logprob(logits, 4, answer), bosch::invalid_argument);
  CHECK_THROWS_AS(answer_logprob(logits, 3, std::vector<int>{1, 3}), bosch::invalid_argument);
  CHECK_THROWS_AS(answer_logprob(logits, 3, std::vector<int>{}), bosch::invalid_argument);
}

TEST_CASE("tasks scoring: teacher forcing positions") {
  const std::vector<int> prompt = {5, 6, 7};
  const std::vector<int> answer = {8, 9};
  const TeacherForcing t = teacher_forcing(prompt, answer);
  CHECK(t.tokens == std::vector<int>{5, 6, 7, 8});
  CHECK(t.positions == std::vector<int>{2, 3});
  const TeacherForcing one = teacher_forcing(prompt, std::vector<int>{8});
  CHECK(one.tokens == prompt);
  CHECK(one.positions == std::vector<int>{2});
  CHECK_THROWS_AS(teacher_forcing(std::vector<int>{}, answer), bosch::invalid_argument);
  CHECK_THROWS_AS(teacher_forcing(prompt, std::vector<int>{}), bosch::invalid_argument);
}

TEST_CASE("tasks scoring: RULER string match and the passkey rule") {
  const std::vector<std::string> refs = {"1234567", "Brave-Lantern", "7654321"};
  CHECK(string_match_all("The numbers are 1234567 and brave-lantern.", refs) ==
        doctest::Approx(2.0 / 3));
  CHECK(string_match_all("1234567 7654321 BRAVE-LANTERN", refs) == 1.0);
  CHECK(string_match_all("nothing", refs) == 0.0);
  CHECK(string_match_all("anything", std::vector<std::string>{}) == 0.0);
  CHECK(string_match_part("is 7654321", refs) == 1.0);
  CHECK(string_match_part("is 765432", refs) == 0.0);

  CHECK(passkey_match(" 12345. Remember it.", "12345"));
  CHECK(passkey_match("The pass key is 12345 or 67890", "12345"));
  CHECK_FALSE(passkey_match("The pass key is 67890 or 12345", "12345"));
  CHECK_FALSE(passkey_match(" 123456", "12345"));
  CHECK_FALSE(passkey_match(" 12 345", "12345"));
  CHECK_FALSE(passkey_match("no digits", "12345"));

  Sample pk;
  pk.kind = TaskKind::passkey;
  pk.references = {"54321"};
  CHECK(accuracy(pk, " 54321.") == 1.0);
  CHECK(accuracy(pk, " 5432 1") == 0.0);
  Sample mv;
  mv.kind = TaskKind::niah_multivalue;
  mv.references = {"1111111", "2222222", "3333333", "4444444"};
  CHECK(accuracy(mv, " 2222222, 1111111 and 4444444") == doctest::Approx(0.75));
}

TEST_CASE("tasks scoring: greedy_generate through a callback") {
  const std::vector<int> prompt = {1, 2, 3};
  std::vector<std::size_t> lengths;
  // Next token = last token + 1; EOS = 7.
  const NextToken next = [&](std::span<const int> seq) {
    lengths.push_back(seq.size());
    return seq.back() + 1;
  };
  CHECK(greedy_generate(next, prompt, 10, 7) == std::vector<int>{4, 5, 6});
  CHECK(lengths == std::vector<std::size_t>{3, 4, 5, 6});  // the call that produced EOS too
  CHECK(greedy_generate(next, prompt, 2) == std::vector<int>{4, 5});
  CHECK(greedy_generate(next, prompt, 0).empty());
  CHECK_THROWS_AS(greedy_generate(next, prompt, -1), bosch::invalid_argument);
}

TEST_CASE("scoring: LongBench's QA normalization, token F1 and exact match") {
  using namespace bosch::tasks;
  CHECK(normalize_answer("  The Eiffel-Tower, in PARIS!  ") == "eiffeltower in paris");
  CHECK(normalize_answer("an apple a day") == "apple day");
  CHECK(normalize_answer("...") == "");
  // qa_f1_score: common tokens 2 of 3 predicted and 2 of 2 gold: P 2/3, R 1, F1 0.8.
  CHECK(token_f1("Paris France capital", "paris, france") == doctest::Approx(0.8));
  CHECK(token_f1("the", "Paris") == 0.0);  // empty after normalization
  CHECK(token_f1("x b b", "b b c") == doctest::Approx(2.0 / 3.0));  // multiset overlap 2
  CHECK(token_f1("a b b", "b b c") == doctest::Approx(0.8));        // "a" is an article: P 1, R 2/3
  CHECK(exact_match("The Paris.", "paris"));
  CHECK_FALSE(exact_match("Paris, France", "paris"));
  CHECK(first_line("\n  \n Paris\nMore text") == " Paris");
  CHECK(first_line("") == "");
  Sample s;
  s.kind = TaskKind::file;
  s.references = {"Ada Lovelace"};
  CHECK(accuracy(s, " Ada Lovelace.\nShe was the keeper.") == 1.0);
  CHECK(accuracy(s, " Lovelace") == doctest::Approx(2.0 / 3.0));
  CHECK(answer_match(s, " ada lovelace\nmore") == 1.0);
  CHECK(answer_match(s, " Ada") == 0.0);
  s.kind = TaskKind::niah_single_1;
  CHECK(std::isnan(answer_match(s, "Ada Lovelace")));
}
