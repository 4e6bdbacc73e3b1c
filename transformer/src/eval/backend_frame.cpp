// SPDX-License-Identifier: Apache-2.0
// bosch::frame: the FLOP model and the input checks of the CPU and CUDA
// backends (eval/backend_frame.hpp).

#include <bosch/error.hpp>
#include <bosch/eval/backend_frame.hpp>

#include <algorithm>
#include <limits>
#include <string>

namespace bosch::frame {

long long visible_keys(int i, int window, int sinks) {
  if (window <= 0) return static_cast<long long>(i) + 1;
  const long long in_window = std::min(i + 1, window);
  const long long lo = std::max(0, i - window + 1);  // first window key
  return in_window + std::min<long long>(sinks, lo);
}

double visible_pairs(int n, int window, int sinks) {
  double total = 0;
  for (int i = 0; i < n; ++i) total += static_cast<double>(visible_keys(i, window, sinks));
  return total;
}

double forward_flops(const model::Config& c, int n, int logit_rows, const AttentionWindows& windows) {
  windows.check(c.layout(), "flops");
  const double d = c.hidden_size, hd = c.head_dim;
  const double qd = c.num_heads * hd, kvd = c.num_kv_heads * hd;
  // Projections, and each layer's FFN (the active experts only in sparse layers).
  double per_token = 2.0 * (d * qd + 2.0 * d * kvd + qd * d) * c.num_layers;
  for (int l = 0; l < c.num_layers; ++l) per_token += model::ffn_flops(c, l);
  double total = per_token * n + 2.0 * d * c.vocab_size * logit_rows;
  const double full = visible_pairs(n, 0, 0);
  const double swa = windows.mask.count() ? visible_pairs(n, windows.window, windows.sinks) : 0.0;
  const int group = c.num_heads / c.num_kv_heads;
  for (int l = 0; l < c.num_layers; ++l)
    for (int g = 0; g < c.num_kv_heads; ++g) total += 4.0 * hd * group * (windows.is_swa(l, g) ? swa : full);
  return total;
}

void check_token(int token, int position, int vocab, const std::string& where) {
  if (token < 0 || token >= vocab)
    throw invalid_argument("token id " + std::to_string(token) + " at position " + std::to_string(position) +
                               " outside the vocabulary [0, " + std::to_string(vocab) + ")",
                           where);
}

void check_tokens(std::span<const int> tokens, int vocab, const std::string& where) {
  for (std::size_t i = 0; i < tokens.size(); ++i) check_token(tokens[i], static_cast<int>(i), vocab, where);
}

void check_positions(std::span<const int> positions, int n_tokens, const std::string& where, int sequence) {
  for (int p : positions)
    if (p < 0 || p >= n_tokens) {
      const std::string which = sequence >= 0 ? "sequence " + std::to_string(sequence) : "the sequence";
      throw invalid_argument("position " + std::to_string(p) + " outside [0, " + std::to_string(n_tokens) + "): " +
                                 which + " has " + std::to_string(n_tokens) + " tokens",
                             where);
    }
}

void check_position_lists(std::size_t lists, std::size_t sequences, const std::string& where) {
  if (lists != sequences)
    throw invalid_argument(std::to_string(lists) + " position lists for " + std::to_string(sequences) +
                               " sequences (give one per sequence)",
                           where);
}

void check_layer_range(int first, int last, int num_layers, const std::string& where) {
  if (first < 0 || first > last || last > num_layers)
    throw invalid_argument("layer range [" + std::to_string(first) + ", " + std::to_string(last) +
                               ") is not within the model's layers [0, " + std::to_string(num_layers) + ")",
                           where);
}

void check_residual(int n_tokens, int hidden, std::size_t values, int model_hidden, const std::string& where) {
  if (hidden != model_hidden || n_tokens < 0 ||
      values != static_cast<std::size_t>(n_tokens) * static_cast<std::size_t>(std::max(hidden, 0)))
    throw invalid_argument("residual stream of " + std::to_string(n_tokens) + " x " + std::to_string(hidden) +
                               " holding " + std::to_string(values) + " values does not fit hidden size " +
                               std::to_string(model_hidden),
                           where);
}

void check_prefill(const model::Config& config, std::span<const int> tokens, const AttentionWindows& windows,
                   int capacity, const std::string& where) {
  windows.check(config.layout(), where);
  if (tokens.empty()) throw invalid_argument("prefill needs at least one token", where);
  if (capacity < 0) throw invalid_argument("capacity must be >= 0, got " + std::to_string(capacity), where);
  check_tokens(tokens, config.vocab_size, where);
}

void check_decode_step(const model::Config& config, int positions, int token, const AttentionWindows& windows,
                       const AttentionWindows& prefilled, const std::string& where) {
  if (AttentionWindows::first_difference(windows, prefilled, config.num_layers, config.num_kv_heads) !=
      config.num_layers)
    throw invalid_argument("decode_step windows differ from those the state was prefilled with", where);
  check_token(token, positions, config.vocab_size, where);
  if (positions == std::numeric_limits<int>::max()) throw invalid_argument("decode state is full", where);
}

}  // namespace bosch::frame
