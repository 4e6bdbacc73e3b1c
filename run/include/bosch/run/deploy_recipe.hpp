// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file run/deploy_recipe.hpp
/// The calibration lengths for a mask that is deployed at a given context
/// (issue 50, item 4): "I want a mask for context L and window w on a CPU".
/// A CPU cannot search at 32k tokens, but a mask calibrated on two shorter
/// lengths at once holds at several times the longer one where a
/// single-length mask does not (docs/results/mixed-length,
/// docs/results/long-smollm2). RunSettings::deploy_context applies it.

#include <vector>

namespace bosch {

/// How many times its longest calibration length a mask is asked to hold.
/// Measured: SmolLM2-135M, window 64, calibrated at 512 and 1024 tokens,
/// keeps 0.96 of all-full's greedy accuracy at 4096 (4x) where a 512-only
/// mask keeps 0.50 (docs/results/mixed-length).
inline constexpr int deploy_hold_factor = 4;
/// The longest calibration length the recipe chooses on its own: a search
/// at 8192 tokens costs about an hour on two cores for a 0.5B model
/// (docs/results/long-context). A window that needs longer samples (see
/// deploy_contexts) still gets them.
inline constexpr int deploy_max_calibration = 8192;
/// Calibration lengths are multiples of this many tokens.
inline constexpr int deploy_granule = 256;
/// The shortest longer length: a task's fixed text takes up to ~200 tokens
/// (the shorter samples are then at least 256), and the main job's 512 is
/// the shortest measured.
inline constexpr int deploy_min_calibration = 512;

/// The calibration contexts for a mask deployed at `deploy_context` tokens
/// with SWA window `window` and `sinks` sink tokens: two lengths, c/2 and c,
/// where c is deploy_context / deploy_hold_factor rounded down to a
/// multiple of deploy_granule, at most deploy_max_calibration, at least
/// deploy_min_calibration and 4 (window + sinks) rounded up (so the shorter
/// samples are at least twice the window: a needle can lie beyond an SWA
/// head's reach), and at most deploy_context; a single length {deploy_context} when half of it would
/// not exceed window + sinks. Requires deploy_context > window + sinks >= 1.
std::vector<int> deploy_contexts(int deploy_context, int window, int sinks);

}  // namespace bosch
