// SPDX-License-Identifier: Apache-2.0
// The static head rankings on the CPU backend: DCAM, APL and RAZOR from the
// backend's attention statistics; QADA and RETRIEVAL from the queries and keys
// an inspect hook of the decoder layer sees (cpu/layer.hpp); FISHER from
// forwards with one KV head's attention output blended between full and
// sliding-window attention (run_probed_layer).

#include <bosch/cpu/layer.hpp>
#include <bosch/error.hpp>
#include <bosch/eval/head_scores.hpp>
#include <bosch/tasks/scoring.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace bosch::eval {
namespace {

using clock = std::chrono::steady_clock;


/// Runs all layers on `x`, every head full, with `inspect` seeing each
/// layer's queries and keys (cpu/layer.hpp).
template <class Inspect>
void run_inspected(const cpu::Backend& backend, cpu::Residual& x, Inspect&& inspect) {
  cpu::LayerHooks hooks;
  hooks.inspect = inspect;
  backend.run_layers(x, 0, backend.config().num_layers, AttentionWindows::full(), hooks);
}

/// Checks the options and, unless null, that `calibration` is not empty; then
/// runs `body(out)` on an empty HeadScores of `method` and records its wall time.
template <class Body>
HeadScores timed(Method method, const cpu::Backend& backend, const HeadScoreOptions& options,
                 const tasks::TaskSet* calibration, Body&& body) {
  validate(options);
  const std::string where(to_string(method));
  if (calibration && calibration->samples.empty())
    throw invalid_argument("the calibration task set is empty", where);
  check_layout(backend.layout(), where);
  const auto t0 = clock::now();
  HeadScores out;
  out.method = method;
  out.layout = backend.layout();
  body(out);
  out.seconds = std::chrono::duration<double>(clock::now() - t0).count();
  return out;
}

/// Runs every calibration sample (teacher-forced) through all layers with the
/// statistics of the options' window and sinks over the rows `rows_of(tf, request)` sets.
template <class Rows>
cpu::HeadStats collect_stats(const cpu::Backend& backend, const tasks::TaskSet& calibration,
                             const HeadScoreOptions& options, Rows rows_of, double& forwards) {
  cpu::HeadStats stats;
  const int L = backend.config().num_layers;
  for (const auto& sample : calibration.samples) {
    const auto tf = tasks::teacher_forcing(sample);
    cpu::StatsRequest req;
    req.window = options.window;
    req.sinks = options.sinks;
    rows_of(tf, req);
    auto x = backend.embed(tf.tokens);
    backend.run_layers(x, 0, L, AttentionWindows::full(), &stats, &req);
    forwards += 1;
  }
  return stats;
}

double mean_loss(const cpu::Backend& backend, const cpu::Residual& x, const tasks::TeacherForcing& tf,
                 const std::vector<int>& answer) {
  const auto logits = backend.logits(x, tf.positions);
  return -tasks::answer_logprob(logits, backend.config().vocab_size, answer).mean_logprob;
}

/// Token ranges of the needle in `sample` that a RETRIEVAL copy event may hit
/// (see the header comment).
std::vector<std::pair<int, int>> needle_spans(const tasks::Sample& sample, const model::Tokenizer& tok) {
  std::vector<std::pair<int, int>> spans;
  const auto& p = sample.prompt;
  if (tok.vocab_size() > 0) {
    for (const auto& needle : sample.needles) {
      if (!needle.queried) continue;
      const int b = std::max(0, needle.begin), e = std::min(static_cast<int>(p.size()), needle.end);
      for (const auto& ref : sample.references) {
        for (const std::string& text : {" " + ref, ref}) {
          const auto ids = tok.encode(text);
          if (ids.empty() || static_cast<int>(ids.size()) > e - b) continue;
          bool found = false;
          for (int i = b; i + static_cast<int>(ids.size()) <= e; ++i)
            if (std::equal(ids.begin(), ids.end(), p.begin() + i)) {
              spans.emplace_back(i, i + static_cast<int>(ids.size()));
              found = true;
            }
          if (found) break;
        }
      }
    }
  }
  if (spans.empty())
    for (const auto& needle : sample.needles)
      if (needle.queried) spans.emplace_back(needle.begin, needle.end);
  if (spans.empty()) spans.emplace_back(sample.context_begin, sample.context_end);
  return spans;
}

}  // namespace

