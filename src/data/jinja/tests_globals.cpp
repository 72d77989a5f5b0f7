// defines: has_test, apply_test (jinja2's builtin tests), make_globals (range, dict, namespace,
// and transformers' raise_exception and strftime_now) — see builtins.h
#include <ctime>
#include <functional>
#include <unordered_map>

#include "data/jinja/builtins.h"
#include "data/jinja/text.h"

namespace sf::jinja {

namespace {

using K = Value::Kind;
using TestFn = std::function<bool(const Value&, CallArgs&)>;

Value arg0(CallArgs& a, const char* test) {
  if (a.pos.empty()) throw LinelessError(std::string("test '") + test + "' needs an argument");
  return a.pos[0];
}

const std::unordered_map<std::string, TestFn>& tests() {
  static const std::unordered_map<std::string, TestFn> t = [] {
    std::unordered_map<std::string, TestFn> m;
    m["defined"] = [](const Value& v, CallArgs&) { return !v.is_undefined(); };
    m["undefined"] = [](const Value& v, CallArgs&) { return v.is_undefined(); };
    m["none"] = [](const Value& v, CallArgs&) { return v.is_none(); };
    m["boolean"] = [](const Value& v, CallArgs&) { return v.kind() == K::kBool; };
    m["true"] = [](const Value& v, CallArgs&) { return v.kind() == K::kBool && v.as_int(); };
    m["false"] = [](const Value& v, CallArgs&) { return v.kind() == K::kBool && !v.as_int(); };
    m["integer"] = [](const Value& v, CallArgs&) { return v.kind() == K::kInt; };
    m["float"] = [](const Value& v, CallArgs&) { return v.kind() == K::kFloat; };
    m["number"] = [](const Value& v, CallArgs&) { return v.is_number(); };
    m["string"] = [](const Value& v, CallArgs&) { return v.is_string(); };
    m["mapping"] = [](const Value& v, CallArgs&) { return v.is_mapping(); };
    m["iterable"] = [](const Value& v, CallArgs&) {
      return v.is_undefined() || v.is_string() || v.is_sequence() || v.is_mapping();
    };
    m["sequence"] = m["iterable"];
    m["callable"] = [](const Value& v, CallArgs&) { return v.kind() == K::kFunc; };
    m["odd"] = [](const Value& v, CallArgs&) {
      v.require_defined();
      return v.kind() == K::kInt && (v.as_int() % 2 != 0);
    };
    m["even"] = [](const Value& v, CallArgs&) {
      v.require_defined();
      return v.kind() == K::kInt && v.as_int() % 2 == 0;
    };
    m["divisibleby"] = [](const Value& v, CallArgs& a) {
      Value n = arg0(a, "divisibleby");
      return binary_op("%", v, n).as_double() == 0;
    };
    m["eq"] = [](const Value& v, CallArgs& a) { return equals(v, arg0(a, "eq")); };
    m["equalto"] = m["=="] = m["eq"];
    m["ne"] = [](const Value& v, CallArgs& a) { return !equals(v, arg0(a, "ne")); };
    m["!="] = m["ne"];
    m["lt"] = [](const Value& v, CallArgs& a) { return compare(v, arg0(a, "lt"), "<") < 0; };
    m["lessthan"] = m["<"] = m["lt"];
    m["le"] = [](const Value& v, CallArgs& a) { return compare(v, arg0(a, "le"), "<=") <= 0; };
    m["<="] = m["le"];
    m["gt"] = [](const Value& v, CallArgs& a) { return compare(v, arg0(a, "gt"), ">") > 0; };
    m["greaterthan"] = m[">"] = m["gt"];
    m["ge"] = [](const Value& v, CallArgs& a) { return compare(v, arg0(a, "ge"), ">=") >= 0; };
    m[">="] = m["ge"];
    m["in"] = [](const Value& v, CallArgs& a) { return contains(arg0(a, "in"), v); };
    m["sameas"] = [](const Value& v, CallArgs& a) {
      Value o = arg0(a, "sameas");
      if (v.kind() != o.kind()) return false;
      if (v.is_none() || v.is_undefined()) return true;
      if (v.kind() == K::kBool) return v.as_int() == o.as_int();
      if (v.kind() == K::kInt)
        return v.as_int() == o.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
      if (v.is_sequence()) return &v.items() == &o.items();
      if (v.has_attrs()) return &v.dict() == &o.dict();
      throw LinelessError("unsupported construct: 'sameas' on " + v.type_name());
    };
    m["lower"] = [](const Value& v, CallArgs&) { return text::is_lower(v.to_str()); };
    m["upper"] = [](const Value& v, CallArgs&) { return text::is_upper(v.to_str()); };
    m["escaped"] = [](const Value&, CallArgs&) { return false; };
    m["filter"] = [](const Value& v, CallArgs&) { return v.is_string() && has_filter(v.str()); };
    m["test"] = [](const Value& v, CallArgs&) { return v.is_string() && has_test(v.str()); };
    return m;
  }();
  return t;
}

}  // namespace

bool has_test(const std::string& name) { return tests().count(name) != 0; }

bool apply_test(const std::string& name, const Value& subject, CallArgs& args) {
  auto it = tests().find(name);
  if (it == tests().end()) throw LinelessError("unknown test '" + name + "'");
  return it->second(subject, args);
}

Dict make_globals() {
  Dict g;
  g.set(Value("range"), Value::func("range", [](CallArgs& a) -> Value {
          a.check("range", 3, {});
          for (const auto& v : a.pos)
            if (v.kind() != K::kInt && v.kind() != K::kBool)
              throw LinelessError("range() arguments must be integers, got " + v.type_name());
          if (a.pos.empty()) throw LinelessError("range expected at least 1 argument, got 0");
          int64_t start = a.pos.size() > 1 ? a.pos[0].as_int() : 0;
          int64_t stop = a.pos.size() > 1 ? a.pos[1].as_int() : a.pos[0].as_int();
          int64_t step = a.pos.size() > 2 ? a.pos[2].as_int() : 1;
          if (step == 0) throw LinelessError("range() arg 3 must not be zero");
          List l;
          for (int64_t i = start; step > 0 ? i < stop : i > stop;) {
            if (l.size() >= 100000)
              throw LinelessError("range too big: the sandbox allows at most 100000 items");
            l.emplace_back(i);
            if (__builtin_add_overflow(i, step, &i)) break;  // past INT64_MAX/MIN: past stop
          }
          return Value::list(std::move(l));
        }));
  auto make_dict = [](CallArgs& a, const char* fn) {
    Dict d;
    if (a.pos.size() > 1)
      throw LinelessError(std::string(fn) + "() takes at most 1 positional argument");
    if (!a.pos.empty()) {
      const Value& src = a.pos[0];
      if (src.has_attrs()) {
        d = src.dict();
      } else {
        for (const auto& pair : src.iterate()) {
          List kv = pair.iterate();
          if (kv.size() != 2)
            throw LinelessError(std::string(fn) + "(): sequence elements must be pairs");
          d.set(kv[0], kv[1]);
        }
      }
    }
    for (const auto& [k, v] : a.kw) d.set(Value(k), v);
    return d;
  };
  g.set(Value("dict"), Value::func("dict", [make_dict](CallArgs& a) {
          return Value::dict(make_dict(a, "dict"));
        }));
  g.set(Value("namespace"), Value::func("namespace", [make_dict](CallArgs& a) {
          Dict d = make_dict(a, "namespace");
          for (const auto& [k, v] : d.entries)
            if (k.is_string() && !k.str().empty() && k.str()[0] == '_')
              throw LinelessError(
                  "chat templates cannot store underscore-prefixed attributes on a namespace, but "
                  "got '" +
                  k.str() + "'");
          return Value::dict(std::move(d), K::kNamespace);
        }));
  g.set(Value("raise_exception"), Value::func("raise_exception", [](CallArgs& a) -> Value {
          throw RaisedError(a.get(0, "message").to_str());
        }));
  g.set(Value("strftime_now"), Value::func("strftime_now", [](CallArgs& a) -> Value {
          std::string fmt = a.get(0, "format").to_str();
          std::time_t now = std::time(nullptr);
          std::tm tm{};
          localtime_r(&now, &tm);
          char buf[512];
          size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
          if (n == 0 && !fmt.empty())
            throw LinelessError("strftime_now: format produced no output or is too long");
          return Value(std::string(buf, n));
        }));
  return g;
}

}  // namespace sf::jinja
