// defines: sf::jinja::lex (see lexer.h); follows jinja2's lexer (jinja2/lexer.py) rule by rule.
#include "data/jinja/lexer.h"

#include <cctype>
#include <charconv>
#include <cstdlib>
#include <cstring>

#include "data/jinja/text.h"
#include "data/jinja/value.h"

namespace sf::jinja {

namespace {

[[noreturn]] void fail(const std::string& name, int line, const std::string& msg) {
  throw TemplateError(sf::str_cat("chat template ", name, " line ", line, ": ", msg));
}

// Python's `\s` over a UTF-8 suffix: true when s[from:] is non-empty and all whitespace.
bool all_space(const std::string& s, size_t from) {
  if (from >= s.size()) return false;
  for (char32_t c : text::decode(s.substr(from)))
    if (!text::is_space(c)) return false;
  return true;
}

std::string rstrip_all(const std::string& s) { return text::strip(s, std::nullopt, false, true); }

// Python's "unicode-escape" decoding of a string literal body (unknown escapes stay as written).
std::string unescape(const std::string& s) {
  std::string o;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '\\' || i + 1 >= s.size()) {
      o += s[i];
      continue;
    }
    char c = s[++i];
    auto hex = [&](int n) -> bool {
      if (i + n >= s.size()) return false;
      uint32_t v = 0;
      auto r = std::from_chars(s.data() + i + 1, s.data() + i + 1 + n, v, 16);
      if (r.ptr != s.data() + i + 1 + n) return false;
      o += text::encode(static_cast<char32_t>(v));
      i += n;
      return true;
    };
    switch (c) {
      case 'n':
        o += '\n';
        break;
      case 't':
        o += '\t';
        break;
      case 'r':
        o += '\r';
        break;
      case '\\':
        o += '\\';
        break;
      case '\'':
        o += '\'';
        break;
      case '"':
        o += '"';
        break;
      case 'a':
        o += '\a';
        break;
      case 'b':
        o += '\b';
        break;
      case 'f':
        o += '\f';
        break;
      case 'v':
        o += '\v';
        break;
      case '\n':
        break;  // line continuation
      case 'x':
        if (!hex(2)) throw LinelessError("truncated \\xXX escape");
        break;
      case 'u':
        if (!hex(4)) throw LinelessError("truncated \\uXXXX escape");
        break;
      case 'U':
        if (!hex(8)) throw LinelessError("truncated \\UXXXXXXXX escape");
        break;
      default:
        if (c >= '0' && c <= '7') {
          uint32_t v = 0;
          int n = 0;
          while (n < 3 && i < s.size() && s[i] >= '0' && s[i] <= '7')
            v = v * 8 + (s[i++] - '0'), ++n;
          --i;
          o += text::encode(static_cast<char32_t>(v));
        } else if (c == 'N') {
          throw LinelessError("\\N{...} escapes are not supported");
        } else {
          o += '\\';
          o += c;
        }
    }
  }
  return o;
}

const char* const kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~", "[",
                            "]",  "(",  ")",  "{",  "}",  ">",  "<", "=", ".", ":", "|", ",", ";"};

}  // namespace

