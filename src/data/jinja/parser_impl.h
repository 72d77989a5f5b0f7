// defines: sf::jinja::detail::Parser — the recursive-descent parser behind parse() (parser.h);
// statements in parser.cpp, expressions in parser_expr.cpp
#pragma once

#include <set>
#include <string>
#include <vector>

#include "data/jinja/ast.h"
#include "data/jinja/lexer.h"
#include "data/jinja/limits.h"

namespace sf::jinja::detail {

using TK = TokenKind;

class Parser {
 public:
  Parser(std::vector<Token> toks, std::string name) : t_(std::move(toks)), name_(std::move(name)) {}

  Body parse_template();

 private:
  std::vector<Token> t_;
  std::string name_;
  size_t p_ = 0;
  int loop_depth_ = 0;
  int nesting_ = 0;  // open brackets, blocks, unary operators (kMaxNesting)
  bool soft_ = false;  // inside an if / inline-if: unknown filters and tests fail at runtime
  std::vector<std::set<std::string>*> names_used_;
  const Token& cur() const { return t_[p_]; }
  const Token& peek(size_t k) const { return t_[std::min(p_ + k, t_.size() - 1)]; }
  Token next() { return t_[p_ < t_.size() - 1 ? p_++ : p_]; }
  bool is_op(const char* op, size_t k = 0) const {
    return peek(k).kind == TK::kOp && peek(k).text == op;
  }
  bool is_name(const char* n, size_t k = 0) const {
    return peek(k).kind == TK::kName && peek(k).text == n;
  }

  [[noreturn]] void fail(int line, const std::string& msg) const {
    throw TemplateError(sf::str_cat("chat template ", name_, " line ", line, ": ", msg));
  }
  static std::string describe(const Token& tok) {
    switch (tok.kind) {
      case TK::kBlockEnd:
        return "'%}'";
      case TK::kVarEnd:
        return "'}}'";
      case TK::kEof:
        return "end of template";
      case TK::kText:
        return "template text";
      case TK::kBlockBegin:
        return "'{%'";
      case TK::kVarBegin:
        return "'{{'";
      default:
        return "'" + tok.text + "'";
    }
  }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(cur().line, sf::str_cat("expected '", op, "', got ", describe(cur())));
    next();
  }
  void expect(TK kind, const char* what) {
    if (cur().kind != kind)
      fail(cur().line, sf::str_cat("expected ", what, ", got ", describe(cur())));
    next();
  }
  std::string expect_name() {
    if (cur().kind != TK::kName) fail(cur().line, "expected a name, got " + describe(cur()));
    return next().text;
  }

  [[noreturn]] void too_deep(int line) const {
    fail(line, sf::str_cat("nesting deeper than ", kMaxNesting,
                           " levels (brackets, blocks, unary operators, operator or filter chains)",
                           "; the limit is kMaxNesting in src/data/jinja/limits.h"));
  }
  // Entered by every recursive descent: fails past kMaxNesting before the stack runs out.
  struct Nest {
    Parser& p;
    Nest(Parser& parser, int line) : p(parser) {
      if (++p.nesting_ > kMaxNesting) {
        --p.nesting_;
        p.too_deep(line);
      }
    }
    ~Nest() { --p.nesting_; }
  };
  // Sets n's subtree depth from its kids; fails past kMaxNesting (a chain of 10^5 filters would
  // otherwise overflow the stack when evaluated or freed).
  NodePtr sealed(NodePtr n) const {
    int d = 0;
    for (const auto& k : n->kids)
      if (k) d = std::max(d, k->depth);
    for (const auto& kv : n->kwargs)
      if (kv.second) d = std::max(d, kv.second->depth);
    n->depth = d + 1;
    if (n->depth > kMaxNesting) too_deep(n->line);
    return n;
  }

  static NodePtr make(NodeKind k, int line) {
    auto n = std::make_shared<Node>();
    n->kind = k;
    n->line = line;
    return n;
  }

  // ---- statements ----

  // Parses until a block tag named in `ends`; consumes `{% <end>` and stores the end name.
  Body parse_body(const std::vector<std::string>& ends, std::string* ended,
                  const std::string& opener, int open_line);
  StmtPtr parse_stmt();
  void parse_if(Stmt& s);
  std::vector<std::string> parse_targets(bool allow_attr);
  std::vector<std::pair<std::string, NodePtr>> parse_signature();

  // ---- expressions ----

  NodePtr parse_tuple(bool with_condexpr, bool explicit_parens);
  NodePtr parse_expr(bool with_condexpr);
  NodePtr binary(NodeKind k, NodePtr a, NodePtr b, int line, const std::string& op = "");
  NodePtr parse_or();
  NodePtr parse_and();
  NodePtr parse_not();
  NodePtr parse_compare();
  NodePtr parse_math1();
  NodePtr parse_concat();
  NodePtr parse_math2();
  NodePtr parse_pow();
  NodePtr parse_unary(bool with_filter);
  NodePtr parse_primary();
  NodePtr parse_postfix(NodePtr n);
  NodePtr parse_subscript(NodePtr obj, int line);
  void parse_call_args(Node& n);
  NodePtr parse_call(NodePtr callee);
  NodePtr parse_filter_expr(NodePtr n);
  std::string dotted_name();
  NodePtr parse_filter(NodePtr n, bool start_inline);
  NodePtr parse_test(NodePtr n);
};

}  // namespace sf::jinja::detail
