// SPDX-License-Identifier: Apache-2.0
// bosch::cpu::Backend::decode_step: one new token through all layers against
// the hybrid key/value cache that Backend::prefill built (incremental greedy
// decoding; cpu/kv_cache.hpp).

#include <bosch/cpu/backend.hpp>
#include <bosch/cpu/kernels.hpp>
#include <bosch/cpu/layer.hpp>
#include <bosch/cpu/rope.hpp>
#include <bosch/error.hpp>
#include <bosch/eval/backend_frame.hpp>

#include <algorithm>
#include <limits>
#include <string>

namespace bosch::cpu {
namespace {

void check_state(const DecodeState& state, const model::Config& c) {
  const auto& kv = state.cache;
  if (state.positions < 1 || kv.empty() || kv.positions() != state.positions || kv.num_layers() != c.num_layers ||
      kv.num_kv_heads() != c.num_kv_heads || kv.head_dim() != c.head_dim)
    throw invalid_argument("decode state of " + std::to_string(kv.num_layers()) + " layers x " +
                               std::to_string(kv.num_kv_heads()) + " KV heads x head_dim " +
                               std::to_string(kv.head_dim()) + ", " + std::to_string(state.positions) +
                               " positions (cache " + std::to_string(kv.positions()) +
                               ") does not fit the model (" + std::to_string(c.num_layers) + " x " +
                               std::to_string(c.num_kv_heads) + " x " + std::to_string(c.head_dim) +
                               "); make it with prefill",
                           "DecodeState");
}

}  // namespace

std::vector<float> Backend::decode_step(DecodeState& state, int token, const AttentionWindows& windows) const {
  const auto& c = config();
  check_state(state, c);
  frame::check_decode_step(c, state.positions, token, windows, state.windows, "decode_step");

  ThreadScope threads(options_.threads);
  const int p = state.positions;
  if (state.rope.positions() <= p)
    state.rope = RopeTable(c, p < (1 << 29) ? std::max(64, 2 * (p + 1)) : std::numeric_limits<int>::max());

  // decoder_layer on one row at position p: the cache hook stores its keys
  // and values (an SWA head into the oldest slot of its ring), and attention
  // reads the hybrid cache, positions [0, p] as each head's window allows.
  if (state.cache.capacity() <= p) state.cache.reserve(p < (1 << 29) ? std::max(p + 1, 2 * p) : p + 1);
  const int token_span[1] = {token};
  Residual x = embed(token_span);
  LayerScratch s(c, 1, bf16_ != nullptr);
  LayerHooks hooks;
  KvCache& cache = state.cache;
  hooks.cache = [&cache, p](const LayerView& view) {
    cache.write(view.layer, view.k, view.v, view.rows, view.shape.kv_stride, p);
    return KeyValues{view.k, view.v, view.rows};
  };
  hooks.attend = [&cache, bf16 = bf16_ != nullptr](const LayerView& view, float* att) {
    cache.attend(view.layer, view.q, att, view.shape, bf16);
  };
  const int offsets[2] = {0, 1};
  std::vector<HeadWindow> hw(static_cast<std::size_t>(c.num_kv_heads));
  // A failure part-way leaves positions() at p: the rows written at p sit in
  // slots no query before p + 1 reads (an SWA head's slot for p held
  // position p - window, which a query at p no longer sees), so the state
  // stays usable.
  for (int l = 0; l < c.num_layers; ++l) {
    layer_windows(windows, l, hw);
    decoder_layer(*model_, l, x.data.data(), LayerRows{offsets, p}, state.rope, hw, AttentionTiles{options_.tile, options_.swa_tile}, s, hooks,
                  bf16_.get());
  }
  cache.advance(1);
  state.positions = p + 1;
  const int last[1] = {0};
  return logits(x, last);
}

}  // namespace bosch::cpu
