// SPDX-License-Identifier: Apache-2.0
// bosch::cpu::Backend::decode_step: one new token through all layers against
// the key/value cache that Backend::prefill built (incremental greedy decoding).

#include <bosch/cpu/backend.hpp>
#include <bosch/cpu/kernels.hpp>
#include <bosch/cpu/layer.hpp>
#include <bosch/cpu/rope.hpp>
#include <bosch/error.hpp>

#include <algorithm>
#include <limits>
#include <string>

namespace bosch::cpu {
namespace {

void check_state(const DecodeState& state, const model::Config& c) {
  const auto L = static_cast<std::size_t>(c.num_layers);
  const int kvd = c.num_kv_heads * c.head_dim;
  if (state.positions < 1 || state.kv_dim != kvd || state.k.size() != L || state.v.size() != L)
    throw invalid_argument("decode state of " + std::to_string(state.k.size()) + " layers, kv_dim " +
                               std::to_string(state.kv_dim) + ", " + std::to_string(state.positions) +
                               " positions does not fit the model (" + std::to_string(c.num_layers) +
                               " layers, kv_dim " + std::to_string(kvd) + "); make it with prefill",
                           "DecodeState");
  const std::size_t rows = static_cast<std::size_t>(state.positions) * static_cast<std::size_t>(kvd);
  for (std::size_t l = 0; l < L; ++l)
    if (state.k[l].size() != rows || state.v[l].size() != rows)
      throw invalid_argument("decode state layer " + std::to_string(l) + " holds " +
                                 std::to_string(state.k[l].size()) + " key and " +
                                 std::to_string(state.v[l].size()) + " value floats, expected " +
                                 std::to_string(rows),
                             "DecodeState");
}

}  // namespace

std::vector<float> Backend::decode_step(DecodeState& state, int token, const AttentionWindows& windows) const {
  const auto& c = config();
  check_state(state, c);
  if (AttentionWindows::first_difference(windows, state.windows, c.num_layers, c.num_kv_heads) != c.num_layers)
    throw invalid_argument("decode_step windows differ from those the state was prefilled with", "windows");
  if (token < 0 || token >= c.vocab_size)
    throw invalid_argument("token id " + std::to_string(token) + " outside the vocabulary of " +
                               std::to_string(c.vocab_size),
                           "token");
  if (state.positions == std::numeric_limits<int>::max())
    throw invalid_argument("decode state is full", "DecodeState");

  ThreadScope threads(options_.threads);
  const int p = state.positions;
  if (state.rope.positions() <= p)
    state.rope = RopeTable(c, p < (1 << 29) ? std::max(64, 2 * (p + 1)) : std::numeric_limits<int>::max());

  // decoder_layer on one row at position p; the cache hook appends its keys
  // and values, so attention reads positions [0, p].
  const int token_span[1] = {token};
  Residual x = embed(token_span);
  LayerScratch s(c, 1);
  LayerHooks hooks;
  hooks.cache = [&state](const LayerView& view) {
    auto& k = state.k[static_cast<std::size_t>(view.layer)];
    auto& v = state.v[static_cast<std::size_t>(view.layer)];
    const auto floats = static_cast<std::size_t>(view.rows) * view.shape.kv_stride;
    k.insert(k.end(), view.k, view.k + floats);
    v.insert(v.end(), view.v, view.v + floats);
    return KeyValues{k.data(), v.data(), static_cast<int>(k.size() / view.shape.kv_stride)};
  };
  const int offsets[2] = {0, 1};
  std::vector<HeadWindow> hw(static_cast<std::size_t>(c.num_kv_heads));
  const auto old_rows = static_cast<std::size_t>(p) * static_cast<std::size_t>(state.kv_dim);
  try {
    for (int l = 0; l < c.num_layers; ++l) {
      layer_windows(windows, l, hw);
      decoder_layer(*model_, l, x.data.data(), LayerRows{offsets, p}, state.rope, hw, AttentionTiles{options_.tile, options_.swa_tile}, s, hooks);
    }
  } catch (...) {
    for (std::size_t l = 0; l < state.k.size(); ++l) {
      state.k[l].resize(old_rows);
      state.v[l].resize(old_rows);
    }
    throw;
  }
  state.positions = p + 1;
  const int last[1] = {0};
  return logits(x, last);
}

}  // namespace bosch::cpu
