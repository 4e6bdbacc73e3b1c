// The pure building blocks of the static head rankings on crafted inputs:
// pooling, crafted attention statistics, RAZOR's ratio rule and probe,
// lexicographic ranks, QADA's Gaussian bulk estimate on synthetic keys,
// RETRIEVAL's copy events and recall, JSON round trip.
#include <bosch/eval/head_scores.hpp>

#include <boost/random/mersenne_twister.hpp>
#include <boost/random/normal_distribution.hpp>
#include <doctest/doctest.h>

#include "test_support.hpp"

#include <cmath>
#include <vector>

using namespace bosch;
using namespace bosch::eval;

TEST_CASE("pooling query heads to KV heads: max and mean over each GQA group") {
  const HeadLayout lay{2, 4, 2};
  const std::vector<double> q{1, 5, 2, 3, 0, 0, 7, -1};
  CHECK(pool_query_heads(lay, q, Pooling::max) == std::vector<double>{5, 3, 0, 7});
  CHECK(pool_query_heads(lay, q, Pooling::mean) == std::vector<double>{3, 2.5, 0, 3});
  CHECK_THROWS_AS(pool_query_heads(lay, std::vector<double>(7), Pooling::max), bosch::invalid_argument);
}

TEST_CASE("crafted attention statistics: a purely local head gets the lowest DCAM score and is made SWA first") {
  // 3 layers x 2 query heads x 2 KV heads (MHA): statistics over 10 rows.
  const HeadLayout lay{3, 2, 2};
  cpu::HeadStats st;
  st.num_layers = 3;
  st.num_heads = 2;
  st.rows = 10;
  st.beyond_window_mass = {4.0, 6.0, 0.0, 2.5, 9.0, 1.0};  // head (1, 0) is purely local
  const auto scores = pool_query_heads(lay, per_row_mean(st, st.beyond_window_mass), Pooling::max);
  CHECK(scores[2] == 0.0);
  CHECK(scores[4] == doctest::Approx(0.9));
  HeadScores hs;
  hs.method = Method::dcam;
  hs.layout = lay;
  hs.scores = scores;
  const auto m1 = ranking_mask(hs, 1.0 / 6.0);
  CHECK(m1.count() == 1);
  CHECK(m1.swa(1, 0));
  // The ranking is nested across ratios (a static ranking).
  const auto m3 = ranking_mask(hs, 0.5);
  CHECK(m3.swa(1, 0));
  CHECK(turnover(m1, m3) == 0.0);
}

TEST_CASE("RAZOR ratio rule: full heads = top induction united with top echo, filled by induction") {
  // 30 KV heads; induction descending with index, echo highest at head 29 (lowest induction).
  const HeadLayout lay{10, 3, 3};
  std::vector<double> ind(30), echo(30, 0.0);
  for (int i = 0; i < 30; ++i) ind[static_cast<std::size_t>(i)] = 1.0 - i / 30.0;
  echo[29] = 0.9;
  echo[28] = 0.5;
  // rho = 0.5: T = 15 SWA, F = 15 full = top 14 induction (heads 0..13) + top 1 echo (head 29).
  const auto s = razor_ratio_scores(lay, ind, echo, 0.5, 14.0 / 15.0);
  const auto m = baselines::mask_from_scores(lay, s, 0.5);
  CHECK(m.count() == 15);
  for (int i = 0; i < 14; ++i) CHECK_FALSE(m[static_cast<std::size_t>(i)]);
  CHECK_FALSE(m[29]);
  CHECK(m[14]);
  CHECK(m[28]);
  // Share 1: induction only.
  const auto m2 = baselines::mask_from_scores(lay, razor_ratio_scores(lay, ind, echo, 0.5, 1.0), 0.5);
  for (int i = 0; i < 15; ++i) CHECK_FALSE(m2[static_cast<std::size_t>(i)]);
  CHECK(m2[29]);
  // Overlap: when the top echo head is also a top induction head, the shortfall is filled by induction.
  std::vector<double> echo2(30, 0.0);
  echo2[0] = 1.0;
  const auto m3 = baselines::mask_from_scores(lay, razor_ratio_scores(lay, ind, echo2, 0.5, 14.0 / 15.0), 0.5);
  for (int i = 0; i < 15; ++i) CHECK_FALSE(m3[static_cast<std::size_t>(i)]);
}

TEST_CASE("lexicographic ranks break ties of the primary key by the secondary one") {
  const std::vector<double> p{0, 0, 1, 0, 1}, s{0.3, 0.1, 0.0, 0.3, 0.5};
  CHECK(lexicographic_ranks(p, s) == std::vector<double>{1, 0, 3, 1, 4});
}

