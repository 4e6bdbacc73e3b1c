// The hybrid KV cache's slots and sizes (model/kv_slots.hpp,
// model/kv_layout.hpp), the host logic that the CPU cache and the CUDA
// cache's kernels share, checked exhaustively on small shapes against the
// attention rule of AttentionWindows and against a replay of the writes
// prefill and decode_step issue.

#include "test_support.hpp"

#include <bosch/error.hpp>
#include <bosch/eval/backend_frame.hpp>
#include <bosch/model/kv_layout.hpp>
#include <bosch/model/kv_slots.hpp>
#include <bosch/model/windows.hpp>

#include <doctest/doctest.h>

#include <set>
#include <string>
#include <vector>

using namespace bosch;

namespace {

// The attention rule, written out: a query at p sees key j.
bool sees(bool swa, int window, int sinks, int p, int j) {
  if (j > p) return false;
  return !swa || j > p - window || j < sinks;
}

}  // namespace

TEST_CASE("kv slots: reads are exactly the visible keys, in order, in distinct slots of the head's rows") {
  long long checked = 0;
  for (bool swa : {false, true})
    for (int window = 1; window <= 9; ++window)
      for (int sinks = 0; sinks <= 5; ++sinks)
        for (int p = 0; p < 45; ++p) {
          INFO("swa " << swa << ", window " << window << ", sinks " << sinks << ", query " << p);
          const kv::Reads r = kv::reads(swa, window, sinks, p);
          std::vector<int> read;
          for (int t = 0; t < r.count(); ++t) read.push_back(r.at(t));
          std::vector<int> visible;
          for (int j = 0; j <= p; ++j)
            if (sees(swa, window, sinks, p, j)) visible.push_back(j);
          REQUIRE(read == visible);
          // The FLOP model counts the same keys.
          CHECK(r.count() == frame::visible_keys(p, swa ? window : 0, sinks));
          // In a cache with room for p + 1 positions, the read keys sit in
          // distinct slots inside the head's rows.
          const long long rows = kv::rows(swa, window, sinks, p + 1);
          std::set<int> slots;
          for (int j : read) {
            const int s = kv::slot(swa, window, sinks, j);
            CHECK(s >= 0);
            CHECK(s < rows);
            slots.insert(s);
          }
          CHECK(slots.size() == read.size());
          // What the head holds for the next query, besides that query's own key.
          for (int j = -1; j <= p + 1; ++j)
            CHECK(kv::holds(swa, window, sinks, p + 1, j) == (j >= 0 && j <= p && sees(swa, window, sinks, p + 1, j)));
          ++checked;
        }
  MESSAGE(checked << " (head, query) cases");
}

TEST_CASE("kv slots: replaying prefill + decode writes leaves every key a later query reads in its slot") {
  // The writes of Backend::prefill (positions [0, n), first reader n) and of
  // each decode_step (position p, first reader p), replayed on a slot table:
  // after each step the query at p finds every visible key j in slot(j).
  long long steps = 0;
  for (bool swa : {false, true})
    for (int window = 1; window <= 8; ++window)
      for (int sinks = 0; sinks <= 4; ++sinks)
        for (int n = 1; n <= 12; ++n) {
          const int context = 40;
          std::vector<int> slot_holds(static_cast<std::size_t>(kv::rows(swa, window, sinks, context)), -1);
          auto write = [&](int j, int first_reader) {
            if (!kv::stored(swa, window, sinks, j, first_reader)) return;
            slot_holds[static_cast<std::size_t>(kv::slot(swa, window, sinks, j))] = j;
          };
          for (int j = 0; j < n; ++j) write(j, n);
          // Prefill stores no more than the head will read: its sinks and the
          // last window - 1 positions at most.
          int stored = 0;
          for (int j = 0; j < n; ++j) stored += kv::stored(swa, window, sinks, j, n);
          if (swa) CHECK(stored <= std::min(n, sinks + window - 1));
          else CHECK(stored == n);
          for (int p = n; p < context; ++p) {
            write(p, p);
            for (int j = 0; j <= p; ++j)
              if (sees(swa, window, sinks, p, j)) {
                INFO("swa " << swa << ", window " << window << ", sinks " << sinks << ", prompt " << n
                            << ", query " << p << ", key " << j);
                REQUIRE(slot_holds[static_cast<std::size_t>(kv::slot(swa, window, sinks, j))] == j);
              }
            ++steps;
          }
        }
  MESSAGE(steps << " decode steps replayed");
}

