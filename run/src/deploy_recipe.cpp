// SPDX-License-Identifier: Apache-2.0
// The calibration lengths for a deployment context (see deploy_recipe.hpp).

#include <bosch/error.hpp>
#include <bosch/run/deploy_recipe.hpp>

#include <algorithm>
#include <string>

namespace bosch {

std::vector<int> deploy_contexts(int deploy_context, int window, int sinks) {
  const long long reach = static_cast<long long>(window) + sinks;
  if (window < 1 || sinks < 0 || deploy_context <= reach)
    throw invalid_argument("a deployment context of " + std::to_string(deploy_context) +
                               " tokens must exceed the window " + std::to_string(window) + " plus " +
                               std::to_string(sinks) + " sinks",
                           "deploy_context");
  const long long g = deploy_granule;
  // The shorter samples at least twice the reach, and long enough for a task.
  const long long floor_len = std::max<long long>((4 * reach + g - 1) / g * g, deploy_min_calibration);
  long long longest = std::min<long long>(deploy_context / deploy_hold_factor / g * g, deploy_max_calibration);
  longest = std::min<long long>(std::max(longest, floor_len), deploy_context);
  const long long shortest = longest / 2;
  if (shortest <= reach) return {static_cast<int>(longest)};
  return {static_cast<int>(shortest), static_cast<int>(longest)};
}

}  // namespace bosch
