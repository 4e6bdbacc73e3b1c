// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file eval/head_scores.hpp
/// Static head-level rankings (docs/baselines.md §Static head rankings):
/// each method computes, once, on the original (all-full) model, one
/// "globalness" score per KV head (higher = needs long context more); a mask for
/// a ratio rho makes the lowest-scored heads SWA (baselines::mask_from_scores).
/// The same ranking serves every ratio, which is what BOSCH's entanglement
/// argument criticizes.
///
/// Methods and the choices made where the sources are silent ([I] = this
/// library's reading; w, s = the deployed window and sinks, HeadScoreOptions):
///
/// - DCAM (distant-context attention mass): per query head the mean,
///   over calibration query rows i >= w of the teacher-forced calibration
///   sequences, of the attention mass on keys s <= j <= i - w, i.e. exactly the
///   mass the head loses when it becomes SWA (sinks it keeps are excluded). [I]
///   rows: every row that has keys beyond the window.
/// - APL (answer-position lag): per query head the mean,
///   over the answer rows of the calibration samples (the teacher-forced rows
///   predicting answer tokens), of the attention-weighted lag
///   sum_{j >= s} a_ij (i - j); keys j < s (the sinks an SWA head keeps) are
///   excluded as for DCAM. [I] attention-weighted mean rather than argmax lag.
/// - RAZOR (RazorAttention, Tang et al. 2025): one forward over BOS (when the tokenizer
///   adds one) + a block of `razor_block` uniform random tokens repeated
///   `razor_repeats` times; per query head the echo score (mass on earlier
///   occurrences of the current token) and induction score (mass on the tokens
///   that followed them), each the mean over the rows of blocks 2.. (rows whose
///   earlier occurrences would reach the BOS are skipped); KV head = max over its
///   query heads. Ratio adaptation [I]: the F = N - T
///   heads kept full are the top ceil(F * share) by induction united with the top
///   ceil(F * (1 - share)) by echo, share = 14/15 (RazorAttention's 14% induction
///   + 1% echo), any shortfall filled by induction then echo. Random ids are
///   drawn from [V/4, 3V/4) of the vocabulary [I] (RazorAttention: [10000,
///   12500) of a 32k+ vocabulary).
/// - QADA (QAdA, Donhauser et al. 2025): for query row i
///   the "bulk" keys are those an SWA head loses (s <= j <= i - w); their logits
///   z = q.k / sqrt(d) are modelled as Gaussian with mean q.mu_K / sqrt(d) and
///   variance q^T Sigma_K q / d from the bulk keys' mean mu_K and covariance
///   Sigma_K, so the expected bulk softmax mass is n_bulk exp(mean + var / 2);
///   the local mass is the exact sum of exp(z) over the keys the SWA head keeps.
///   bulk share = bulk / (bulk + local). Static score [I]: the mean bulk share
///   over calibration rows with a non-empty bulk (qada_threshold = 0), or the
///   fraction of rows whose share exceeds qada_threshold (QAdA's per-query rule
///   made static).
/// - PROXY: S(all full) - S(only that KV head SWA), S = the
///   evaluator's calibration score (mean answer log-probability): one evaluator
///   call per KV head.
/// - FISHER (SWA-gate Fisher, after Kwon et al. 2022): a gate m per KV head blends the
///   attention output of its query heads, o = m o_full + (1 - m) o_swa (SWA with
///   w, s), inside a real forward; the per-sample loss is the mean
///   negative answer log-probability; g = dL/dm at m = 1 by a backward finite
///   difference (L(1) - L(1 - eps)) / eps with eps = fisher_epsilon (eps = 1 is
///   the single-head ablation); F = sum over calibration samples of g^2. The
///   gate is per KV head, so its query heads' contributions add before squaring
///   (no pooling). The blended layer runs through run_probed_layer (below).
/// - RETRIEVAL (Wu et al. 2024): per calibration sample, greedy
///   decoding of answer tokens + retrieval_extra_tokens tokens (stopping at
///   EOS); at each decoding step, for every query head, a copy event is the
///   argmax key of the step's query row lying in the needle span with the
///   prompt token there equal to the generated token; sample score = events /
///   answer tokens (the tokens there are to copy). Samples count only when the
///   generated tokens recall at least retrieval_min_recall of the answer
///   tokens (ROUGE-1 recall over token ids, clipped counts [I]; Wu et al. use
///   words); when none passes, all count [I]. Needle span [I]: each occurrence
///   of a reference string's tokens (with and without a leading space) inside
///   a queried needle; the queried needles' whole token ranges when none is
///   found; the sample's context region when it has no queried needle. Most
///   scores are exactly 0, so ties are broken by a secondary key (HeadKV-R2's
///   soft score): the mean attention probability on the span at
///   the decoding rows; ranking by (score, secondary) lexicographically.
///
/// Query heads are pooled to KV heads by max (HeadScoreOptions::pooling) for
/// DCAM, APL, RAZOR, QADA and RETRIEVAL (a KV head stays global when any of its
/// query heads is; RazorAttention's rule). Every score is computed on the
/// original model with full attention everywhere.

