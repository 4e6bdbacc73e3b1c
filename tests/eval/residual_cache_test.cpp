// ResidualCache: exact prefix keys, deepest-hit lookup, LRU eviction within
// the byte bound.
#include <bosch/eval/residual_cache.hpp>

#include <doctest/doctest.h>

#include <string>

namespace {
bosch::HeadMask mask_with(std::initializer_list<std::pair<int, int>> swa) {
  bosch::HeadMask m({4, 4, 2});
  for (auto [l, g] : swa) m.set(l, g, true);
  return m;
}
}  // namespace

TEST_CASE("a cached stream serves every mask with the same bits below its layer") {
  bosch::ResidualCache<std::string> cache(1000);
  const auto a = mask_with({{3, 1}});          // differs from b only in layer 3
  const auto b = mask_with({{3, 0}, {2, 1}});  // and in layer 2
  cache.insert(a, 2, "a@2", 10);
  cache.insert(a, 3, "a@3", 10);
  REQUIRE(cache.find(a, 2) != nullptr);
  CHECK(*cache.find(a, 2) == "a@2");
  // b shares a's bits in layers 0-1 but not in layer 2.
  CHECK(cache.find(b, 2) != nullptr);
  CHECK(cache.find(b, 3) == nullptr);
  CHECK(cache.deepest(b, 3) == 2);
  CHECK(cache.deepest(a, 3) == 3);
  CHECK(cache.deepest(a, 2) == 2);
  CHECK(cache.deepest(mask_with({{0, 0}}), 3) == 0);
}

TEST_CASE("the cache never exceeds its byte bound and evicts the least recently used entry") {
  bosch::ResidualCache<int> cache(30);
  const auto m = mask_with({});
  cache.insert(m, 1, 1, 10);
  cache.insert(m, 2, 2, 10);
  cache.insert(m, 3, 3, 10);
  CHECK(cache.bytes() == 30);
  REQUIRE(cache.find(m, 1) != nullptr);  // layer 1 becomes most recent; layer 2 is now oldest
  cache.insert(mask_with({{0, 0}}), 1, 4, 10);
  CHECK(cache.bytes() == 30);
  CHECK(cache.entries() == 3);
  CHECK(cache.find(m, 2) == nullptr);
  CHECK(cache.find(m, 1) != nullptr);
  CHECK(cache.find(m, 3) != nullptr);
  cache.insert(m, 2, 5, 31);  // larger than the whole bound: not stored
  CHECK(cache.find(m, 2) == nullptr);
  CHECK(cache.bytes() <= 30);
}

TEST_CASE("a disabled cache stores nothing") {
  bosch::ResidualCache<int> cache(0);
  const auto m = mask_with({});
  cache.insert(m, 1, 1, 1);
  CHECK(cache.entries() == 0);
  CHECK(cache.deepest(m, 3) == 0);
}
