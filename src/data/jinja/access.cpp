// defines: get_attr, get_item, get_slice, binary_op, negate, contains, to_json (see builtins.h)
#include <algorithm>
#include <cmath>

#include "data/jinja/builtins.h"
#include "data/jinja/limits.h"
#include "data/jinja/text.h"

namespace sf::jinja {

namespace {
std::string no_attr(const Value& obj, const std::string& what) {
  return "'" + obj.type_name() + "' has no attribute '" + what + "'";
}
}  // namespace

Value get_attr(const Value& obj, const std::string& name) {
  obj.require_defined();
  if (obj.kind() == Value::Kind::kNamespace || obj.kind() == Value::Kind::kObject) {
    const Value* v = obj.dict().find(name);
    return v ? *v : Value::undefined(no_attr(obj, name));
  }
  Value m = get_method(obj, name);
  if (!m.is_undefined()) return m;
  if (obj.is_mapping()) {
    const Value* v = obj.dict().find(name);
    if (v) return *v;
  }
  return Value::undefined(no_attr(obj, name));
}

Value get_item(const Value& obj, const Value& key) {
  obj.require_defined();
  if (obj.has_attrs()) {
    const Value* v = obj.dict().find(key);
    if (v) return *v;
  } else if ((obj.is_sequence() || obj.is_string()) &&
             (key.kind() == Value::Kind::kInt || key.kind() == Value::Kind::kBool)) {
    int64_t i = key.as_int();
    if (obj.is_string()) {
      auto cps = text::decode(obj.str());
      int64_t n = static_cast<int64_t>(cps.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return Value(text::encode(cps[i]));
    } else {
      int64_t n = static_cast<int64_t>(obj.items().size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return obj.items()[i];
    }
    return Value::undefined(sf::str_cat("'", obj.type_name(), "' has no element ", key.as_int()));
  }
  if (key.is_string()) {
    Value m = get_attr(obj, key.str());
    if (!m.is_undefined()) return m;
    return Value::undefined(no_attr(obj, key.str()));
  }
  return Value::undefined(sf::str_cat("'", obj.type_name(), "' has no element ", key.repr()));
}

Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step) {
  obj.require_defined();
  auto as_opt = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_none()) return std::nullopt;
    if (v.kind() != Value::Kind::kInt && v.kind() != Value::Kind::kBool)
      throw LinelessError(std::string("slice ") + what + " must be an integer or none");
    return v.as_int();
  };
  auto b = as_opt(start, "start"), e = as_opt(stop, "stop"), s = as_opt(step, "step");
  int64_t st = s.value_or(1);
  if (st == 0) throw LinelessError("slice step cannot be zero");
  std::vector<char32_t> cps;
  int64_t n;
  if (obj.is_string()) {
    cps = text::decode(obj.str());
    n = static_cast<int64_t>(cps.size());
  } else if (obj.is_sequence()) {
    n = static_cast<int64_t>(obj.items().size());
  } else {
    throw LinelessError("'" + obj.type_name() + "' cannot be sliced");
  }
  auto fix = [&](std::optional<int64_t> v, int64_t def, int64_t lo, int64_t hi) {
    if (!v) return def;
    int64_t x = *v < 0 ? *v + n : *v;
    return std::clamp(x, lo, hi);
  };
  int64_t i0 = st > 0 ? fix(b, 0, 0, n) : fix(b, n - 1, -1, n - 1);
  int64_t i1 = st > 0 ? fix(e, n, 0, n) : fix(e, -1, -1, n - 1);
  std::vector<int64_t> idx;
  for (int64_t i = i0; st > 0 ? i < i1 : i > i1; i += st) idx.push_back(i);
  if (obj.is_string()) {
    std::string o;
    for (int64_t i : idx) o += text::encode(cps[i]);
    return Value(o);
  }
  List l;
  for (int64_t i : idx) l.push_back(obj.items()[i]);
  return Value::list(std::move(l), obj.kind() == Value::Kind::kTuple);
}

namespace {
[[noreturn]] void bad_operands(const std::string& op, const Value& a, const Value& b) {
  throw LinelessError(sf::str_cat("unsupported operand type(s) for ", op, ": '", python_type_name(a),
                                  "' and '", python_type_name(b), "'"));
}
template <typename Op>
int64_t checked(Op op, int64_t x, int64_t y) {
  int64_t r = 0;
  if (op(x, y, &r)) throw LinelessError("integer overflow (the interpreter's integers are 64-bit)");
  return r;
}
bool add(int64_t x, int64_t y, int64_t* r) { return __builtin_add_overflow(x, y, r); }
bool sub(int64_t x, int64_t y, int64_t* r) { return __builtin_sub_overflow(x, y, r); }
bool mul(int64_t x, int64_t y, int64_t* r) { return __builtin_mul_overflow(x, y, r); }
}  // namespace

