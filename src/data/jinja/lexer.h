// defines: sf::jinja::Token, TokenKind, lex — template source → tokens, with the whitespace rules
// transformers configures (trim_blocks, lstrip_blocks, keep_trailing_newline=False) and `-`/`+`
// whitespace control applied to the text tokens.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sf::jinja {

enum class TokenKind {
  kText,
  kBlockBegin,
  kBlockEnd,
  kVarBegin,
  kVarEnd,
  kName,
  kString,
  kInt,
  kFloat,
  kOp,
  kEof
};

struct Token {
  TokenKind kind;
  std::string text;  // text, name, operator, or the decoded string literal
  int line = 1;
  int64_t ival = 0;
  double fval = 0;
};

// Throws TemplateError naming `name` and the line on an unterminated tag, comment or string.
std::vector<Token> lex(const std::string& source, const std::string& name);

}  // namespace sf::jinja
