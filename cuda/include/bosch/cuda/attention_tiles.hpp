// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file cuda/attention_tiles.hpp
/// Which key tiles a query tile of the CUDA attention kernel visits, shared
/// verbatim by the kernel (device) and the tests (host), so the promise "an
/// SWA head never loads a key tile outside its window" is checked on any
/// machine, GPU or not.
///
/// Visibility (AttentionWindows, model/windows.hpp): query i sees key j when
/// j <= i and, for a sliding-window head with window w >= 1 and s sinks,
/// i - w < j or j < s. A full head is window = 0 here.
///
/// For the query rows [q0, q1) of one tile the union of visible keys is
/// [0, q1) for a full head, and [0, min(s, q1)) u [max(0, q0 - w + 1), q1)
/// for an SWA head. The kernel visits the key tiles (of `key_tile` keys)
/// that meet this union, sink tiles first, in increasing order; every tile
/// visited holds at least one key visible to some row of the tile.

#if defined(__CUDACC__)
#define BOSCH_HOST_DEVICE __host__ __device__
#else
#define BOSCH_HOST_DEVICE
#endif

namespace bosch::cuda {

/// The key tiles a query tile visits: indices [0, sink_end) then
/// [window_begin, end) (window_begin >= sink_end). count() tiles in all.
struct KeyTiles {
  int sink_end = 0;
  int window_begin = 0;
  int end = 0;
  /// Number of tiles visited.
  BOSCH_HOST_DEVICE int count() const { return sink_end + (end - window_begin); }
  /// Index of the k-th visited tile, 0 <= k < count().
  BOSCH_HOST_DEVICE int at(int k) const { return k < sink_end ? k : window_begin + (k - sink_end); }
};

/// Key tiles for query rows [q0, q1) (q0 < q1, local to their sequence)
/// under window `window` (0 = full) with `sinks` sink keys.
BOSCH_HOST_DEVICE inline KeyTiles key_tiles(int q0, int q1, int window, int sinks, int key_tile) {
  KeyTiles t;
  t.end = (q1 - 1) / key_tile + 1;  // tiles holding keys [0, q1)
  if (window <= 0) return t;          // full: [0, end)
  const int lo = q0 - window + 1 > 0 ? q0 - window + 1 : 0;  // first window key of row q0
  const int first = lo / key_tile;
  const int sink_keys = sinks < q1 ? sinks : q1;
  int se = (sink_keys + key_tile - 1) / key_tile;
  if (se > first) se = first;  // sink tiles overlapping the window run with it
  t.sink_end = se;
  t.window_begin = first;
  return t;
}

/// True when query i sees key j (i, j local to the sequence).
BOSCH_HOST_DEVICE inline bool key_visible(int i, int j, int window, int sinks) {
  if (j > i) return false;
  if (window <= 0) return true;
  return j > i - window || j < sinks;
}

/// True when every key in [k0, k1) is visible to every row in [q0, q1)
/// (k0 < k1, q0 < q1): the kernel then skips the per-element mask.
BOSCH_HOST_DEVICE inline bool tile_fully_visible(int q0, int q1, int k0, int k1, int window,
                                                 int sinks) {
  if (k1 - 1 > q0) return false;  // causal: the last key must be visible to the first row
  if (window <= 0) return true;
  // Keys hidden from some row: s <= j <= i - w, widest for the last row i = q1 - 1.
  const int hidden_last = (q1 - 1) - window;
  return k0 > hidden_last || k1 <= sinks || sinks > hidden_last;
}

/// True when some key in [k0, k1) is visible to some row in [q0, q1).
BOSCH_HOST_DEVICE inline bool tile_touches(int q0, int q1, int k0, int k1, int window,
                                           int sinks) {
  if (k0 > q1 - 1) return false;  // all keys after the last row
  if (window <= 0) return true;
  const int sink_hit = k0 < sinks;                 // key k0 < s is visible to row q1-1 >= k0
  const int window_hit = k1 - 1 > q0 - window;     // (q0 - w, q1 - 1] meets [k0, k1)
  return sink_hit || window_hit;
}

}  // namespace bosch::cuda
