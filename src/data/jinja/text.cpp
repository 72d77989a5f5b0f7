// defines: sf::jinja::text functions (see text.h)
#include "data/jinja/text.h"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "core/error.h"
#include "data/jinja/value.h"  // check_value_bytes

namespace sf::jinja::text {

std::vector<char32_t> decode(const std::string& s) {
  std::vector<char32_t> out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    auto c = static_cast<unsigned char>(s[i]);
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) {
      out.push_back(0xFFFD);
      ++i;
      continue;
    }
    char32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += n;
  }
  return out;
}

std::string encode(char32_t cp) {
  std::string o;
  if (cp < 0x80) {
    o += static_cast<char>(cp);
  } else if (cp < 0x800) {
    o += static_cast<char>(0xC0 | (cp >> 6));
    o += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    o += static_cast<char>(0xE0 | (cp >> 12));
    o += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    o += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    o += static_cast<char>(0xF0 | (cp >> 18));
    o += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    o += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    o += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return o;
}

std::string encode(const std::vector<char32_t>& cps) {
  std::string o;
  for (char32_t c : cps) o += encode(c);
  return o;
}

size_t length(const std::string& s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

bool is_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

std::string strip(const std::string& s, const std::optional<std::string>& chars, bool left,
                  bool right) {
  auto cps = decode(s);
  std::vector<char32_t> set;
  if (chars) set = decode(*chars);
  auto drop = [&](char32_t c) {
    if (!chars) return is_space(c);
    for (char32_t x : set)
      if (x == c) return true;
    return false;
  };
  size_t b = 0, e = cps.size();
  if (left)
    while (b < e && drop(cps[b])) ++b;
  if (right)
    while (e > b && drop(cps[e - 1])) --e;
  return encode(std::vector<char32_t>(cps.begin() + b, cps.begin() + e));
}

std::vector<std::string> split(const std::string& s, const std::optional<std::string>& sep,
                               int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep) {
    SF_CHECK(!sep->empty(), "split(): empty separator");
    size_t pos = 0;
    while (maxsplit < 0 || static_cast<int64_t>(out.size()) < maxsplit) {
      size_t f = s.find(*sep, pos);
      if (f == std::string::npos) break;
      out.push_back(s.substr(pos, f - pos));
      pos = f + sep->size();
    }
    out.push_back(s.substr(pos));
    return out;
  }
  auto cps = decode(s);
  size_t i = 0, n = cps.size();
  while (true) {
    while (i < n && is_space(cps[i])) ++i;
    if (i >= n) break;
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
      size_t e = n;
      while (e > i && is_space(cps[e - 1])) --e;
      out.push_back(encode(std::vector<char32_t>(cps.begin() + i, cps.begin() + e)));
      break;
    }
    size_t j = i;
    while (j < n && !is_space(cps[j])) ++j;
    out.push_back(encode(std::vector<char32_t>(cps.begin() + i, cps.begin() + j)));
    i = j;
  }
  return out;
}

std::string replace(const std::string& s, const std::string& old, const std::string& repl,
                    int64_t count) {
  std::string out;
  if (old.empty()) {  // Python inserts repl between every code point and at both ends
    auto cps = decode(s);
    int64_t done = 0;
    for (size_t i = 0; i <= cps.size(); ++i) {
      if (count < 0 || done < count) {
        out += repl;
        ++done;
      }
      if (i < cps.size()) out += encode(cps[i]);
      check_value_bytes(out.size(), "the result of replace");
    }
    return out;
  }
  size_t pos = 0;
  int64_t done = 0;
  while (count < 0 || done < count) {
    size_t f = s.find(old, pos);
    if (f == std::string::npos) break;
    out.append(s, pos, f - pos);
    out += repl;
    pos = f + old.size();
    ++done;
    check_value_bytes(out.size(), "the result of replace");
  }
  out.append(s, pos, std::string::npos);
  return out;
}

namespace {

// Whether a code point may have case outside the ranges mapped below.
bool unmapped_cased(char32_t c) {
  return (c >= 0x100 && c <= 0x3FF && !(c >= 0x2B0 && c <= 0x36F)) || (c >= 0x460 && c <= 0x58F) ||
         (c >= 0x10A0 && c <= 0x10FF) || (c >= 0x13A0 && c <= 0x13FF) ||
         (c >= 0x1C80 && c <= 0x1CBF) || (c >= 0x1D00 && c <= 0x1FFF) ||
         (c >= 0x2100 && c <= 0x218F) || (c >= 0x24B6 && c <= 0x24E9) ||
         (c >= 0x2C00 && c <= 0x2D2F) || (c >= 0xA640 && c <= 0xA7FF) ||
         (c >= 0xAB30 && c <= 0xABBF) || (c >= 0xFB00 && c <= 0xFB4F) ||
         (c >= 0xFF21 && c <= 0xFF5A) || (c >= 0x10400 && c <= 0x1E94F);
}

void check_mappable(char32_t c) {
  SF_CHECK(!unmapped_cased(c), "case mapping of U+", std::hex, static_cast<uint32_t>(c),
           " is not supported by the chat template interpreter");
}

bool is_up(char32_t c) {
  return (c >= 'A' && c <= 'Z') || (c >= 0xC0 && c <= 0xDE && c != 0xD7) ||
         (c >= 0x400 && c <= 0x42F);
}
bool is_low(char32_t c) {
  return (c >= 'a' && c <= 'z') || (c >= 0xDF && c <= 0xFF && c != 0xF7) || c == 0xB5 ||
         c == 0xAA || c == 0xBA || (c >= 0x430 && c <= 0x45F);
}

std::string up1(char32_t c) {
  check_mappable(c);
  if (c >= 'a' && c <= 'z') return encode(c - 32);
  if (c == 0xDF) return "SS";
  if (c == 0xB5) return encode(0x39C);
  if (c == 0xFF) return encode(0x178);
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return encode(c - 32);
  if (c >= 0x430 && c <= 0x44F) return encode(c - 32);
  if (c >= 0x450 && c <= 0x45F) return encode(c - 80);
  return encode(c);
}
std::string low1(char32_t c) {
  check_mappable(c);
  if (c >= 'A' && c <= 'Z') return encode(c + 32);
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return encode(c + 32);
  if (c >= 0x410 && c <= 0x42F) return encode(c + 32);
  if (c >= 0x400 && c <= 0x40F) return encode(c + 80);
  return encode(c);
}

}  // namespace

