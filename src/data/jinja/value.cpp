// defines: sf::jinja::Value, Dict, CallArgs, equals, compare (see value.h)
#include "data/jinja/value.h"

#include "data/jinja/limits.h"
#include "data/jinja/text.h"

namespace sf::jinja {

Value Value::undefined(std::string hint) {
  Value v;
  v.s_ = std::move(hint);
  return v;
}
Value Value::none() {
  Value v;
  v.kind_ = Kind::kNone;
  return v;
}
namespace {
int checked_depth(int d) {
  if (d > kMaxValueDepth)
    throw LinelessError(sf::str_cat("a value nested deeper than ", kMaxValueDepth,
                                    " lists/dicts (kMaxValueDepth in src/data/jinja/limits.h)"));
  return d;
}
}  // namespace

Value Value::list(List items, bool tuple) {
  Value v;
  v.kind_ = tuple ? Kind::kTuple : Kind::kList;
  int d = 0;
  for (const auto& e : items) d = std::max(d, e.depth_);
  v.depth_ = checked_depth(d + 1);
  v.list_ = std::make_shared<List>(std::move(items));
  return v;
}
Value Value::dict(Dict d, Kind kind) {
  Value v;
  v.kind_ = kind;
  int depth = 0;
  for (const auto& [k, e] : d.entries) depth = std::max({depth, k.depth_, e.depth_});
  v.depth_ = checked_depth(depth + 1);
  v.dict_ = std::make_shared<Dict>(std::move(d));
  return v;
}

int Value::nesting_of(const Value& v, int limit) {
  if (v.kind_ == Kind::kNamespace) return -1;
  if (limit < 0) return 0;
  int d = 0;
  if (v.list_) {
    for (const auto& e : *v.list_) {
      int k = nesting_of(e, limit - 1);
      if (k < 0) return -1;
      d = std::max(d, k);
    }
    return d + 1;
  }
  if (v.dict_ && v.kind_ != Kind::kFunc) {
    for (const auto& [k, e] : v.dict_->entries) {
      int n = nesting_of(e, limit - 1);
      if (n < 0) return -1;
      d = std::max(d, n);
    }
    return d + 1;
  }
  return 0;
}

Value Value::func(std::string name, Func f) {
  Value v;
  v.kind_ = Kind::kFunc;
  v.s_ = std::move(name);
  v.fn_ = std::make_shared<Func>(std::move(f));
  return v;
}

namespace {
template <typename J>
Value from_json_impl(const J& j, int depth = 0) {
  // The readers refuse deep JSON before nlohmann parses it (data/json_limits.h); this stops a
  // json built in memory before the recursion below runs out of stack.
  if (depth > kMaxValueDepth) checked_depth(depth);
  switch (j.type()) {
    case J::value_t::null:
      return Value::none();
    case J::value_t::boolean:
      return Value(j.template get<bool>());
    case J::value_t::number_integer:
      return Value(j.template get<int64_t>());
    case J::value_t::number_unsigned: {
      auto u = j.template get<uint64_t>();
      SF_CHECK(u <= static_cast<uint64_t>(INT64_MAX), "chat template input: integer ", u,
               " exceeds the interpreter's 64-bit integers");
      return Value(static_cast<int64_t>(u));
    }
    case J::value_t::number_float:
      return Value(j.template get<double>());
    case J::value_t::string:
      return Value(j.template get<std::string>());
    case J::value_t::array: {
      List l;
      for (const auto& e : j) l.push_back(from_json_impl(e, depth + 1));
      return Value::list(std::move(l));
    }
    case J::value_t::object: {
      Dict d;
      for (auto it = j.begin(); it != j.end(); ++it)
        d.entries.emplace_back(Value(it.key()), from_json_impl(it.value(), depth + 1));
      return Value::dict(std::move(d));
    }
    default:
      SF_FAIL("chat template input: unsupported JSON value (binary or discarded)");
  }
}
}  // namespace

Value Value::from_json(const nlohmann::json& j) { return from_json_impl(j); }
Value Value::from_json(const nlohmann::ordered_json& j) { return from_json_impl(j); }

bool Value::truthy() const {
  switch (kind_) {
    case Kind::kUndefined:
    case Kind::kNone:
      return false;
    case Kind::kBool:
    case Kind::kInt:
      return i_ != 0;
    case Kind::kFloat:
      return f_ != 0;
    case Kind::kString:
      return !s_.empty();
    case Kind::kList:
    case Kind::kTuple:
      return !list_->empty();
    case Kind::kDict:
      return !dict_->entries.empty();
    default:
      return true;
  }
}

std::string Value::to_str() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "";
    case Kind::kString:
      return s_;
    default:
      return repr();
  }
}

