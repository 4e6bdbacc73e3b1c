// The calibration lengths for a deployment context (run/deploy_recipe.hpp)
// and how RunSettings applies them.
#include <bosch/run/deploy_recipe.hpp>
#include <bosch/run/settings.hpp>

#include <doctest/doctest.h>

using bosch::deploy_contexts;

TEST_CASE("deploy_contexts: two lengths, the longer a quarter of the deployment context") {
  // The measured settings: SmolLM2, window 64, 512 + 1024 holds at 4096.
  CHECK(deploy_contexts(4096, 64, 0) == std::vector<int>{512, 1024});
  CHECK(deploy_contexts(8192, 64, 0) == std::vector<int>{1024, 2048});
  // The paper's deployment: 32k, window 1024 (+ sinks): 4096 + 8192.
  CHECK(deploy_contexts(32768, 1024, 0) == std::vector<int>{4096, 8192});
  CHECK(deploy_contexts(32768, 1024, 4) == std::vector<int>{4096, 8192});
  // Capped at deploy_max_calibration on a CPU...
  CHECK(deploy_contexts(131072, 1024, 0) == std::vector<int>{4096, 8192});
  // ...unless the window needs longer samples: the shorter ones at least twice window + sinks.
  CHECK(deploy_contexts(131072, 4096, 0) == std::vector<int>{8192, 16384});
  CHECK(deploy_contexts(8192, 1024, 0) == std::vector<int>{2048, 4096});
  // Rounded down to 256 tokens; never beyond the deployment context.
  CHECK(deploy_contexts(32000, 1024, 0) == std::vector<int>{3968, 7936});
  CHECK(deploy_contexts(300, 64, 0) == std::vector<int>{150, 300});
  // At least 512 (and 256): a task's fixed text needs room.
  CHECK(deploy_contexts(1024, 32, 0) == std::vector<int>{256, 512});
  CHECK(deploy_contexts(2048, 64, 0) == std::vector<int>{256, 512});
  CHECK(deploy_contexts(1000, 200, 0) == std::vector<int>{500, 1000});
  // One length when half of it would not exceed the window.
  CHECK(deploy_contexts(100, 64, 0) == std::vector<int>{100});
  CHECK(deploy_contexts(2000, 1000, 0) == std::vector<int>{2000});
  for (int L : {100, 257, 1000, 4096, 10000, 32768, 100000})
    for (int w : {1, 16, 64, 256, 1024})
      for (int s : {0, 4}) {
        if (L <= w + s) continue;
        const auto c = deploy_contexts(L, w, s);
        INFO("L " << L << " w " << w << " s " << s);
        REQUIRE(!c.empty());
        CHECK(c.back() <= L);
        CHECK(c.front() > w + s);  // every calibration sample is longer than an SWA head's reach
        if (c.size() == 2) CHECK(c[0] == c[1] / 2);
      }
  CHECK_THROWS_AS(deploy_contexts(64, 64, 0), bosch::invalid_argument);
  CHECK_THROWS_AS(deploy_contexts(64, 60, 4), bosch::invalid_argument);
}

TEST_CASE("apply_deploy_context: the recipe without a context, an error with one") {
  bosch::RunSettings s;
  s.model = "m.gguf";
  s.window = 256;
  s.deploy_context = 8192;
  bosch::apply_deploy_context(s, false);
  CHECK(s.context == std::vector<int>{1024, 2048});
  bosch::validate(s);

  bosch::RunSettings both = s;
  both.context = {512};
  try {
    bosch::apply_deploy_context(both, true);
    FAIL("no error");
  } catch (const bosch::invalid_argument& e) {
    CHECK(e.where() == "deploy_context");
    CHECK(std::string(e.what()).find("not both") != std::string::npos);
  }
  CHECK(both.context == std::vector<int>{512});

  bosch::RunSettings none;  // 0: not said, nothing changes
  bosch::apply_deploy_context(none, false);
  CHECK(none.context == std::vector<int>{512});

  // A deployment context the window covers is refused by validate, naming it.
  bosch::RunSettings covered;
  covered.model = "m.gguf";
  covered.window = 64;
  covered.deploy_context = 64;
  bosch::apply_deploy_context(covered, false);  // left to validate
  covered.context = {512};
  try {
    bosch::validate(covered);
    FAIL("no error");
  } catch (const bosch::invalid_argument& e) {
    CHECK(e.where() == "deploy_context");
  }
  covered.deploy_context = 16;
  CHECK_THROWS_AS(bosch::validate(covered), bosch::invalid_argument);
}
