// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file bosch.hpp
/// The one header users include for the BOSCH search core (header-only):
///
/// - bosch::HeadLayout, bosch::HeadMask, turnover, jaccard_distance, text grid (mask.hpp)
/// - the bosch::Evaluator concept and its optional capabilities (evaluator.hpp)
/// - bosch::Options, bosch::Result, bosch::EvaluationRecord (options.hpp)
/// - bosch::Objective: memo, anchors, normalization, loss, log (objective.hpp)
/// - callbacks: ProgressReporter, EarlyStop (callbacks.hpp); checkpoints and
///   resume are io/checkpoint.hpp's Checkpoint callback
/// - bosch::select(evaluator, options, callbacks...) (search/select.hpp)
/// - model-free baselines: RAND, BME, INTR, mask_from_scores (baselines/)
///
/// It needs only the standard library and Boost headers (no JSON, no OS
/// headers, no <iostream>). Mask files, checkpoints and logs are the separate
/// bosch::io headers (<bosch/io/mask_io.hpp>, <bosch/io/checkpoint.hpp>).
///
/// @code
/// #include <bosch/bosch.hpp>
/// struct my_eval {
///   bosch::HeadLayout layout() const { return {28, 16, 8}; }
///   double evaluate(const bosch::HeadMask& m) { return my_benchmark(m); }
/// };
/// my_eval e;
/// bosch::Options o;
/// o.target_ratio = 0.5;
/// o.seed = 42;
/// bosch::Result r = bosch::select(e, o, bosch::ProgressReporter{});
/// @endcode

#include <bosch/error.hpp>
#include <bosch/version.hpp>
#include <bosch/mask.hpp>
#include <bosch/evaluator.hpp>
#include <bosch/options.hpp>
#include <bosch/objective.hpp>
#include <bosch/callbacks.hpp>
#include <bosch/search/select.hpp>
#include <bosch/margin.hpp>
#include <bosch/baselines/layer.hpp>
#include <bosch/baselines/ranking.hpp>