#include <bosch/baselines/ranking.hpp>
#include <bosch/cpu/attention.hpp>
#include <bosch/cpu/backend.hpp>
#include <bosch/evaluator.hpp>
#include <bosch/mask.hpp>
#include <bosch/tasks/task.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace bosch::eval {

/// The static head-level rankings.
enum class Method { dcam, apl, razor, qada, proxy, fisher, retrieval };

/// Every method, in the order above.
std::vector<Method> all_methods();
/// "DCAM", "APL", "RAZOR", "QADA", "PROXY", "FISHER", "RETRIEVAL".
std::string_view to_string(Method method) noexcept;
/// Inverse of to_string, ignoring ASCII case; throws bosch::invalid_argument
/// naming the accepted names.
Method parse_method(std::string_view name);

/// How per-query-head scores become per-KV-head scores.
enum class Pooling {
  max,   ///< the most global query head decides (default; RazorAttention's rule)
  mean,  ///< the group's mean
};

/// Settings of the head scores. Window and sinks must be those the masks will be
/// deployed with (the evaluator's), since DCAM, APL, QADA and FISHER measure
/// what an SWA head with exactly that window loses.
struct HeadScoreOptions {
  int window = 256;  ///< w >= 1: SWA keys i - w < j <= i
  int sinks = 0;     ///< s >= 0: plus keys j < s
  Pooling pooling = Pooling::max;
  /// RAZOR: random tokens per block (>= 2) and number of blocks (>= 2); the
  /// probe has 1 (BOS) + block * repeats tokens. RazorAttention: 2500 x 4.
  int razor_block = 256;
  int razor_repeats = 4;
  /// RAZOR: share of the full heads chosen by induction score (rest by echo).
  double razor_induction_share = 14.0 / 15.0;
  std::uint64_t seed = 0;  ///< RAZOR's random tokens (Boost mt19937_64)
  /// QADA: 0 = mean bulk share; in (0, 1) = fraction of rows with share above it.
  double qada_threshold = 0.0;
  /// FISHER: finite-difference step of the gate, in (0, 1].
  double fisher_epsilon = 0.05;
  /// RETRIEVAL: greedy tokens past the answer length (>= 0).
  int retrieval_extra_tokens = 4;
  /// RETRIEVAL: least answer-token recall for a sample to count, in [0, 1].
  double retrieval_min_recall = 0.5;
};

/// Throws bosch::invalid_argument (where = the field) for a value outside its domain.
void validate(const HeadScoreOptions& options);

/// One method's scores on one model.
struct HeadScores {
  Method method = Method::dcam;
  HeadLayout layout{};
  /// Per KV head, layer-major (L x Hkv), higher = more global. RAZOR: the
  /// induction score; RETRIEVAL: the retrieval (copy) score.
  std::vector<double> scores;
  /// RAZOR: the echo score per KV head; RETRIEVAL: the soft needle-span mass
  /// per KV head (the tie-breaker); empty for the other methods.
  std::vector<double> secondary;
  /// Per (layer, query head) before pooling, layer-major (L x Hq); empty for
  /// the per-KV-head methods (PROXY, FISHER). RAZOR: induction.
  std::vector<double> query_scores;
  /// RAZOR's induction share used by ranking_scores().
  double induction_share = 14.0 / 15.0;
  /// Cost: calibration-set scorings through an evaluator (PROXY) ...
  std::size_t evaluations = 0;
  /// ... and forward passes in full-forward equivalents: sequences x layers
  /// run / L (a forward restarted at layer l counts (L - l) / L).
  double forwards = 0;
  double seconds = 0;  ///< wall-clock seconds of the computation
  std::string note;    ///< what the computation noticed (e.g. RETRIEVAL's gate)
};

/// The per-KV-head scores handed to mask_from_scores for ratio `rho`: `scores`
/// for most methods; RAZOR's union rule (the F = N - T chosen full heads get
/// 2 + their induction rank fraction, the others their induction rank fraction
/// in [0, 1)); RETRIEVAL's lexicographic ranks of (scores, secondary).
std::vector<double> ranking_scores(const HeadScores& scores, double rho);

