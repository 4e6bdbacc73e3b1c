// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file eval/transformer_evaluator.hpp
/// TransformerEvaluator<Backend>: the bundled bosch::Evaluator. It scores a head
/// mask by running a real model with that mask's sliding windows on a
/// calibration task set and returning the mean teacher-forced log-probability of
/// the answer tokens (higher is better; a continuous score rather than accuracy, whose
/// resolution is 1/samples: docs/algorithm.md §Open choices 5).
///
/// Capabilities (evaluator.hpp):
///  - hinted evaluation: the residual stream entering layer l depends only on the
///    mask bits below l, so streams are cached (ResidualCache, bounded by
///    Options::cache_bytes, one entry per sample and layer) and each sample's
///    forward restarts from the deepest cached layer of the mask's own prefix.
///    With a hint (reference mask, first changed layer f) the streams entering
///    layers up to f are stored on the way, so the following masks derived
///    from the same reference start at f. The score is bit-identical to a full
///    evaluation: layer-wise runs equal the full forward.
///  - shared prefix (Options::shared_prefix, backends with shared_prefix(),
///    the CPU one): a query before position w attends every earlier key
///    under any window of w keys, so the first P = min(w, first answer
///    position) rows of a sample are the same under every mask, at every
///    layer. Their keys and values are computed once per sample (a forward
///    over those P rows, with full attention, whatever mask comes first:
///    resume and process count cannot change them) and every forward runs
///    only rows P..n-1 against them: at 512 tokens and w = 64 an eighth of
///    the rows less. Cached streams hold those rows only. The last layer,
///    whose output only the logits read, also computes its queries,
///    attention and feed-forward for the rows from the first answer
///    position on only (the earlier rows give their keys and values).
///  - cost (bosch::CostedEvaluator): layer applications summed over samples,
///    divided by the layer count, i.e. full-model sample forwards (a
///    forward over a sample's rows past its shared prefix counts as a whole
///    one), plus ceil(P L / n) layer applications per sample for its
///    shared-prefix pass (whole numbers, so that sums over processes are exact).
///  - per-sample scores (bosch::PerSampleEvaluator, racing): score_samples()
///    scores any calibration samples, race_order() interleaves the tasks, and
///    the score is reduce() of the per-sample scores.
///  - batch evaluation: masks in order (the CPU backend gains nothing from
///    interleaving; a GPU backend batches inside its forward).
///  - a share of the samples: set_sample_range(begin, end) makes it score only
///    samples [begin, end) (sample_scores() returns theirs, the cache holds
///    theirs). Sample-parallel evaluation (bosch/mpi/evaluator.hpp) gives each
///    process a share, gathers the per-sample scores in sample order and
///    combines them with reduce(), the same arithmetic evaluate() uses, so the
///    score is bit-identical to one process scoring every sample.

#include <bosch/eval/backend.hpp>
#include <bosch/eval/residual_cache.hpp>
#include <bosch/evaluator.hpp>
#include <bosch/tasks/scoring.hpp>
#include <bosch/tasks/task.hpp>

#include <algorithm>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace bosch {

/// Settings of TransformerEvaluator.
struct TransformerEvaluatorOptions {
  int window = 64;   ///< w: an SWA query i sees keys i-w < j <= i (the paper: 1024 at 32k)
  int sinks = 0;     ///< s: plus the first s keys (docs/algorithm.md §Open choices 6; default none)
  /// Bound on the residual-stream cache in bytes (0 disables it). One entry is
  /// the stream of one calibration sample at one layer: its tokens * hidden * 4
  /// bytes.
  std::size_t cache_bytes = std::size_t{2} << 30;
  /// Compute each sample's first min(w, first answer position) rows once
  /// and run only the later rows for every mask, and in the last layer only
  /// the rows from the first answer position on (see the file comment), when
  /// the backend can (cpu::Backend). The score then differs from a plain
  /// forward's by fp32 rounding (not bitwise), identically for every mask,
  /// process count and resume.
  bool shared_prefix = true;
};

/// Counters of the work an evaluator did.
struct TransformerEvaluatorStats {
  std::size_t evaluations = 0;    ///< scoring calls (a mask, or a race's block of samples of one)
  std::size_t layers_run = 0;     ///< layer applications, summed over samples
  std::size_t layers_saved = 0;   ///< layer applications skipped thanks to the cache
  /// Shared-prefix passes, in layer applications: a sample's prefix of P of
  /// its n rows through L layers counts ceil(P L / n), once per sample whose
  /// prefix was computed (whole numbers, so that cost() sums exactly across
  /// processes; the rounding never undercounts and is under one layer
  /// application per sample).
  std::size_t prefix_layers = 0;
  /// Token rows times layers of layers_run and prefix_layers (a layer over a
  /// sample's n - P rows past its shared prefix counts n - P, a prefix pass P
  /// per layer): over layer_applications() the mean tokens per application,
  /// which turns sample forwards into tokens (a 4096-token forward is not a
  /// 512-token one).
  std::size_t row_layers = 0;

