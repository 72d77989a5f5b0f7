// defines: sf::jinja::parse (see parser.h) and the statement half of detail::Parser
#include "data/jinja/parser.h"

#include "data/jinja/builtins.h"
#include "data/jinja/parser_impl.h"

namespace sf::jinja {
namespace detail {

Body Parser::parse_body(const std::vector<std::string>& ends, std::string* ended,
                        const std::string& opener, int open_line) {
  Nest nest(*this, open_line);
  Body body;
  while (true) {
    const Token& tok = cur();
    if (tok.kind == TK::kEof) {
      if (ends.empty()) return body;
      std::string want;
      for (const auto& e : ends) want += (want.empty() ? "'" : " or '") + e + "'";
      fail(open_line,
           sf::str_cat("unterminated '", opener, "' block: reached the end of the template ",
                       "looking for ", want));
    }
    if (tok.kind == TK::kText) {
      auto s = std::make_shared<Stmt>();
      s->kind = StmtKind::kText;
      s->line = tok.line;
      s->text = tok.text;
      body.push_back(s);
      next();
    } else if (tok.kind == TK::kVarBegin) {
      int line = next().line;
      auto s = std::make_shared<Stmt>();
      s->kind = StmtKind::kPrint;
      s->line = line;
      s->expr = parse_tuple(true, false);
      expect(TK::kVarEnd, "'}}'");
      body.push_back(s);
    } else if (tok.kind == TK::kBlockBegin) {
      const Token& tag = peek(1);
      if (tag.kind != TK::kName)
        fail(tag.line, "expected a tag name after '{%', got " + describe(tag));
      for (const auto& e : ends)
        if (tag.text == e) {
          next();
          next();
          *ended = e;
          return body;
        }
      body.push_back(parse_stmt());
    } else {
      fail(tok.line, "unexpected " + describe(tok));
    }
  }
}

Body Parser::parse_template() {
  std::string ended;
  Body b = parse_body({}, &ended, "", 0);
  return b;
}

StmtPtr Parser::parse_stmt() {
  next();  // {%
  Token tag = next();
  auto s = std::make_shared<Stmt>();
  s->line = tag.line;
  const std::string& n = tag.text;
  std::string ended;
  if (n == "if") {
    parse_if(*s);
    return s;
  }
  if (n == "for") {
    s->kind = StmtKind::kFor;
    s->targets = parse_targets(false);
    if (!is_name("in"))
      fail(cur().line, "expected 'in' in the for statement, got " + describe(cur()));
    next();
    s->expr = parse_tuple(false, false);
    if (is_name("if")) {
      next();
      s->cond = parse_expr(true);
    }
    if (is_name("recursive")) fail(cur().line, "unsupported construct: recursive for loops");
    expect(TK::kBlockEnd, "'%}'");
    bool soft = soft_;
    soft_ = false;
    ++loop_depth_;
    s->body = parse_body({"endfor", "else"}, &ended, "for", s->line);
    --loop_depth_;
    if (ended == "else") {
      expect(TK::kBlockEnd, "'%}'");
      s->else_body = parse_body({"endfor"}, &ended, "for", s->line);
    }
    soft_ = soft;
    expect(TK::kBlockEnd, "'%}'");
    return s;
  }
  if (n == "set") {
    s->targets = parse_targets(true);
    if (is_op(".")) {
      if (s->targets.size() != 1) fail(cur().line, "expected '=' after the set targets");
      next();
      s->text = expect_name();
    }
    if (is_op("=")) {
      next();
      s->kind = StmtKind::kSet;
      s->expr = parse_tuple(true, false);
      expect(TK::kBlockEnd, "'%}'");
      return s;
    }
    if (s->targets.size() != 1 || !s->text.empty())
      fail(cur().line, "expected '=' in the set statement, got " + describe(cur()));
    if (is_op("|")) fail(cur().line, "unsupported construct: filtered block set");
    expect(TK::kBlockEnd, "'%}'");
    s->kind = StmtKind::kSetBlock;
    s->body = parse_body({"endset"}, &ended, "set", s->line);
    expect(TK::kBlockEnd, "'%}'");
    return s;
  }
  if (n == "macro" || n == "call") {
    bool macro = n == "macro";
    s->kind = macro ? StmtKind::kMacro : StmtKind::kCallBlock;
    if (macro) s->text = expect_name();
    if (macro || is_op("(")) s->params = parse_signature();
    if (!macro) {
      s->expr = parse_expr(true);
      if (s->expr->kind != NodeKind::kCall) fail(s->line, "expected a call after 'call'");
    }
    expect(TK::kBlockEnd, "'%}'");
    std::set<std::string> used;
    names_used_.push_back(&used);
    bool soft = soft_;
    int depth = loop_depth_;
    soft_ = false;
    loop_depth_ = 0;
    s->body = parse_body({macro ? "endmacro" : "endcall"}, &ended, n, s->line);
    soft_ = soft;
    loop_depth_ = depth;
    names_used_.pop_back();
    s->uses_varargs = used.count("varargs");
    s->uses_kwargs = used.count("kwargs");
    s->uses_caller = used.count("caller");
    expect(TK::kBlockEnd, "'%}'");
    return s;
  }
  if (n == "filter") {
    s->kind = StmtKind::kFilterBlock;
    s->expr = parse_filter(make(NodeKind::kName, s->line), true);
    expect(TK::kBlockEnd, "'%}'");
    s->body = parse_body({"endfilter"}, &ended, "filter", s->line);
    expect(TK::kBlockEnd, "'%}'");
    return s;
  }
  if (n == "break" || n == "continue") {
    if (loop_depth_ == 0) fail(s->line, "'" + n + "' outside of a for loop");
    s->kind = n == "break" ? StmtKind::kBreak : StmtKind::kContinue;
    expect(TK::kBlockEnd, "'%}'");
    return s;
  }
  if (n == "generation") {
    s->kind = StmtKind::kGeneration;
    expect(TK::kBlockEnd, "'%}'");
    s->body = parse_body({"endgeneration"}, &ended, "generation", s->line);
    expect(TK::kBlockEnd, "'%}'");
    return s;
  }
  static const std::set<std::string> unsupported = {
      "block", "extends", "include", "import", "from", "with", "autoescape", "raw", "do", "trans"};
  if (unsupported.count(n)) fail(s->line, "unsupported construct: the '" + n + "' tag");
  fail(s->line, "unknown tag '" + n + "'");
}

void Parser::parse_if(Stmt& s) {
  s.kind = StmtKind::kIf;
  bool soft = soft_;
  soft_ = true;
  s.expr = parse_tuple(false, false);
  expect(TK::kBlockEnd, "'%}'");
  std::string ended;
  s.body = parse_body({"elif", "else", "endif"}, &ended, "if", s.line);
  if (ended == "elif") {  // an if inside the else: one level deeper for the interpreter too
    Nest nest(*this, s.line);
    auto e = std::make_shared<Stmt>();
    e->line = peek(0).line;
    parse_if(*e);
    s.else_body.push_back(e);
    soft_ = soft;
    return;  // the nested if consumed endif
  }
  if (ended == "else") {
    expect(TK::kBlockEnd, "'%}'");
    s.else_body = parse_body({"endif"}, &ended, "if", s.line);
  }
  expect(TK::kBlockEnd, "'%}'");
  soft_ = soft;
}

std::vector<std::string> Parser::parse_targets(bool allow_attr) {
  std::vector<std::string> names;
  bool paren = is_op("(");
  if (paren) next();
  while (true) {
    names.push_back(expect_name());
    if (allow_attr && is_op(".")) break;
    if (!is_op(",")) break;
    next();
    if (paren && is_op(")")) break;
  }
  if (paren) expect_op(")");
  return names;
}

std::vector<std::pair<std::string, NodePtr>> Parser::parse_signature() {
  std::vector<std::pair<std::string, NodePtr>> params;
  expect_op("(");
  while (!is_op(")")) {
    if (!params.empty()) expect_op(",");
    std::string p = expect_name();
    NodePtr def;
    if (is_op("=")) {
      next();
      def = parse_expr(true);
    }
    params.emplace_back(p, def);
  }
  next();
  return params;
}

}  // namespace detail

Body parse(const std::string& source, const std::string& name) {
  detail::Parser p(lex(source, name), name);
  return p.parse_template();
}

}  // namespace sf::jinja
