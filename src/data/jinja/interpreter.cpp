// defines: sf::jinja::Interpreter (see interpreter.h), sf::jinja::Template
#include "data/jinja/interpreter.h"

#include "data/jinja/builtins.h"
#include "data/jinja/limits.h"
#include "data/jinja/parser.h"
#include "data/jinja/template.h"

namespace sf::jinja {

Template::Template(std::string source, std::string name)
    : source_(std::move(source)),
      name_(std::move(name)),
      body_(std::make_shared<const Body>(parse(source_, name_))) {}

std::string Template::render(const Value& context) const {
  Interpreter in(name_, context);
  return in.run(*body_);
}

Interpreter::Interpreter(std::string name, const Value& context) : name_(std::move(name)) {
  frames_.resize(2);
  for (auto& [k, v] : make_globals().entries) frames_[0][k.str()] = v;
  if (context.is_mapping())
    for (auto& [k, v] : context.dict().entries) frames_[1][k.to_str()] = v;
}

void Interpreter::fail(int line, const std::string& msg) const {
  throw TemplateError(sf::str_cat("chat template ", name_, " line ", line, ": ", msg));
}

void Interpreter::step(int line, size_t bytes) {
  steps_ += 1 + static_cast<int64_t>(bytes / 64);
  if (steps_ > kMaxRenderSteps)
    fail(line, sf::str_cat("the render took more than ", kMaxRenderSteps,
                           " steps (kMaxRenderSteps in src/data/jinja/limits.h): a runaway loop?"));
}

void Interpreter::check_size(int line, size_t n, const char* what) const {
  if (n > kMaxStringBytes)
    fail(line, sf::str_cat(what, " is larger than ", kMaxStringBytes,
                           " bytes (kMaxStringBytes in src/data/jinja/limits.h)"));
}

std::string Interpreter::run(const Body& body) {
  std::string out;
  out_ = &out;
  exec(body);
  return out;
}

std::string Interpreter::render_body(const Body& body) {
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  try {
    exec(body);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return buf;
}

Value Interpreter::lookup(const std::string& name) const {
  for (auto it = frames_.rbegin(); it != frames_.rend(); ++it) {
    auto f = it->find(name);
    if (f != it->end()) return f->second;
  }
  return Value::undefined("'" + name + "' is undefined");
}

void Interpreter::assign(const std::vector<std::string>& targets, const Value& v) {
  if (targets.size() == 1) {
    frames_.back()[targets[0]] = v;
    return;
  }
  List items = v.iterate();
  if (items.size() != targets.size())
    throw LinelessError(
        sf::str_cat("cannot unpack ", items.size(), " value(s) into ", targets.size(), " names"));
  for (size_t i = 0; i < targets.size(); ++i) frames_.back()[targets[i]] = items[i];
}

Interpreter::Flow Interpreter::exec(const Body& body) {
  for (const auto& s : body) {
    Flow f = exec_stmt(*s);
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Interpreter::Flow Interpreter::exec_stmt(const Stmt& s) {
  step(s.line);
  if (++eval_depth_ > kMaxEvalDepth) {
    --eval_depth_;
    fail(s.line, sf::str_cat("evaluation nested deeper than ", kMaxEvalDepth,
                             " levels (kMaxEvalDepth in src/data/jinja/limits.h)"));
  }
  struct Depth {
    int& d;
    ~Depth() { --d; }
  } depth_guard{eval_depth_};
  Flow flow = exec_stmt_inner(s);
  check_size(s.line, out_->size(), "the rendered text");
  return flow;
}

Interpreter::Flow Interpreter::exec_stmt_inner(const Stmt& s) {
  try {
    switch (s.kind) {
      case StmtKind::kText:
        *out_ += s.text;
        break;
      case StmtKind::kPrint:
        *out_ += eval(*s.expr).to_str();
        break;
      case StmtKind::kIf:
        return exec(eval(*s.expr).truthy() ? s.body : s.else_body);
      case StmtKind::kFor:
        exec_for(s);
        break;
      case StmtKind::kSet: {
        Value v = eval(*s.expr);
        if (s.text.empty()) {
          assign(s.targets, v);
          break;
        }
        Value ns = lookup(s.targets[0]);
        if (ns.kind() != Value::Kind::kNamespace)
          throw LinelessError("cannot assign attribute '" + s.text + "' on '" + s.targets[0] +
                              "': only namespace() objects take attribute assignment");
        if (!s.text.empty() && s.text[0] == '_')
          throw LinelessError(
              "chat templates cannot store underscore-prefixed attributes on a namespace");
        int nest = Value::nesting_of(v, kMaxValueDepth);
        if (nest < 0)
          throw LinelessError("unsupported construct: a namespace stored in namespace attribute '" +
                              s.targets[0] + "." + s.text + "'");
        if (nest + 1 > kMaxValueDepth)
          throw LinelessError(sf::str_cat("a value nested deeper than ", kMaxValueDepth,
                                          " lists/dicts (kMaxValueDepth in src/data/jinja/limits.h)"));
        ns.dict().set(Value(s.text), v);
        break;
      }
      case StmtKind::kSetBlock:
        assign(s.targets, Value(render_body(s.body)));
        break;
      case StmtKind::kMacro:
        frames_.back()[s.text] = make_macro(s, s.text);
        break;
      case StmtKind::kCallBlock: {
        Value caller = make_macro(s, "caller");
        *out_ += eval_call(*s.expr, &caller).to_str();
        break;
      }
      case StmtKind::kFilterBlock: {
        std::string body = render_body(s.body);
        frames_.emplace_back();
        frames_.back()[""] = Value(body);
        Value v;
        try {
          v = eval(*s.expr);
        } catch (...) {
          frames_.pop_back();
          throw;
        }
        frames_.pop_back();
        *out_ += v.to_str();
        break;
      }
      case StmtKind::kBreak:
        return Flow::kBreak;
      case StmtKind::kContinue:
        return Flow::kContinue;
      case StmtKind::kGeneration:
        return exec(s.body);
    }
  } catch (const LinelessError& e) {
    fail(s.line, e.what());
  }
  return Flow::kNormal;
}

void Interpreter::exec_for(const Stmt& s) {
  List all = eval(*s.expr).iterate();
  frames_.emplace_back();
  struct Pop {
    std::vector<Frame>& f;
    size_t n;
    ~Pop() { f.resize(n); }
  } pop{frames_, frames_.size() - 1};
  List items;
  if (s.cond) {
    for (const auto& it : all) {
      assign(s.targets, it);
      if (eval(*s.cond).truthy()) items.push_back(it);
    }
  } else {
    items = std::move(all);
  }
  if (items.empty()) {
    exec(s.else_body);
    return;
  }
  const auto n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    step(s.line, 7 * 64);  // an iteration (its loop object) costs as 8 steps
    frames_.back().clear();  // jinja2: a `set` in the body lasts one iteration
    assign(s.targets, items[i]);
    Dict loop;
    loop.set("index", Value(i + 1));
    loop.set("index0", Value(i));
    loop.set("revindex", Value(n - i));
    loop.set("revindex0", Value(n - i - 1));
    loop.set("first", Value(i == 0));
    loop.set("last", Value(i == n - 1));
    loop.set("length", Value(n));
    loop.set("depth", Value(1));
    loop.set("depth0", Value(0));
    loop.set("previtem", i > 0 ? items[i - 1] : Value::undefined("there is no previous item"));
    loop.set("nextitem", i + 1 < n ? items[i + 1] : Value::undefined("there is no next item"));
    loop.set("cycle", Value::func("loop.cycle", [i](CallArgs& a) -> Value {
               if (a.pos.empty()) throw LinelessError("no items for cycling given");
               return a.pos[i % a.pos.size()];
             }));
    frames_.back()["loop"] = Value::dict(std::move(loop), Value::Kind::kObject);
    Flow f = exec(s.body);
    if (f == Flow::kBreak) break;
  }
}

Value Interpreter::make_macro(const Stmt& m, const std::string& name) {
  size_t depth = frames_.size();
  return Value::func(name, [this, &m, name, depth](CallArgs& a) -> Value {
    // Python (hence jinja2) stops runaway recursion with RecursionError; so do we, before the
    // C++ stack runs out.
    if (macro_depth_ >= kMaxMacroDepth)
      throw LinelessError(sf::str_cat("maximum recursion depth exceeded in macro '", name, "'"));
    ++macro_depth_;
    struct Depth {
      int& d;
      ~Depth() { --d; }
    } depth_guard{macro_depth_};
    Frame local;
    size_t np = m.params.size();
    if (a.pos.size() > np && !m.uses_varargs)
      throw LinelessError(
          sf::str_cat("macro '", name, "' takes not more than ", np, " argument(s)"));
    List varargs(a.pos.begin() + std::min(np, a.pos.size()), a.pos.end());
    Dict kwargs;
    for (const auto& [k, v] : a.kw) {
      bool is_param = false;
      for (const auto& p : m.params) is_param |= p.first == k;
      if (is_param) continue;
      if (k == "caller" && m.uses_caller)
        local["caller"] = v;
      else if (m.uses_kwargs)
        kwargs.set(Value(k), v);
      else
        throw LinelessError("macro '" + name + "' takes no keyword argument '" + k + "'");
    }
    // Run in the scope the macro was defined in, plus its own frame.
    std::vector<Frame> hidden(frames_.begin() + std::min(depth, frames_.size()), frames_.end());
    frames_.resize(std::min(depth, frames_.size()));
    frames_.push_back(std::move(local));
    struct Restore {
      std::vector<Frame>& f;
      std::vector<Frame>& hidden;
      size_t n;
      ~Restore() {
        f.resize(n);
        for (auto& h : hidden) f.push_back(std::move(h));
      }
    } restore{frames_, hidden, frames_.size() - 1};
    for (size_t i = 0; i < np; ++i) {
      const auto& [pname, def] = m.params[i];
      Value v = a.get(i, pname, Value::undefined("parameter '" + pname + "' was not provided"));
      bool given = i < a.pos.size();
      for (const auto& kv : a.kw) given |= kv.first == pname;
      if (!given && def) v = eval(*def);
      frames_.back()[pname] = v;
    }
    frames_.back()["varargs"] = Value::list(varargs, true);
    frames_.back()["kwargs"] = Value::dict(kwargs);
    return Value(render_body(m.body));
  });
}

CallArgs Interpreter::eval_args(const Node& n, size_t first) {
  CallArgs a;
  for (size_t i = first; i < n.kids.size(); ++i) a.pos.push_back(eval(*n.kids[i]));
  for (const auto& [k, v] : n.kwargs) a.kw.emplace_back(k, eval(*v));
  return a;
}

Value Interpreter::eval_call(const Node& n, const Value* caller) {
  Value f = eval(*n.kids[0]);
  CallArgs a = eval_args(n, 1);
  if (caller) a.kw.emplace_back("caller", *caller);
  try {
    if (f.kind() != Value::Kind::kFunc) {
      f.require_defined();
      throw LinelessError("'" + f.type_name() + "' is not callable");
    }
    return f.fn()(a);
  } catch (const LinelessError& e) {
    fail(n.line, e.what());
  }
}

Value Interpreter::eval(const Node& n) {
  if (++eval_depth_ > kMaxEvalDepth) {
    --eval_depth_;
    fail(n.line, sf::str_cat("evaluation nested deeper than ", kMaxEvalDepth,
                             " levels (kMaxEvalDepth in src/data/jinja/limits.h)"));
  }
  struct Depth {
    int& d;
    ~Depth() { --d; }
  } depth_guard{eval_depth_};
  Value v;
  try {
    v = eval_inner(n);
  } catch (const LinelessError& e) {
    fail(n.line, e.what());
  }
  size_t size = v.is_string() ? v.str().size() : v.is_sequence() ? v.items().size() : 0;
  step(n.line, v.is_sequence() ? size * 64 : size);  // a list element costs as 64 bytes
  check_size(n.line, v.is_string() ? size : value_bytes(v), "a value");
  return v;
}

Value Interpreter::eval_inner(const Node& n) {
  switch (n.kind) {
    case NodeKind::kConst:
      return n.value;
    case NodeKind::kName:
      return lookup(n.name);
    case NodeKind::kList:
    case NodeKind::kTuple: {
      List l;
      for (const auto& k : n.kids) l.push_back(eval(*k));
      return Value::list(std::move(l), n.kind == NodeKind::kTuple);
    }
    case NodeKind::kDict: {
      Dict d;
      for (size_t i = 0; i + 1 < n.kids.size(); i += 2)
        d.set(eval(*n.kids[i]), eval(*n.kids[i + 1]));
      return Value::dict(std::move(d));
    }
    case NodeKind::kAttr:
      return get_attr(eval(*n.kids[0]), n.name);
    case NodeKind::kItem:
      return get_item(eval(*n.kids[0]), eval(*n.kids[1]));
    case NodeKind::kSlice: {
      auto part = [&](size_t i) { return n.kids[i] ? eval(*n.kids[i]) : Value::none(); };
      return get_slice(eval(*n.kids[0]), part(1), part(2), part(3));
    }
    case NodeKind::kCall:
      return eval_call(n, nullptr);
    case NodeKind::kFilter:
    case NodeKind::kTest: {
      bool filter = n.kind == NodeKind::kFilter;
      if (filter ? !has_filter(n.name) : !has_test(n.name))
        throw LinelessError(sf::str_cat("unknown ", filter ? "filter" : "test", " '", n.name, "'"));
      Value subject = eval(*n.kids[0]);
      CallArgs a = eval_args(n, 1);
      if (filter) return apply_filter(n.name, subject, a);
      return Value(apply_test(n.name, subject, a) != n.negated);
    }
    case NodeKind::kNeg:
      return negate(eval(*n.kids[0]));
    case NodeKind::kPos: {
      Value v = eval(*n.kids[0]);
      if (!v.is_number()) v.require_defined(), throw LinelessError("bad operand type for unary +");
      return v;
    }
    case NodeKind::kNot:
      return Value(!eval(*n.kids[0]).truthy());
    case NodeKind::kAnd: {
      Value l = eval(*n.kids[0]);
      return l.truthy() ? eval(*n.kids[1]) : l;
    }
    case NodeKind::kOr: {
      Value l = eval(*n.kids[0]);
      return l.truthy() ? l : eval(*n.kids[1]);
    }
    case NodeKind::kBinary: {
      Value l = eval(*n.kids[0]);
      Value r = eval(*n.kids[1]);
      if (n.name == "~") return Value(l.to_str() + r.to_str());
      return binary_op(n.name, l, r);
    }
    case NodeKind::kCompare: {
      Value l = eval(*n.kids[0]);
      for (size_t i = 0; i < n.ops.size(); ++i) {
        Value r = eval(*n.kids[i + 1]);
        const std::string& op = n.ops[i];
        bool ok;
        if (op == "==")
          ok = equals(l, r);
        else if (op == "!=")
          ok = !equals(l, r);
        else if (op == "in")
          ok = contains(r, l);
        else if (op == "notin")
          ok = !contains(r, l);
        else {
          int c = compare(l, r, op.c_str());
          ok = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
        }
        if (!ok) return Value(false);
        l = r;
      }
      return Value(true);
    }
    case NodeKind::kCond: {
      if (eval(*n.kids[1]).truthy()) return eval(*n.kids[0]);
      if (n.kids[2]) return eval(*n.kids[2]);
      return Value::undefined(sf::str_cat("the inline if-expression on line ", n.line,
                                          " evaluated to false and no else section was defined."));
    }
  }
  return Value();
}

}  // namespace sf::jinja