HeadScores dcam_scores(const cpu::Backend& backend, const tasks::TaskSet& calibration,
                       const HeadScoreOptions& options) {
  return timed(Method::dcam, backend, options, &calibration, [&](HeadScores& out) {
    const auto stats = collect_stats(
        backend, calibration, options,
        [&](const tasks::TeacherForcing&, cpu::StatsRequest& r) {
          r.query_begin = options.window;  // rows with keys beyond the window
        },
        out.forwards);
    if (stats.rows == 0)
      throw invalid_argument("no calibration sequence is longer than the window " + std::to_string(options.window),
                             "DCAM");
    out.query_scores = per_row_mean(stats, stats.beyond_window_mass);
    out.scores = pool_query_heads(out.layout, out.query_scores, options.pooling);
    out.note = std::to_string(static_cast<long>(stats.rows)) + " query rows";
  });
}

HeadScores apl_scores(const cpu::Backend& backend, const tasks::TaskSet& calibration,
                      const HeadScoreOptions& options) {
  return timed(Method::apl, backend, options, &calibration, [&](HeadScores& out) {
    const auto stats = collect_stats(
        backend, calibration, options,
        [&](const tasks::TeacherForcing& tf, cpu::StatsRequest& r) {
          r.rows = tf.positions;  // the rows predicting answer tokens
          std::sort(r.rows.begin(), r.rows.end());
        },
        out.forwards);
    out.query_scores = per_row_mean(stats, stats.mean_distance);
    out.scores = pool_query_heads(out.layout, out.query_scores, options.pooling);
    out.note = std::to_string(static_cast<long>(stats.rows)) + " answer rows";
  });
}

HeadScores razor_scores(const cpu::Backend& backend, const HeadScoreOptions& options) {
  return timed(Method::razor, backend, options, nullptr, [&](HeadScores& out) {
    out.induction_share = options.razor_induction_share;
    const auto& tok = backend.model().tokenizer;
    const int bos = (tok.vocab_size() > 0 && tok.spec().add_bos) ? tok.bos() : -1;
    const auto tokens = razor_probe_tokens(backend.config().vocab_size, options.razor_block,
                                           options.razor_repeats, bos, options.seed);
    cpu::StatsRequest req;
    req.period = options.razor_block;
    req.rows = razor_probe_rows(options.razor_block, options.razor_repeats, bos >= 0);
    cpu::HeadStats stats;
    auto x = backend.embed(tokens);
    backend.run_layers(x, 0, backend.config().num_layers, AttentionWindows::full(), &stats, &req);
    out.forwards = 1;
    out.query_scores = per_row_mean(stats, stats.induction);
    out.scores = pool_query_heads(out.layout, out.query_scores, options.pooling);
    out.secondary = pool_query_heads(out.layout, per_row_mean(stats, stats.echo), options.pooling);
    out.note = std::to_string(tokens.size()) + " probe tokens (" + std::to_string(options.razor_repeats) + " x " +
               std::to_string(options.razor_block) + (bos >= 0 ? " + BOS)" : ")");
  });
}

HeadScores qada_scores(const cpu::Backend& backend, const tasks::TaskSet& calibration,
                       const HeadScoreOptions& options) {
  return timed(Method::qada, backend, options, &calibration, [&](HeadScores& out) {
    const auto& c = backend.config();
    const std::size_t Hq = static_cast<std::size_t>(c.num_heads);
    std::vector<double> sum(static_cast<std::size_t>(c.num_layers) * Hq, 0.0), rows(sum.size(), 0.0);
    for (const auto& sample : calibration.samples) {
      const auto tf = tasks::teacher_forcing(sample);
      auto x = backend.embed(tf.tokens);
      run_inspected(backend, x, [&](const cpu::LayerView& v) {
        const std::size_t at = static_cast<std::size_t>(v.layer) * Hq;
        qada_accumulate(v.q, v.k, v.rows, v.shape, options.window, options.sinks, options.qada_threshold,
                        std::span<double>(sum).subspan(at, Hq), std::span<double>(rows).subspan(at, Hq));
      });
      out.forwards += 1;
    }
    out.query_scores.assign(sum.size(), 0.0);
    double total_rows = 0;
    for (std::size_t i = 0; i < sum.size(); ++i) {
      if (rows[i] > 0) out.query_scores[i] = sum[i] / rows[i];
      total_rows = std::max(total_rows, rows[i]);
    }
    if (total_rows == 0)
      throw invalid_argument("no calibration sequence is longer than window + sinks", "QADA");
    out.scores = pool_query_heads(out.layout, out.query_scores, options.pooling);
    out.note = std::to_string(static_cast<long>(total_rows)) + " query rows per head";
  });
}

