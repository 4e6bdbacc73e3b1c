// SPDX-License-Identifier: Apache-2.0
// UTF-8 and byte-level helpers of the tokenizer.

#include "tokenizer_detail.hpp"

#include <unordered_map>

namespace bosch::model::detail {

std::size_t utf8_char_length(std::string_view s, std::size_t i) noexcept {
  const auto byte = [&](std::size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char lead = byte(i);
  std::size_t n = 0;
  std::uint32_t min_cp = 0;
  if (lead < 0x80) return 1;
  if ((lead & 0xE0) == 0xC0) {
    n = 2;
    min_cp = 0x80;
  } else if ((lead & 0xF0) == 0xE0) {
    n = 3;
    min_cp = 0x800;
  } else if ((lead & 0xF8) == 0xF0) {
    n = 4;
    min_cp = 0x10000;
  } else {
    return 1;
  }
  if (i + n > s.size()) return 1;
  std::uint32_t cp = lead & (0x7F >> n);
  for (std::size_t k = 1; k < n; ++k) {
    const unsigned char c = byte(i + k);
    if ((c & 0xC0) != 0x80) return 1;
    cp = (cp << 6) | (c & 0x3F);
  }
  // Overlong forms, surrogates and code points past U+10FFFF are malformed.
  if (cp < min_cp || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return 1;
  return n;
}

void append_utf8(std::string& out, std::uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

const std::array<std::string, 256>& byte_to_unicode() {
  static const std::array<std::string, 256> table = [] {
    std::array<std::string, 256> t;
    // Bytes that are printable and not whitespace keep their code point
    // ('!'..'~', '¡'..'¬', '®'..'ÿ'); the rest get U+0100, U+0101, ... in order.
    std::uint32_t next = 0x100;
    for (std::uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) ||
                             (b >= 0xAE && b <= 0xFF);
      append_utf8(t[b], printable ? b : next++);
    }
    return t;
  }();
  return table;
}

namespace {

const std::unordered_map<std::string_view, unsigned char>& unicode_to_byte() {
  static const std::unordered_map<std::string_view, unsigned char> table = [] {
    std::unordered_map<std::string_view, unsigned char> t;
    const auto& forward = byte_to_unicode();
    for (int b = 0; b < 256; ++b) t.emplace(forward[b], static_cast<unsigned char>(b));
    return t;
  }();
  return table;
}

}  // namespace

std::string byte_level_decode(std::string_view text) {
  const auto& table = unicode_to_byte();
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    const std::size_t n = utf8_char_length(text, i);
    const std::string_view ch = text.substr(i, n);
    auto it = table.find(ch);
    if (it != table.end()) {
      out += static_cast<char>(it->second);
    } else {
      out += ch;
    }
    i += n;
  }
  return out;
}

std::string byte_level_encode(std::string_view bytes) {
  const auto& table = byte_to_unicode();
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) out += table[static_cast<unsigned char>(c)];
  return out;
}

namespace {
constexpr std::string_view kSpmSpace = "\xE2\x96\x81";  // U+2581 LOWER ONE EIGHTH BLOCK
}

std::string spm_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 4);
  for (char c : text) {
    if (c == ' ') {
      out += kSpmSpace;
    } else {
      out += c;
    }
  }
  return out;
}

std::string spm_unescape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (std::size_t i = 0; i < text.size();) {
    if (text.substr(i, kSpmSpace.size()) == kSpmSpace) {
      out += ' ';
      i += kSpmSpace.size();
    } else {
      out += text[i++];
    }
  }
  return out;
}

std::optional<unsigned char> parse_byte_token(std::string_view text) noexcept {
  if (text.size() != 6 || text.substr(0, 3) != "<0x" || text[5] != '>') return std::nullopt;
  const auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    return -1;
  };
  const int hi = hex(text[3]), lo = hex(text[4]);
  if (hi < 0 || lo < 0) return std::nullopt;
  return static_cast<unsigned char>(hi * 16 + lo);
}

}  // namespace bosch::model::detail
