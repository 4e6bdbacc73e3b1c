// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file model/tokenizer_json.hpp
/// Reader of Hugging Face `tokenizer.json` files (the `tokenizers` library's
/// serialization) into a TokenizerSpec, for checkpoints that come as a
/// directory (config.json + tokenizer.json + *.safetensors).
///
/// Supported: `model.type` "BPE" with `vocab` (text -> id), `merges` (either
/// "left right" strings or [left, right] pairs, in priority order),
/// `ignore_merges`, `byte_fallback`, `unk_token`; `added_tokens` (special ones
/// become control tokens, the others user-defined; ids may extend the vocab;
/// holes become unused tokens with empty text).
///  - Byte-level BPE (a ByteLevel pre-tokenizer or decoder): the
///    pre-tokenizer (ByteLevel, Digits, Split with a Regex or String pattern
///    and behaviour "Isolated", Sequence of these) is mapped to a named
///    pre-tokenizer when it is one of the known ones ("gpt2": ByteLevel with
///    its regex; "smollm": Digits(individual_digits) + ByteLevel; "llama-bpe":
///    Llama 3's Split regex; "qwen2": Qwen2's Split regex), otherwise its
///    regexes are carried in TokenizerSpec::pre_regexes (PCRE2 syntax, which
///    agrees with the Oniguruma patterns these files use). The normalizer must
///    be absent or NFC; NFC is not applied (as llama.cpp: input is expected
///    in NFC already).
///  - SentencePiece-style BPE (Llama 2, Mistral: `byte_fallback` with a
///    Metaspace pre-tokenizer, or a normalizer that replaces ' ' by U+2581):
///    Kind::spm, with scores derived from the merges (a token's score is
///    minus the rank of the first merge that makes it), which gives the same
///    greedy order as the merge ranks.
///  - `post_processor` (TemplateProcessing, BertProcessing/RobertaProcessing,
///    Sequence): a special token before the sequence becomes BOS with
///    add_bos = true.
///  - When a `tokenizer_config.json` sits beside the file, its `bos_token`,
///    `eos_token`, `unk_token`, `pad_token` (string or {"content": ...}) and
///    `add_bos_token` fill what the tokenizer.json leaves open.
/// Anything else (another model type, an unsupported pre-tokenizer or
/// normalizer, BPE dropout, subword prefixes) is a bosch::format_error whose
/// `where` names the file and the field, e.g. "tokenizer.json: model.merges[12]".
/// The spec is checked by building a Tokenizer from it before it is returned.

#include <bosch/model/tokenizer_spec.hpp>

#include <filesystem>
#include <string>
#include <string_view>

namespace bosch::model {

/// Reads `tokenizer_json` (and a sibling tokenizer_config.json when present).
/// Throws bosch::file_error when the file cannot be read, bosch::format_error
/// for malformed or unsupported content.
TokenizerSpec tokenizer_spec_from_json(const std::filesystem::path& tokenizer_json);

/// The same from JSON text already in memory; `where` names the source in
/// errors (e.g. the file name); `config_json` is the optional content of a
/// tokenizer_config.json ("" for none).
TokenizerSpec tokenizer_spec_from_json_text(std::string_view json_text,
                                            const std::string& where = "tokenizer.json",
                                            std::string_view config_json = {});

}  // namespace bosch::model
