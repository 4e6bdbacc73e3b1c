// SPDX-License-Identifier: Apache-2.0
// Head scores: names, options, ranking to masks, JSON, and the pure building
// blocks (pooling, RAZOR's ratio rule and probe, lexicographic ranks, QADA's
// Gaussian bulk estimate, RETRIEVAL's copy events).

#include <bosch/error.hpp>
#include <bosch/eval/head_scores.hpp>
#include <bosch/search/rng.hpp>

#include <boost/random/uniform_int_distribution.hpp>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <string>

namespace bosch::eval {
namespace {

bool iequal(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i])))
      return false;
  return true;
}

/// Fraction rank of each value in [0, 1): rank / n, ascending by (value, index).
std::vector<double> rank_fraction(std::span<const double> v) {
  std::vector<std::size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  std::vector<double> out(v.size());
  for (std::size_t r = 0; r < idx.size(); ++r)
    out[idx[r]] = static_cast<double>(r) / static_cast<double>(v.size());
  return out;
}

}  // namespace

std::vector<Method> all_methods() {
  return {Method::dcam, Method::apl, Method::razor, Method::qada,
          Method::proxy, Method::fisher, Method::retrieval};
}

std::string_view to_string(Method method) noexcept {
  switch (method) {
    case Method::dcam: return "DCAM";
    case Method::apl: return "APL";
    case Method::razor: return "RAZOR";
    case Method::qada: return "QADA";
    case Method::proxy: return "PROXY";
    case Method::fisher: return "FISHER";
    case Method::retrieval: return "RETRIEVAL";
  }
  return "?";
}

Method parse_method(std::string_view name) {
  std::string names;
  for (Method m : all_methods()) {
    if (iequal(name, to_string(m))) return m;
    names += names.empty() ? "" : ", ";
    names += to_string(m);
  }
  throw invalid_argument("unknown head-ranking method '" + std::string(name) + "' (expected one of: " +
                             names + ")",
                         "method");
}

void validate(const HeadScoreOptions& o) {
  auto fail = [](const std::string& msg, const char* field) { throw invalid_argument(msg, field); };
  if (o.window < 1) fail("must be >= 1, got " + std::to_string(o.window), "window");
  if (o.sinks < 0) fail("must be >= 0, got " + std::to_string(o.sinks), "sinks");
  if (o.razor_block < 2) fail("must be >= 2, got " + std::to_string(o.razor_block), "razor_block");
  if (o.razor_repeats < 2) fail("must be >= 2, got " + std::to_string(o.razor_repeats), "razor_repeats");
  if (!(o.razor_induction_share >= 0.0 && o.razor_induction_share <= 1.0))
    fail("must lie in [0, 1]", "razor_induction_share");
  if (!(o.qada_threshold >= 0.0 && o.qada_threshold < 1.0)) fail("must lie in [0, 1)", "qada_threshold");
  if (!(o.fisher_epsilon > 0.0 && o.fisher_epsilon <= 1.0)) fail("must lie in (0, 1]", "fisher_epsilon");
  if (o.retrieval_extra_tokens < 0) fail("must be >= 0", "retrieval_extra_tokens");
  if (!(o.retrieval_min_recall >= 0.0 && o.retrieval_min_recall <= 1.0))
    fail("must lie in [0, 1]", "retrieval_min_recall");
}

// --- ranking -------------------------------------------------------------------------

std::vector<double> ranking_scores(const HeadScores& s, double rho) {
  check_layout(s.layout, "head scores");
  if (s.scores.size() != s.layout.size())
    throw invalid_argument("scores do not fit the layout", std::string(to_string(s.method)));
  switch (s.method) {
    case Method::razor:
      return razor_ratio_scores(s.layout, s.scores, s.secondary, rho, s.induction_share);
    case Method::retrieval:
      if (s.secondary.size() == s.scores.size()) return lexicographic_ranks(s.scores, s.secondary);
      return s.scores;
    default:
      return s.scores;
  }
}

HeadMask ranking_mask(const HeadScores& s, double rho, baselines::Quota quota) {
  const auto scores = ranking_scores(s, rho);
  return baselines::mask_from_scores(s.layout, scores, rho, quota);
}