HeadScores fisher_scores(const cpu::Backend& backend, const tasks::TaskSet& calibration,
                         const HeadScoreOptions& options) {
  return timed(Method::fisher, backend, options, &calibration, [&](HeadScores& out) {
    const auto& c = backend.config();
    const int L = c.num_layers, H = c.num_kv_heads;
    const auto eps = static_cast<float>(options.fisher_epsilon);
    out.scores.assign(out.layout.size(), 0.0);
    const auto full = AttentionWindows::full();
    for (const auto& sample : calibration.samples) {
      const auto tf = tasks::teacher_forcing(sample);
      const auto x0 = backend.embed(tf.tokens);
      auto xf = x0;
      backend.run_layers(xf, 0, L, full);
      const double base = mean_loss(backend, xf, tf, sample.answer);
      out.forwards += 1;
      auto x = x0;  // the stream entering layer l, all heads full
      for (int l = 0; l < L; ++l) {
        for (int g = 0; g < H; ++g) {
          auto y = x;
          LayerProbe probe;
          probe.blend_kv = g;
          probe.gate = 1.0f - eps;
          probe.window = options.window;
          probe.sinks = options.sinks;
          run_probed_layer(backend, y, l, probe);
          backend.run_layers(y, l + 1, L, full);
          const double loss = mean_loss(backend, y, tf, sample.answer);
          const double grad = (base - loss) / static_cast<double>(eps);  // dL/dm at m = 1
          out.scores[static_cast<std::size_t>(l) * H + g] += grad * grad;
          out.forwards += static_cast<double>(L - l) / L;
        }
        backend.run_layers(x, l, l + 1, full);
      }
    }
    out.note = "gate step " + std::to_string(options.fisher_epsilon) + ", " +
               std::to_string(calibration.samples.size()) + " samples";
  });
}

