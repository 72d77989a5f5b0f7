// defines: sf::jinja::Value (Python-like values of the template language), Dict, CallArgs, the
// interpreter's error types (TemplateError, RaisedError, LinelessError)
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"

namespace sf::jinja {

// A runtime failure thrown by helpers that do not know the template line; the interpreter catches
// it and rethrows a TemplateError that names the line.
class LinelessError : public sf::Error {
 public:
  using sf::Error::Error;
};
// A parse or render failure; the message names the template and line.
class TemplateError : public sf::Error {
 public:
  using sf::Error::Error;
};
// raise_exception(msg) called by the template: what() is exactly msg.
class RaisedError : public sf::Error {
 public:
  using sf::Error::Error;
};

class Value;
class Dict;
struct CallArgs;
using List = std::vector<Value>;
using Func = std::function<Value(CallArgs&)>;

class Value {
 public:
  // kObject: read-only attribute bag (the loop variable); kNamespace: namespace(), assignable.
  enum class Kind {
    kUndefined,
    kNone,
    kBool,
    kInt,
    kFloat,
    kString,
    kList,
    kTuple,
    kDict,
    kNamespace,
    kObject,
    kFunc
  };

  Value() = default;  // undefined
  Value(bool b) : kind_(Kind::kBool), i_(b) {}
  Value(int i) : kind_(Kind::kInt), i_(i) {}
  Value(int64_t i) : kind_(Kind::kInt), i_(i) {}
  Value(double d) : kind_(Kind::kFloat), f_(d) {}
  Value(std::string s) : kind_(Kind::kString), s_(std::move(s)) {}
  Value(const char* s) : kind_(Kind::kString), s_(s) {}

  static Value undefined(std::string hint);  // hint: jinja2's message, e.g. "'x' is undefined"
  static Value none();
  static Value list(List items, bool tuple = false);
  static Value dict(Dict d, Kind kind = Kind::kDict);
  static Value func(std::string name, Func f);
  static Value from_json(const nlohmann::json& j);
  static Value from_json(const nlohmann::ordered_json& j);

  Kind kind() const { return kind_; }
  // Nesting of lists/dicts inside this value (0: a scalar), as of its creation; list() and dict()
  // refuse more than kMaxValueDepth (limits.h) so printing, comparing or freeing cannot overflow
  // the stack. Namespaces are mutable: their attribute assignment checks with nesting_of().
  int depth() const { return depth_; }
  // The nesting of v (walks it, up to `limit` levels); -1 when v is or contains a namespace.
  // Namespace attributes take only namespace-free values: then no mutation can make a value
  // deeper than twice kMaxValueDepth, nor a cycle.
  static int nesting_of(const Value& v, int limit);
  bool is_undefined() const { return kind_ == Kind::kUndefined; }
  bool is_none() const { return kind_ == Kind::kNone; }
  bool is_string() const { return kind_ == Kind::kString; }
  bool is_number() const {
    return kind_ == Kind::kInt || kind_ == Kind::kFloat || kind_ == Kind::kBool;
  }
  bool is_sequence() const { return kind_ == Kind::kList || kind_ == Kind::kTuple; }
  bool is_mapping() const { return kind_ == Kind::kDict; }
  bool has_attrs() const {
    return kind_ == Kind::kDict || kind_ == Kind::kNamespace || kind_ == Kind::kObject;
  }

  const std::string& str() const { return s_; }
  int64_t as_int() const { return i_; }
  double as_double() const { return kind_ == Kind::kFloat ? f_ : static_cast<double>(i_); }
  const List& items() const { return *list_; }
  Dict& dict() const { return *dict_; }
  const Func& fn() const { return *fn_; }
  const std::string& name() const { return s_; }  // function name / undefined hint

  bool truthy() const;
  std::string to_str() const;     // Python str(); undefined → ""
  std::string repr() const;       // Python repr()
  std::string type_name() const;  // jinja2's "'dict object'" wording, without quotes
  // Throws LinelessError(hint) when undefined (jinja2's Undefined failing on use).
  const Value& require_defined() const;
  // The elements iteration yields: list items, dict keys, string characters; undefined → none.
  List iterate() const;

 private:
  Kind kind_ = Kind::kUndefined;
  int depth_ = 0;
  int64_t i_ = 0;
  double f_ = 0;
  std::string s_;
  std::shared_ptr<List> list_;
  std::shared_ptr<Dict> dict_;
  std::shared_ptr<Func> fn_;
};

// Insertion-ordered mapping, as Python's dict.
class Dict {
 public:
  std::vector<std::pair<Value, Value>> entries;
  const Value* find(const Value& key) const;
  const Value* find(const std::string& key) const;
  void set(const Value& key, Value v);
};

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
  // Positional i, else keyword `name`, else `def`; marks the keyword used.
  Value get(size_t i, const std::string& name, Value def = Value()) const;
  // Fails when more than `max_pos` positional or unknown keywords were passed.
  void check(const std::string& fn, size_t max_pos, const std::vector<std::string>& kw_names) const;
};

// What a value holds, in bytes: a string's bytes; for a list, tuple or dict, sizeof(Value) per
// element plus the bytes of the strings among its elements (one level: deeper values are shared
// by no one, but are each bounded when built). What copying it costs, so a value is checked
// against kMaxStringBytes *before* an operation builds it (repetition, concatenation).
size_t value_bytes(const Value& v);
// Throws LinelessError when `bytes` is past kMaxStringBytes (src/data/jinja/limits.h), naming
// `what` ("the result of replace", ...): called while a string or list is built, so the work and
// memory of building an oversized value stop at the limit.
void check_value_bytes(size_t bytes, const char* what);

bool equals(const Value& a, const Value& b);                  // Python ==
int compare(const Value& a, const Value& b, const char* op);  // <0, 0, >0; throws on mixed types

// Python's name of the value's type ("int", "str", "dict", ...), for error messages that match
// Python's wording; other kinds get jinja2's.
std::string python_type_name(const Value& v);

}  // namespace sf::jinja
