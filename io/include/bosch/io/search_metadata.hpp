// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file io/search_metadata.hpp
/// The part of a mask file's metadata that the search alone determines: what
/// was asked (ratio, seed, variant, every option) and what came out (score,
/// anchors, evaluations, time). Written by every front end (the `bosch`
/// program through eval::mask_metadata, which adds the model, windows and
/// tasks; the Python package's Result.metadata()), so a mask file describes
/// its search the same way whoever wrote it.

#include <bosch/io/json_number.hpp>
#include <bosch/io/options_json.hpp>
#include <bosch/margin.hpp>
#include <bosch/mask.hpp>
#include <bosch/options.hpp>
#include <bosch/version.hpp>

#include <nlohmann/json.hpp>

#include <cmath>

namespace bosch {

/// The search fields of mask metadata:
///
///     layout (string "LxHqxHkv"), target_ratio, ratio, swa_heads, kv_heads,
///     score, normalized_score, anchor_full, anchor_swa, evaluations,
///     eliminated (masks a race or Stage 1's screening scored on only some
///     samples; Result::eliminated), forwards (the search's cost in
///     full-model sample forwards, null when the evaluator does not count
///     it; Result::forwards), seed,
///     variant, search_options (every Options field), search_seconds,
///     stopped (a callback or the budget cut the search short), bosch_version,
///     layer_drops (Stage 1's drop per layer, null for a layer not probed;
///     only when Stage 1 ran: the evidence that orders a kvpress export's
///     scores, bosch/io/mask_export.hpp),
///     choice (how clearly the mask beat the other masks the search scored,
///     bosch/margin.hpp: runner_up_score, gap, gap_ci [low, high] and samples
///     when scores were per sample, close: masks the samples cannot tell from
///     it, compared; only when another mask with the target count was scored)
///
/// NaN scores (a search stopped before any evaluation) are written as null.
inline nlohmann::json search_metadata(const Options& options, const Result& result) {
  const auto num = io::json_number;
  nlohmann::json meta{{"layout", to_string(result.mask.layout())},
                      {"target_ratio", options.target_ratio},
                      {"ratio", result.mask.ratio()},
                      {"swa_heads", result.mask.count()},
                      {"kv_heads", result.mask.size()},
                      {"score", num(result.score)},
                      {"normalized_score", num(result.normalized_score)},
                      {"anchor_full", num(result.anchors.full)},
                      {"anchor_swa", num(result.anchors.swa)},
                      {"evaluations", result.evaluations},
                      {"eliminated", result.eliminated},
                      {"forwards", num(result.forwards)},
                      {"seed", options.seed},
                      {"variant", to_string(options.variant)},
                      {"search_options", options_to_json(options)},
                      {"search_seconds", result.seconds},
                      {"stopped", result.stopped || result.budget_exhausted},
                      {"bosch_version", version_string}};
  if (!result.layer_drops.empty()) {
    nlohmann::json drops = nlohmann::json::array();
    for (double d : result.layer_drops) drops.push_back(num(d));
    meta["layer_drops"] = std::move(drops);
  }
  if (const ChoiceMargin m = choice_margin(result); m.has_runner_up) {
    nlohmann::json c{{"runner_up_score", num(m.runner_up_score)}, {"gap", num(m.gap)}};
    if (m.samples > 0) {
      c["gap_ci"] = {num(m.gap_low), num(m.gap_high)};
      c["samples"] = m.samples;
      c["close"] = m.close;
      c["compared"] = m.compared;
    }
    meta["choice"] = std::move(c);
  }
  return meta;
}

}  // namespace bosch