TEST_CASE("kv layout: packed offsets, rows per head and bytes equal the formula") {
  model::Config c;
  c.num_layers = 3;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  HeadMask mask(c.layout());
  mask.set(0, 1, true);
  mask.set(2, 0, true);
  mask.set(2, 1, true);
  for (int sinks : {0, 2})
    for (int capacity : {1, 5, 17, 18, 100}) {
      const auto w = AttentionWindows::from_mask(mask, 16, sinks);
      const kv::Layout layout(c, w, capacity);
      INFO("sinks " << sinks << ", capacity " << capacity);
      CHECK(layout.capacity() == capacity);
      std::int64_t next = 0;
      for (int l = 0; l < 3; ++l)
        for (int g = 0; g < 2; ++g) {
          CHECK(layout.swa(l, g) == mask.swa(l, g));
          CHECK(layout.offset(l, g) == next);  // layer-major, back to back
          CHECK(layout.rows(l, g) == (mask.swa(l, g) ? std::min(capacity, sinks + 16) : capacity));
          CHECK(layout.head_windows()[static_cast<std::size_t>(2 * l + g)] == (mask.swa(l, g) ? 16 : 0));
          next += layout.rows(l, g);
        }
      CHECK(layout.total_rows() == next);
      for (std::size_t value_bytes : {2u, 4u}) {
        CHECK(layout.bytes(value_bytes) == kv::bytes(c, w, capacity, value_bytes));
        CHECK(layout.bytes(value_bytes) == static_cast<std::size_t>(next) * 2 * 8 * value_bytes);
      }
    }
  // 3 full heads x 100 rows + 3 SWA heads x min(100, 2 + 16) rows, x 2 x 8 values x 2 bytes.
  CHECK(kv::bytes(c.layout(), 8, mask, 16, 2, 100, 2) == (3 * 100 + 3 * 18) * 2 * 8 * 2);
  // Growth: a bigger capacity keeps every head's rows at least as many, and an
  // SWA head below sinks + window rows has not wrapped (positions <= rows),
  // so copying its rows to the new offset keeps its slots.
  const auto w = AttentionWindows::from_mask(mask, 6, 1);
  const kv::Layout small(c, w, 4), big(c, w, 8);
  for (int l = 0; l < 3; ++l)
    for (int g = 0; g < 2; ++g) {
      CHECK(big.rows(l, g) >= small.rows(l, g));
      if (small.swa(l, g) && small.rows(l, g) < 1 + 6)
        for (int j = 0; j < small.capacity(); ++j) CHECK(kv::slot(true, 6, 1, j) == j);
    }
}

TEST_CASE("kv layout: a mask of another layout is refused naming both layouts") {
  model::Config c;
  c.num_layers = 2;
  c.num_heads = 4;
  c.num_kv_heads = 2;
  c.head_dim = 8;
  const HeadLayout other{3, 4, 2};
  const auto w = AttentionWindows::from_mask(HeadMask::filled(other, true), 4);
  for (int which = 0; which < 2; ++which) {
    try {
      if (which == 0) (void)kv::Layout(c, w, 8);
      else (void)kv::bytes(c, w, 8, 2);
      FAIL("accepted a mask of another layout");
    } catch (const invalid_argument& e) {
      const std::string what = e.what();
      CHECK(what.find(to_string(other)) != std::string::npos);
      CHECK(what.find(to_string(c.layout())) != std::string::npos);
    }
  }
  CHECK_THROWS_AS(kv::Layout(c, AttentionWindows::full(), 0), invalid_argument);
  CHECK_THROWS_AS(kv::bytes(c, AttentionWindows::full(), -1, 2), invalid_argument);
}
