// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file fuzz/tiny_model.hpp
/// The tiny models the seed generator and the directory targets write, built
/// with the tests' own writers (tests/model/writers.hpp), so every seed is a
/// file the test suite also reads as valid.

#include "model/writers.hpp"  // tests/model/writers.hpp (tests/ is on the include path)

namespace bosch::fuzz {

/// A tiny random model of `arch`: hidden 8, FFN 16, `layers` layers, 2 query
/// heads sharing 1 KV head (head_dim 4), the writers' 273-token byte-level BPE
/// vocabulary; weights seeded by `seed`.
inline test::writers::TinyModel tiny_model(model::Arch arch = model::Arch::llama, int layers = 1,
                                           std::uint64_t seed = 1) {
  test::writers::TinySpec spec;
  spec.arch = arch;
  spec.hidden = 8;
  spec.intermediate = 16;
  spec.layers = layers;
  spec.heads = 2;
  spec.kv_heads = 1;
  spec.context = 64;
  return test::writers::random_model(spec, seed);
}

/// The same at hidden 32 (one Q8_0/Q4_0/Q4_1 block per row), for quantized
/// GGUF seeds.
inline test::writers::TinyModel tiny_model_32(model::Arch arch, std::uint64_t seed = 2) {
  test::writers::TinySpec spec;
  spec.arch = arch;
  spec.hidden = 32;
  spec.intermediate = 32;
  spec.layers = 1;
  spec.heads = 2;
  spec.kv_heads = 1;
  spec.context = 64;
  return test::writers::random_model(spec, seed);
}

}  // namespace bosch::fuzz
