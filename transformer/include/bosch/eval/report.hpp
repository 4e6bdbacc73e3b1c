// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file eval/report.hpp
/// Held-out scores of one mask: the teacher-forced answer log-probability and
/// greedy-decoding accuracy (RULER string match, passkey rule), overall and
/// per task, each with its sample count and a percentile bootstrap interval
/// over the samples (eval/bootstrap.hpp); the per-sample scores are kept so
/// that intervals and paired comparisons can be computed again later.
///
/// Greedy decoding reuses the teacher-forced logits: while the greedy token
/// equals the gold answer token the two runs see the same prefix, so the first
/// k+1 greedy tokens (k = first position whose argmax differs from the answer)
/// come for free; only the tokens after that need further work. When the
/// backend offers incremental decoding (prefill + decode_step, see
/// IncrementalDecoder; the CPU and CUDA backends do) the sequence so far is prefilled
/// once and each further token costs one single-row step against the
/// key/value cache; otherwise each further token is a fresh forward pass over
/// the whole sequence. Either way the result is plain greedy decoding (the
/// two routes differ only by rounding in the logits of the steps).

#include <bosch/error.hpp>
#include <bosch/eval/backend.hpp>
#include <bosch/eval/bootstrap.hpp>
#include <bosch/model/tokenizer.hpp>
#include <bosch/tasks/scoring.hpp>
#include <bosch/tasks/task.hpp>

#include <nlohmann/json.hpp>

#include <cmath>
#include <algorithm>
#include <concepts>
#include <functional>
#include <limits>
#include <optional>
#include <type_traits>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace bosch {

/// The scores of one held-out sample.
struct SampleScore {
  std::string task;       ///< the sample's task name
  double logprob = 0;     ///< mean answer-token log-probability (nats)
  double accuracy = 0;    ///< task-rule accuracy of the greedy answer in [0, 1]; NaN when not computed
  double exact = 0;       ///< 1 when the greedy answer begins with the gold tokens (prefix match), else 0
  /// File tasks: 1 when the greedy answer's first line equals the gold
  /// answer after normalization (tasks::answer_match), else 0; NaN for the
  /// built-in tasks.
  double match = std::numeric_limits<double>::quiet_NaN();
};

/// Scores of a group of samples: means, and 95% (BootstrapOptions::level)
/// percentile bootstrap intervals over the samples (eval/bootstrap.hpp;
/// stratified by task for "all").
struct TaskScore {
  std::string task;          ///< task name, or "all"
  int samples = 0;
  double mean_logprob = 0;   ///< mean over samples of the mean answer-token log-prob (nats)
  double probability = 0;    ///< exp(mean_logprob)
  double accuracy = 0;       ///< mean accuracy in [0, 1]; NaN when not computed
  double exact = 0;          ///< fraction of samples whose greedy answer begins with the gold tokens
  /// Mean of SampleScore::match over the samples that have it (file tasks);
  /// NaN when none has.
  double match = std::numeric_limits<double>::quiet_NaN();
  eval::Interval logprob_ci{};      ///< interval of mean_logprob
  eval::Interval probability_ci{};  ///< exp of logprob_ci (the percentile interval maps through exp)
  eval::Interval accuracy_ci{};     ///< NaN when accuracy is
  eval::Interval exact_ci{};
  eval::Interval match_ci{};        ///< NaN when match is
};

/// Held-out report: overall and per task (in first-appearance order), and the
/// per-sample scores they summarize (in task-set order; empty in a report
/// read from a file written before they were kept, whose intervals are NaN).
struct HeldOutReport {
  TaskScore all;
  std::vector<TaskScore> per_task;
  std::vector<SampleScore> samples;
};

/// A held-out metric of SampleScore.
enum class HeldOutMetric { logprob, accuracy, exact, match };

/// "logprob", "accuracy", "exact", "match".
const char* to_string(HeldOutMetric metric) noexcept;

/// The report of `samples`: per-task and overall means with their bootstrap
/// intervals (per task: resampled within the task; overall: within every task,
/// so the task mix stays fixed). Tasks in first-appearance order. Throws
/// bosch::invalid_argument for invalid options.
HeldOutReport summarize_held_out(std::vector<SampleScore> samples, const eval::BootstrapOptions& options = {});