/// The mask of `rho` from a method's scores (mask_from_scores of ranking_scores).
HeadMask ranking_mask(const HeadScores& scores, double rho,
                      baselines::Quota quota = baselines::Quota::global);

/// JSON form (every field; method by name). from_json throws bosch::format_error
/// (where = `where`) for a missing field or sizes that do not fit the layout.
nlohmann::json to_json(const HeadScores& scores);
HeadScores head_scores_from_json(const nlohmann::json& j, const std::string& where = "head scores");

// --- pure building blocks (tested on crafted inputs) -----------------------------

/// Pools per-(layer, query head) values (L x Hq) to KV heads (L x Hkv); query
/// head h belongs to KV head h / (Hq / Hkv). Throws on a size mismatch.
std::vector<double> pool_query_heads(const HeadLayout& layout, std::span<const double> per_query,
                                     Pooling pooling);

/// Per-row means of one HeadStats field (field / stats.rows; zeros when no row
/// contributed).
std::vector<double> per_row_mean(const cpu::HeadStats& stats, const std::vector<double>& field);

/// RAZOR's ratio adaptation (see the file comment) as scores for mask_from_scores.
/// `induction` and `echo` are per KV head; share in [0, 1].
std::vector<double> razor_ratio_scores(const HeadLayout& layout, std::span<const double> induction,
                                       std::span<const double> echo, double rho, double share);

/// Ranks (0 = lowest) of the pairs (primary[i], secondary[i]) in lexicographic
/// order; equal pairs get equal ranks. Sizes must match.
std::vector<double> lexicographic_ranks(std::span<const double> primary,
                                        std::span<const double> secondary);

/// RAZOR's probe: [bos] + block random ids repeated `repeats` times, ids uniform
/// in [vocab / 4, 3 vocab / 4) (at least 1 value) from `seed`; bos < 0 = none.
std::vector<int> razor_probe_tokens(int vocab, int block, int repeats, int bos, std::uint64_t seed);

/// The contributing rows of the RAZOR probe: every row of blocks 2 .. repeats,
/// except, with a BOS, the last row of each block (its earlier-occurrence walk
/// would reach the BOS).
std::vector<int> razor_probe_rows(int block, int repeats, bool bos);

/// QADA accumulator over the query/key buffers of one layer of one sequence (as
/// run_probed_layer's ProbeView gives them: Q [n, Hq*d] and K [n, Hkv*d], after
/// RoPE, unscaled). For each row i with a non-empty bulk (i - w >= s) and
/// query head h: bulk share as in the file comment; adds the share (threshold
/// 0) or the indicator share > threshold to sum[h], and 1 to rows[h].
/// `sum` and `rows` have Hq entries.
void qada_accumulate(const float* q, const float* k, int n, const cpu::AttentionShape& shape,
                     int window, int sinks, double threshold, std::span<double> sum,
                     std::span<double> rows);

/// The QADA bulk share of one query `q` (d values, unscaled) against keys
/// `keys` (n rows of d floats, row-major) for query position i = n - 1: bulk
/// = keys s <= j <= i - w (Gaussian estimate), local = the others (exact).
/// Returns 0 when the bulk is empty.
double qada_bulk_share(std::span<const float> q, std::span<const float> keys, int d, int window,
                       int sinks);

/// RETRIEVAL's copy events of one decoding step for every query head: `argmax`
/// holds one key index per query head; an event when span_begin <= ... inside
/// one of the spans and prompt[argmax] == generated. Adds 1 per event to
/// events[h].
void count_copy_events(std::span<const int> argmax, std::span<const int> prompt,
                       std::span<const std::pair<int, int>> spans, int generated,
                       std::span<double> events);

/// ROUGE-1 recall over token ids with clipped counts: the fraction of
/// `reference` tokens matched by `generated` tokens (1 for an empty reference).
double token_recall(std::span<const int> generated, std::span<const int> reference);

// --- probed forward -----------------------------------------------------------------

/// What a probe sees of one layer: its queries and keys after projection,
/// biases, Q/K norms and RoPE (before the 1/sqrt(d) scale).
struct ProbeView {
  int layer = 0;
  int n = 0;                    ///< rows (tokens)
  const float* q = nullptr;     ///< [n, Hq * d], stride shape.q_stride
  const float* k = nullptr;     ///< [n, Hkv * d], stride shape.kv_stride
  cpu::AttentionShape shape{};
};