Value binary_op(const std::string& op, const Value& a, const Value& b) {
  a.require_defined();
  b.require_defined();
  bool ints = (a.kind() == Value::Kind::kInt || a.kind() == Value::Kind::kBool) &&
              (b.kind() == Value::Kind::kInt || b.kind() == Value::Kind::kBool);
  bool nums = a.is_number() && b.is_number();
  int64_t x = a.as_int(), y = b.as_int();
  if (op == "+") {
    if (ints) return Value(checked(add, x, y));
    if (nums) return Value(a.as_double() + b.as_double());
    if (a.is_string() && b.is_string()) {
      check_value_bytes(a.str().size() + b.str().size(), "the concatenation");
      return Value(a.str() + b.str());
    }
    if (a.is_sequence() && a.kind() == b.kind()) {
      check_value_bytes(value_bytes(a) + value_bytes(b), "the concatenation");
      List l = a.items();
      l.insert(l.end(), b.items().begin(), b.items().end());
      return Value::list(std::move(l), a.kind() == Value::Kind::kTuple);
    }
    if (a.is_string())
      throw LinelessError(
          sf::str_cat("can only concatenate str (not \"", python_type_name(b), "\") to str"));
    bad_operands(op, a, b);
  }
  if (op == "-") {
    if (ints) return Value(checked(sub, x, y));
    if (nums) return Value(a.as_double() - b.as_double());
    bad_operands(op, a, b);
  }
  if (op == "*") {
    if (ints) return Value(checked(mul, x, y));
    if (nums) return Value(a.as_double() * b.as_double());
    const Value* seq = ints ? nullptr : (a.is_string() || a.is_sequence()) ? &a : &b;
    const Value* cnt = seq == &a ? &b : &a;
    if ((seq->is_string() || seq->is_sequence()) &&
        (cnt->kind() == Value::Kind::kInt || cnt->kind() == Value::Kind::kBool)) {
      int64_t times = std::max<int64_t>(0, cnt->as_int());
      // A list's unit is what copying its elements costs (their strings are copied too).
      size_t unit = seq->is_string() ? seq->str().size() : value_bytes(*seq);
      if (unit == 0 || times == 0) return seq->is_string() ? Value("") : Value::list({}, seq->kind() == Value::Kind::kTuple);
      if (static_cast<uint64_t>(times) > kMaxStringBytes / unit)
        throw LinelessError(sf::str_cat("repetition too large: ", unit, " x ", times,
                                        " exceeds the limit of ", kMaxStringBytes,
                                        " bytes (kMaxStringBytes in src/data/jinja/limits.h)"));
      if (seq->is_string()) {  // by doubling: O(log n) appends (2-byte appends took seconds)
        const size_t total = unit * size_t(times);
        std::string o;
        o.reserve(total);
        o = seq->str();
        while (o.size() * 2 <= total) o.append(o.data(), o.size());  // reserved: no realloc
        o.append(o.data(), total - o.size());
        return Value(std::move(o));
      }
      List l;
      l.reserve(seq->items().size() * size_t(times));
      for (int64_t i = 0; i < times; ++i)
        l.insert(l.end(), seq->items().begin(), seq->items().end());
      return Value::list(std::move(l), seq->kind() == Value::Kind::kTuple);
    }
    bad_operands(op, a, b);
  }
  if (op == "/" || op == "//" || op == "%") {
    if (a.is_string() && op == "%")
      throw LinelessError("unsupported construct: printf-style '%' string formatting");
    if (!nums) bad_operands(op, a, b);
    if (b.as_double() == 0)
      throw LinelessError(ints && op != "/" ? "integer division or modulo by zero"
                                            : "division by zero");
    if (op == "/") return Value(a.as_double() / b.as_double());
    if (ints) {
      if (x == INT64_MIN && y == -1) {
        if (op == "%") return Value(int64_t{0});
        throw LinelessError("integer overflow (the interpreter's integers are 64-bit)");
      }
      int64_t q = x / y, m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) --q, m += y;
      return Value(op == "//" ? q : m);
    }
    double fa = a.as_double(), fb = b.as_double();  // Python's float divmod
    double m = std::fmod(fa, fb);
    double div = (fa - m) / fb;
    if (m != 0 && ((fb < 0) != (m < 0))) m += fb, div -= 1.0;
    if (op == "%") return Value(m);
    double fl = std::floor(div);
    if (div - fl > 0.5) fl += 1.0;
    return Value(fl);
  }
  if (op == "**") {
    if (ints && y >= 0) {  // by squaring: 64 multiplications at most, any exponent
      if (x == 0 || x == 1) return Value(y == 0 ? int64_t{1} : x);
      if (x == -1) return Value(y % 2 ? int64_t{-1} : int64_t{1});
      int64_t p = 1, base = x;
      for (int64_t e = y; e > 0; e >>= 1) {  // |x| >= 2: overflows before e runs out
        if (e & 1) p = checked(mul, p, base);
        if (e > 1) base = checked(mul, base, base);
      }
      return Value(p);
    }
    if (nums) return Value(std::pow(a.as_double(), b.as_double()));
    bad_operands(op, a, b);
  }
  throw LinelessError("unknown operator " + op);
}

