// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file model/kv_slots.hpp
/// Where the hybrid KV cache of incremental decoding keeps each position
/// (docs/deployment.md, "Hybrid KV cache"), written once for the CPU cache
/// (cpu/kv_cache.hpp) and the CUDA cache (its kernels include this header),
/// so that both backends store and read the very same slots.
///
/// Per layer and KV head: a full head keeps every position j in slot j; an
/// SWA head with window w >= 1 and s sinks keeps positions j < s in slot j
/// and the last w positions j >= s in a ring, slot s + (j - s) mod w. A query
/// at position p sees keys j <= p with j > p - w or j < s
/// (AttentionWindows::visible), so the w ring slots hold exactly its window,
/// its own key included.
///
/// Plain integer functions without includes, callable from host and device
/// code. `swa` false means a full head (window and sinks are then ignored).

#if !defined(BOSCH_HOST_DEVICE)
#if defined(__CUDACC__)
#define BOSCH_HOST_DEVICE __host__ __device__
#else
#define BOSCH_HOST_DEVICE
#endif
#endif

namespace bosch::kv {

/// Rows one head holds in a cache with room for `tokens` positions: tokens
/// for a full head, min(tokens, sinks + window) for an SWA head.
BOSCH_HOST_DEVICE inline long long rows(bool swa, int window, int sinks, long long tokens) {
  if (!swa) return tokens;
  const long long ring = static_cast<long long>(sinks) + window;
  return tokens < ring ? tokens : ring;
}

/// The slot (row) of `position` in its head (the head must hold it).
BOSCH_HOST_DEVICE inline int slot(bool swa, int window, int sinks, int position) {
  if (!swa || position < sinks) return position;
  return sinks + (position - sinks) % window;
}

/// True when a head holds `position` once positions [0, positions) are
/// written: every one for a full head; the sinks and the last window - 1
/// positions for an SWA head (what a query at `positions` can see besides
/// its own key).
BOSCH_HOST_DEVICE inline bool holds(bool swa, int window, int sinks, int positions, int position) {
  if (position < 0 || position >= positions) return false;
  if (!swa) return true;
  return position < sinks || position > positions - window;
}

/// True when a write of `position` stores it: some query at `first_reader`
/// or later (reading from the cache) can see it. A full head stores every
/// position; an SWA head its sinks and positions > first_reader - window.
/// Prefill of n tokens writes with first_reader n (its own queries attend in
/// the forward kernel), a decode step at p with first_reader p.
BOSCH_HOST_DEVICE inline bool stored(bool swa, int window, int sinks, int position, int first_reader) {
  if (!swa) return true;
  return position < sinks || position > first_reader - window;
}

/// The keys a query at position p reads, in increasing position order: the
/// sink positions [0, sink_end), then [ring_begin, end) with end = p + 1. A
/// full head reads [0, p + 1) (sink_end = 0, ring_begin = 0).
struct Reads {
  int sink_end = 0;
  int ring_begin = 0;
  int end = 0;
  /// Number of keys read.
  BOSCH_HOST_DEVICE int count() const { return sink_end + (end - ring_begin); }
  /// Position of the t-th key read, 0 <= t < count().
  BOSCH_HOST_DEVICE int at(int t) const { return t < sink_end ? t : ring_begin + (t - sink_end); }
};

/// What a query at position p >= 0 reads (see Reads).
BOSCH_HOST_DEVICE inline Reads reads(bool swa, int window, int sinks, int p) {
  Reads r;
  r.end = p + 1;
  if (!swa) return r;
  r.sink_end = sinks < p + 1 ? sinks : p + 1;
  const int lo = p - window + 1;
  r.ring_begin = lo > sinks ? lo : sinks;
  if (r.ring_begin > r.end) r.ring_begin = r.end;  // p < sinks: the sinks are all it reads
  return r;
}

}  // namespace bosch::kv