std::vector<double> pool_query_heads(const HeadLayout& layout, std::span<const double> per_query,
                                     Pooling pooling) {
  check_layout(layout, "pool_query_heads");
  const std::size_t L = static_cast<std::size_t>(layout.num_layers);
  const std::size_t Hq = static_cast<std::size_t>(layout.num_query_heads);
  const std::size_t Hkv = static_cast<std::size_t>(layout.num_kv_heads);
  if (per_query.size() != L * Hq)
    throw invalid_argument("expected " + std::to_string(L * Hq) + " per-query-head values, got " +
                               std::to_string(per_query.size()),
                           "pool_query_heads");
  const std::size_t G = Hq / Hkv;
  std::vector<double> out(L * Hkv);
  for (std::size_t l = 0; l < L; ++l)
    for (std::size_t g = 0; g < Hkv; ++g) {
      double acc = pooling == Pooling::max ? -std::numeric_limits<double>::infinity() : 0.0;
      for (std::size_t r = 0; r < G; ++r) {
        const double v = per_query[l * Hq + g * G + r];
        acc = pooling == Pooling::max ? std::max(acc, v) : acc + v;
      }
      out[l * Hkv + g] = pooling == Pooling::max ? acc : acc / static_cast<double>(G);
    }
  return out;
}

std::vector<double> per_row_mean(const cpu::HeadStats& stats, const std::vector<double>& field) {
  std::vector<double> out(field.size(), 0.0);
  if (stats.rows > 0)
    for (std::size_t i = 0; i < field.size(); ++i) out[i] = field[i] / stats.rows;
  return out;
}

std::vector<double> razor_ratio_scores(const HeadLayout& layout, std::span<const double> induction,
                                       std::span<const double> echo, double rho, double share) {
  const std::size_t N = layout.size();
  const std::size_t T = target_count(layout, rho);
  if (induction.size() != N || echo.size() != N)
    throw invalid_argument("RAZOR needs one induction and one echo score per KV head", "razor_ratio_scores");
  if (!(share >= 0.0 && share <= 1.0)) throw invalid_argument("share must lie in [0, 1]", "razor_ratio_scores");
  const std::size_t F = N - T;  // heads kept full
  auto order = [&](std::span<const double> primary, std::span<const double> other) {
    std::vector<std::size_t> idx(N);
    std::iota(idx.begin(), idx.end(), std::size_t{0});
    std::stable_sort(idx.begin(), idx.end(), [&](std::size_t a, std::size_t b) {
      if (primary[a] != primary[b]) return primary[a] > primary[b];
      return other[a] > other[b];
    });
    return idx;
  };
  const auto by_induction = order(induction, echo);
  const auto by_echo = order(echo, induction);
  const auto n_ind = static_cast<std::size_t>(std::ceil(static_cast<double>(F) * share - 1e-9));
  const auto n_echo = static_cast<std::size_t>(std::ceil(static_cast<double>(F) * (1.0 - share) - 1e-9));
  std::vector<char> full(N, 0);
  std::size_t kept = 0;
  auto take = [&](std::size_t i) {
    if (kept < F && !full[i]) {
      full[i] = 1;
      ++kept;
    }
  };
  for (std::size_t r = 0; r < std::min(n_ind, N); ++r) take(by_induction[r]);
  for (std::size_t r = 0; r < std::min(n_echo, N); ++r) take(by_echo[r]);
  for (std::size_t r = 0; r < N && kept < F; ++r) take(by_induction[r]);
  for (std::size_t r = 0; r < N && kept < F; ++r) take(by_echo[r]);
  auto out = rank_fraction(induction);
  for (std::size_t i = 0; i < N; ++i)
    if (full[i]) out[i] += 2.0;
  return out;
}

std::vector<double> lexicographic_ranks(std::span<const double> primary, std::span<const double> secondary) {
  if (primary.size() != secondary.size())
    throw invalid_argument("primary and secondary keys differ in size", "lexicographic_ranks");
  std::vector<std::size_t> idx(primary.size());
  std::iota(idx.begin(), idx.end(), std::size_t{0});
  auto less = [&](std::size_t a, std::size_t b) {
    if (primary[a] != primary[b]) return primary[a] < primary[b];
    return secondary[a] < secondary[b];
  };
  std::stable_sort(idx.begin(), idx.end(), less);
  std::vector<double> out(primary.size());
  double rank = 0;
  for (std::size_t r = 0; r < idx.size(); ++r) {
    if (r > 0 && less(idx[r - 1], idx[r])) rank = static_cast<double>(r);
    out[idx[r]] = rank;
  }
  return out;
}

std::vector<int> razor_probe_tokens(int vocab, int block, int repeats, int bos, std::uint64_t seed) {
  if (vocab < 1 || block < 1 || repeats < 1)
    throw invalid_argument("vocab, block and repeats must be positive", "razor_probe_tokens");
  const int lo = vocab / 4, hi = std::max(lo, 3 * vocab / 4 - 1);
  auto rng = search::make_engine(seed, {0x7a3a});
  boost::random::uniform_int_distribution<int> u(lo, hi);
  std::vector<int> blockv(static_cast<std::size_t>(block));
  for (auto& t : blockv) t = u(rng);
  std::vector<int> out;
  if (bos >= 0) out.push_back(bos);
  for (int r = 0; r < repeats; ++r) out.insert(out.end(), blockv.begin(), blockv.end());
  return out;
}