HeadScores retrieval_scores(const cpu::Backend& backend, const tasks::TaskSet& calibration,
                            const HeadScoreOptions& options) {
  return timed(Method::retrieval, backend, options, &calibration, [&](HeadScores& out) {
    const auto& c = backend.config();
    const auto& tok = backend.model().tokenizer;
    const int eos = tok.vocab_size() > 0 ? tok.eos() : -1;
    const int vocab = c.vocab_size;
    const std::size_t Hq = static_cast<std::size_t>(c.num_heads);
    const std::size_t NQ = static_cast<std::size_t>(c.num_layers) * Hq;
    const auto full = AttentionWindows::full();
    std::vector<double> gated(NQ, 0.0), gated_soft(NQ, 0.0), all(NQ, 0.0), all_soft(NQ, 0.0);
    int n_gated = 0, n_all = 0;
    for (const auto& sample : calibration.samples) {
      // Greedy decoding; the teacher-forced logits give the tokens that match the answer for free.
      const auto tf = tasks::teacher_forcing(sample);
      const auto logits = backend.forward(tf.tokens, full, tf.positions);
      out.forwards += 1;
      const int budget = static_cast<int>(sample.answer.size()) + options.retrieval_extra_tokens;
      std::vector<int> generated;
      bool stopped = false;
      for (std::size_t k = 0; k < sample.answer.size() && static_cast<int>(generated.size()) < budget; ++k) {
        const int best = tasks::argmax(std::span<const float>(logits).subspan(
            k * static_cast<std::size_t>(vocab), static_cast<std::size_t>(vocab)));
        if (best == eos) {
          stopped = true;
          break;
        }
        generated.push_back(best);
        if (best != sample.answer[k]) break;
      }
      std::vector<int> seq(sample.prompt.begin(), sample.prompt.end());
      seq.insert(seq.end(), generated.begin(), generated.end());
      if (!stopped && static_cast<int>(generated.size()) < budget) {
        // The rest greedily through the KV cache: one prefill (its last
        // logits bitwise those of a forward over seq) and a cheap decode step
        // per further token, not one whole forward per token (at 4096 tokens
        // on a 0.5B model that was hours per ranking).
        std::vector<float> last;
        auto state = backend.prefill(seq, full, &last, static_cast<int>(seq.size()) + budget);
        out.forwards += 1;
        while (true) {
          const int next = tasks::argmax(last);
          if (next == eos) break;
          generated.push_back(next);
          seq.push_back(next);
          if (static_cast<int>(generated.size()) >= budget) break;
          last = backend.decode_step(state, next, full);
        }
      }
      if (generated.empty()) continue;

      // One probed forward over prompt + generated[:-1]: decoding step t is row P - 1 + t.
      const auto spans = needle_spans(sample, tok);
      const int P = static_cast<int>(sample.prompt.size());
      seq.pop_back();
      const int steps = static_cast<int>(generated.size());
      std::vector<double> events(NQ, 0.0), soft(NQ, 0.0);
      auto x = backend.embed(seq);
      run_inspected(backend, x, [&](const cpu::LayerView& v) {
        const int d = v.shape.head_dim, G = v.shape.num_heads / v.shape.num_kv_heads;
        const double scale = 1.0 / std::sqrt(static_cast<double>(d));
        std::vector<int> arg(Hq);
        std::vector<double> z;
        for (int t = 0; t < steps; ++t) {
          const int i = P - 1 + t;
          for (std::size_t h = 0; h < Hq; ++h) {
            const float* q = v.q + static_cast<std::size_t>(i) * v.shape.q_stride + h * d;
            const float* kb = v.k + (h / static_cast<std::size_t>(G)) * d;
            z.assign(static_cast<std::size_t>(i) + 1, 0.0);
            double mx = -std::numeric_limits<double>::infinity();
            int best = 0;
            for (int j = 0; j <= i; ++j) {
              const float* kj = kb + static_cast<std::size_t>(j) * v.shape.kv_stride;
              double dot = 0;
              for (int a = 0; a < d; ++a) dot += static_cast<double>(q[a]) * kj[a];
              z[static_cast<std::size_t>(j)] = dot * scale;
              if (z[static_cast<std::size_t>(j)] > mx) mx = z[static_cast<std::size_t>(j)], best = j;
            }
            arg[h] = best;
            double total = 0, in_span = 0;
            for (int j = 0; j <= i; ++j) {
              const double e = std::exp(z[static_cast<std::size_t>(j)] - mx);
              total += e;
              for (const auto& [b, en] : spans)
                if (j >= b && j < en) {
                  in_span += e;
                  break;
                }
            }
            soft[static_cast<std::size_t>(v.layer) * Hq + h] += in_span / total;
          }
          count_copy_events(arg, sample.prompt, spans, generated[static_cast<std::size_t>(t)],
                            std::span<double>(events).subspan(static_cast<std::size_t>(v.layer) * Hq, Hq));
        }
      });
      out.forwards += 1;
      const double recall = token_recall(generated, sample.answer);
      const double norm = static_cast<double>(sample.answer.size());
      for (std::size_t i = 0; i < NQ; ++i) {
        all[i] += events[i] / norm;
        all_soft[i] += soft[i] / steps;
        if (recall >= options.retrieval_min_recall) {
          gated[i] += events[i] / norm;
          gated_soft[i] += soft[i] / steps;
        }
      }
      ++n_all;
      if (recall >= options.retrieval_min_recall) ++n_gated;
    }
    if (n_all == 0) throw invalid_argument("no calibration sample produced a token", "RETRIEVAL");
    const bool use_gated = n_gated > 0;
    const double n = use_gated ? n_gated : n_all;
    out.query_scores.resize(NQ);
    std::vector<double> soft_q(NQ);
    for (std::size_t i = 0; i < NQ; ++i) {
      out.query_scores[i] = (use_gated ? gated[i] : all[i]) / n;
      soft_q[i] = (use_gated ? gated_soft[i] : all_soft[i]) / n;
    }
    out.scores = pool_query_heads(out.layout, out.query_scores, options.pooling);
    out.secondary = pool_query_heads(out.layout, soft_q, options.pooling);
    out.note = std::to_string(n_gated) + " of " + std::to_string(n_all) + " samples passed the recall gate" +
               (use_gated ? "" : "; all samples used");
  });
}

HeadScores compute_head_scores(Method method, const cpu::Backend& backend, const tasks::TaskSet& calibration,
                               const HeadScoreOptions& options) {
  switch (method) {
    case Method::dcam: return dcam_scores(backend, calibration, options);
    case Method::apl: return apl_scores(backend, calibration, options);
    case Method::razor: return razor_scores(backend, options);
    case Method::qada: return qada_scores(backend, calibration, options);
    case Method::fisher: return fisher_scores(backend, calibration, options);
    case Method::retrieval: return retrieval_scores(backend, calibration, options);
    case Method::proxy:
      break;
  }
  throw invalid_argument("PROXY needs an evaluator: use proxy_scores", "compute_head_scores");
}

}  // namespace bosch::eval
