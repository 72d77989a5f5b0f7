// defines: the expression half of sf::jinja::detail::Parser (jinja2's precedence: or, and, not,
// comparisons, + -, ~, * / // %, **, unary, postfix, filters and tests)
#include "data/jinja/builtins.h"
#include "data/jinja/parser_impl.h"

namespace sf::jinja::detail {

NodePtr Parser::parse_tuple(bool with_condexpr, bool explicit_parens) {
  int line = cur().line;
  std::vector<NodePtr> items;
  bool comma = false;
  while (true) {
    if (!items.empty()) {
      if (!is_op(",")) break;
      next();
      comma = true;
    }
    if (cur().kind == TK::kBlockEnd || cur().kind == TK::kVarEnd || is_op(")") ||
        (!items.empty() && is_name("in")))
      break;
    items.push_back(parse_expr(with_condexpr));
  }
  if (!comma && items.size() == 1) return items[0];
  if (items.empty() && !explicit_parens)
    fail(line, "expected an expression, got " + describe(cur()));
  auto n = make(NodeKind::kTuple, line);
  n->kids = std::move(items);
  return sealed(n);
}

NodePtr Parser::parse_expr(bool with_condexpr) {
  Nest nest(*this, cur().line);
  NodePtr e = parse_or();
  if (!with_condexpr) return e;
  while (is_name("if")) {
    int line = next().line;
    bool soft = soft_;
    soft_ = true;
    auto c = make(NodeKind::kCond, line);
    c->kids.push_back(e);
    c->kids.push_back(parse_or());
    if (is_name("else")) {
      next();
      c->kids.push_back(parse_expr(true));
    } else {
      c->kids.push_back(nullptr);
    }
    soft_ = soft;
    e = sealed(c);
  }
  return e;
}

NodePtr Parser::binary(NodeKind k, NodePtr a, NodePtr b, int line, const std::string& op) {
  auto n = make(k, line);
  n->name = op;
  n->kids = {std::move(a), std::move(b)};
  return sealed(n);
}

NodePtr Parser::parse_or() {
  NodePtr l = parse_and();
  while (is_name("or")) {
    int line = next().line;
    l = binary(NodeKind::kOr, l, parse_and(), line);
  }
  return l;
}

NodePtr Parser::parse_and() {
  NodePtr l = parse_not();
  while (is_name("and")) {
    int line = next().line;
    l = binary(NodeKind::kAnd, l, parse_not(), line);
  }
  return l;
}

NodePtr Parser::parse_not() {
  if (is_name("not")) {
    Nest nest(*this, cur().line);
    auto n = make(NodeKind::kNot, next().line);
    n->kids.push_back(parse_not());
    return sealed(n);
  }
  return parse_compare();
}

NodePtr Parser::parse_compare() {
  int line = cur().line;
  NodePtr first = parse_math1();
  auto n = make(NodeKind::kCompare, line);
  n->kids.push_back(first);
  while (true) {
    std::string op;
    if (cur().kind == TK::kOp && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                  cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
      op = next().text;
    } else if (is_name("in")) {
      next();
      op = "in";
    } else if (is_name("not") && is_name("in", 1)) {
      next();
      next();
      op = "notin";
    } else {
      break;
    }
    n->ops.push_back(op);
    n->kids.push_back(parse_math1());
  }
  return n->ops.empty() ? first : sealed(n);
}

NodePtr Parser::parse_math1() {
  NodePtr l = parse_concat();
  while (is_op("+") || is_op("-")) {
    Token op = next();
    l = binary(NodeKind::kBinary, l, parse_concat(), op.line, op.text);
  }
  return l;
}

NodePtr Parser::parse_concat() {
  NodePtr l = parse_math2();
  while (is_op("~")) {
    int line = next().line;
    l = binary(NodeKind::kBinary, l, parse_math2(), line, "~");
  }
  return l;
}

NodePtr Parser::parse_math2() {
  NodePtr l = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    Token op = next();
    l = binary(NodeKind::kBinary, l, parse_pow(), op.line, op.text);
  }
  return l;
}

NodePtr Parser::parse_pow() {
  NodePtr l = parse_unary(true);
  while (is_op("**")) {
    int line = next().line;
    l = binary(NodeKind::kBinary, l, parse_unary(true), line, "**");
  }
  return l;
}

NodePtr Parser::parse_unary(bool with_filter) {
  NodePtr n;
  if (is_op("-") || is_op("+")) {
    Nest nest(*this, cur().line);
    Token op = next();
    n = make(op.text == "-" ? NodeKind::kNeg : NodeKind::kPos, op.line);
    n->kids.push_back(parse_unary(false));
    sealed(n);
  } else {
    n = parse_primary();
  }
  n = parse_postfix(n);
  if (with_filter) n = parse_filter_expr(n);
  return n;
}