  /// All the layer applications this evaluator paid for: layers_run +
  /// prefix_layers (cost() is this over the layer count). Every cost figure
  /// (Result::forwards, a comparison's forwards) counts these, not
  /// layers_run alone, which leaves out the shared-prefix passes.
  std::size_t layer_applications() const noexcept { return layers_run + prefix_layers; }
};

namespace detail {
/// Whether backend B can run the rows after a shared prefix (cpu::Backend's
/// shared_prefix() and run_layers(..., prefix)), and the prefix's type.
template <class B>
struct SharedPrefixOf {
  static constexpr bool available = false;
  using type = int;  // unused
};
template <class B>
  requires requires(const B& b, typename B::Residual& r, std::span<const int> t, const AttentionWindows& w) {
    b.run_layers(r, 0, 1, w, b.shared_prefix(t));
  }
struct SharedPrefixOf<B> {
  static constexpr bool available = true;
  using type = decltype(std::declval<const B&>().shared_prefix(std::span<const int>{}));
};
}  // namespace detail

template <Backend B>
class TransformerEvaluator {
 public:
  /// @param backend     the forward engine (kept by reference; must outlive this)
  /// @param calibration the tasks the score is computed on (non-empty)
  /// @param options     window, sinks and cache bound
  TransformerEvaluator(const B& backend, tasks::TaskSet calibration,
                       TransformerEvaluatorOptions options = {})
      : backend_(&backend), options_(options), cache_(options.cache_bytes) {
    const auto& cfg = backend.config();
    layout_ = cfg.layout();
    check_layout(layout_, "TransformerEvaluator: model layout");
    if (options_.window <= 0)
      throw invalid_argument("window must be >= 1, got " + std::to_string(options_.window), "window");
    if (options_.sinks < 0)
      throw invalid_argument("sinks must be >= 0, got " + std::to_string(options_.sinks), "sinks");
    if (calibration.samples.empty())
      throw invalid_argument("the calibration task set is empty", "TransformerEvaluator");
    for (const auto& s : calibration.samples) {
      inputs_.push_back(tasks::teacher_forcing(s));
      answers_.push_back(s.answer);
      const auto& in = inputs_.back();
      int rows = 0;  // the sample's shared prefix (see the file comment)
      const int first_answer =
          in.positions.empty() ? 0 : *std::min_element(in.positions.begin(), in.positions.end());
      if constexpr (has_shared_prefix)
        if (options_.shared_prefix) rows = std::min(options_.window, first_answer);
      prefix_rows_.push_back(std::max(0, rows));
      // The last layer's output rows: from the first answer position on (past the prefix).
      outputs_from_.push_back(rows > 0 ? first_answer - rows : 0);
      sample_bytes_.push_back((in.tokens.size() - static_cast<std::size_t>(prefix_rows_.back())) *
                              static_cast<std::size_t>(cfg.hidden_size) * sizeof(float));
    }
    prefixes_.resize(inputs_.size());
    tasks_ = std::move(calibration);
    set_sample_range(0, inputs_.size());
  }

  HeadLayout layout() const { return layout_; }
  const TransformerEvaluatorOptions& options() const noexcept { return options_; }
  const tasks::TaskSet& tasks() const noexcept { return tasks_; }
  const TransformerEvaluatorStats& stats() const noexcept { return stats_; }
  /// The work so far in full-model sample forwards (bosch::CostedEvaluator):
  /// (stats().layers_run + stats().prefix_layers) / num_layers.
  double cost() const noexcept {
    return static_cast<double>(stats_.layer_applications()) / static_cast<double>(layout_.num_layers);
  }

  /// The attention windows a mask stands for under this evaluator's w and s.
  AttentionWindows windows(const HeadMask& mask) const {
    return AttentionWindows::from_mask(mask, options_.window, options_.sinks);
  }

  /// Number of calibration samples (all of them, whatever sample_range() is).
  std::size_t sample_count() const noexcept { return inputs_.size(); }
  /// The samples scored, [first, second): all of them unless set_sample_range() was called.
  std::pair<std::size_t, std::size_t> sample_range() const noexcept { return {begin_, end_}; }
  /// From now on score only samples [begin, end) (begin == end: none):
  /// sample_scores() returns their scores, evaluate() their mean
  /// (score_samples() still scores whichever samples it is given). Clears
  /// the residual cache. Throws bosch::invalid_argument unless
  /// begin <= end <= sample_count().
  void set_sample_range(std::size_t begin, std::size_t end) {
    if (begin > end || end > inputs_.size())
      throw invalid_argument("sample range [" + std::to_string(begin) + ", " + std::to_string(end) +
                                 ") is not within the " + std::to_string(inputs_.size()) + " samples",
                             "TransformerEvaluator::set_sample_range");
    begin_ = begin;
    end_ = end;
    cache_.clear();
  }

