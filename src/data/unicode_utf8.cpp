#include "data/unicode_utf8.h"

#include <utf8proc.h>

#include <cstdlib>
#include <cstring>

#include "core/error.h"

namespace sf::utf8 {

namespace {

// Length of the well-formed sequence at s[i], or 0 with `bad` = bytes of the maximal subpart.
int sequence_len(const unsigned char* s, size_t n, size_t i, int* bad) {
  unsigned char b = s[i];
  if (b < 0x80) return 1;
  int need;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b >= 0xC2 && b <= 0xDF) {
    need = 1;
  } else if (b >= 0xE0 && b <= 0xEF) {
    need = 2;
    if (b == 0xE0) lo = 0xA0;
    if (b == 0xED) hi = 0x9F;  // no surrogates
  } else if (b >= 0xF0 && b <= 0xF4) {
    need = 3;
    if (b == 0xF0) lo = 0x90;
    if (b == 0xF4) hi = 0x8F;
  } else {
    *bad = 1;
    return 0;
  }
  for (int k = 1; k <= need; ++k) {
    if (i + k >= n) {
      *bad = k;
      return 0;
    }
    unsigned char c = s[i + k];
    unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (c < l || c > h) {
      *bad = k;
      return 0;
    }
  }
  return need + 1;
}

}  // namespace

bool is_valid(std::string_view sv) {
  auto* s = reinterpret_cast<const unsigned char*>(sv.data());
  size_t n = sv.size(), i = 0;
  while (i < n) {
    // ASCII fast path, 8 bytes at a time.
    while (i + 8 <= n) {
      uint64_t w;
      std::memcpy(&w, s + i, 8);
      if (w & 0x8080808080808080ull) break;
      i += 8;
    }
    if (i >= n) break;
    int bad = 0;
    int len = sequence_len(s, n, i, &bad);
    if (len == 0) return false;
    i += len;
  }
  return true;
}

std::string repair(std::string_view sv) {
  auto* s = reinterpret_cast<const unsigned char*>(sv.data());
  size_t n = sv.size(), i = 0;
  std::string out;
  out.reserve(n + 8);
  while (i < n) {
    int bad = 0;
    int len = sequence_len(s, n, i, &bad);
    if (len > 0) {
      out.append(sv.data() + i, len);
      i += len;
    } else {
      out += "\xEF\xBF\xBD";
      i += bad;
    }
  }
  return out;
}

void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += char(cp);
  } else if (cp < 0x800) {
    out += char(0xC0 | (cp >> 6));
    out += char(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += char(0xE0 | (cp >> 12));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  } else {
    out += char(0xF0 | (cp >> 18));
    out += char(0x80 | ((cp >> 12) & 0x3F));
    out += char(0x80 | ((cp >> 6) & 0x3F));
    out += char(0x80 | (cp & 0x3F));
  }
}

bool is_whitespace(uint32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

bool is_word_char(uint32_t c) {
  if (c < 0x80) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
  }
  if (c == 0x200C || c == 0x200D) return true;
  switch (utf8proc_category(int32_t(c))) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_PC:
      return true;
    default:
      return false;
  }
}

const ByteLevelTable& byte_level_table() {
  static const ByteLevelTable table = [] {
    ByteLevelTable t{};
    t.cp_to_byte.fill(-1);
    uint32_t extra = 0;
    for (int b = 0; b < 256; ++b) {
      bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255);
      uint32_t cp = printable ? uint32_t(b) : 256 + extra++;
      t.byte_to_cp[b] = cp;
      append(t.byte_to_str[b], cp);
      t.cp_to_byte[cp] = int16_t(b);
    }
    return t;
  }();
  return table;
}

std::string normalize(std::string_view s, NormalForm form) {
  // Code points below U+0300 are stable under every form except compatibility ones for a few
  // Latin-1 characters (e.g. U+00A0, U+00BD), so only NFC/NFD take the fast path.
  if (form == NormalForm::kNFC || form == NormalForm::kNFD) {
    bool fast = true;
    for (unsigned char b : s) {
      if (b >= 0xCC) {
        fast = false;
        break;
      }
    }
    if (fast && form == NormalForm::kNFC) return std::string(s);
    if (fast) {
      bool ascii = true;
      for (unsigned char b : s)
        if (b >= 0x80) {
          ascii = false;
          break;
        }
      if (ascii) return std::string(s);
    }
  }
  int options = UTF8PROC_STABLE;
  switch (form) {
    case NormalForm::kNFC:
      options |= UTF8PROC_COMPOSE;
      break;
    case NormalForm::kNFD:
      options |= UTF8PROC_DECOMPOSE;
      break;
    case NormalForm::kNFKC:
      options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
      break;
    case NormalForm::kNFKD:
      options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
      break;
  }
  utf8proc_uint8_t* out = nullptr;
  utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                                    utf8proc_ssize_t(s.size()), &out, utf8proc_option_t(options));
  if (n < 0) {
    SF_FAIL("tokenizer: Unicode normalization failed: ", utf8proc_errmsg(n));
  }
  std::string r(reinterpret_cast<char*>(out), size_t(n));
  std::free(out);
  return r;
}

std::string lowercase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  const char* p = s.data();
  const char* end = p + s.size();
  while (p < end) {
    uint32_t c = next(p);
    append(out, c < 0x80 ? ((c >= 'A' && c <= 'Z') ? c + 32 : c)
                         : uint32_t(utf8proc_tolower(int32_t(c))));
  }
  return out;
}

}  // namespace sf::utf8