TEST_CASE("RAZOR probe: repeated blocks, and the rows never walk back onto the BOS") {
  const auto t = razor_probe_tokens(100, 7, 4, 99, 5);
  REQUIRE(t.size() == 1 + 28);
  CHECK(t[0] == 99);
  for (int i = 8; i < 29; ++i) CHECK(t[static_cast<std::size_t>(i)] == t[static_cast<std::size_t>(i - 7)]);
  for (int i = 1; i < 29; ++i) {
    CHECK(t[static_cast<std::size_t>(i)] >= 25);
    CHECK(t[static_cast<std::size_t>(i)] < 75);
  }
  CHECK(razor_probe_tokens(100, 7, 4, 99, 5) == t);
  const auto rows = razor_probe_rows(7, 4, true);
  CHECK(rows.size() == 3 * 6);
  for (int i : rows) {
    CHECK(i >= 8);
    for (int j = i - 7; j >= 0; j -= 7) CHECK(j != 0);  // the echo walk of StatsRequest.period
  }
  CHECK(razor_probe_rows(7, 4, false).size() == 21);
}

namespace {
/// Exact bulk share: softmax mass of keys s <= j <= i - w for the last row.
double exact_share(const std::vector<float>& q, const std::vector<float>& keys, int d, int w, int s) {
  const int n = static_cast<int>(keys.size()) / d, i = n - 1;
  double bulk = 0, local = 0;
  for (int j = 0; j <= i; ++j) {
    double z = 0;
    for (int a = 0; a < d; ++a) z += static_cast<double>(q[static_cast<std::size_t>(a)]) * keys[static_cast<std::size_t>(j * d + a)];
    const double e = std::exp(z / std::sqrt(static_cast<double>(d)));
    (j >= s && j <= i - w ? bulk : local) += e;
  }
  return bulk / (bulk + local);
}
}  // namespace

TEST_CASE("QADA on synthetic keys: the Gaussian bulk estimate matches the exact mass for Gaussian keys") {
  const int d = 16, n = 4000, w = 32, s = 2;
  boost::random::mt19937_64 rng(bosch::test::seed(11));
  boost::random::normal_distribution<double> g;
  std::vector<float> keys(static_cast<std::size_t>(n) * d), q(d);
  // Bulk keys Gaussian with mean 0.3 and sd 0.5 per dim; local keys the same law.
  for (auto& k : keys) k = static_cast<float>(0.3 + 0.5 * g(rng));
  for (auto& x : q) x = static_cast<float>(g(rng));
  const double est = qada_bulk_share(q, keys, d, w, s);
  const double ex = exact_share(q, keys, d, w, s);
  // With q.k / 4 ~ N(m, v), v about 0.25, the sample mean of exp over ~4000 keys
  // has a relative sd of about sqrt((e^v - 1) / n) < 1%; the share, close to 1,
  // moves much less. Tolerance 1% absolute.
  CHECK(est == doctest::Approx(ex).epsilon(0.01));
  CHECK(est > 0.9);
  // A query aligned with the window keys gives a small share (bulk keys all
  // equal, so the Gaussian estimate is exact there).
  std::vector<float> keys2(static_cast<std::size_t>(200) * d, 0.0f);
  for (int j = 200 - w; j < 200; ++j) keys2[static_cast<std::size_t>(j * d)] = 3.0f;  // window keys along e0
  std::vector<float> q2(d, 0.0f);
  q2[0] = 8.0f;  // window logits 8 * 3 / 4 = 6, bulk logits 0
  const double local_share = qada_bulk_share(q2, keys2, d, w, 0);
  CHECK(local_share == doctest::Approx(exact_share(q2, keys2, d, w, 0)).epsilon(1e-9));  // bulk keys all equal: exact
  CHECK(local_share < 0.1);
  // The same query when the bulk keys carry the signal: share near 1.
  std::vector<float> keys3(static_cast<std::size_t>(200) * d, 0.0f);
  for (int j = 0; j < 200 - w; ++j) keys3[static_cast<std::size_t>(j * d)] = 3.0f;
  CHECK(qada_bulk_share(q2, keys3, d, w, 0) > 0.99);
  // No bulk: 0.
  CHECK(qada_bulk_share(q2, std::vector<float>(static_cast<std::size_t>(w) * d, 1.0f), d, w, 0) == 0.0);
}

