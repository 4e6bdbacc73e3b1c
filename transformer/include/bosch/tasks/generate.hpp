// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file tasks/generate.hpp
/// Task generators: deterministic from the spec (same spec and tokenizer, same
/// tokens on every platform; Boost.Random only), no downloads.
///
/// Construction in token space. A prompt is assembled from text segments that
/// are tokenized separately and concatenated:
///   [BOS] [format.prefix] [task header] [context items...] [question]
///   [format.suffix] [answer prefix]  ->  answer
/// where the context items are haystack units (a sentence of natural text, a
/// noise line, a distractor needle line) and the inserted needles, each with its
/// leading separator (" " or "\n"). Every segment boundary sits before a space or
/// a newline that follows a non-space character, a boundary that byte-level BPE
/// pre-tokenizers (GPT-2, Llama 3, SmolLM2) and SentencePiece never merge across,
/// so the concatenation equals the tokenization of the whole text in practice,
/// while every token count is exact and additive. A segment is tokenized as it
/// appears after its left neighbour: encode(anchor + segment) with the anchor
/// (the tail of the previous text, e.g. "is" before " 1234567") stripped, after
/// checking that encode(anchor) is a prefix of it. This keeps the leading space
/// of " 1234567" a part of the answer exactly as a model would produce it, and
/// avoids SentencePiece's extra space prefix on a segment. Haystack units and
/// needles, which always follow a sentence end or a word, are tokenized once
/// after the anchor "." and reused wherever they go. The answer ids are
/// therefore the tokens that follow the prompt, and decode(answer) == answer_text
/// up to the tokenizer's normalisation. The tests check, for SmolLM2 and
/// stories260K, that encode(prompt_text) == prompt and encode(prompt_text +
/// answer_text) == prompt + answer (BOS aside).
///
/// Templates. NIAH: RULER's niah.py template, needle "One of the special magic
/// {numbers|uuids} for {key} is: {value}." and answer prefix, singularised as
/// RULER does when one value is asked for; keys "adjective-noun" (words.hpp) or
/// UUIDs, values 7-digit numbers or UUIDs; haystacks joined by " " (natural text)
/// or "\n" (noise lines, needle lines). Passkey: the Landmark-attention lines
/// (header, garbage, "The pass key is K. Remember it. K is the pass key.",
/// garbage, "What is the pass key? The pass key is"), K 5-digit, the garbage cut
/// at its sentences. Copy: [haystack with the span at depth] "\n" cue -> rest of
/// the span. Several answer values are joined "a, b, c, and d" (multi-value: in
/// context order; multi-query: in query order).
///
/// Length. Fixed segments (header, question, answer prefix, answer, needles) are
/// tokenized first; haystack units are then added while prompt + answer stays
/// within context_length (natural text: the last sentence is cut at the word that
/// fills the budget best; noise and needle lines are whole). Needles go to the
/// unit boundary whose token offset is nearest to depth x haystack tokens. The
/// assembled prompt is measured again and shortened from the end of the haystack
/// if separators changed a count, so prompt + answer <= context_length always.

#include <bosch/model/tokenizer.hpp>
#include <bosch/tasks/codec.hpp>
#include <bosch/tasks/task.hpp>

#include <span>

namespace bosch::tasks {

/// Generates spec.num_samples samples. Throws bosch::invalid_argument for a bad
/// spec (context_length too small for the fixed parts, depth outside [0, 1],
/// copy_cue outside [1, copy_words), an impossible haystack), bosch::file_error /
/// bosch::format_error for unreadable or empty text files.
TaskSet generate(const TaskSpec& spec, const model::Tokenizer& tokenizer);
TaskSet generate(const TaskSpec& spec, const TextCodec& codec);

/// Several specs into one set (samples in spec order); text files shared by the
/// specs are read once.
TaskSet generate(std::span<const TaskSpec> specs, const model::Tokenizer& tokenizer);
TaskSet generate(std::span<const TaskSpec> specs, const TextCodec& codec);

/// A length grid (e.g. passkey over depth x length): for every context length,
/// `base` with that length (base.num_samples samples, base.depths cycled).
TaskSet generate_grid(const TaskSpec& base, std::span<const int> context_lengths,
                      const model::Tokenizer& tokenizer);
TaskSet generate_grid(const TaskSpec& base, std::span<const int> context_lengths,
                      const TextCodec& codec);

}  // namespace bosch::tasks