std::string Value::repr() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return i_ ? "True" : "False";
    case Kind::kInt:
      return std::to_string(i_);
    case Kind::kFloat:
      return text::float_repr(f_);
    case Kind::kString:
      return text::string_repr(s_);
    case Kind::kList:
    case Kind::kTuple: {
      bool t = kind_ == Kind::kTuple;
      std::string o = t ? "(" : "[";
      for (size_t i = 0; i < list_->size(); ++i) o += (i ? ", " : "") + (*list_)[i].repr();
      if (t && list_->size() == 1) o += ",";
      return o + (t ? ")" : "]");
    }
    case Kind::kDict:
    case Kind::kNamespace:
    case Kind::kObject: {
      std::string o = "{";
      bool first = true;
      for (const auto& [k, v] : dict_->entries) {
        o += (first ? "" : ", ") + k.repr() + ": " + v.repr();
        first = false;
      }
      o += "}";
      if (kind_ == Kind::kNamespace) return "<Namespace " + o + ">";
      if (kind_ == Kind::kObject) return "<LoopContext>";
      return o;
    }
    case Kind::kFunc:
      return "<function " + s_ + ">";
  }
  return "";
}

std::string Value::type_name() const {
  switch (kind_) {
    case Kind::kUndefined:
      return "Undefined";
    case Kind::kNone:
      return "None";
    case Kind::kBool:
      return "bool object";
    case Kind::kInt:
      return "int object";
    case Kind::kFloat:
      return "float object";
    case Kind::kString:
      return "str object";
    case Kind::kList:
      return "list object";
    case Kind::kTuple:
      return "tuple object";
    case Kind::kDict:
      return "dict object";
    case Kind::kNamespace:
      return "Namespace object";
    case Kind::kObject:
      return "LoopContext object";
    case Kind::kFunc:
      return "function object";
  }
  return "";
}

const Value& Value::require_defined() const {
  if (kind_ == Kind::kUndefined) throw LinelessError(s_.empty() ? "value is undefined" : s_);
  return *this;
}

size_t value_bytes(const Value& v) {
  auto shallow = [](const Value& e) {
    return sizeof(Value) + (e.is_string() ? e.str().size() : 0);
  };
  if (v.is_string()) return v.str().size();
  size_t n = 0;
  if (v.is_sequence())
    for (const Value& e : v.items()) n += shallow(e);
  else if (v.kind() == Value::Kind::kDict)
    for (const auto& [k, e] : v.dict().entries) n += shallow(k) + shallow(e);
  return n;
}

void check_value_bytes(size_t bytes, const char* what) {
  if (bytes > kMaxStringBytes)
    throw LinelessError(sf::str_cat(what, " would be larger than ", kMaxStringBytes,
                                    " bytes (kMaxStringBytes in src/data/jinja/limits.h)"));
}