Value negate(const Value& v) {
  v.require_defined();
  if (v.kind() == Value::Kind::kFloat) return Value(-v.as_double());
  if (v.is_number()) {
    if (v.as_int() == INT64_MIN)
      throw LinelessError("integer overflow (the interpreter's integers are 64-bit)");
    return Value(-v.as_int());
  }
  throw LinelessError(sf::str_cat("bad operand type for unary -: '", python_type_name(v), "'"));
}

bool contains(const Value& c, const Value& item) {
  switch (c.kind()) {
    case Value::Kind::kUndefined:
      return false;
    case Value::Kind::kString:
      if (!item.is_string())
        throw LinelessError(
            sf::str_cat("'in <string>' requires string as left operand, not ", python_type_name(item)));
      return c.str().find(item.str()) != std::string::npos;
    case Value::Kind::kList:
    case Value::Kind::kTuple:
      for (const auto& e : c.items())
        if (equals(e, item)) return true;
      return false;
    case Value::Kind::kDict:
      return c.dict().find(item) != nullptr;
    default:
      throw LinelessError(sf::str_cat("argument of type '", python_type_name(c), "' is not iterable"));
  }
}

namespace {
void dump(const Value& v, const JsonOptions& o, const std::string& ind, bool pretty, int level,
          std::string& out) {
  switch (v.kind()) {
    case Value::Kind::kNone:
      out += "null";
      return;
    case Value::Kind::kBool:
      out += v.as_int() ? "true" : "false";
      return;
    case Value::Kind::kInt:
      out += std::to_string(v.as_int());
      return;
    case Value::Kind::kFloat: {
      double d = v.as_double();
      out += std::isnan(d)   ? "NaN"
             : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity")
                             : text::float_repr(d);
      return;
    }
    case Value::Kind::kString:
      out += text::json_string(v.str(), o.ensure_ascii);
      return;
    default:
      break;
  }
  std::string item_sep = o.item_sep.empty() ? (pretty ? "," : ", ") : o.item_sep;
  std::string key_sep = o.key_sep.empty() ? ": " : o.key_sep;
  auto newline = [&](int lvl) {
    check_value_bytes(out.size(), "the result of tojson");
    if (!pretty) return;
    out += "\n";
    for (int i = 0; i < lvl; ++i) out += ind;
  };
  if (v.is_sequence()) {
    if (v.items().empty()) {
      out += "[]";
      return;
    }
    out += "[";
    newline(level + 1);
    for (size_t i = 0; i < v.items().size(); ++i) {
      if (i) out += item_sep, newline(level + 1);
      dump(v.items()[i], o, ind, pretty, level + 1, out);
    }
    newline(level);
    out += "]";
    return;
  }
  if (v.kind() == Value::Kind::kDict) {
    if (v.dict().entries.empty()) {
      out += "{}";
      return;
    }
    std::vector<std::pair<std::string, const Value*>> kv;
    for (const auto& [k, val] : v.dict().entries) {
      std::string ks;
      switch (k.kind()) {
        case Value::Kind::kString:
          ks = k.str();
          break;
        case Value::Kind::kInt:
          ks = std::to_string(k.as_int());
          break;
        case Value::Kind::kFloat:
          ks = text::float_repr(k.as_double());
          break;
        case Value::Kind::kBool:
          ks = k.as_int() ? "true" : "false";
          break;
        case Value::Kind::kNone:
          ks = "null";
          break;
        default:
          throw LinelessError(
              sf::str_cat("keys must be str, int, float, bool or None, not ", python_type_name(k)));
      }
      kv.emplace_back(ks, &val);
    }
    if (o.sort_keys)
      std::stable_sort(kv.begin(), kv.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; });
    out += "{";
    newline(level + 1);
    for (size_t i = 0; i < kv.size(); ++i) {
      if (i) out += item_sep, newline(level + 1);
      out += text::json_string(kv[i].first, o.ensure_ascii) + key_sep;
      dump(*kv[i].second, o, ind, pretty, level + 1, out);
    }
    newline(level);
    out += "}";
    return;
  }
  v.require_defined();
  throw LinelessError("Object of type " + v.type_name() + " is not JSON serializable");
}
}  // namespace

std::string to_json(const Value& v, const JsonOptions& o) {
  bool pretty = !o.indent.is_none() && !o.indent.is_undefined();
  std::string ind;
  if (pretty) {
    if (o.indent.is_string())
      ind = o.indent.str();
    else if (o.indent.kind() == Value::Kind::kInt && o.indent.as_int() > 4096)
      throw LinelessError(sf::str_cat("tojson: indent ", o.indent.as_int(), " is past 4096"));
    else if (o.indent.kind() == Value::Kind::kInt)
      ind.assign(std::max<int64_t>(0, o.indent.as_int()), ' ');
    else
      throw LinelessError("tojson: indent must be an integer or a string");
  }
  std::string out;
  dump(v, o, ind, pretty, 0, out);
  return out;
}

}  // namespace sf::jinja
