// SPDX-License-Identifier: Apache-2.0
// bosch::cpu::KvCache: the hybrid KV cache of incremental decoding (see
// cpu/kv_cache.hpp and docs/deployment.md, "Hybrid KV cache").

#include <bosch/cpu/attention.hpp>
#include <bosch/cpu/bf16.hpp>
#include <bosch/cpu/kernels.hpp>
#include <bosch/cpu/kv_cache.hpp>
#include <bosch/error.hpp>
#include <bosch/model/kv_layout.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

namespace bosch::cpu {

std::int64_t kv_rows(bool swa, int window, int sinks, std::int64_t tokens) noexcept {
  return kv::rows(swa, window, sinks, tokens);
}

std::size_t kv_bytes(const HeadLayout& layout, int head_dim, const HeadMask& mask, int window, int sinks,
                     std::int64_t tokens) {
  return kv::bytes(layout, head_dim, mask, window, sinks, tokens, sizeof(float));
}

std::size_t kv_bytes(const model::Config& config, const AttentionWindows& windows, std::int64_t tokens) {
  return kv::bytes(config, windows, tokens, sizeof(float));
}

KvCache::KvCache(const model::Config& config, const AttentionWindows& windows, int capacity)
    : num_layers_(config.num_layers),
      num_kv_heads_(config.num_kv_heads),
      head_dim_(config.head_dim),
      windows_(windows) {
  windows.check(config.layout(), "KvCache");
  if (capacity < 1) throw invalid_argument("capacity must be >= 1, got " + std::to_string(capacity), "KvCache");
  heads_.resize(static_cast<std::size_t>(num_layers_) * static_cast<std::size_t>(num_kv_heads_));
  for (int l = 0; l < num_layers_; ++l)
    for (int g = 0; g < num_kv_heads_; ++g)
      heads_[static_cast<std::size_t>(l) * static_cast<std::size_t>(num_kv_heads_) + static_cast<std::size_t>(g)]
          .swa = windows.is_swa(l, g);
  reserve(capacity);
}

void KvCache::reserve(int capacity) {
  if (capacity <= capacity_) return;
  const auto hd = static_cast<std::size_t>(head_dim_);
  for (auto& h : heads_) {
    const auto rows = static_cast<int>(kv_rows(h.swa, windows_.window, windows_.sinks, capacity));
    if (rows <= h.rows) continue;
    // Exact-size buffers (capacity() == size()), so allocated_bytes() is the
    // formula. An SWA head below sinks + window rows has not wrapped yet
    // (positions <= its rows), so its slots stay where they are.
    std::vector<float> k(static_cast<std::size_t>(rows) * hd), v(static_cast<std::size_t>(rows) * hd);
    std::copy(h.k.begin(), h.k.end(), k.begin());
    std::copy(h.v.begin(), h.v.end(), v.begin());
    h.k.swap(k);
    h.v.swap(v);
    h.rows = rows;
  }
  capacity_ = capacity;
}

int KvCache::slot(const Head& h, int position) const noexcept {
  return kv::slot(h.swa, windows_.window, windows_.sinks, position);
}

bool KvCache::holds(const Head& h, int position) const noexcept {
  return kv::holds(h.swa, windows_.window, windows_.sinks, positions_, position);
}

void KvCache::write(int layer, const float* k, const float* v, int rows, std::size_t kv_stride, int first_reader) {
  if (layer < 0 || layer >= num_layers_ || rows < 0 || positions_ + rows > capacity_ ||
      kv_stride < static_cast<std::size_t>(num_kv_heads_) * static_cast<std::size_t>(head_dim_))
    throw invalid_argument("write of " + std::to_string(rows) + " rows at position " + std::to_string(positions_) +
                               " into layer " + std::to_string(layer) + " does not fit the cache (" +
                               std::to_string(num_layers_) + " layers, capacity " + std::to_string(capacity_) + ")",
                           "KvCache");
  const auto hd = static_cast<std::size_t>(head_dim_);
  const int start = positions_;
  for (int g = 0; g < num_kv_heads_; ++g) {
    Head& h = heads_[static_cast<std::size_t>(layer) * static_cast<std::size_t>(num_kv_heads_) +
                     static_cast<std::size_t>(g)];
    const std::size_t col = static_cast<std::size_t>(g) * hd;
    for (int r = 0; r < rows; ++r) {
      const int j = start + r;
      // An SWA head stores its sinks and the keys a query at first_reader or
      // later can see (j > first_reader - window); nothing else is ever read.
      if (!kv::stored(h.swa, windows_.window, windows_.sinks, j, first_reader)) continue;
      const std::size_t dst = static_cast<std::size_t>(slot(h, j)) * hd;
      const std::size_t src = static_cast<std::size_t>(r) * kv_stride + col;
      std::copy_n(k + src, hd, h.k.data() + dst);
      std::copy_n(v + src, hd, h.v.data() + dst);
    }
  }
}

void KvCache::advance(int rows) {
  if (rows < 0 || positions_ + rows > capacity_)
    throw invalid_argument("advance by " + std::to_string(rows) + " past the capacity " + std::to_string(capacity_),
                           "KvCache");
  positions_ += rows;
}

void KvCache::attend(int layer, const float* q, float* out, const AttentionShape& shape, bool bf16) const {
  if (layer < 0 || layer >= num_layers_ || shape.num_kv_heads != num_kv_heads_ || shape.head_dim != head_dim_ ||
      shape.num_heads % std::max(1, shape.num_kv_heads) != 0 || positions_ >= capacity_)
    throw invalid_argument("attention shape or layer does not fit the cache", "KvCache::attend");
  const int G = shape.num_heads / shape.num_kv_heads;
  const int hd = head_dim_;
  const int p = positions_;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  // bf16: the inputs of the two products rounded as the tiled kernel rounds
  // them (queries scaled, keys, values, probabilities), sums in fp32.
  auto round = [bf16](float x) { return bf16 ? from_bf16(to_bf16(x)) : x; };
  // Threads only when there is enough work to pay for a parallel region (a
  // short context's few thousand multiply-adds run faster on one thread).
  const bool parallel = static_cast<std::size_t>(p + 1) * static_cast<std::size_t>(shape.num_heads) *
                            static_cast<std::size_t>(hd) >=
                        (std::size_t{1} << 16);
#pragma omp parallel if (parallel)
  {
    std::vector<float> scores(static_cast<std::size_t>(p + 1)), qs(static_cast<std::size_t>(hd));
    std::vector<const float*> keys(static_cast<std::size_t>(p + 1)), values(static_cast<std::size_t>(p + 1));
#pragma omp for schedule(static)
    for (int qh = 0; qh < shape.num_heads; ++qh) {
      const Head& h = head(layer, qh / G);
      const float* qrow = q + static_cast<std::size_t>(qh) * hd;
      float* o = out + static_cast<std::size_t>(qh) * hd;
      // The visible positions in increasing order, as attention_cached
      // walks them (kv::reads): a full head [0, p]; an SWA head its sinks
      // [0, min(s, p + 1)) and the ring's [max(s, p - w + 1), p].
      const kv::Reads reads = kv::reads(h.swa, windows_.window, windows_.sinks, p);
      const int count = reads.count();
      for (int t = 0; t < count; ++t) {
        const std::size_t at = static_cast<std::size_t>(slot(h, reads.at(t))) * static_cast<std::size_t>(hd);
        keys[static_cast<std::size_t>(t)] = h.k.data() + at;
        values[static_cast<std::size_t>(t)] = h.v.data() + at;
      }
      for (int c = 0; c < hd; ++c) qs[static_cast<std::size_t>(c)] = round(qrow[c] * scale);
      float mx = -std::numeric_limits<float>::infinity();
      for (int t = 0; t < count; ++t) {
        const float* kj = keys[static_cast<std::size_t>(t)];
        float dot = 0.0f;
        if (bf16)
          for (int c = 0; c < hd; ++c) dot += qs[static_cast<std::size_t>(c)] * round(kj[c]);
        else
          for (int c = 0; c < hd; ++c) dot += qs[static_cast<std::size_t>(c)] * kj[c];
        scores[static_cast<std::size_t>(t)] = dot;
        mx = std::max(mx, dot);
      }
      const float sum = exp_shifted(scores.data(), static_cast<std::size_t>(count), mx);
      std::fill_n(o, hd, 0.0f);
      for (int t = 0; t < count; ++t) {
        const float a = round(scores[static_cast<std::size_t>(t)]);
        const float* vj = values[static_cast<std::size_t>(t)];
        if (bf16)
          for (int c = 0; c < hd; ++c) o[c] += a * round(vj[c]);
        else
          for (int c = 0; c < hd; ++c) o[c] += a * vj[c];
      }
      const float inv = 1.0f / sum;
      for (int c = 0; c < hd; ++c) o[c] *= inv;
    }
  }
}

const float* KvCache::key(int layer, int kv_head, int position) const noexcept {
  if (layer < 0 || layer >= num_layers_ || kv_head < 0 || kv_head >= num_kv_heads_) return nullptr;
  const Head& h = head(layer, kv_head);
  return holds(h, position) ? h.k.data() + static_cast<std::size_t>(slot(h, position)) * head_dim_ : nullptr;
}

const float* KvCache::value(int layer, int kv_head, int position) const noexcept {
  if (layer < 0 || layer >= num_layers_ || kv_head < 0 || kv_head >= num_kv_heads_) return nullptr;
  const Head& h = head(layer, kv_head);
  return holds(h, position) ? h.v.data() + static_cast<std::size_t>(slot(h, position)) * head_dim_ : nullptr;
}

std::int64_t KvCache::head_rows(int layer, int kv_head) const noexcept {
  if (layer < 0 || layer >= num_layers_ || kv_head < 0 || kv_head >= num_kv_heads_) return 0;
  return head(layer, kv_head).rows;
}

std::size_t KvCache::allocated_bytes() const noexcept {
  std::size_t floats = 0;
  for (const auto& h : heads_) floats += h.k.capacity() + h.v.capacity();
  return floats * sizeof(float);
}

}  // namespace bosch::cpu