std::string upper(const std::string& s) {
  std::string o;
  for (char32_t c : decode(s)) o += up1(c);
  return o;
}
std::string lower(const std::string& s) {
  std::string o;
  for (char32_t c : decode(s)) o += low1(c);
  return o;
}
std::string title(const std::string& s) {
  std::string o;
  bool prev_cased = false;
  for (char32_t c : decode(s)) {
    o += prev_cased ? low1(c) : up1(c);
    prev_cased = is_up(c) || is_low(c);
  }
  return o;
}
std::string capitalize(const std::string& s) {
  std::string o;
  bool first = true;
  for (char32_t c : decode(s)) {
    o += first ? up1(c) : low1(c);
    first = false;
  }
  return o;
}
bool is_upper(const std::string& s) {
  bool cased = false;
  for (char32_t c : decode(s)) {
    check_mappable(c);
    if (is_low(c)) return false;
    cased |= is_up(c);
  }
  return cased;
}
bool is_lower(const std::string& s) {
  bool cased = false;
  for (char32_t c : decode(s)) {
    check_mappable(c);
    if (is_up(c)) return false;
    cased |= is_low(c);
  }
  return cased;
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, r.ptr);  // e.g. -1.2345e+02
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci = sci.substr(1);
  }
  size_t epos = sci.find('e');
  int exp = std::stoi(sci.substr(epos + 1));
  std::string digits;
  for (size_t i = 0; i < epos; ++i)
    if (sci[i] != '.') digits += sci[i];
  if (exp >= -4 && exp < 16) {
    std::string out;
    if (exp >= 0) {
      std::string ip = digits.substr(0, std::min<size_t>(digits.size(), exp + 1));
      ip.append(exp + 1 - ip.size(), '0');
      std::string fp = digits.size() > static_cast<size_t>(exp + 1) ? digits.substr(exp + 1) : "0";
      out = ip + "." + fp;
    } else {
      out = "0." + std::string(-exp - 1, '0') + digits;
    }
    return sign + out;
  }
  std::string m = digits.substr(0, 1);
  if (digits.size() > 1) m += "." + digits.substr(1);
  char eb[16];
  std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  return sign + m + eb;
}

namespace {
bool printable(char32_t c) {
  if (c < 0x20 || c == 0x7F) return false;
  if (c < 0x7F) return true;
  return !((c >= 0x80 && c <= 0xA0) || c == 0xAD || (c >= 0x600 && c <= 0x605) || c == 0x61C ||
           c == 0x6DD || c == 0x70F || c == 0x180E || c == 0x1680 || (c >= 0x2000 && c <= 0x200F) ||
           (c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x206F) || c == 0x3000 ||
           (c >= 0xD800 && c <= 0xF8FF) || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB) ||
           (c >= 0xE0000 && c <= 0xE007F) || c >= 0xF0000);
}
}  // namespace

std::string string_repr(const std::string& s) {
  bool has_sq = s.find('\'') != std::string::npos, has_dq = s.find('"') != std::string::npos;
  char q = has_sq && !has_dq ? '"' : '\'';
  std::string o(1, q);
  o.reserve(s.size() + 2);
  char buf[16];
  for (char32_t c : decode(s)) {
    if (c >= 0x20 && c < 0x7f && c != '\\' && c != static_cast<char32_t>(q))
      o += static_cast<char>(c);  // printable ASCII, the common case: as is
    else if (c == '\\')
      o += "\\\\";
    else if (c == static_cast<char32_t>(q))
      o += std::string("\\") + q;
    else if (c == '\n')
      o += "\\n";
    else if (c == '\r')
      o += "\\r";
    else if (c == '\t')
      o += "\\t";
    else if (printable(c))
      o += encode(c);
    else {
      if (c < 0x100)
        std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      else if (c < 0x10000)
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      else
        std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
      o += buf;
    }
  }
  return o + q;
}

std::string json_string(const std::string& s, bool ensure_ascii) {
  std::string o = "\"";
  char buf[16];
  for (char32_t c : decode(s)) {
    switch (c) {
      case '"':
        o += "\\\"";
        continue;
      case '\\':
        o += "\\\\";
        continue;
      case '\n':
        o += "\\n";
        continue;
      case '\r':
        o += "\\r";
        continue;
      case '\t':
        o += "\\t";
        continue;
      case '\b':
        o += "\\b";
        continue;
      case '\f':
        o += "\\f";
        continue;
      default:
        break;
    }
    if (c < 0x20 || (ensure_ascii && c > 0x7E)) {
      if (c >= 0x10000) {
        char32_t v = c - 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 | (v >> 10)),
                      static_cast<unsigned>(0xDC00 | (v & 0x3FF)));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      }
      o += buf;
    } else {
      o += encode(c);
    }
  }
  return o + "\"";
}

}  // namespace sf::jinja::text