/// What run_probed_layer does besides the plain full-attention layer.
struct LayerProbe {
  /// KV head whose query heads' attention output is blended; -1 = none.
  int blend_kv = -1;
  /// Gate m: o = m o_full + (1 - m) o_swa for that head's query heads (any
  /// finite m; 1 = full, 0 = SWA).
  float gate = 1.0f;
  int window = 1;  ///< the SWA of the blended head: w >= 1 ...
  int sinks = 0;   ///< ... and s >= 0
  /// Called once with the layer's queries and keys (may be empty).
  std::function<void(const ProbeView&)> visitor;
};

/// Runs layer `layer` of `backend`'s model on the residual stream `x` in place,
/// all heads full attention, with `probe`'s blend and visitor: the backend's
/// own decoder layer (cpu/layer.hpp) with an inspect hook (the visitor) and a
/// blend hook (a second attention call with that KV head windowed, using the
/// backend's tiles). Without a blend (or with gate 1) the result equals
/// backend.run_layers(x, layer, layer + 1, full) bit for bit (tested), and with
/// gate 0 equals the run with that KV head SWA. Throws bosch::invalid_argument
/// for a bad layer, head, window or residual.
void run_probed_layer(const cpu::Backend& backend, cpu::Residual& x, int layer,
                      const LayerProbe& probe);

// --- the methods ------------------------------------------------------------------------

/// DCAM, APL, RAZOR, QADA, FISHER and RETRIEVAL on `backend`'s model (RAZOR
/// needs no tasks: `calibration` is ignored). Throws bosch::invalid_argument
/// for PROXY (use proxy_scores), an empty task set or invalid options.
HeadScores compute_head_scores(Method method, const cpu::Backend& backend,
                               const tasks::TaskSet& calibration, const HeadScoreOptions& options);

HeadScores dcam_scores(const cpu::Backend& backend, const tasks::TaskSet& calibration,
                       const HeadScoreOptions& options);
HeadScores apl_scores(const cpu::Backend& backend, const tasks::TaskSet& calibration,
                      const HeadScoreOptions& options);
HeadScores razor_scores(const cpu::Backend& backend, const HeadScoreOptions& options);
HeadScores qada_scores(const cpu::Backend& backend, const tasks::TaskSet& calibration,
                       const HeadScoreOptions& options);
HeadScores fisher_scores(const cpu::Backend& backend, const tasks::TaskSet& calibration,
                         const HeadScoreOptions& options);
HeadScores retrieval_scores(const cpu::Backend& backend, const tasks::TaskSet& calibration,
                            const HeadScoreOptions& options);

/// PROXY with any evaluator: S(all full) - S(only head (l, g) SWA) per KV head.
/// With a hinted evaluator the single-head masks are scored with the all-full
/// mask as reference (a transformer evaluator then restarts at layer l).
/// `forwards_per_evaluation` (e.g. the calibration sample count) converts
/// evaluator calls into forward equivalents, counting a hinted call from layer
/// l as (L - l) / L of one; 0 leaves forwards at 0.
template <Evaluator E>
HeadScores proxy_scores(E& evaluator, double forwards_per_evaluation = 0) {
  const auto t0 = std::chrono::steady_clock::now();
  HeadScores out;
  out.method = Method::proxy;
  out.layout = evaluator.layout();
  check_layout(out.layout, "proxy_scores");
  const HeadMask full(out.layout);
  const int L = out.layout.num_layers;
  EvaluationHint hint;
  hint.reference = &full;
  hint.first_changed_layer = L;
  double base = 0;
  if constexpr (HintedEvaluator<E>) {
    base = evaluator.evaluate(full, hint);
  } else {
    base = evaluator.evaluate(full);
  }
  out.evaluations = 1;
  out.forwards = forwards_per_evaluation;
  out.scores.assign(out.layout.size(), 0.0);
  for (int l = 0; l < L; ++l)
    for (int g = 0; g < out.layout.num_kv_heads; ++g) {
      HeadMask m(out.layout);
      m.set(l, g, true);
      double s = 0;
      if constexpr (HintedEvaluator<E>) {
        EvaluationHint h;
        h.reference = &full;
        h.first_changed_layer = l;
        s = evaluator.evaluate(m, h);
        out.forwards += forwards_per_evaluation * static_cast<double>(L - l) / L;
      } else {
        s = evaluator.evaluate(m);
        out.forwards += forwards_per_evaluation;
      }
      out.scores[m.index(l, g)] = base - s;
      out.evaluations += 1;
    }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace bosch::eval