/// The paired difference a - b of `metric` over the samples of `task` ("all" =
/// every sample, stratified by task): both reports must hold the same samples
/// (same count and task sequence; bosch::invalid_argument otherwise, naming
/// `where`). Samples absent (old files): a NaN difference. For
/// HeldOutMetric::match only the samples that have it (file tasks) count.
eval::PairedDifference paired_difference(const HeldOutReport& a, const HeldOutReport& b, HeldOutMetric metric,
                                         const std::string& task = "all",
                                         const eval::BootstrapOptions& options = {},
                                         const std::string& where = "paired_difference");

/// JSON of a report: {"all": S, "per_task": [S, ...], "samples": {"task": [...],
/// "logprob": [...], "accuracy": [...], "exact": [...], "match": [...]}}, S =
/// {"task", "samples", "mean_logprob", "probability", "accuracy", "exact",
/// "match", "logprob_ci": [low, high], "probability_ci", "accuracy_ci",
/// "exact_ci", "match_ci"} (NaN as null; "match" only when a sample has it,
/// so reports without file tasks read as before). `with_samples` false
/// leaves out "samples".
nlohmann::json to_json(const TaskScore& score);
nlohmann::json to_json(const HeldOutReport& report, bool with_samples = true);

/// A report from to_json(): with "samples" the summary and intervals are
/// recomputed from them (with `options`); without, the stored means are read
/// and the intervals stay NaN. Throws bosch::format_error naming `where` for a
/// malformed object.
HeldOutReport held_out_report_from_json(const nlohmann::json& j, const std::string& where,
                                        const eval::BootstrapOptions& options = {});

/// How greedy tokens past the free ones are generated.
enum class GreedyPath {
  automatic,    ///< incremental when the backend is an IncrementalDecoder, else recompute
  recompute,    ///< one forward pass over the whole sequence per generated token
  incremental,  ///< prefill once, then decode_step per token (throws when the backend lacks them)
};

/// Settings of evaluate_held_out.
struct ReportOptions {
  bool accuracy = true;  ///< run greedy decoding (costs work past the first miss)
  /// Greedy budget per sample: < 0 uses the sample's max_new_tokens; otherwise
  /// answer tokens + this many.
  int extra_new_tokens = -1;
  GreedyPath greedy = GreedyPath::automatic;  ///< generation route (same tokens either way)
  /// With a TeacherForcedPrefill backend and a greedy route other than
  /// recompute: continue the greedy answer from the teacher-forced pass when
  /// it agrees with the gold answer on its first m - 1 tokens (one pass over
  /// the sequence instead of two; same log-probabilities, bitwise). false:
  /// always a fresh prefill for the greedy answer, as before this option.
  bool one_pass = true;
  eval::BootstrapOptions bootstrap{};          ///< the intervals of the report
  /// Scores known already, by sample index (a resumed evaluation: see
  /// eval/report_checkpoint.hpp): a sample with a value is not run again.
  /// Shorter than the task set, or empty: the rest are run.
  std::vector<std::optional<SampleScore>> done;
  /// Called after each sample that was run, with its index and scores (a
  /// checkpoint, progress); may throw to stop the evaluation.
  std::function<void(std::size_t, const SampleScore&)> on_sample;
};

namespace detail {
template <class B>
using decode_state_t = decltype(std::declval<const B&>().prefill(
    std::declval<std::span<const int>>(), std::declval<const AttentionWindows&>(),
    std::declval<std::vector<float>*>()));
}  // namespace detail

/// A backend with incremental decoding: `prefill(tokens, windows, &logits)`
/// returns a state (a key/value cache) and the last position's logits;
/// `decode_step(state, token, windows)` appends a token and returns its
/// logits ([vocab]). bosch::cpu::Backend and bosch::cuda::Backend model it
/// (the same hybrid KV cache layout); a backend without it is decoded by
/// recomputation.
template <class B>
concept IncrementalDecoder =
    requires { typename detail::decode_state_t<B>; } &&
    requires(const B& b, detail::decode_state_t<B>& state, int token, const AttentionWindows& w) {
      { b.decode_step(state, token, w) } -> std::same_as<std::vector<float>>;
    };