TEST_CASE("QADA accumulation over a layer's Q/K buffers agrees with the per-row share") {
  const int d = 8, n = 40, Hq = 4, Hkv = 2, w = 8, s = 1;
  boost::random::mt19937_64 rng(bosch::test::seed(12));
  boost::random::normal_distribution<double> g;
  cpu::AttentionShape shape;
  shape.num_heads = Hq;
  shape.num_kv_heads = Hkv;
  shape.head_dim = d;
  shape.q_stride = shape.out_stride = static_cast<std::size_t>(Hq) * d;
  shape.kv_stride = static_cast<std::size_t>(Hkv) * d;
  std::vector<float> q(static_cast<std::size_t>(n) * Hq * d), k(static_cast<std::size_t>(n) * Hkv * d);
  for (auto& x : q) x = static_cast<float>(2 * g(rng));
  for (auto& x : k) x = static_cast<float>(g(rng));
  std::vector<double> sum(Hq, 0.0), rows(Hq, 0.0);
  qada_accumulate(q.data(), k.data(), n, shape, w, s, 0.0, sum, rows);
  for (int h = 0; h < Hq; ++h) {
    const int kv = h / 2;
    double expect = 0;
    for (int i = w + s; i < n; ++i) {
      std::vector<float> qi(q.begin() + (static_cast<std::ptrdiff_t>(i) * Hq + h) * d,
                            q.begin() + (static_cast<std::ptrdiff_t>(i) * Hq + h + 1) * d);
      std::vector<float> keys;
      for (int j = 0; j <= i; ++j)
        keys.insert(keys.end(), k.begin() + (static_cast<std::ptrdiff_t>(j) * Hkv + kv) * d,
                    k.begin() + (static_cast<std::ptrdiff_t>(j) * Hkv + kv + 1) * d);
      expect += qada_bulk_share(qi, keys, d, w, s);
    }
    CHECK(rows[static_cast<std::size_t>(h)] == n - w - s);
    CHECK(sum[static_cast<std::size_t>(h)] == doctest::Approx(expect).epsilon(1e-9));
  }
  // Threshold mode counts rows above it.
  std::vector<double> cnt(Hq, 0.0), rows2(Hq, 0.0);
  qada_accumulate(q.data(), k.data(), n, shape, w, s, 0.5, cnt, rows2);
  for (int h = 0; h < Hq; ++h) {
    CHECK(cnt[static_cast<std::size_t>(h)] <= rows2[static_cast<std::size_t>(h)]);
    CHECK(cnt[static_cast<std::size_t>(h)] == std::floor(cnt[static_cast<std::size_t>(h)]));
  }
}

TEST_CASE("RETRIEVAL: copy events need the argmax inside the needle span on the generated token") {
  const std::vector<int> prompt{5, 6, 7, 8, 9, 10};
  const std::vector<std::pair<int, int>> spans{{2, 4}};
  std::vector<double> ev(4, 0.0);
  // Heads: inside span with the right token; inside with another token; outside; out of range.
  count_copy_events(std::vector<int>{3, 2, 5, 17}, prompt, spans, 8, ev);
  CHECK(ev == std::vector<double>{1, 0, 0, 0});
  CHECK(token_recall(std::vector<int>{1, 2, 2, 9}, std::vector<int>{2, 2, 2, 1}) == doctest::Approx(0.75));
  CHECK(token_recall(std::vector<int>{}, std::vector<int>{3}) == 0.0);
}

TEST_CASE("head scores survive a JSON round trip; bad JSON is a format error") {
  HeadScores s;
  s.method = Method::razor;
  s.layout = {2, 4, 2};
  s.scores = {0.1, 0.2, 0.3, 0.4};
  s.secondary = {0, 1, 0, 1};
  s.query_scores = std::vector<double>(8, 0.5);
  s.evaluations = 3;
  s.forwards = 1.5;
  s.note = std::string(1, 'x');  // (GCC 12 -Wrestrict false positive on = "x")
  const auto back = head_scores_from_json(to_json(s));
  CHECK(back.method == Method::razor);
  CHECK(back.scores == s.scores);
  CHECK(back.secondary == s.secondary);
  CHECK(back.forwards == 1.5);
  CHECK(ranking_mask(back, 0.5) == ranking_mask(s, 0.5));
  auto j = to_json(s);
  j["scores"] = std::vector<double>{1, 2};
  CHECK_THROWS_AS(head_scores_from_json(j), bosch::format_error);
  j = to_json(s);
  j.erase("layout");
  CHECK_THROWS_AS(head_scores_from_json(j), bosch::format_error);
  CHECK(parse_method("fisher") == Method::fisher);
  CHECK_THROWS_AS(parse_method("nope"), bosch::invalid_argument);
}
