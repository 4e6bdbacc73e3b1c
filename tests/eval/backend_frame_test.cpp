// The backends' shared frame (eval/backend_frame.hpp): the FLOP model against
// a brute-force count of visible (query, key) pairs, and the input checks'
// messages, which both backends now raise word for word.

#include "../cpu/tiny_model.hpp"
#include "test_support.hpp"

#include <bosch/cpu/backend.hpp>
#include <bosch/error.hpp>
#include <bosch/eval/backend_frame.hpp>

#include <doctest/doctest.h>

#include <limits>
#include <string>
#include <vector>

using namespace bosch;

namespace {

/// The message of the invalid_argument `f` throws (fails when none).
template <class F>
std::string message_of(F&& f) {
  try {
    f();
  } catch (const invalid_argument& e) {
    return e.what();
  }
  FAIL("no invalid_argument thrown");
  return {};
}

}  // namespace

TEST_CASE("frame: the FLOP model counts every visible (query, key) pair exactly") {
  auto c = test::tiny_config(model::Arch::llama, 2);
  c.num_layers = 3;
  for (int n : {1, 7, 40})
    for (int window : {1, 3, 16})
      for (int sinks : {0, 2}) {
        const auto w = AttentionWindows::from_mask(test::random_mask(c.layout(), test::seed(800 + n + window)),
                                                   window, sinks);
        double pairs = 0;
        for (int l = 0; l < c.num_layers; ++l)
          for (int g = 0; g < c.num_kv_heads; ++g)
            for (int i = 0; i < n; ++i)
              for (int j = 0; j < n; ++j) pairs += w.visible(l, g, i, j);
        const double hidden = c.hidden_size, hd = c.head_dim, q = c.num_heads * hd, kvd = c.num_kv_heads * hd;
        const double weights = hidden * q + 2 * hidden * kvd + q * hidden + 3 * hidden * c.intermediate_size;
        const double expected = 2 * weights * c.num_layers * n + 2 * hidden * c.vocab_size * 2 +
                                4 * hd * (c.num_heads / c.num_kv_heads) * pairs;
        INFO("n " << n << ", window " << window << ", sinks " << sinks);
        CHECK(frame::forward_flops(c, n, 2, w) == doctest::Approx(expected).epsilon(1e-12));
      }
  // The CPU backend reports exactly this model.
  const auto m = test::tiny_model(c, test::seed(801));
  const auto w = AttentionWindows::from_mask(HeadMask::filled(c.layout(), true), 5, 1);
  CHECK(cpu::Backend(m).flops(33, 3, w) == frame::forward_flops(c, 33, 3, w));
  // A mask of another layout is refused.
  const auto other = AttentionWindows::from_mask(HeadMask::filled(HeadLayout{4, 4, 2}, true), 5);
  CHECK_THROWS_AS(frame::forward_flops(c, 10, 1, other), invalid_argument);
}

TEST_CASE("frame: one message per check") {
  CHECK(message_of([] { frame::check_token(70, 3, 61, "tokens"); }) ==
        "tokens: token id 70 at position 3 outside the vocabulary [0, 61)");
  CHECK(message_of([] { frame::check_tokens(std::vector<int>{1, 2, -1}, 61, "cuda::Backend::embed"); }) ==
        "cuda::Backend::embed: token id -1 at position 2 outside the vocabulary [0, 61)");
  CHECK(message_of([] { frame::check_positions(std::vector<int>{0, 3}, 3, "positions"); }) ==
        "positions: position 3 outside [0, 3): the sequence has 3 tokens");
  CHECK(message_of([] { frame::check_positions(std::vector<int>{-1}, 5, "positions", 2); }) ==
        "positions: position -1 outside [0, 5): sequence 2 has 5 tokens");
  CHECK(message_of([] { frame::check_position_lists(1, 2, "positions"); }) ==
        "positions: 1 position lists for 2 sequences (give one per sequence)");
  CHECK(message_of([] { frame::check_layer_range(1, 5, 2, "run_layers"); }) ==
        "run_layers: layer range [1, 5) is not within the model's layers [0, 2)");
  CHECK(message_of([] { frame::check_layer_range(2, 1, 2, "run_layers"); }) ==
        "run_layers: layer range [2, 1) is not within the model's layers [0, 2)");
  CHECK(message_of([] { frame::check_residual(2, 3, 6, 32, "residual"); }) ==
        "residual: residual stream of 2 x 3 holding 6 values does not fit hidden size 32");
  // Valid input passes every check.
  frame::check_tokens(std::vector<int>{0, 60}, 61, "tokens");
  frame::check_positions(std::vector<int>{0, 2}, 3, "positions");
  frame::check_layer_range(0, 2, 2, "run_layers");
  frame::check_layer_range(2, 2, 2, "run_layers");
  frame::check_residual(2, 32, 64, 32, "residual");
}