/// An IncrementalDecoder whose prefill also returns the logits at chosen
/// positions, bitwise those of forward() (cpu::Backend): the held-out report
/// then scores a sample by teacher forcing and continues its greedy answer
/// from the same pass, instead of a second forward over the whole sequence.
template <class B>
concept TeacherForcedPrefill =
    IncrementalDecoder<B> &&
    requires(const B& b, std::span<const int> tokens, const AttentionWindows& w, std::span<const int> positions,
             std::vector<float>& logits, int capacity) {
      { b.prefill(tokens, w, positions, logits, capacity) } -> std::same_as<detail::decode_state_t<B>>;
    };

namespace detail {
template <class B, bool = TeacherForcedPrefill<B>>
struct one_pass_state {
  using type = int;
};
template <class B>
struct one_pass_state<B, true> {
  using type = decode_state_t<B>;
};

/// The incremental greedy loop from a `state` that holds every token before
/// generated.back(): feeds generated.back(), then appends argmax tokens until
/// `generated` holds `budget` tokens or the argmax is `eos` (not appended),
/// as greedy_continue's incremental route does after its prefill.
/// The greedy loop itself, from the `logits` of the token after
/// generated.back() (or after the prompt): appends their argmax and decodes
/// it, until `generated` holds `budget` tokens or the argmax is `eos`.
template <class B, class S, class L>
void greedy_from(const B& backend, S& state, L logits, std::vector<int>& generated, int budget, int eos,
                 const AttentionWindows& windows) {
  while (true) {
    const int next = tasks::argmax(logits);
    if (next == eos) return;
    generated.push_back(next);
    if (static_cast<int>(generated.size()) >= budget) return;
    logits = backend.decode_step(state, next, windows);
  }
}

template <class B, class S>
void decode_greedy(const B& backend, S& state, std::vector<int>& generated, int budget, int eos,
                   const AttentionWindows& windows) {
  if (generated.empty() || static_cast<int>(generated.size()) >= budget) return;
  greedy_from(backend, state, backend.decode_step(state, generated.back(), windows), generated, budget, eos,
              windows);
}
}  // namespace detail

/// Greedy continuation: appends argmax tokens of the model on `prompt` +
/// `generated` to `generated` until it holds `budget` tokens or the argmax is
/// `eos` (not appended). `generated` may start with tokens already known
/// (e.g. the free ones from teacher forcing). `path` picks the route;
/// GreedyPath::incremental on a backend that is no IncrementalDecoder throws
/// bosch::invalid_argument.
template <Backend B>
void greedy_continue(const B& backend, std::span<const int> prompt, std::vector<int>& generated, int budget,
                     int eos, const AttentionWindows& windows, GreedyPath path = GreedyPath::automatic) {
  if (static_cast<int>(generated.size()) >= budget) return;
  std::vector<int> seq(prompt.begin(), prompt.end());
  seq.insert(seq.end(), generated.begin(), generated.end());
  if (path == GreedyPath::incremental && !IncrementalDecoder<B>)
    throw invalid_argument("the backend has no incremental decoding (prefill / decode_step)", "greedy");
  if constexpr (IncrementalDecoder<B>) {
    if (path != GreedyPath::recompute) {
      std::vector<float> logits;
      // A cache with room for every position decoded (the last token is
      // never fed back), when the backend takes a capacity (both bundled ones do).
      const int capacity = static_cast<int>(seq.size()) + budget - static_cast<int>(generated.size()) - 1;
      auto state = [&] {
        if constexpr (requires { backend.prefill(std::span<const int>(seq), windows, &logits, capacity); })
          return backend.prefill(seq, windows, &logits, capacity);
        else
          return backend.prefill(seq, windows, &logits);
      }();
      detail::greedy_from(backend, state, std::move(logits), generated, budget, eos, windows);
      return;
    }
  }
  while (static_cast<int>(generated.size()) < budget) {
    const int pos = static_cast<int>(seq.size()) - 1;
    const auto next_logits = backend.forward(seq, windows, std::span<const int>(&pos, 1));
    const int next = tasks::argmax(next_logits);
    if (next == eos) break;
    generated.push_back(next);
    seq.push_back(next);
  }
}

