// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file eval/backend_frame.hpp
/// The outer layer that bosch::cpu::Backend and bosch::cuda::Backend share:
/// the FLOP model and the checks of their inputs (token ids, positions,
/// layer ranges, residual shapes, incremental-decoding arguments), each
/// written once so that both backends count the same work and refuse bad
/// input with the same message. Every check throws bosch::invalid_argument
/// at `where` (the caller's name for the input or the entry point, e.g.
/// "tokens" or "cuda::Backend::embed").

#include <bosch/model/config.hpp>
#include <bosch/model/windows.hpp>

#include <cstddef>
#include <span>
#include <string>

namespace bosch::frame {

/// Keys a query at position i sees (itself included) under `window`
/// (0 = full: i + 1) with `sinks` sink keys: min(i + 1, window) keys of the
/// window plus the sinks before it, min(sinks, max(0, i - window + 1)).
long long visible_keys(int i, int window, int sinks);

/// Sum of visible_keys(i, window, sinks) over i in [0, n).
double visible_pairs(int n, int window, int sinks);

/// Floating-point operations of one forward over n tokens of a model of
/// `config` with logits at `logit_rows` rows: 2 x (Q, K, V, O and FFN
/// weights) per token and layer (in a Qwen3-MoE sparse layer the router and
/// the experts a token runs, model::ffn_flops), 2 x hidden x vocab per logit row, and
/// 4 x head_dim per (query head, visible key) for QK^T and PV under
/// `windows` (exact visible counts; no credit for masked tile corners).
/// Checks the windows against the model's layout first.
double forward_flops(const model::Config& config, int n, int logit_rows, const AttentionWindows& windows);

/// Token id `token` at `position` is in [0, vocab):
/// "token id T at position P outside the vocabulary [0, V)".
void check_token(int token, int position, int vocab, const std::string& where);

/// check_token for every id of `tokens` at its index.
void check_tokens(std::span<const int> tokens, int vocab, const std::string& where);

/// Every position in [0, n_tokens): "position P outside [0, N): the
/// sequence has N tokens" (with `sequence` >= 0: "sequence B has N tokens").
void check_positions(std::span<const int> positions, int n_tokens, const std::string& where, int sequence = -1);

/// One position list per sequence (forward_batch).
void check_position_lists(std::size_t lists, std::size_t sequences, const std::string& where);

/// 0 <= first <= last <= num_layers: "layer range [F, L) is not within the
/// model's layers [0, N)".
void check_layer_range(int first, int last, int num_layers, const std::string& where);

/// A residual stream of n_tokens x hidden holding `values` numbers fits a
/// model of hidden size `model_hidden`.
void check_residual(int n_tokens, int hidden, std::size_t values, int model_hidden, const std::string& where);

/// The arguments of Backend::prefill, in this order, before any work: the
/// windows against the model's layout (a mask of another layout is reported
/// naming both layouts, even when the tokens are bad too), at least one
/// token, capacity >= 0, every token id in the vocabulary.
void check_prefill(const model::Config& config, std::span<const int> tokens, const AttentionWindows& windows,
                   int capacity, const std::string& where);

/// The arguments of Backend::decode_step against a state of `positions`
/// positions prefilled under `prefilled`: the same windows, a token id in
/// the vocabulary (reported at `positions`, where it would go), and room for
/// one more position (positions < INT_MAX).
void check_decode_step(const model::Config& config, int positions, int token, const AttentionWindows& windows,
                       const AttentionWindows& prefilled, const std::string& where);

}  // namespace bosch::frame