List Value::iterate() const {
  switch (kind_) {
    case Kind::kUndefined:
      return {};
    case Kind::kList:
    case Kind::kTuple:
      return *list_;
    case Kind::kDict: {
      List keys;
      for (const auto& e : dict_->entries) keys.push_back(e.first);
      return keys;
    }
    case Kind::kString: {
      List chars;
      // Checked before decoding (code points counted without allocating), and after.
      check_value_bytes(text::length(s_) * (sizeof(Value) + 4),
                        "the characters of a string, as a list");
      const std::vector<char32_t> cps = text::decode(s_);
      check_value_bytes(cps.size() * (sizeof(Value) + 4), "the characters of a string, as a list");
      chars.reserve(cps.size());
      for (char32_t c : cps) chars.emplace_back(text::encode(c));
      return chars;
    }
    default:
      throw LinelessError("'" + type_name() + "' is not iterable");
  }
}

const Value* Dict::find(const Value& key) const {
  for (const auto& e : entries)
    if (equals(e.first, key)) return &e.second;
  return nullptr;
}
const Value* Dict::find(const std::string& key) const {
  for (const auto& e : entries)
    if (e.first.is_string() && e.first.str() == key) return &e.second;
  return nullptr;
}
void Dict::set(const Value& key, Value v) {
  for (auto& e : entries)
    if (equals(e.first, key)) {
      e.second = std::move(v);
      return;
    }
  entries.emplace_back(key, std::move(v));
}

Value CallArgs::get(size_t i, const std::string& name, Value def) const {
  if (i < pos.size()) return pos[i];
  for (const auto& [k, v] : kw)
    if (k == name) return v;
  return def;
}

void CallArgs::check(const std::string& fn, size_t max_pos,
                     const std::vector<std::string>& kw_names) const {
  if (pos.size() > max_pos)
    throw LinelessError(sf::str_cat(fn, "() takes at most ", max_pos, " positional argument(s), ",
                                    pos.size(), " given"));
  for (const auto& [k, v] : kw) {
    bool ok = false;
    for (const auto& n : kw_names) ok |= n == k;
    if (!ok) throw LinelessError(fn + "() got an unexpected keyword argument '" + k + "'");
  }
}

bool equals(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) {
    if (a.kind() == K::kFloat || b.kind() == K::kFloat) return a.as_double() == b.as_double();
    return a.as_int() == b.as_int();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::kUndefined:
    case K::kNone:
      return true;
    case K::kString:
      return a.str() == b.str();
    case K::kList:
    case K::kTuple: {
      if (a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i)
        if (!equals(a.items()[i], b.items()[i])) return false;
      return true;
    }
    case K::kDict: {
      if (a.dict().entries.size() != b.dict().entries.size()) return false;
      for (const auto& [k, v] : a.dict().entries) {
        const Value* o = b.dict().find(k);
        if (!o || !equals(v, *o)) return false;
      }
      return true;
    }
    default:
      return &a.dict() == &b.dict();  // identity for namespaces, objects
  }
}

std::string python_type_name(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::kNone:
      return "NoneType";
    case Value::Kind::kBool:
      return "bool";
    case Value::Kind::kInt:
      return "int";
    case Value::Kind::kFloat:
      return "float";
    case Value::Kind::kString:
      return "str";
    case Value::Kind::kList:
      return "list";
    case Value::Kind::kTuple:
      return "tuple";
    case Value::Kind::kDict:
      return "dict";
    default:
      return v.type_name();
  }
}

int compare(const Value& a, const Value& b, const char* op) {
  a.require_defined();
  b.require_defined();
  if (a.is_number() && b.is_number()) {
    if (a.kind() == Value::Kind::kFloat || b.kind() == Value::Kind::kFloat)
      return a.as_double() < b.as_double() ? -1 : a.as_double() > b.as_double() ? 1 : 0;
    return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
  }
  if (a.is_string() && b.is_string())
    return a.str().compare(b.str()) < 0 ? -1 : a.str() == b.str() ? 0 : 1;
  if (a.kind() == b.kind() && a.is_sequence()) {
    const auto &x = a.items(), &y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i)
      if (!equals(x[i], y[i])) return compare(x[i], y[i], op);
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  throw LinelessError(sf::str_cat("'", op, "' not supported between instances of '", python_type_name(a),
                                  "' and '", python_type_name(b), "'"));
}

}  // namespace sf::jinja