std::vector<int> razor_probe_rows(int block, int repeats, bool bos) {
  std::vector<int> rows;
  const int off = bos ? 1 : 0;
  for (int i = off + block; i < off + block * repeats; ++i) {
    if (bos && (i - off) % block == block - 1) continue;
    rows.push_back(i);
  }
  return rows;
}

// --- QADA -------------------------------------------------------------------------------

namespace {

/// log(sum exp(z)) of the local logits and the Gaussian log bulk mass -> share.
double share_from(double log_local, double log_bulk) {
  const double t = log_local - log_bulk;
  if (t > 700) return 0.0;
  return 1.0 / (1.0 + std::exp(t));
}

/// Running first and second moments of the bulk keys of one KV head.
struct Moments {
  int d = 0;
  double n = 0;
  std::vector<double> s1, s2;  // sum k, sum k k^T (row-major d x d)
  explicit Moments(int dim) : d(dim), s1(static_cast<std::size_t>(dim), 0.0), s2(static_cast<std::size_t>(dim) * dim, 0.0) {}
  void add(const float* k) {
    n += 1;
    for (int a = 0; a < d; ++a) {
      const double ka = k[a];
      s1[static_cast<std::size_t>(a)] += ka;
      double* row = s2.data() + static_cast<std::size_t>(a) * d;
      for (int b = 0; b < d; ++b) row[b] += ka * static_cast<double>(k[b]);
    }
  }
  /// log of n * exp(mean + var / 2) for the logits q.k * scale.
  double log_bulk(const float* q, double scale) const {
    double qm = 0, qsq = 0;
    for (int a = 0; a < d; ++a) {
      const double qa = q[a];
      qm += qa * s1[static_cast<std::size_t>(a)];
      const double* row = s2.data() + static_cast<std::size_t>(a) * d;
      double r = 0;
      for (int b = 0; b < d; ++b) r += row[b] * static_cast<double>(q[b]);
      qsq += qa * r;
    }
    const double mean = qm / n;                           // q . mu
    const double var = std::max(0.0, qsq / n - mean * mean);  // q^T Sigma q
    return std::log(n) + mean * scale + 0.5 * var * scale * scale;
  }
};

double log_local_mass(const float* q, const float* k, std::size_t kv_stride, int d, int i, int window,
                      int sinks, double scale) {
  const int lo = std::max(0, i - window + 1);
  double mx = -std::numeric_limits<double>::infinity();
  std::vector<double> z;
  auto add = [&](int j) {
    double dot = 0;
    const float* kj = k + static_cast<std::size_t>(j) * kv_stride;
    for (int a = 0; a < d; ++a) dot += static_cast<double>(q[a]) * kj[a];
    z.push_back(dot * scale);
    mx = std::max(mx, z.back());
  };
  for (int j = 0; j < std::min(sinks, lo); ++j) add(j);
  for (int j = lo; j <= i; ++j) add(j);
  double sum = 0;
  for (double v : z) sum += std::exp(v - mx);
  return mx + std::log(sum);
}

}  // namespace

double qada_bulk_share(std::span<const float> q, std::span<const float> keys, int d, int window, int sinks) {
  if (d < 1 || q.size() != static_cast<std::size_t>(d) || keys.size() % static_cast<std::size_t>(d) != 0 ||
      keys.empty() || window < 1 || sinks < 0)
    throw invalid_argument("inconsistent query, keys, window or sinks", "qada_bulk_share");
  const int n = static_cast<int>(keys.size() / static_cast<std::size_t>(d));
  const int i = n - 1;
  if (i - window < sinks) return 0.0;
  Moments m(d);
  for (int j = sinks; j <= i - window; ++j) m.add(keys.data() + static_cast<std::size_t>(j) * d);
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  return share_from(log_local_mass(q.data(), keys.data(), static_cast<std::size_t>(d), d, i, window, sinks, scale),
                    m.log_bulk(q.data(), scale));
}