NodePtr Parser::parse_primary() {
  Token tok = next();
  auto n = make(NodeKind::kConst, tok.line);
  switch (tok.kind) {
    case TK::kName:
      if (tok.text == "true" || tok.text == "True")
        n->value = Value(true);
      else if (tok.text == "false" || tok.text == "False")
        n->value = Value(false);
      else if (tok.text == "none" || tok.text == "None")
        n->value = Value::none();
      else {
        n->kind = NodeKind::kName;
        n->name = tok.text;
        if (!names_used_.empty()) names_used_.back()->insert(tok.text);
      }
      return n;
    case TK::kString: {
      std::string s = tok.text;
      while (cur().kind == TK::kString) s += next().text;
      n->value = Value(s);
      return n;
    }
    case TK::kInt:
      n->value = Value(tok.ival);
      return n;
    case TK::kFloat:
      n->value = Value(tok.fval);
      return n;
    case TK::kOp:
      if (tok.text == "(") {
        NodePtr e = parse_tuple(true, true);
        expect_op(")");
        return e;
      }
      if (tok.text == "[" || tok.text == "{") {
        bool list = tok.text == "[";
        n->kind = list ? NodeKind::kList : NodeKind::kDict;
        const char* close = list ? "]" : "}";
        while (!is_op(close)) {
          if (!n->kids.empty()) {
            expect_op(",");
            if (is_op(close)) break;
          }
          n->kids.push_back(parse_expr(true));
          if (!list) {
            expect_op(":");
            n->kids.push_back(parse_expr(true));
          }
        }
        next();
        return sealed(n);
      }
      break;
    default:
      break;
  }
  fail(tok.line, "unexpected " + describe(tok) + " in an expression");
}

NodePtr Parser::parse_postfix(NodePtr n) {
  while (true) {
    if (is_op(".")) {
      int line = next().line;
      Token a = next();
      if (a.kind == TK::kName) {
        auto x = make(NodeKind::kAttr, line);
        x->name = a.text;
        x->kids.push_back(n);
        n = sealed(x);
      } else if (a.kind == TK::kInt) {
        auto k = make(NodeKind::kConst, line);
        k->value = Value(a.ival);
        n = binary(NodeKind::kItem, n, k, line);
      } else {
        fail(a.line, "expected an attribute name after '.', got " + describe(a));
      }
    } else if (is_op("[")) {
      int line = next().line;
      n = parse_subscript(n, line);
    } else if (is_op("(")) {
      n = parse_call(n);
    } else {
      return n;
    }
  }
}

NodePtr Parser::parse_subscript(NodePtr obj, int line) {
  NodePtr start, stop, step;
  bool slice = false;
  if (!is_op(":")) start = parse_expr(true);
  if (is_op(":")) {
    slice = true;
    next();
    if (!is_op("]") && !is_op(":")) stop = parse_expr(true);
    if (is_op(":")) {
      next();
      if (!is_op("]")) step = parse_expr(true);
    }
  }
  if (is_op(",")) fail(cur().line, "unsupported construct: tuple subscripts");
  expect_op("]");
  if (!slice) return binary(NodeKind::kItem, obj, start, line);
  auto n = make(NodeKind::kSlice, line);
  n->kids = {obj, start, stop, step};
  return sealed(n);
}

void Parser::parse_call_args(Node& n) {
  expect_op("(");
  bool first = true;
  while (!is_op(")")) {
    if (!first) {
      expect_op(",");
      if (is_op(")")) break;
    }
    first = false;
    if (is_op("*") || is_op("**"))
      fail(cur().line, "unsupported construct: *args / **kwargs in a call");
    if (cur().kind == TK::kName && is_op("=", 1)) {
      std::string k = next().text;
      next();
      n.kwargs.emplace_back(k, parse_expr(true));
    } else {
      if (!n.kwargs.empty()) fail(cur().line, "positional argument follows keyword argument");
      n.kids.push_back(parse_expr(true));
    }
  }
  next();
}

NodePtr Parser::parse_call(NodePtr callee) {
  auto n = make(NodeKind::kCall, cur().line);
  n->kids.push_back(callee);
  parse_call_args(*n);
  return sealed(n);
}

NodePtr Parser::parse_filter_expr(NodePtr n) {
  while (true) {
    if (is_op("|"))
      n = parse_filter(n, false);
    else if (is_name("is"))
      n = parse_test(n);
    else if (is_op("("))
      n = parse_call(n);
    else
      return n;
  }
}

std::string Parser::dotted_name() {
  std::string name = expect_name();
  while (is_op(".") && peek(1).kind == TK::kName) {
    next();
    name += "." + next().text;
  }
  return name;
}

NodePtr Parser::parse_filter(NodePtr n, bool start_inline) {
  while (is_op("|") || start_inline) {
    if (!start_inline) next();
    start_inline = false;
    auto f = make(NodeKind::kFilter, cur().line);
    f->name = dotted_name();
    if (!has_filter(f->name) && !soft_) fail(f->line, "unknown filter '" + f->name + "'");
    f->kids.push_back(n);
    if (is_op("(")) parse_call_args(*f);
    n = sealed(f);
  }
  return n;
}

NodePtr Parser::parse_test(NodePtr n) {
  auto t = make(NodeKind::kTest, next().line);
  if (is_name("not")) {
    next();
    t->negated = true;
  }
  t->name = dotted_name();
  if (!has_test(t->name) && !soft_) fail(t->line, "unknown test '" + t->name + "'");
  t->kids.push_back(n);
  const Token& c = cur();
  if (is_op("(")) {
    parse_call_args(*t);
  } else if ((c.kind == TK::kName || c.kind == TK::kString || c.kind == TK::kInt ||
              c.kind == TK::kFloat || is_op("[") || is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) fail(c.line, "you cannot chain multiple tests with 'is'");
    t->kids.push_back(parse_postfix(parse_primary()));
  }
  return sealed(t);
}

}  // namespace sf::jinja::detail