TEST_CASE("frame: prefill and decode_step arguments, in order, before any work") {
  const auto c = test::tiny_config(model::Arch::llama, 2);
  const auto w = AttentionWindows::from_mask(HeadMask::filled(c.layout(), true), 4, 1);
  const HeadLayout other{c.num_layers + 1, c.num_heads, c.num_kv_heads};
  const auto foreign = AttentionWindows::from_mask(HeadMask::filled(other, true), 4, 1);
  // The layout first, even with bad tokens and a bad capacity too.
  const std::string layout = message_of([&] { frame::check_prefill(c, std::vector<int>{-1}, foreign, -1, "prefill"); });
  CHECK(layout.find(to_string(other)) != std::string::npos);
  CHECK(layout.find(to_string(c.layout())) != std::string::npos);
  CHECK(message_of([&] { frame::check_prefill(c, std::vector<int>{}, w, -1, "prefill"); }) ==
        "prefill: prefill needs at least one token");
  CHECK(message_of([&] { frame::check_prefill(c, std::vector<int>{1}, w, -1, "prefill"); }) ==
        "prefill: capacity must be >= 0, got -1");
  CHECK(message_of([&] { frame::check_prefill(c, std::vector<int>{1, 61}, w, 0, "prefill"); }) ==
        "prefill: token id 61 at position 1 outside the vocabulary [0, 61)");
  frame::check_prefill(c, std::vector<int>{1, 60}, w, 0, "prefill");
  CHECK(message_of([&] { frame::check_decode_step(c, 5, 1, AttentionWindows::full(), w, "decode_step"); }) ==
        "decode_step: decode_step windows differ from those the state was prefilled with");
  CHECK(message_of([&] { frame::check_decode_step(c, 5, 61, w, w, "decode_step"); }) ==
        "decode_step: token id 61 at position 5 outside the vocabulary [0, 61)");
  CHECK(message_of([&] { frame::check_decode_step(c, std::numeric_limits<int>::max(), 1, w, w, "decode_step"); }) ==
        "decode_step: decode state is full");
  frame::check_decode_step(c, 5, 60, w, w, "decode_step");
  // The CPU backend raises these messages.
  const auto m = test::tiny_model(c, test::seed(802));
  const cpu::Backend b(m);
  CHECK(message_of([&] { b.embed(std::vector<int>{1, 61}); }) ==
        "tokens: token id 61 at position 1 outside the vocabulary [0, 61)");
  CHECK(message_of([&] { b.forward(std::vector<int>{1, 2}, w, std::vector<int>{2}); }) ==
        "positions: position 2 outside [0, 2): the sequence has 2 tokens");
  auto x = b.embed(std::vector<int>{1, 2});
  CHECK(message_of([&] { b.run_layers(x, 0, c.num_layers + 1, w); }) ==
        "run_layers: layer range [0, 3) is not within the model's layers [0, 2)");
}
