// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file eval/backend.hpp
/// The Backend concept that TransformerEvaluator runs on: bosch::cpu::Backend
/// and bosch::cuda::Backend both model it.

#include <bosch/model/config.hpp>
#include <bosch/model/windows.hpp>

#include <concepts>
#include <span>
#include <vector>

namespace bosch {

/// A forward-pass engine with layer-wise entry points. `B::Residual` is the
/// residual stream of one sequence (host or device memory); it must be
/// copyable, since evaluators cache it.
template <class B>
concept Backend = requires(const B& b, typename B::Residual& r, std::span<const int> tokens,
                           const AttentionWindows& w, std::span<const int> positions) {
  requires std::copyable<typename B::Residual>;
  { b.config() } -> std::convertible_to<const model::Config&>;
  { b.embed(tokens) } -> std::same_as<typename B::Residual>;
  { b.run_layers(r, 0, 1, w) };
  { b.logits(r, positions) } -> std::same_as<std::vector<float>>;
  { b.forward(tokens, w, positions) } -> std::same_as<std::vector<float>>;
};

}  // namespace bosch