void qada_accumulate(const float* q, const float* k, int n, const cpu::AttentionShape& shape, int window,
                     int sinks, double threshold, std::span<double> sum, std::span<double> rows) {
  if (shape.num_heads < 1 || shape.num_kv_heads < 1 || shape.num_heads % shape.num_kv_heads != 0 ||
      shape.head_dim < 1 || sum.size() != static_cast<std::size_t>(shape.num_heads) ||
      rows.size() != sum.size() || window < 1 || sinks < 0 || n < 0)
    throw invalid_argument("inconsistent shape, window or accumulators", "qada_accumulate");
  const int d = shape.head_dim, G = shape.num_heads / shape.num_kv_heads;
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
#pragma omp parallel for schedule(dynamic, 1)
  for (int g = 0; g < shape.num_kv_heads; ++g) {
    Moments m(d);
    const float* kg = k + static_cast<std::size_t>(g) * d;
    std::vector<double> local_sum(static_cast<std::size_t>(G), 0.0), local_rows(static_cast<std::size_t>(G), 0.0);
    for (int i = window + sinks; i < n; ++i) {
      m.add(kg + static_cast<std::size_t>(i - window) * shape.kv_stride);  // bulk grows by key i - w
      for (int r = 0; r < G; ++r) {
        const int h = g * G + r;
        const float* qi = q + static_cast<std::size_t>(i) * shape.q_stride + static_cast<std::size_t>(h) * d;
        const double share =
            share_from(log_local_mass(qi, kg, shape.kv_stride, d, i, window, sinks, scale), m.log_bulk(qi, scale));
        local_sum[static_cast<std::size_t>(r)] += threshold > 0 ? (share > threshold ? 1.0 : 0.0) : share;
        local_rows[static_cast<std::size_t>(r)] += 1.0;
      }
    }
    for (int r = 0; r < G; ++r) {
      sum[static_cast<std::size_t>(g * G + r)] += local_sum[static_cast<std::size_t>(r)];
      rows[static_cast<std::size_t>(g * G + r)] += local_rows[static_cast<std::size_t>(r)];
    }
  }
}

// --- RETRIEVAL ----------------------------------------------------------------------------

void count_copy_events(std::span<const int> argmax, std::span<const int> prompt,
                       std::span<const std::pair<int, int>> spans, int generated, std::span<double> events) {
  if (argmax.size() != events.size())
    throw invalid_argument("one argmax per query head needed", "count_copy_events");
  for (std::size_t h = 0; h < argmax.size(); ++h) {
    const int j = argmax[h];
    if (j < 0 || j >= static_cast<int>(prompt.size())) continue;
    bool inside = false;
    for (const auto& [b, e] : spans) inside = inside || (j >= b && j < e);
    if (inside && prompt[static_cast<std::size_t>(j)] == generated) events[h] += 1.0;
  }
}

double token_recall(std::span<const int> generated, std::span<const int> reference) {
  if (reference.empty()) return 1.0;
  std::map<int, int> left;
  for (int t : generated) ++left[t];
  std::size_t hit = 0;
  for (int t : reference) {
    auto it = left.find(t);
    if (it != left.end() && it->second > 0) {
      --it->second;
      ++hit;
    }
  }
  return static_cast<double>(hit) / static_cast<double>(reference.size());
}

// --- JSON ------------------------------------------------------------------------------------

nlohmann::json to_json(const HeadScores& s) {
  return nlohmann::json{{"method", std::string(to_string(s.method))},
                        {"layout", {s.layout.num_layers, s.layout.num_query_heads, s.layout.num_kv_heads}},
                        {"scores", s.scores},
                        {"secondary", s.secondary},
                        {"query_scores", s.query_scores},
                        {"induction_share", s.induction_share},
                        {"evaluations", s.evaluations},
                        {"forwards", s.forwards},
                        {"seconds", s.seconds},
                        {"note", s.note}};
}

HeadScores head_scores_from_json(const nlohmann::json& j, const std::string& where) {
  HeadScores s;
  try {
    s.method = parse_method(j.at("method").get<std::string>());
    const auto lay = j.at("layout").get<std::vector<int>>();
    if (lay.size() != 3) throw format_error("layout must hold 3 numbers", where);
    s.layout = {lay[0], lay[1], lay[2]};
    s.scores = j.at("scores").get<std::vector<double>>();
    s.secondary = j.at("secondary").get<std::vector<double>>();
    s.query_scores = j.at("query_scores").get<std::vector<double>>();
    s.induction_share = j.at("induction_share").get<double>();
    s.evaluations = j.at("evaluations").get<std::size_t>();
    s.forwards = j.at("forwards").get<double>();
    s.seconds = j.at("seconds").get<double>();
    s.note = j.at("note").get<std::string>();
  } catch (const nlohmann::json::exception& e) {
    throw format_error(std::string("malformed head scores: ") + e.what(), where);
  } catch (const invalid_argument& e) {
    throw format_error(e.what(), where);
  }
  if (!s.layout.valid() || s.scores.size() != s.layout.size() ||
      (!s.secondary.empty() && s.secondary.size() != s.layout.size()) ||
      (!s.query_scores.empty() &&
       s.query_scores.size() != static_cast<std::size_t>(s.layout.num_layers) * s.layout.num_query_heads))
    throw format_error("head scores do not fit their layout", where);
  return s;
}

}  // namespace bosch::eval
