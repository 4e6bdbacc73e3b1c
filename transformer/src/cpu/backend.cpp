// SPDX-License-Identifier: Apache-2.0
// bosch::cpu::Backend: the decoder forward pass (llama / qwen2 / qwen3 / qwen3moe) with
// per-KV-head attention windows, on packed batches of sequences.

#include <bosch/cpu/attention.hpp>
#include <bosch/cpu/backend.hpp>
#include <bosch/cpu/bf16.hpp>
#include <bosch/cpu/kernels.hpp>
#include <bosch/cpu/layer.hpp>
#include <bosch/cpu/rope.hpp>
#include <bosch/error.hpp>
#include <bosch/eval/backend_frame.hpp>
#include <bosch/model/validate.hpp>

#include <omp.h>

#include <algorithm>
#include <string>

namespace bosch::cpu {
namespace {

void check_residual(const Residual& x, const model::Config& c, int first, int last) {
  frame::check_layer_range(first, last, c.num_layers, "run_layers");
  frame::check_residual(x.n_tokens, x.hidden, x.data.size(), c.hidden_size, "residual");
}

/// Runs layers [first, last) on the packed rows x (sequence b = rows
/// [offsets[b], offsets[b+1])): decoder_layer with the caller's hooks.
void run_packed(const model::Model& model, const Options& options, const Bf16Weights* bf16, float* x,
                std::span<const int> offsets, int first, int last, const AttentionWindows& windows,
                const LayerHooks& hooks = {}) {
  const auto& c = model.config;
  const std::size_t N = static_cast<std::size_t>(offsets.back());
  if (first >= last || N == 0) return;
  ThreadScope threads(options.threads);
  int longest = 0;
  for (std::size_t b = 0; b + 1 < offsets.size(); ++b) longest = std::max(longest, offsets[b + 1] - offsets[b]);
  const RopeTable rope(c, longest);
  LayerScratch s(c, N, bf16 != nullptr);
  const AttentionTiles tiles{options.tile, options.swa_tile};
  std::vector<HeadWindow> hw(static_cast<std::size_t>(c.num_kv_heads));
  for (int l = first; l < last; ++l) {
    layer_windows(windows, l, hw);
    decoder_layer(model, l, x, LayerRows{offsets, 0}, rope, hw, tiles, s, hooks, bf16);
  }
}

/// Final norm + output projection of the given packed rows.
std::vector<float> project(const model::Model& model, const Options& options, const float* x,
                           std::span<const std::size_t> rows) {
  const auto& c = model.config;
  const int d = c.hidden_size;
  std::vector<float> h(rows.size() * d);
  for (std::size_t r = 0; r < rows.size(); ++r)
    std::copy_n(x + rows[r] * d, d, h.data() + r * d);
  std::vector<float> out(rows.size() * static_cast<std::size_t>(c.vocab_size));
  if (rows.empty()) return out;
  ThreadScope threads(options.threads);
  rms_norm(h.data(), h.data(), rows.size(), d, model.weights.final_norm.data(), static_cast<float>(c.rms_eps));
  linear(h.data(), rows.size(), model.weights.output(), nullptr, out.data());
  return out;
}

void embed_into(const model::Model& model, std::span<const int> tokens, float* x) {
  const auto& c = model.config;
  frame::check_tokens(tokens, c.vocab_size, "tokens");
  for (std::size_t i = 0; i < tokens.size(); ++i)
    std::copy_n(model.weights.embedding.row(tokens[i]), c.hidden_size, x + i * c.hidden_size);
}

}  // namespace

Backend::Backend(const model::Model& model, Options options) : model_(&model), options_(options) {
  model::validate(model);
  if (options_.tile <= 0) throw invalid_argument("tile must be positive, got " + std::to_string(options_.tile), "tile");
  if (options_.swa_tile < 0)
    throw invalid_argument("swa_tile must be >= 0, got " + std::to_string(options_.swa_tile), "swa_tile");
  if (options_.threads < 0)
    throw invalid_argument("threads must be >= 0, got " + std::to_string(options_.threads), "threads");
  precision_ = choose_precision(options_.precision);
  if (precision_.precision == Precision::bf16) {
    ThreadScope threads(options_.threads);
    bf16_ = std::make_shared<const Bf16Weights>(pack_bf16(model, precision_.kernel));
  }
}

std::size_t Backend::packed_bytes() const noexcept { return bf16_ ? bf16_->bytes() : 0; }

const model::Config& Backend::config() const noexcept { return model_->config; }
const model::Model& Backend::model() const noexcept { return *model_; }
HeadLayout Backend::layout() const { return model_->config.layout(); }

Residual Backend::embed(std::span<const int> tokens) const {
  Residual r;
  r.n_tokens = static_cast<int>(tokens.size());
  r.hidden = config().hidden_size;
  r.data.resize(tokens.size() * static_cast<std::size_t>(r.hidden));
  embed_into(*model_, tokens, r.data.data());
  return r;
}

void Backend::run_layers(Residual& x, int first, int last, const AttentionWindows& windows,
                         HeadStats* stats, const StatsRequest* request) const {
  const auto& c = config();
  check_residual(x, c, first, last);
  windows.check(c.layout(), "windows");
  if (!stats) {
    run_layers(x, first, last, windows, LayerHooks{});
    return;
  }
  if (stats->num_layers == 0 && stats->num_heads == 0) {
    const std::size_t size = static_cast<std::size_t>(c.num_layers) * static_cast<std::size_t>(c.num_heads);
    stats->num_layers = c.num_layers;
    stats->num_heads = c.num_heads;
    stats->rows = 0;
    for (auto* v : {&stats->beyond_window_mass, &stats->mean_distance, &stats->entropy, &stats->sink_mass,
                    &stats->echo, &stats->induction})
      v->assign(size, 0.0);
  } else if (stats->num_layers != c.num_layers || stats->num_heads != c.num_heads) {
    throw invalid_argument("statistics sized for " + std::to_string(stats->num_layers) + " layers x " +
                               std::to_string(stats->num_heads) + " heads, model has " +
                               std::to_string(c.num_layers) + " x " + std::to_string(c.num_heads),
                           "HeadStats");
  }
  if (first >= last || x.n_tokens == 0) return;
  const StatsRequest default_request;
  const StatsRequest& req = request ? *request : default_request;
  const std::vector<int> rows = stats_rows(req, x.n_tokens);
  stats->rows += static_cast<double>(rows.size());
  LayerHooks hooks;
  hooks.inspect = [&](const LayerView& view) {
    attention_stats(view.q, view.k, view.rows, view.shape, view.windows, req, rows, view.layer, *stats);
  };
  run_layers(x, first, last, windows, hooks);
}

void Backend::run_layers(Residual& x, int first, int last, const AttentionWindows& windows,
                         const LayerHooks& hooks) const {
  const auto& c = config();
  check_residual(x, c, first, last);
  windows.check(c.layout(), "windows");
  const int offsets[2] = {0, x.n_tokens};
  run_packed(*model_, options_, bf16_.get(), x.data.data(), offsets, first, last, windows, hooks);
}

SharedPrefix Backend::shared_prefix(std::span<const int> tokens) const {
  const auto& c = config();
  Residual x = embed(tokens);
  SharedPrefix prefix;
  prefix.rows = x.n_tokens;
  prefix.k.resize(static_cast<std::size_t>(c.num_layers));
  prefix.v.resize(static_cast<std::size_t>(c.num_layers));
  LayerHooks hooks;
  hooks.cache = [&prefix](const LayerView& view) {
    const std::size_t n = static_cast<std::size_t>(view.rows) * view.shape.kv_stride;
    prefix.k[static_cast<std::size_t>(view.layer)].assign(view.k, view.k + n);
    prefix.v[static_cast<std::size_t>(view.layer)].assign(view.v, view.v + n);
    return KeyValues{view.k, view.v, view.rows};
  };
  const int offsets[2] = {0, x.n_tokens};
  run_packed(*model_, options_, bf16_.get(), x.data.data(), offsets, 0, c.num_layers, AttentionWindows::full(),
             hooks);
  return prefix;
}

void Backend::run_layers(Residual& x, int first, int last, const AttentionWindows& windows,
                         const SharedPrefix& prefix, int outputs_from) const {
  const auto& c = config();
  check_residual(x, c, first, last);
  windows.check(c.layout(), "windows");
  const std::size_t kv_stride = static_cast<std::size_t>(c.num_kv_heads) * static_cast<std::size_t>(c.head_dim);
  const std::size_t P = static_cast<std::size_t>(std::max(0, prefix.rows));
  if (prefix.rows < 0 || prefix.k.size() != static_cast<std::size_t>(c.num_layers) ||
      prefix.v.size() != prefix.k.size())
    throw invalid_argument("shared prefix of " + std::to_string(prefix.k.size()) + " layers, model has " +
                               std::to_string(c.num_layers),
                           "run_layers");
  for (std::size_t l = 0; l < prefix.k.size(); ++l)
    if (prefix.k[l].size() != P * kv_stride || prefix.v[l].size() != P * kv_stride)
      throw invalid_argument("shared prefix layer " + std::to_string(l) + " does not hold " + std::to_string(P) +
                                 " rows of keys and values",
                             "run_layers");
  if (windows.mask.size() != 0 && windows.mask.count() > 0 && windows.window < prefix.rows)
    throw invalid_argument("a shared prefix of " + std::to_string(prefix.rows) + " rows needs windows of at least " +
                               std::to_string(prefix.rows) + " keys, got " + std::to_string(windows.window),
                           "run_layers");
  const int N = x.n_tokens;
  if (outputs_from < 0 || outputs_from > N)
    throw invalid_argument("outputs from row " + std::to_string(outputs_from) + " of " + std::to_string(N),
                           "run_layers");
  if (first >= last || N == 0) return;
  ThreadScope threads(options_.threads);
  const RopeTable rope(c, prefix.rows + N);
  LayerScratch s(c, static_cast<std::size_t>(N), bf16_ != nullptr);
  const AttentionTiles tiles{options_.tile, options_.swa_tile};
  std::vector<HeadWindow> hw(static_cast<std::size_t>(c.num_kv_heads));
  // Keys and values attention reads: the prefix's rows, then the new rows.
  const std::size_t rows = P + static_cast<std::size_t>(N);
  std::vector<float> keys(rows * kv_stride), values(rows * kv_stride);
  LayerHooks hooks;
  hooks.cache = [&](const LayerView& view) {
    const auto l = static_cast<std::size_t>(view.layer);
    std::copy(prefix.k[l].begin(), prefix.k[l].end(), keys.begin());
    std::copy(prefix.v[l].begin(), prefix.v[l].end(), values.begin());
    std::copy_n(view.k, static_cast<std::size_t>(N) * kv_stride, keys.begin() + static_cast<std::ptrdiff_t>(P * kv_stride));
    std::copy_n(view.v, static_cast<std::size_t>(N) * kv_stride, values.begin() + static_cast<std::ptrdiff_t>(P * kv_stride));
    return KeyValues{keys.data(), values.data(), static_cast<int>(rows)};
  };
  const int offsets[2] = {0, N};
  for (int l = first; l < last; ++l) {
    layer_windows(windows, l, hw);
    const LayerRows rows{offsets, prefix.rows, l + 1 == last ? outputs_from : 0};
    decoder_layer(*model_, l, x.data.data(), rows, rope, hw, tiles, s, hooks, bf16_.get());
  }
}

std::vector<float> Backend::logits(const Residual& x, std::span<const int> positions) const {
  frame::check_residual(x.n_tokens, x.hidden, x.data.size(), config().hidden_size, "residual");
  frame::check_positions(positions, x.n_tokens, "positions");
  const std::vector<std::size_t> rows(positions.begin(), positions.end());
  return project(*model_, options_, x.data.data(), rows);
}

std::vector<float> Backend::forward(std::span<const int> tokens, const AttentionWindows& windows,
                                    std::span<const int> positions) const {
  Residual x = embed(tokens);
  run_layers(x, 0, config().num_layers, windows);
  return logits(x, positions);
}

DecodeState Backend::prefill(std::span<const int> tokens, const AttentionWindows& windows,
                             std::vector<float>* last_logits, int capacity) const {
  std::vector<float> logits;
  const int last = static_cast<int>(tokens.size()) - 1;
  // An empty sequence has no last position: prefill_rows refuses it first.
  auto state = prefill_rows(tokens, windows, last_logits && last >= 0 ? std::span<const int>(&last, 1)
                                                                      : std::span<const int>(),
                            logits, capacity);
  if (last_logits) *last_logits = std::move(logits);
  return state;
}

DecodeState Backend::prefill(std::span<const int> tokens, const AttentionWindows& windows,
                             std::span<const int> positions, std::vector<float>& logits, int capacity) const {
  return prefill_rows(tokens, windows, positions, logits, capacity);
}

DecodeState Backend::prefill_rows(std::span<const int> tokens, const AttentionWindows& windows,
                                  std::span<const int> positions, std::vector<float>& logits, int capacity) const {
  const auto& c = config();
  frame::check_prefill(c, tokens, windows, capacity, "prefill");  // before the cache is allocated
  const int n = static_cast<int>(tokens.size());
  frame::check_positions(positions, n, "positions");
  Residual x = embed(tokens);
  DecodeState state;
  state.cache = KvCache(c, windows, std::max(n, capacity));
  state.windows = windows;
  const int offsets[2] = {0, x.n_tokens};
  // Stores what each head will read later (the first reader is position n,
  // the first decode step); attention reads the new rows from the scratch,
  // as without a cache, so the logits stay bitwise those of forward().
  LayerHooks hooks;
  hooks.cache = [&state, n](const LayerView& view) {
    state.cache.write(view.layer, view.k, view.v, view.rows, view.shape.kv_stride, n);
    return KeyValues{view.k, view.v, view.rows};
  };
  run_packed(*model_, options_, bf16_.get(), x.data.data(), offsets, 0, c.num_layers, windows, hooks);
  state.cache.advance(n);
  state.positions = n;
  if (!positions.empty()) {
    const std::vector<std::size_t> rows(positions.begin(), positions.end());
    logits = project(*model_, options_, x.data.data(), rows);
  } else {
    logits.clear();
  }
  return state;
}

std::vector<std::vector<float>> Backend::forward_batch(std::span<const std::vector<int>> sequences,
                                                       const AttentionWindows& windows,
                                                       std::span<const std::vector<int>> positions) const {
  const auto& c = config();
  frame::check_position_lists(positions.size(), sequences.size(), "positions");
  windows.check(c.layout(), "windows");
  std::vector<int> offsets{0};
  for (const auto& s : sequences) offsets.push_back(offsets.back() + static_cast<int>(s.size()));
  const std::size_t d = static_cast<std::size_t>(c.hidden_size);
  std::vector<float> x(static_cast<std::size_t>(offsets.back()) * d);
  std::vector<std::size_t> rows;
  for (std::size_t b = 0; b < sequences.size(); ++b) {
    embed_into(*model_, sequences[b], x.data() + static_cast<std::size_t>(offsets[b]) * d);
    frame::check_positions(positions[b], static_cast<int>(sequences[b].size()), "positions", static_cast<int>(b));
    for (int p : positions[b]) rows.push_back(static_cast<std::size_t>(offsets[b] + p));
  }
  run_packed(*model_, options_, bf16_.get(), x.data(), offsets, 0, c.num_layers, windows);
  const std::vector<float> all = project(*model_, options_, x.data(), rows);
  std::vector<std::vector<float>> out(sequences.size());
  const std::size_t vocab = static_cast<std::size_t>(c.vocab_size);
  std::size_t r = 0;
  for (std::size_t b = 0; b < sequences.size(); ++b) {
    const std::size_t k = positions[b].size();
    out[b].assign(all.begin() + static_cast<std::ptrdiff_t>(r * vocab),
                  all.begin() + static_cast<std::ptrdiff_t>((r + k) * vocab));
    r += k;
  }
  return out;
}

std::size_t Backend::scratch_bytes(int n) const noexcept {
  const auto& c = config();
  const auto rows = static_cast<std::size_t>(std::max(0, n));
  const auto hd = static_cast<std::size_t>(c.head_dim);
  // h, q, k, v, attention output, gate, up when a layer is dense (and their
  // bf16 copy); the RoPE table (cos + sin); in sparse layers the router
  // logits, the k gathered rows per token and their expert activations
  // (cpu/moe.hpp).
  const std::size_t layer = LayerScratch::bytes(c, rows, bf16_ != nullptr);
  std::size_t floats = rows * hd;
  if (c.moe.num_experts > 0)
    floats += rows * (static_cast<std::size_t>(c.moe.num_experts) +
                      static_cast<std::size_t>(c.moe.num_experts_used) *
                          (static_cast<std::size_t>(c.hidden_size) + static_cast<std::size_t>(c.moe.expert_intermediate_size)));
  // Attention, per thread: packed queries, accumulator and a score chunk of
  // (group x tile) rows by 4 tiles of keys.
  const auto tile = static_cast<std::size_t>(std::max(1, options_.tile));
  const auto group_rows = static_cast<std::size_t>(c.num_heads / c.num_kv_heads) * tile;
  const int threads = options_.threads > 0 ? options_.threads : omp_get_max_threads();
  floats += static_cast<std::size_t>(threads) * group_rows * (2 * hd + 4 * ((tile + 7) / 8 * 8));
  // The experts' gate and up blocks, per thread (moe.cpp: 128 rows x 256 columns).
  if (c.moe.num_experts > 0) floats += static_cast<std::size_t>(threads) * 2 * 128 * 256;
  return layer + floats * sizeof(float);
}

double Backend::flops(int n, int logit_rows, const AttentionWindows& windows) const {
  return frame::forward_flops(config(), n, logit_rows, windows);
}

std::size_t Backend::kv_bytes(const AttentionWindows& windows, std::int64_t tokens) const {
  return cpu::kv_bytes(config(), windows, tokens);
}

}  // namespace bosch::cpu