std::vector<Token> lex(const std::string& source, const std::string& name) {
  // Newlines normalise to \n and one trailing newline is dropped (keep_trailing_newline=False).
  std::string src;
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      src += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      src += source[i];
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();

  std::vector<Token> out;
  const size_t n = src.size();
  size_t pos = 0;
  int line = 1;
  bool line_starting = true;
  auto count_nl = [&](size_t a, size_t b) {
    for (size_t i = a; i < b; ++i) line += src[i] == '\n';
  };
  auto at = [&](size_t p, const char* s) { return src.compare(p, std::strlen(s), s) == 0; };
  // After `-%}`, `-}}` or `-#}`: skip all whitespace; after `%}` / `#}` trim one newline.
  auto after_end = [&](bool minus, bool block) {
    if (minus) {
      size_t e = pos;
      while (e < n) {
        size_t k = e;
        auto c = static_cast<unsigned char>(src[k]);
        size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
        if (k + len > n || !text::is_space(text::decode(src.substr(k, len))[0])) break;
        e = k + len;
      }
      count_nl(pos, e);
      pos = e;
    } else if (block && pos < n && src[pos] == '\n') {
      ++line;
      ++pos;
    }
    line_starting = pos > 0 && src[pos - 1] == '\n';
  };

  while (pos < n) {
    size_t t = pos;
    while ((t = src.find('{', t)) != std::string::npos &&
           !(t + 1 < n && (src[t + 1] == '{' || src[t + 1] == '%' || src[t + 1] == '#')))
      ++t;
    int text_line = line;
    if (t == std::string::npos) {
      out.push_back({TokenKind::kText, src.substr(pos), text_line});
      count_nl(pos, n);
      break;
    }
    char kind = src[t + 1];
    char sign = t + 2 < n && (src[t + 2] == '-' || src[t + 2] == '+') ? src[t + 2] : 0;
    std::string txt = src.substr(pos, t - pos);
    count_nl(pos, t);
    if (sign == '-') {
      txt = rstrip_all(txt);
    } else if (sign != '+' && kind != '{') {  // lstrip_blocks
      size_t l_pos = txt.rfind('\n');
      l_pos = l_pos == std::string::npos ? 0 : l_pos + 1;
      if ((l_pos > 0 || line_starting) && all_space(txt, l_pos)) txt.resize(l_pos);
    }
    if (!txt.empty()) out.push_back({TokenKind::kText, txt, text_line});
    int tag_line = line;
    pos = t + 2 + (sign ? 1 : 0);

    if (kind == '#') {
      size_t e = src.find("#}", pos);
      if (e == std::string::npos) fail(name, tag_line, "unterminated comment '{#'");
      bool minus = e > pos && src[e - 1] == '-';
      count_nl(pos, e);
      pos = e + 2;
      after_end(minus, true);
      continue;
    }
    out.push_back({kind == '%' ? TokenKind::kBlockBegin : TokenKind::kVarBegin, "", tag_line});
    int balance = 0;
    while (true) {
      while (pos < n &&
             (src[pos] == ' ' || src[pos] == '\t' || src[pos] == '\n' || src[pos] == '\r'))
        line += src[pos++] == '\n';
      if (pos >= n)
        fail(name, tag_line,
             kind == '%' ? "unterminated block tag '{%' (missing '%}')"
                         : "unterminated expression '{{' (missing '}}')");
      const char* close = kind == '%' ? "%}" : "}}";
      if (balance == 0) {
        bool minus = at(pos, "-") && at(pos + 1, close);
        bool plus = at(pos, "+") && at(pos + 1, close);
        if (minus || plus || at(pos, close)) {
          pos += (minus || plus ? 1 : 0) + 2;
          out.push_back({kind == '%' ? TokenKind::kBlockEnd : TokenKind::kVarEnd, "", line});
          after_end(minus, kind == '%' && !plus);
          break;
        }
      }
      char c = src[pos];
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t e = pos;
        while (e < n && (std::isalnum(static_cast<unsigned char>(src[e])) || src[e] == '_')) ++e;
        out.push_back({TokenKind::kName, src.substr(pos, e - pos), line});
        pos = e;
      } else if (std::isdigit(static_cast<unsigned char>(c))) {
        size_t e = pos;
        bool is_float = false;
        auto digits = [&] {
          while (e < n && (std::isdigit(static_cast<unsigned char>(src[e])) ||
                           (src[e] == '_' && e + 1 < n &&
                            std::isdigit(static_cast<unsigned char>(src[e + 1])))))
            ++e;
        };
        digits();
        if (e + 1 < n && src[e] == '.' && std::isdigit(static_cast<unsigned char>(src[e + 1]))) {
          is_float = true;
          ++e;
          digits();
        }
        if (e < n && (src[e] == 'e' || src[e] == 'E')) {
          size_t k = e + 1;
          if (k < n && (src[k] == '+' || src[k] == '-')) ++k;
          if (k < n && std::isdigit(static_cast<unsigned char>(src[k]))) {
            is_float = true;
            e = k;
            digits();
          }
        }
        std::string lit;
        for (size_t i = pos; i < e; ++i)
          if (src[i] != '_') lit += src[i];
        Token tok{is_float ? TokenKind::kFloat : TokenKind::kInt, lit, line};
        if (is_float) {
          tok.fval = std::strtod(lit.c_str(), nullptr);  // 1e400 → inf, as Python's literal
        } else {
          auto r = std::from_chars(lit.data(), lit.data() + lit.size(), tok.ival);
          if (r.ec != std::errc()) fail(name, line, "integer literal " + lit + " exceeds 64 bits");
        }
        out.push_back(tok);
        pos = e;
      } else if (c == '\'' || c == '"') {
        size_t e = pos + 1;
        while (e < n && src[e] != c) e += src[e] == '\\' ? 2 : 1;
        if (e >= n) fail(name, line, "unterminated string literal");
        std::string body = src.substr(pos + 1, e - pos - 1);
        try {
          out.push_back({TokenKind::kString, unescape(body), line});
        } catch (const LinelessError& err) {
          fail(name, line, err.what());
        }
        count_nl(pos, e);
        pos = e + 1;
      } else {
        const char* op = nullptr;
        for (const char* o : kOps)
          if (at(pos, o)) {
            op = o;
            break;
          }
        if (!op) fail(name, line, sf::str_cat("unexpected character '", c, "'"));
        if (std::strchr("([{", op[0]) && op[1] == 0) ++balance;
        if (std::strchr(")]}", op[0]) && op[1] == 0 && balance > 0) --balance;
        out.push_back({TokenKind::kOp, op, line});
        pos += std::strlen(op);
      }
    }
  }
  out.push_back({TokenKind::kEof, "", line});
  return out;
}

}  // namespace sf::jinja