  /// The order in which a race scores the samples (bosch::PerSampleEvaluator):
  /// the tasks interleaved (the first sample of every task in order of first
  /// appearance, then every task's second, ...), so that the first looks of
  /// a race see every task. With several context lengths (a mixed-length
  /// suite) each task's own samples alternate between the lengths, task i
  /// starting at length i (mod the number of lengths), so that the first
  /// looks also see every length: with 4 tasks at 512 and 1024 tokens the
  /// first four samples are task 1 at 512, task 2 at 1024, task 3 at 512 and
  /// task 4 at 1024 (screened probes, Options::probe_samples, score exactly
  /// those).
  std::vector<std::size_t> race_order() const {
    std::vector<std::string> names;
    std::vector<int> lengths;
    // by_task[task][length]: the samples, in suite order.
    std::vector<std::vector<std::vector<std::size_t>>> by_task;
    for (std::size_t s = 0; s < tasks_.samples.size(); ++s) {
      const auto& sample = tasks_.samples[s];
      const auto it = std::find(names.begin(), names.end(), sample.task);
      const std::size_t k = static_cast<std::size_t>(it - names.begin());
      if (it == names.end()) {
        names.push_back(sample.task);
        by_task.emplace_back();
      }
      const auto lt = std::find(lengths.begin(), lengths.end(), sample.context_length);
      const std::size_t j = static_cast<std::size_t>(lt - lengths.begin());
      if (lt == lengths.end()) lengths.push_back(sample.context_length);
      if (by_task[k].size() <= j) by_task[k].resize(j + 1);
      by_task[k][j].push_back(s);
    }
    // Each task's queue: its lengths taken in turn from length (task mod lengths).
    std::vector<std::vector<std::size_t>> queues(by_task.size());
    for (std::size_t k = 0; k < by_task.size(); ++k) {
      const auto& groups = by_task[k];
      std::vector<std::size_t> next(groups.size(), 0);
      std::size_t left = 0;
      for (const auto& g : groups) left += g.size();
      for (std::size_t turn = 0; left > 0; ++turn) {
        const std::size_t j = (k + turn) % groups.size();
        if (next[j] < groups[j].size()) {
          queues[k].push_back(groups[j][next[j]++]);
          --left;
        }
      }
    }
    std::vector<std::size_t> out;
    for (std::size_t round = 0; out.size() < tasks_.samples.size(); ++round)
      for (const auto& q : queues)
        if (round < q.size()) out.push_back(q[round]);
    return out;
  }

  /// The score (mean_logprob) of each of the calibration samples `samples`
  /// (indices below sample_count(), any order) under `mask`, in that order
  /// (bosch::PerSampleEvaluator); reduce() of all of them in sample order is
  /// evaluate()'s score. Throws bosch::invalid_argument for an index out of range.
  std::vector<double> score_samples(const HeadMask& mask, const EvaluationHint& hint,
                                    std::span<const std::size_t> samples) {
    check_mask(mask);
    for (std::size_t s : samples)
      if (s >= inputs_.size())
        throw invalid_argument("sample " + std::to_string(s) + " is not within the " +
                                   std::to_string(inputs_.size()) + " samples",
                               "TransformerEvaluator::score_samples");
    const AttentionWindows win = windows(mask);
    std::vector<double> out;
    out.reserve(samples.size());
    for (std::size_t s : samples) out.push_back(score_sample(mask, win, s, hint).mean_logprob);
    stats_.evaluations += 1;
    return out;
  }

  /// The score from per-sample scores (AnswerScore::mean_logprob) in sample
  /// order: their sum, accumulated in order, divided by their count (0 for
  /// none). evaluate() is exactly this over sample_scores().
  static double reduce(std::span<const double> per_sample) {
    double sum = 0;
    for (double v : per_sample) sum += v;
    return per_sample.empty() ? 0.0 : sum / static_cast<double>(per_sample.size());
  }

  /// Mean over the scored samples (all by default) of the mean answer-token
  /// log-probability.
  double evaluate(const HeadMask& mask) { return evaluate(mask, EvaluationHint{}); }

  /// As evaluate(mask), reusing cached residual streams (see the file comment).
  double evaluate(const HeadMask& mask, const EvaluationHint& hint) {
    std::vector<double> v;
    for (const auto& s : sample_scores(mask, hint)) v.push_back(s.mean_logprob);
    return reduce(v);
  }

