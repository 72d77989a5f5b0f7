// defines: sf::utf8 — UTF-8 validation, lossy repair (U+FFFD), code point decode/encode, the
// Unicode predicates the tokenizer needs (White_Space, regex \w), GPT-2's byte↔char table and
// Unicode normalization forms (NFC/NFD/NFKC/NFKD through utf8proc).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace sf::utf8 {

// True when `s` is well-formed UTF-8 (no surrogates, no overlongs, ≤ U+10FFFF).
bool is_valid(std::string_view s);

// Replaces every maximal ill-formed subsequence with U+FFFD, exactly as Python's
// bytes.decode("utf-8", errors="replace") and Rust's String::from_utf8_lossy do.
std::string repair(std::string_view s);

// Decodes the code point at `p` (well-formed input assumed) and advances `p`.
inline uint32_t next(const char*& p) {
  auto b = static_cast<unsigned char>(*p);
  if (b < 0x80) {
    ++p;
    return b;
  }
  if (b < 0xE0) {
    uint32_t c = ((b & 0x1Fu) << 6) | (uint8_t(p[1]) & 0x3Fu);
    p += 2;
    return c;
  }
  if (b < 0xF0) {
    uint32_t c = ((b & 0x0Fu) << 12) | ((uint8_t(p[1]) & 0x3Fu) << 6) | (uint8_t(p[2]) & 0x3Fu);
    p += 3;
    return c;
  }
  uint32_t c = ((b & 0x07u) << 18) | ((uint8_t(p[1]) & 0x3Fu) << 12) |
               ((uint8_t(p[2]) & 0x3Fu) << 6) | (uint8_t(p[3]) & 0x3Fu);
  p += 4;
  return c;
}

// Byte length of the character whose lead byte is `b` (1 for stray bytes).
inline int char_len(unsigned char b) { return b < 0xC0 ? 1 : b < 0xE0 ? 2 : b < 0xF0 ? 3 : 4; }

void append(std::string& out, uint32_t cp);

// Unicode White_Space (what Rust's char::is_whitespace and regex \s accept).
bool is_whitespace(uint32_t cp);
// Regex \w: alphabetic, marks, decimal digits, connector punctuation, joiners.
bool is_word_char(uint32_t cp);

// GPT-2's byte-level alphabet: each byte maps to a printable code point (and back).
struct ByteLevelTable {
  std::array<uint32_t, 256> byte_to_cp;
  std::array<std::string, 256> byte_to_str;  // the code point as UTF-8
  std::array<int16_t, 512> cp_to_byte;       // -1 where the code point is not in the alphabet
};
const ByteLevelTable& byte_level_table();

enum class NormalForm { kNFC, kNFD, kNFKC, kNFKD };
// Returns `s` in the given normalization form (input must be valid UTF-8).
std::string normalize(std::string_view s, NormalForm form);
// Lower-cases by code point (Unicode simple case mapping).
std::string lowercase(std::string_view s);

}  // namespace sf::utf8
