// SPDX-License-Identifier: Apache-2.0
// Natural text for haystacks: sentence splitting of plain-text books.
#include <bosch/error.hpp>
#include <bosch/io/atomic_file.hpp>
#include <bosch/tasks/text.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <sstream>

namespace bosch::tasks {
namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
bool is_upper(char c) { return c >= 'A' && c <= 'Z'; }
bool is_closer(char c) { return c == '"' || c == '\'' || c == ')' || c == ']'; }
bool is_opener(char c) { return c == '"' || c == '\'' || c == '(' || c == '['; }

// Words after which a period does not end a sentence.
constexpr std::array<std::string_view, 14> kAbbreviations = {
    "Mr", "Mrs", "Ms", "Dr", "St", "Messrs", "Col", "Capt", "Gen", "Lt", "Rev", "Esq", "Jr", "Sr"};

// Collapses whitespace runs to one space, drops '_' and trims.
std::string normalise_paragraph(std::string_view p) {
  std::string out;
  out.reserve(p.size());
  bool pending_space = false;
  for (char c : p) {
    if (c == '_') continue;
    if (is_space(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out += ' ';
    pending_space = false;
    out += c;
  }
  return out;
}

bool is_heading(const std::string& p) {
  const auto words = std::count(p.begin(), p.end(), ' ') + 1;
  const bool punct = p.find_first_of(".!?\"") != std::string::npos;
  return words <= 8 && !punct;
}

// The word (letters only) that ends right before position `dot`.
std::string_view word_before(std::string_view s, std::size_t dot) {
  std::size_t b = dot;
  while (b > 0 && ((s[b - 1] >= 'A' && s[b - 1] <= 'Z') || (s[b - 1] >= 'a' && s[b - 1] <= 'z')))
    --b;
  return s.substr(b, dot - b);
}

void split_paragraph(const std::string& p, std::vector<std::string>& out) {
  std::size_t start = 0;
  for (std::size_t i = 0; i < p.size(); ++i) {
    const char c = p[i];
    if (c != '.' && c != '!' && c != '?') continue;
    std::size_t j = i + 1;
    while (j < p.size() && (is_closer(p[j]) || p[j] == '.' || p[j] == '!' || p[j] == '?')) ++j;
    if (j >= p.size() || p[j] != ' ' || j + 1 >= p.size()) continue;
    const char next = p[j + 1];
    if (!is_upper(next) && !is_opener(next)) continue;
    if (c == '.') {
      const auto w = word_before(p, i);
      if (std::find(kAbbreviations.begin(), kAbbreviations.end(), w) != kAbbreviations.end())
        continue;
      if (w.size() == 1 && is_upper(w[0])) continue;  // an initial: "E. Dashwood"
    }
    out.push_back(p.substr(start, j - start));
    start = j + 1;
    i = j;
  }
  if (start < p.size()) out.push_back(p.substr(start));
}

}  // namespace

std::vector<std::string> split_sentences(std::string_view text) {
  std::vector<std::string> out;
  // Paragraphs: separated by lines that are empty or whitespace only.
  std::size_t pos = 0;
  std::string para;
  auto flush = [&] {
    const std::string p = normalise_paragraph(para);
    para.clear();
    if (!p.empty() && !is_heading(p)) split_paragraph(p, out);
  };
  while (pos <= text.size()) {
    std::size_t eol = text.find('\n', pos);
    if (eol == std::string_view::npos) eol = text.size();
    const std::string_view line = text.substr(pos, eol - pos);
    const bool blank = std::all_of(line.begin(), line.end(), is_space);
    if (blank) {
      flush();
    } else {
      para.append(line);
      para += '\n';
    }
    pos = eol + 1;
  }
  flush();
  return out;
}

void check_text(std::string_view text, const std::string& where) {
  const auto* b = reinterpret_cast<const unsigned char*>(text.data());
  const std::size_t n = text.size();
  auto bad = [&](std::size_t at, const char* why) {
    char hex[8];
    std::snprintf(hex, sizeof hex, "0x%02x", static_cast<unsigned>(b[at]));
    throw format_error(std::string("not UTF-8 text: ") + why + " (byte " + hex + ") at byte offset " +
                           std::to_string(at),
                       where);
  };
  for (std::size_t i = 0; i < n;) {
    const unsigned char c = b[i];
    if (c == 0) bad(i, "NUL byte");
    if (c < 0x80) {
      ++i;
      continue;
    }
    std::size_t len = 0;
    unsigned cp = 0, min = 0;
    if ((c & 0xE0) == 0xC0) len = 2, cp = c & 0x1Fu, min = 0x80;
    else if ((c & 0xF0) == 0xE0) len = 3, cp = c & 0x0Fu, min = 0x800;
    else if ((c & 0xF8) == 0xF0) len = 4, cp = c & 0x07u, min = 0x10000;
    else bad(i, "invalid lead byte");
    if (i + len > n) bad(i, "truncated sequence");
    for (std::size_t k = 1; k < len; ++k) {
      if ((b[i + k] & 0xC0) != 0x80) bad(i + k, "invalid continuation byte");
      cp = (cp << 6) | (b[i + k] & 0x3Fu);
    }
    if (cp < min) bad(i, "overlong encoding");
    if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) bad(i, "invalid code point");
    i += len;
  }
}

Corpus load_corpus(const std::vector<std::filesystem::path>& files) {
  Corpus c;
  for (const auto& f : files) {
    const std::string text = io::read_file(f, io::max_text_bytes, "a text file");
    check_text(text, f.string());
    auto s = split_sentences(text);
    if (s.empty()) throw format_error("no sentences in text file", f.string());
    c.files.push_back(f);
    c.sentences.push_back(std::move(s));
  }
  return c;
}

SentenceRange split_region(std::size_t n, Split split) noexcept {
  const std::size_t half = n / 2;
  return split == Split::calibration ? SentenceRange{0, half} : SentenceRange{half, n};
}

}  // namespace bosch::tasks
