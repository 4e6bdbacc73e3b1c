// SPDX-License-Identifier: Apache-2.0
#pragma once

/// @file tasks/text.hpp
/// Natural text for haystacks: plain-text novels (the Jane Austen files the
/// setup exports) split into sentences, and the calibration / held-out regions.

#include <bosch/tasks/task.hpp>

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace bosch::tasks {

/// The sentences of a plain-text book, in order. Paragraphs are separated by
/// blank lines; whitespace runs become one space and '_' (italics markup) is
/// dropped; heading-like paragraphs (at most 8 words and no '.', '!', '?', '"')
/// such as "CHAPTER I" or "By Jane Austen" are skipped. A sentence ends at '.',
/// '!' or '?' (closing quotes and brackets kept with it) followed by a space and
/// an upper-case letter or an opening quote, except after common abbreviations
/// (Mr., Mrs., Dr., St., Col., ...) and single capital initials.
std::vector<std::string> split_sentences(std::string_view text);

/// The sentences of several files.
struct Corpus {
  std::vector<std::filesystem::path> files;
  std::vector<std::vector<std::string>> sentences;  ///< per file
};

/// Reads and splits `files`. Throws bosch::file_error when one cannot be read and
/// bosch::format_error when one yields no sentence.
Corpus load_corpus(const std::vector<std::filesystem::path>& files);

/// Throws bosch::format_error (where = `where`) unless `text` is UTF-8 text:
/// no NUL byte, no invalid, truncated or overlong sequence, no surrogate; the
/// message gives the byte offset of the first bad byte.
void check_text(std::string_view text, const std::string& where);

/// Half-open range of sentence indices of a file that a split may use:
/// calibration [0, n/2), held-out [n/2, n), n = the file's sentence count.
struct SentenceRange {
  std::size_t begin = 0;
  std::size_t end = 0;
};
SentenceRange split_region(std::size_t sentence_count, Split split) noexcept;

}  // namespace bosch::tasks