  std::vector<double> evaluate_batch(std::span<const HeadMask> masks) {
    return evaluate_batch(masks, EvaluationHint{});
  }
  std::vector<double> evaluate_batch(std::span<const HeadMask> masks, const EvaluationHint& hint) {
    std::vector<double> out;
    out.reserve(masks.size());
    for (const auto& m : masks) {
      // The shared hint's layer is the batch minimum; each mask's own first
      // changed layer against the reference is at least that.
      EvaluationHint h = hint;
      if (hint.reference != nullptr) h.first_changed_layer = first_changed_layer(m, *hint.reference);
      out.push_back(evaluate(m, h));
    }
    return out;
  }

  /// The teacher-forced score of every scored sample (sample_range(), in
  /// order) under `mask`.
  std::vector<tasks::AnswerScore> sample_scores(const HeadMask& mask, const EvaluationHint& hint = {}) {
    check_mask(mask);
    const AttentionWindows win = windows(mask);
    std::vector<tasks::AnswerScore> scores;
    scores.reserve(end_ - begin_);
    for (std::size_t s = begin_; s < end_; ++s) scores.push_back(score_sample(mask, win, s, hint));
    stats_.evaluations += 1;
    return scores;
  }

  /// Drops every cached residual stream.
  void clear_cache() { cache_.clear(); }

 private:
  void check_mask(const HeadMask& mask) const {
    if (!(mask.layout() == layout_))
      throw invalid_argument("mask layout does not match the model's", "TransformerEvaluator::evaluate");
  }

  /// Sample `s` under `mask` (windows `win`): its forward from the deepest
  /// cached stream of the mask's prefix, storing the streams entering the
  /// layers up to the hint's first changed layer on the way.
  tasks::AnswerScore score_sample(const HeadMask& mask, const AttentionWindows& win, std::size_t s,
                                  const EvaluationHint& hint) {
    const int num_layers = layout_.num_layers;
    const int start = cache_.capacity() ? cache_.deepest(mask, num_layers - 1, s) : 0;
    // Layers whose incoming stream is stored on the way: (start, save_to].
    const int save_to = std::min(hint.reference ? hint.first_changed_layer : 0, num_layers - 1);
    const int P = prefix_rows_[s];
    const std::span<const int> tokens(inputs_[s].tokens);
    typename B::Residual x = start > 0 ? *cache_.find(mask, start, s) : backend_->embed(tokens.subspan(P));
    auto run = [&](int first, int last) {
      if constexpr (has_shared_prefix) {
        if (P > 0) {
          backend_->run_layers(x, first, last, win, prefix(s), last == num_layers ? outputs_from_[s] : 0);
          return;
        }
      }
      backend_->run_layers(x, first, last, win);
    };
    int layer = start;
    for (int k = start + 1; k <= save_to; ++k) {
      run(layer, k);
      layer = k;
      cache_.insert(mask, k, x, sample_bytes_[s], s);
    }
    run(layer, num_layers);
    std::vector<int> positions = inputs_[s].positions;
    for (int& p : positions) p -= P;
    const auto logits = backend_->logits(x, positions);
    stats_.layers_run += static_cast<std::size_t>(num_layers - start);
    stats_.row_layers += static_cast<std::size_t>(num_layers - start) * (tokens.size() - static_cast<std::size_t>(P));
    stats_.layers_saved += static_cast<std::size_t>(start);
    return tasks::answer_logprob(logits, backend_->config().vocab_size, answers_[s]);
  }

  static constexpr bool has_shared_prefix = detail::SharedPrefixOf<B>::available;

  /// Sample `s`'s shared prefix, computed on first use.
  const auto& prefix(std::size_t s) {
    auto& p = prefixes_[s];
    if (!p) {
      const std::span<const int> tokens(inputs_[s].tokens);
      p = backend_->shared_prefix(tokens.first(static_cast<std::size_t>(prefix_rows_[s])));
      const std::size_t rows = static_cast<std::size_t>(prefix_rows_[s]) * static_cast<std::size_t>(layout_.num_layers);
      stats_.prefix_layers += (rows + tokens.size() - 1) / tokens.size();
      stats_.row_layers += rows;
    }
    return *p;
  }

  const B* backend_;
  TransformerEvaluatorOptions options_;
  HeadLayout layout_{};
  tasks::TaskSet tasks_;
  std::vector<tasks::TeacherForcing> inputs_;
  std::vector<std::vector<int>> answers_;
  std::vector<std::size_t> sample_bytes_;  // one cache entry: a sample's stream at one layer
  std::vector<int> prefix_rows_;           // P per sample (0: no shared prefix)
  std::vector<int> outputs_from_;          // the last layer's first output row past P
  std::vector<std::optional<typename detail::SharedPrefixOf<B>::type>> prefixes_;
  std::size_t begin_ = 0, end_ = 0;        // the scored samples
  ResidualCache<typename B::Residual> cache_;
  TransformerEvaluatorStats stats_;
};

}  // namespace bosch
