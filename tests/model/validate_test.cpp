// model::validate, the one model check of the loader and both backends: every
// broken field or tensor is refused with an invalid_argument whose where()
// names the model and the field or tensor, and the CPU backend applies exactly
// this check (rms_eps must be positive there too).
#include "cpu/tiny_model.hpp"
#include "test_support.hpp"

#include <bosch/cpu/backend.hpp>
#include <bosch/error.hpp>
#include <bosch/model/validate.hpp>

#include <doctest/doctest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>

using namespace bosch;

namespace {

/// where() of the invalid_argument that validate(m) raises.
std::string where_of(const model::Model& m) {
  try {
    model::validate(m);
  } catch (const invalid_argument& e) {
    return e.where();
  }
  FAIL("validate accepted the model");
  return {};
}

}  // namespace

TEST_CASE("validate: well-formed models of every architecture pass") {
  for (auto arch : {model::Arch::llama, model::Arch::qwen2, model::Arch::qwen3, model::Arch::qwen3moe}) {
    CAPTURE(model::to_string(arch));
    auto m = test::tiny_model(test::tiny_config(arch, 2), test::seed(300));
    CHECK_NOTHROW(model::validate(m));
    CHECK_NOTHROW(model::validate(m.config));
  }
}

TEST_CASE("validate: a bad configuration field is named, with the model") {
  const auto good = test::tiny_model(test::tiny_config(model::Arch::llama, 2), test::seed(301));
  struct Case {
    const char* field;
    std::function<void(model::Config&)> edit;
  };
  const Case cases[] = {
      {"vocab_size", [](model::Config& c) { c.vocab_size = 0; }},
      {"num_layers", [](model::Config& c) { c.num_layers = -1; }},
      {"num_kv_heads", [](model::Config& c) { c.num_kv_heads = 3; }},  // does not divide 4
      {"head_dim", [](model::Config& c) { c.head_dim = 7; }},
      {"rms_eps", [](model::Config& c) { c.rms_eps = 0.0; }},
      {"rms_eps", [](model::Config& c) { c.rms_eps = std::numeric_limits<double>::quiet_NaN(); }},
      {"rope_theta", [](model::Config& c) { c.rope_theta = 0.0; }},
      {"rope_scaling.type", [](model::Config& c) { c.rope_scaling.type = "yarn"; }},
  };
  for (const auto& k : cases) {
    CAPTURE(k.field);
    auto m = good;
    k.edit(m.config);
    CHECK(where_of(m) == std::string("model 'tiny-llama': ") + k.field);
    // The backend refuses it with the same check.
    CHECK_THROWS_AS(cpu::Backend{m}, invalid_argument);
  }
  auto unnamed = good;
  unnamed.config.name.clear();
  unnamed.config.rms_eps = 0.0;
  CHECK(where_of(unnamed) == "model: rms_eps");
  unnamed.source = "/models/m.gguf";
  CHECK(where_of(unnamed) == "/models/m.gguf: rms_eps");
}

TEST_CASE("validate: a tensor of the wrong size is named by its GGUF name") {
  const auto good = test::tiny_model(test::tiny_config(model::Arch::qwen3, 2), test::seed(302));
  struct Case {
    const char* tensor;
    std::function<void(model::Weights&)> edit;
  };
  const Case cases[] = {
      {"token_embd", [](model::Weights& w) { w.embedding.rows -= 1; }},
      {"output_norm", [](model::Weights& w) { w.final_norm.pop_back(); }},
      {"blk.1.attn_k", [](model::Weights& w) { w.layers[1].wk.rows -= 1; }},
      {"blk.0.attn_output", [](model::Weights& w) { w.layers[0].wo.data.pop_back(); }},
      {"blk.0.attn_q.bias", [](model::Weights& w) { w.layers[0].bq.assign(32, 0.0f); }},  // qwen3: no biases
      {"blk.1.attn_k_norm", [](model::Weights& w) { w.layers[1].k_norm.clear(); }},
      {"blk.1.ffn_down", [](model::Weights& w) { w.layers[1].w_down.cols += 1; }},
  };
  for (const auto& k : cases) {
    CAPTURE(k.tensor);
    auto m = good;
    k.edit(m.weights);
    CHECK(where_of(m) == std::string("model 'tiny-qwen3': tensor '") + k.tensor + "'");
  }
  auto fewer = good;
  fewer.weights.layers.pop_back();
  CHECK(where_of(fewer) == "model 'tiny-qwen3': num_layers");
}

TEST_CASE("validate: Qwen3-MoE fields and expert tensors are checked and named") {
  const auto good = test::tiny_model(test::tiny_moe_config(), test::seed(303));  // layer 1 dense
  CHECK_NOTHROW(model::validate(good));
  struct Case {
    const char* where;
    std::function<void(model::Model&)> edit;
  };
  const Case cases[] = {
      {"moe.num_experts_used", [](model::Model& m) { m.config.moe.num_experts_used = 5; }},
      {"moe.num_experts_used", [](model::Model& m) { m.config.moe.num_experts_used = 0; }},
      {"moe.num_experts", [](model::Model& m) { m.config.moe.num_experts = -1; }},
      {"moe.expert_intermediate_size", [](model::Model& m) { m.config.moe.expert_intermediate_size = 0; }},
      {"moe.sparse_layers", [](model::Model& m) { m.config.moe.sparse_layers.pop_back(); }},
      {"moe.num_experts", [](model::Model& m) { m.config.arch = model::Arch::qwen3; }},  // experts only in qwen3moe
      {"intermediate_size", [](model::Model& m) { m.config.intermediate_size = 0; }},    // layer 1 is dense
      {"tensor 'blk.0.ffn_gate_inp'", [](model::Model& m) { m.weights.layers[0].router.rows -= 1; }},
      {"tensor 'blk.2.ffn_up_exps'", [](model::Model& m) { m.weights.layers[2].up_exps.data.pop_back(); }},
      {"tensor 'blk.0.ffn_down_exps'", [](model::Model& m) { m.weights.layers[0].down_exps.cols += 1; }},
      // A sparse layer holds no dense FFN, a dense layer no experts.
      {"tensor 'blk.0.ffn_gate'", [](model::Model& m) { m.weights.layers[0].w_gate = m.weights.layers[1].w_gate; }},
      {"tensor 'blk.1.ffn_gate_inp'", [](model::Model& m) { m.weights.layers[1].router = m.weights.layers[0].router; }},
      // Marking the dense layer sparse: its experts are missing.
      {"tensor 'blk.1.ffn_gate'", [](model::Model& m) { m.config.moe.sparse_layers[1] = true; }},
  };
  for (const auto& k : cases) {
    CAPTURE(k.where);
    auto m = good;
    k.edit(m);
    CHECK(where_of(m) == std::string("model 'tiny-qwen3moe': ") + k.where);
    CHECK_THROWS_AS(cpu::Backend{m}, invalid_argument);
  }
  // Without any dense layer the dense size is not needed.
  auto all_sparse = test::tiny_model(test::tiny_moe_config(2, 4, 2, true, 2, {}), test::seed(304));
  all_sparse.config.intermediate_size = 0;
  CHECK_NOTHROW(model::validate(all_sparse));
}
