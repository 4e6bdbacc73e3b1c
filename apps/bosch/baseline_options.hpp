// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file apps/bosch/baseline_options.hpp
/// The command-line options of the static head rankings, shared by
/// `bosch baseline` and `bosch compare`.

#include "command_line.hpp"

#include <bosch/baselines/ranking.hpp>
#include <bosch/eval/head_scores.hpp>
#include <bosch/eval/transformer_evaluator.hpp>

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace bosch::cli {

/// The options of the static head rankings (shared with `bosch compare`).
struct HeadScoreCli {
  eval::HeadScoreOptions options;
  std::string pooling = "max";
  std::string quota = "global";

  po::options_description describe() {
    po::options_description d("Head rankings");
    d.add_options()("pooling", po::value(&pooling)->default_value(pooling)->value_name("max|mean"),
                    "query heads -> KV head (DCAM, APL, RAZOR, QADA, RETRIEVAL)")(
        "quota", po::value(&quota)->default_value(quota)->value_name("global|per-layer"),
        "where a ranking's SWA quota applies")(
        "razor-block", po::value(&options.razor_block)->default_value(options.razor_block)->value_name("N"),
        "RAZOR: random tokens per repeated block")(
        "razor-repeats", po::value(&options.razor_repeats)->default_value(options.razor_repeats)->value_name("N"),
        "RAZOR: number of blocks")(
        "qada-threshold", number(&options.qada_threshold)->value_name("T"),
        "QADA: 0 = mean bulk share; in (0, 1) = fraction of queries above T")(
        "fisher-epsilon", number(&options.fisher_epsilon)->value_name("E"),
        "FISHER: finite-difference step of the gate, in (0, 1]")(
        "retrieval-extra-tokens",
        po::value(&options.retrieval_extra_tokens)->default_value(options.retrieval_extra_tokens)->value_name("N"),
        "RETRIEVAL: greedy tokens past the answer length");
    return d;
  }
  /// Validated options with window/sinks from the evaluator settings.
  eval::HeadScoreOptions resolved(const TransformerEvaluatorOptions& windows, std::uint64_t seed) const {
    eval::HeadScoreOptions o = options;
    o.window = windows.window;
    o.sinks = windows.sinks;
    o.seed = seed;
    if (pooling == "max") {
      o.pooling = eval::Pooling::max;
    } else if (pooling == "mean") {
      o.pooling = eval::Pooling::mean;
    } else {
      throw bosch::invalid_argument("unknown pooling '" + pooling + "' (expected max or mean)", "--pooling");
    }
    try {
      eval::validate(o);
    } catch (const bosch::invalid_argument& e) {
      throw bosch::invalid_argument(e.message(), option_name(e.where()));
    }
    return o;
  }
  baselines::Quota resolved_quota() const {
    if (quota == "global") return baselines::Quota::global;
    if (quota == "per-layer" || quota == "per_layer") return baselines::Quota::per_layer;
    throw bosch::invalid_argument("unknown quota '" + quota + "' (expected global or per-layer)", "--quota");
  }
  nlohmann::json to_json() const {
    return {{"pooling", pooling},
            {"quota", quota},
            {"razor_block", options.razor_block},
            {"razor_repeats", options.razor_repeats},
            {"razor_induction_share", options.razor_induction_share},
            {"qada_threshold", options.qada_threshold},
            {"fisher_epsilon", options.fisher_epsilon},
            {"retrieval_extra_tokens", options.retrieval_extra_tokens},
            {"retrieval_min_recall", options.retrieval_min_recall}};
  }
};

}  // namespace bosch::cli
