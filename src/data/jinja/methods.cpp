// defines: get_method — the Python methods of str, dict and list that templates call, bound to
// their receiver (see builtins.h). Methods that mutate are refused, as jinja2's
// ImmutableSandboxedEnvironment refuses them.
#include <cctype>
#include <optional>

#include "data/jinja/builtins.h"
#include "data/jinja/text.h"

namespace sf::jinja {

namespace {

std::optional<std::string> opt_str(const Value& v, const std::string& what) {
  if (v.is_undefined() || v.is_none()) return std::nullopt;
  if (!v.is_string()) throw LinelessError(what + " arg must be None or str");
  return v.str();
}

int64_t opt_int(const Value& v, int64_t def) {
  if (v.is_undefined() || v.is_none()) return def;
  if (v.kind() != Value::Kind::kInt && v.kind() != Value::Kind::kBool)
    throw LinelessError("an integer argument is required, got " + v.type_name());
  return v.as_int();
}

// startswith/endswith take a string or a tuple of strings.
bool affix(const std::string& s, const Value& arg, bool start) {
  auto one = [&](const Value& p) {
    if (!p.is_string())
      throw LinelessError("startswith/endswith first arg must be str or a tuple of str");
    const std::string& x = p.str();
    if (x.size() > s.size()) return false;
    return start ? s.compare(0, x.size(), x) == 0
                 : s.compare(s.size() - x.size(), x.size(), x) == 0;
  };
  if (arg.kind() == Value::Kind::kTuple) {
    for (const auto& p : arg.items())
      if (one(p)) return true;
    return false;
  }
  return one(arg);
}

Value str_method(const std::string& s, const std::string& name, CallArgs& a) {
  auto n = [&](size_t max_pos, std::vector<std::string> kws = {}) {
    a.check("str." + name, max_pos, kws);
  };
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    n(1);
    return Value(text::strip(s, opt_str(a.get(0, ""), name), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    n(2, {"sep", "maxsplit"});
    int64_t maxsplit = opt_int(a.get(1, "maxsplit"), -1);
    if (name == "rsplit" && maxsplit >= 0)
      throw LinelessError("unsupported construct: str.rsplit with maxsplit");
    List l;
    for (auto& part : text::split(s, opt_str(a.get(0, "sep"), "sep"), maxsplit))
      l.emplace_back(part);
    return Value::list(std::move(l));
  }
  if (name == "startswith" || name == "endswith") {
    n(1);
    Value p = a.get(0, "");
    if (p.is_undefined()) throw LinelessError(name + "() takes at least 1 argument (0 given)");
    return Value(affix(s, p, name == "startswith"));
  }
  if (name == "upper") return n(0), Value(text::upper(s));
  if (name == "lower") return n(0), Value(text::lower(s));
  if (name == "title") return n(0), Value(text::title(s));
  if (name == "capitalize") return n(0), Value(text::capitalize(s));
  if (name == "isupper") return n(0), Value(text::is_upper(s));
  if (name == "islower") return n(0), Value(text::is_lower(s));
  if (name == "replace") {
    n(3, {"count"});
    Value o = a.get(0, ""), r = a.get(1, "");
    if (!o.is_string() || !r.is_string()) throw LinelessError("replace() arguments must be str");
    return Value(text::replace(s, o.str(), r.str(), opt_int(a.get(2, "count"), -1)));
  }
  if (name == "find" || name == "count") {
    n(1);
    Value sub = a.get(0, "");
    if (!sub.is_string()) throw LinelessError(name + "() argument must be str");
    if (name == "find") {
      size_t f = s.find(sub.str());
      return Value(f == std::string::npos ? int64_t{-1}
                                          : static_cast<int64_t>(text::length(s.substr(0, f))));
    }
    if (sub.str().empty()) return Value(static_cast<int64_t>(text::length(s) + 1));
    int64_t c = 0;
    for (size_t p = s.find(sub.str()); p != std::string::npos;
         p = s.find(sub.str(), p + sub.str().size()))
      ++c;
    return Value(c);
  }
  if (name == "join") {
    n(1);
    std::string o;
    bool first = true;
    for (const auto& e : a.get(0, "").iterate()) {
      if (!e.is_string())
        throw LinelessError("sequence item: expected str instance, " + e.type_name() + " found");
      o += (first ? "" : s) + e.str();
      first = false;
      check_value_bytes(o.size(), "the result of join");
    }
    return Value(o);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    n(1);
    Value x = a.get(0, "");
    if (!x.is_string()) throw LinelessError(name + "() argument must be str");
    bool pre = name == "removeprefix";
    if (!affix(s, x, pre)) return Value(s);
    return Value(pre ? s.substr(x.str().size()) : s.substr(0, s.size() - x.str().size()));
  }
  if (name == "isdigit" || name == "isspace" || name == "isalpha" || name == "isalnum") {
    n(0);
    auto cps = text::decode(s);
    if (cps.empty()) return Value(false);
    for (char32_t c : cps) {
      if (c >= 0x80 && name != "isspace")
        throw LinelessError("unsupported construct: str." + name + " on non-ASCII text");
      bool ok = name == "isdigit"   ? (c >= '0' && c <= '9')
                : name == "isspace" ? text::is_space(c)
                : name == "isalpha" ? std::isalpha(static_cast<int>(c)) != 0
                                    : std::isalnum(static_cast<int>(c)) != 0;
      if (!ok) return Value(false);
    }
    return Value(true);
  }
  throw LinelessError("unsupported construct: str." + name + "()");
}

Value dict_method(const Value& d, const std::string& name, CallArgs& a) {
  if (name == "get") {
    a.check("dict.get", 2, {});
    const Value* v = d.dict().find(a.get(0, ""));
    return v ? *v : a.get(1, "", Value::none());
  }
  a.check("dict." + name, 0, {});
  List l;
  for (const auto& [k, v] : d.dict().entries) {
    if (name == "keys")
      l.push_back(k);
    else if (name == "values")
      l.push_back(v);
    else
      l.push_back(Value::list({k, v}, true));
  }
  return Value::list(std::move(l));
}

Value list_method(const Value& l, const std::string& name, CallArgs& a) {
  a.check("list." + name, 1, {});
  Value x = a.get(0, "");
  int64_t i = 0;
  for (const auto& e : l.items()) {
    if (equals(e, x) && name == "index") return Value(i);
    i += name == "index" || equals(e, x);
  }
  if (name == "count") return Value(i);
  throw LinelessError(x.repr() + " is not in list");
}

bool in(const std::string& name, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (name == n) return true;
  return false;
}

Value refused(const Value& obj, const std::string& name) {
  std::string what = obj.type_name() + "." + name;
  return Value::func(what, [what](CallArgs&) -> Value {
    throw LinelessError("access to '" + what +
                        "' is unsafe: the sandbox refuses methods that modify values");
  });
}

}  // namespace

Value get_method(const Value& obj, const std::string& name) {
  if (obj.is_string()) {
    if (in(name, {"strip",    "lstrip",  "rstrip",  "split",        "rsplit",      "startswith",
                  "endswith", "upper",   "lower",   "title",        "capitalize",  "replace",
                  "find",     "count",   "join",    "isupper",      "islower",     "isdigit",
                  "isspace",  "isalpha", "isalnum", "removeprefix", "removesuffix"})) {
      std::string s = obj.str();
      return Value::func("str." + name, [s, name](CallArgs& a) { return str_method(s, name, a); });
    }
    if (in(name,
           {"format",    "format_map", "splitlines",   "center",      "ljust",     "rjust",
            "zfill",     "encode",     "partition",    "rpartition",  "index",     "rfind",
            "rindex",    "swapcase",   "casefold",     "expandtabs",  "translate", "isnumeric",
            "isdecimal", "istitle",    "isidentifier", "isprintable", "isascii"}))
      throw LinelessError("unsupported construct: str." + name);
  } else if (obj.is_mapping()) {
    if (in(name, {"get", "keys", "values", "items"}))
      return Value::func("dict." + name,
                         [obj, name](CallArgs& a) { return dict_method(obj, name, a); });
    if (in(name, {"pop", "popitem", "setdefault", "update", "clear"})) return refused(obj, name);
    if (in(name, {"copy", "fromkeys"})) throw LinelessError("unsupported construct: dict." + name);
  } else if (obj.is_sequence()) {
    if (in(name, {"index", "count"}))
      return Value::func("list." + name,
                         [obj, name](CallArgs& a) { return list_method(obj, name, a); });
    if (in(name, {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"}))
      return refused(obj, name);
    if (name == "copy") throw LinelessError("unsupported construct: list.copy");
  }
  return Value();
}

}  // namespace sf::jinja