/// Scores `tasks` under `windows` with `backend`; `tokenizer` decodes the
/// greedy output for string matching and gives the end-of-sequence id.
template <Backend B>
HeldOutReport evaluate_held_out(const B& backend, const model::Tokenizer& tokenizer,
                                const tasks::TaskSet& tasks, const AttentionWindows& windows,
                                const ReportOptions& options = {}) {
  const int vocab = backend.config().vocab_size;
  std::vector<SampleScore> scores;
  scores.reserve(tasks.samples.size());
  // With a TeacherForcedPrefill backend and greedy decoding asked for, the
  // teacher-forced pass is a prefill (the same logits, bitwise) whose state
  // covers the prompt and answer[0 .. m-2]; a greedy answer that agrees with
  // the gold one on those tokens (exact, or first wrong at the last one)
  // continues from it by decode_step, so most samples cost one pass over the
  // sequence, not two. Any other greedy answer is continued by
  // greedy_continue (a fresh prefill), as without such a backend.
  constexpr bool one_pass = TeacherForcedPrefill<B>;
  using state_type = typename detail::one_pass_state<B>::type;
  for (std::size_t index = 0; index < tasks.samples.size(); ++index) {
    if (index < options.done.size() && options.done[index]) {
      scores.push_back(*options.done[index]);
      continue;
    }
    const tasks::Sample& sample = tasks.samples[index];
    const auto tf = tasks::teacher_forcing(sample);
    const std::size_t m = sample.answer.size();
    const int budget = options.extra_new_tokens < 0 ? sample.max_new_tokens
                                                    : static_cast<int>(m) + options.extra_new_tokens;
    std::vector<float> logits;
    std::optional<state_type> state;
    if constexpr (one_pass) {
      if (options.accuracy && options.one_pass && options.greedy != GreedyPath::recompute) {
        const int n = static_cast<int>(tf.tokens.size());
        const int capacity = std::max(n, n + budget - static_cast<int>(m));
        state.emplace(backend.prefill(std::span<const int>(tf.tokens), windows, std::span<const int>(tf.positions),
                                      logits, capacity));
      }
    }
    if (!state) logits = backend.forward(tf.tokens, windows, tf.positions);
    const auto score = tasks::answer_logprob(logits, vocab, sample.answer);

    // Greedy tokens known from the teacher-forced logits.
    std::vector<int> generated;
    std::size_t k = 0;
    for (; k < m; ++k) {
      const int best = tasks::argmax(std::span<const float>(logits).subspan(k * static_cast<std::size_t>(vocab), static_cast<std::size_t>(vocab)));
      generated.push_back(best);
      if (best != sample.answer[k]) break;
    }
    const double exact = (k == m) ? 1.0 : 0.0;
    double acc = std::nan(""), match = std::nan("");
    if (options.accuracy) {
      const int eos = tokenizer.eos();
      // Cut the free tokens at the budget or at end-of-sequence.
      bool stopped = false;
      for (std::size_t i = 0; i < generated.size(); ++i) {
        if (generated[i] == eos || static_cast<int>(i) >= budget) {
          stopped = true;
          generated.resize(i);
          break;
        }
      }
      if (!stopped) {
        bool continued = false;
        if constexpr (one_pass) {
          if (state && generated.size() == m && m > 0) {
            // generated[0 .. m-2] = answer[0 .. m-2], the state's last tokens.
            detail::decode_greedy(backend, *state, generated, budget, eos, windows);
            continued = true;
          }
        }
        if (!continued) greedy_continue(backend, sample.prompt, generated, budget, eos, windows, options.greedy);
      }
      const std::string prediction = tokenizer.decode(generated);
      acc = tasks::accuracy(sample, prediction);
      match = tasks::answer_match(sample, prediction);
    }
    scores.push_back({sample.task, score.mean_logprob, acc, exact, match});
    if (options.on_sample) options.on_sample(index, scores.back());
  }
  return summarize_held_out(std::move(scores), options.bootstrap);
}

}  // namespace bosch
