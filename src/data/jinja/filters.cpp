// defines: has_filter, apply_filter — jinja2's builtin filters that chat templates use, with
// transformers' tojson (see builtins.h)
#include <charconv>
#include <algorithm>
#include <cctype>
#include <cmath>
#include <functional>
#include <unordered_map>

#include "data/jinja/builtins.h"
#include "data/jinja/text.h"

namespace sf::jinja {

namespace {

using FilterFn = std::function<Value(const Value&, CallArgs&)>;

std::string html_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    switch (c) {
      case '&':
        o += "&amp;";
        break;
      case '<':
        o += "&lt;";
        break;
      case '>':
        o += "&gt;";
        break;
      case '"':
        o += "&#34;";
        break;
      case '\'':
        o += "&#39;";
        break;
      default:
        o += c;
    }
  }
  return o;
}

// jinja2's attribute getter for map/selectattr/sort...: dotted path, integer parts index.
Value attr_path(const Value& v, const Value& attribute) {
  if (attribute.kind() == Value::Kind::kInt) return get_item(v, attribute);
  Value cur = v;
  for (const auto& part : text::split(attribute.to_str(), std::string("."), -1)) {
    bool digits = !part.empty() && std::all_of(part.begin(), part.end(), ::isdigit);
    int64_t index = 0;
    if (digits && std::from_chars(part.data(), part.data() + part.size(), index).ec != std::errc())
      digits = false;  // past 64 bits: no such element; looked up as a key, undefined
    cur = digits ? get_item(cur, Value(index)) : get_item(cur, Value(part));
  }
  return cur;
}

std::string str_of(const Value& v) { return v.to_str(); }

// Key used by sort/min/max/unique: lower-cased strings unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(text::lower(v.str()));
  return v;
}

List select_impl(const Value& seq, CallArgs& a, bool by_attr, bool keep) {
  size_t first = by_attr ? 1 : 0;
  Value attribute = by_attr ? a.get(0, "attr") : Value();
  if (by_attr && attribute.is_undefined())
    throw LinelessError("selectattr/rejectattr need an attribute name");
  std::string test = a.pos.size() > first ? a.pos[first].to_str() : "";
  CallArgs targs;
  for (size_t i = first + 1; i < a.pos.size(); ++i) targs.pos.push_back(a.pos[i]);
  if (!test.empty() && !has_test(test)) throw LinelessError("unknown test '" + test + "'");
  List out;
  for (const auto& item : seq.iterate()) {
    Value x = by_attr ? attr_path(item, attribute) : item;
    bool ok = test.empty() ? x.truthy() : apply_test(test, x, targs);
    if (ok == keep) out.push_back(item);
  }
  return out;
}

const std::unordered_map<std::string, FilterFn>& filters() {
  static const std::unordered_map<std::string, FilterFn> f = [] {
    std::unordered_map<std::string, FilterFn> m;
    m["abs"] = [](const Value& v, CallArgs&) {
      v.require_defined();
      if (v.kind() == Value::Kind::kFloat) return Value(std::fabs(v.as_double()));
      if (!v.is_number()) throw LinelessError("bad operand type for abs(): " + v.type_name());
      return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
    };
    m["attr"] = [](const Value& v, CallArgs& a) { return get_attr(v, a.get(0, "name").to_str()); };
    m["capitalize"] = [](const Value& v, CallArgs&) { return Value(text::capitalize(str_of(v))); };
    m["default"] = [](const Value& v, CallArgs& a) {
      a.check("default", 2, {"default_value", "boolean"});
      bool boolean = a.get(1, "boolean", Value(false)).truthy();
      if (v.is_undefined() || (boolean && !v.truthy())) return a.get(0, "default_value", Value(""));
      return v;
    };
    m["d"] = m["default"];
    m["escape"] = [](const Value& v, CallArgs&) { return Value(html_escape(str_of(v))); };
    m["e"] = m["forceescape"] = m["escape"];
    m["first"] = [](const Value& v, CallArgs&) {
      List l = v.iterate();
      return l.empty() ? Value::undefined("No first item, sequence was empty.") : l.front();
    };
    m["last"] = [](const Value& v, CallArgs&) {
      v.require_defined();
      List l = v.iterate();
      return l.empty() ? Value::undefined("No last item, sequence was empty.") : l.back();
    };
    m["float"] = [](const Value& v, CallArgs& a) {
      if (v.is_number()) return Value(v.as_double());
      if (v.is_string()) {
        try {
          size_t used = 0;
          std::string s = text::strip(v.str(), std::nullopt, true, true);
          double d = std::stod(s, &used);
          if (used == s.size()) return Value(d);
        } catch (const std::exception&) {
        }
      }
      return a.get(0, "default", Value(0.0));
    };
    m["int"] = [](const Value& v, CallArgs& a) {
      Value def = a.get(0, "default", Value(0));
      if (a.pos.size() > 1 || !a.get(1, "base").is_undefined())
        throw LinelessError("unsupported construct: int filter with a base");
      if (v.kind() == Value::Kind::kFloat) {
        if (!(std::fabs(v.as_double()) < 9.2e18))  // NaN, inf, or past 64 bits
          throw LinelessError(sf::str_cat("int: ", v.repr(),
                                          " does not fit the interpreter's 64-bit integers"));
        return Value(static_cast<int64_t>(std::trunc(v.as_double())));
      }
      if (v.is_number()) return Value(v.as_int());
      if (v.is_string()) {
        std::string s = text::strip(v.str(), std::nullopt, true, true);
        try {
          size_t used = 0;
          int64_t i = std::stoll(s, &used);
          if (used == s.size()) return Value(i);
          double d = std::stod(s, &used);
          if (used == s.size()) {
            if (!(std::fabs(d) < 9.2e18)) return def;  // past 64 bits
            return Value(static_cast<int64_t>(std::trunc(d)));
          }
        } catch (const std::exception&) {
        }
      }
      return def;
    };
    m["items"] = [](const Value& v, CallArgs&) {
      if (v.is_undefined()) return Value::list({});
      if (!v.is_mapping())
        throw LinelessError("items filter: can only get item pairs from a mapping");
      List l;
      for (const auto& [k, x] : v.dict().entries) l.push_back(Value::list({k, x}, true));
      return Value::list(std::move(l));
    };
    m["join"] = [](const Value& v, CallArgs& a) {
      a.check("join", 2, {"d", "attribute"});
      std::string sep = a.get(0, "d", Value("")).to_str(), o;
      Value attribute = a.get(1, "attribute");
      bool first = true;
      for (const auto& e : v.iterate()) {
        o += (first ? "" : sep) + (attribute.is_undefined() ? e : attr_path(e, attribute)).to_str();
        first = false;
        check_value_bytes(o.size(), "the result of join");
      }
      return Value(o);
    };
    m["length"] = [](const Value& v, CallArgs&) {
      if (v.is_string()) return Value(static_cast<int64_t>(text::length(v.str())));
      if (v.has_attrs() && !v.is_mapping())
        throw LinelessError("object of type '" + v.type_name() + "' has no len()");
      return Value(static_cast<int64_t>(v.iterate().size()));
    };
    m["count"] = m["length"];
    m["list"] = [](const Value& v, CallArgs&) { return Value::list(v.iterate()); };
    m["lower"] = [](const Value& v, CallArgs&) { return Value(text::lower(str_of(v))); };
    m["upper"] = [](const Value& v, CallArgs&) { return Value(text::upper(str_of(v))); };
    m["title"] = [](const Value& v, CallArgs&) {  // jinja2 do_title: words split at [-\s({[<]+
      std::string o;
      bool start = true;
      for (char32_t c : text::decode(str_of(v))) {
        bool sep = c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || text::is_space(c);
        o += sep     ? text::encode(c)
             : start ? text::upper(text::encode(c))
                     : text::lower(text::encode(c));
        start = sep;
      }
      return Value(o);
    };
    m["map"] = [](const Value& v, CallArgs& a) {
      Value attribute = a.get(99, "attribute");
      List out;
      if (!attribute.is_undefined()) {
        Value def = a.get(99, "default");
        for (const auto& e : v.iterate()) {
          Value x = attr_path(e, attribute);
          out.push_back(x.is_undefined() && !def.is_undefined() ? def : x);
        }
        return Value::list(std::move(out));
      }
      if (a.pos.empty()) throw LinelessError("map requires a filter name or attribute=");
      std::string name = a.pos[0].to_str();
      if (!has_filter(name)) throw LinelessError("unknown filter '" + name + "'");
      CallArgs fa;
      fa.pos.assign(a.pos.begin() + 1, a.pos.end());
      fa.kw = a.kw;
      for (const auto& e : v.iterate()) out.push_back(apply_filter(name, e, fa));
      return Value::list(std::move(out));
    };
    auto minmax = [](bool want_max) {
      return [want_max](const Value& v, CallArgs& a) {
        a.check(want_max ? "max" : "min", 0, {"case_sensitive", "attribute"});
        bool cs = a.get(99, "case_sensitive", Value(false)).truthy();
        Value attribute = a.get(99, "attribute");
        List l = v.iterate();
        if (l.empty())
          return Value::undefined(std::string("No aggregated item, sequence was empty."));
        size_t best = 0;
        auto key = [&](size_t i) {
          return sort_key(attribute.is_undefined() ? l[i] : attr_path(l[i], attribute), cs);
        };
        for (size_t i = 1; i < l.size(); ++i) {
          int c = compare(key(i), key(best), want_max ? ">" : "<");
          if (want_max ? c > 0 : c < 0) best = i;
        }
        return l[best];
      };
    };
    m["max"] = minmax(true);
    m["min"] = minmax(false);
    m["reject"] = [](const Value& v, CallArgs& a) {
      return Value::list(select_impl(v, a, false, false));
    };
    m["select"] = [](const Value& v, CallArgs& a) {
      return Value::list(select_impl(v, a, false, true));
    };
    m["rejectattr"] = [](const Value& v, CallArgs& a) {
      return Value::list(select_impl(v, a, true, false));
    };
    m["selectattr"] = [](const Value& v, CallArgs& a) {
      return Value::list(select_impl(v, a, true, true));
    };
    m["replace"] = [](const Value& v, CallArgs& a) {
      a.check("replace", 3, {"old", "new", "count"});
      Value c = a.get(2, "count");
      return Value(text::replace(str_of(v), a.get(0, "old").to_str(), a.get(1, "new").to_str(),
                                 c.is_undefined() || c.is_none() ? -1 : c.as_int()));
    };
    m["reverse"] = [](const Value& v, CallArgs&) {
      if (v.is_string()) {
        auto cps = text::decode(v.str());
        std::reverse(cps.begin(), cps.end());
        return Value(text::encode(cps));
      }
      List l = v.iterate();
      std::reverse(l.begin(), l.end());
      return Value::list(std::move(l));
    };
    m["safe"] = [](const Value& v, CallArgs&) { return Value(str_of(v)); };
    m["string"] = m["safe"];
    m["sort"] = [](const Value& v, CallArgs& a) {
      a.check("sort", 3, {"reverse", "case_sensitive", "attribute"});
      bool rev = a.get(0, "reverse", Value(false)).truthy();
      bool cs = a.get(1, "case_sensitive", Value(false)).truthy();
      Value attribute = a.get(2, "attribute");
      List l = v.iterate();
      auto key = [&](const Value& x) {
        return sort_key(attribute.is_undefined() ? x : attr_path(x, attribute), cs);
      };
      std::stable_sort(l.begin(), l.end(), [&](const Value& x, const Value& y) {
        return rev ? compare(key(y), key(x), "<") < 0 : compare(key(x), key(y), "<") < 0;
      });
      return Value::list(std::move(l));
    };
    m["sum"] = [](const Value& v, CallArgs& a) {
      Value attribute = a.get(0, "attribute");
      Value total = a.get(1, "start", Value(0));
      if (total.is_string())  // Python: "sum() can't sum strings [use ''.join(seq) instead]"
        throw LinelessError("sum() can't sum strings [use ''.join(seq) instead]");
      if (total.is_sequence()) {  // lists: appended in place (a + per element would be O(n²))
        List acc = total.items();
        size_t bytes = value_bytes(total);
        for (const auto& e : v.iterate()) {
          const Value x = attribute.is_undefined() ? e : attr_path(e, attribute);
          if (x.kind() != total.kind()) {
            (void)binary_op("+", total, x);  // throws Python's TypeError wording
            throw LinelessError("sum: can only add lists to lists, tuples to tuples");
          }
          bytes += value_bytes(x);
          check_value_bytes(bytes, "the result of sum");
          acc.insert(acc.end(), x.items().begin(), x.items().end());
        }
        return Value::list(std::move(acc), total.kind() == Value::Kind::kTuple);
      }
      for (const auto& e : v.iterate())
        total = binary_op("+", total, attribute.is_undefined() ? e : attr_path(e, attribute));
      return total;
    };
    m["tojson"] = [](const Value& v, CallArgs& a) {
      a.check("tojson", 4, {"ensure_ascii", "indent", "separators", "sort_keys"});
      JsonOptions o;
      o.ensure_ascii = a.get(0, "ensure_ascii", Value(false)).truthy();
      o.indent = a.get(1, "indent", Value::none());
      Value seps = a.get(2, "separators", Value::none());
      if (!seps.is_none()) {
        if (!seps.is_sequence() || seps.items().size() != 2)
          throw LinelessError("tojson: separators must be an (item_separator, key_separator) pair");
        o.item_sep = seps.items()[0].to_str();
        o.key_sep = seps.items()[1].to_str();
        if (o.item_sep.empty() || o.key_sep.empty())
          throw LinelessError("unsupported construct: tojson with an empty separator");
      }
      o.sort_keys = a.get(3, "sort_keys", Value(false)).truthy();
      return Value(to_json(v, o));
    };
    m["trim"] = [](const Value& v, CallArgs& a) {
      a.check("trim", 1, {"chars"});
      Value c = a.get(0, "chars");
      std::optional<std::string> chars;
      if (!c.is_undefined() && !c.is_none()) chars = c.to_str();
      return Value(text::strip(str_of(v), chars, true, true));
    };
    m["unique"] = [](const Value& v, CallArgs& a) {
      a.check("unique", 2, {"case_sensitive", "attribute"});
      bool cs = a.get(0, "case_sensitive", Value(false)).truthy();
      Value attribute = a.get(1, "attribute");
      List out, seen;
      for (const auto& e : v.iterate()) {
        Value k = sort_key(attribute.is_undefined() ? e : attr_path(e, attribute), cs);
        if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, k); }))
          seen.push_back(k), out.push_back(e);
      }
      return Value::list(std::move(out));
    };
    m["indent"] = [](const Value& v, CallArgs& a) {
      a.check("indent", 3, {"width", "first", "blank"});
      Value w = a.get(0, "width", Value(4));
      if (!w.is_string() && w.as_int() > 4096)
        throw LinelessError(sf::str_cat("indent: width ", w.as_int(), " is past 4096"));
      std::string ind =
          w.is_string() ? w.str() : std::string(std::max<int64_t>(0, w.as_int()), ' ');
      bool first = a.get(1, "first", Value(false)).truthy(),
           blank = a.get(2, "blank", Value(false)).truthy();
      std::string s = str_of(v) + "\n";
      std::vector<std::string> lines;  // Python str.splitlines() on \n, \r\n, \r
      std::string cur;
      for (size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '\n' || s[i] == '\r') {
          lines.push_back(cur);
          cur.clear();
          if (s[i] == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ++i;
        } else {
          cur += s[i];
        }
      }
      if (!cur.empty()) lines.push_back(cur);
      std::string rv;
      for (size_t i = 0; i < lines.size(); ++i) {
        if (i) rv += "\n" + ((blank || !lines[i].empty()) ? ind : "");
        rv += lines[i];
        check_value_bytes(rv.size(), "the result of indent");
      }
      return Value(first ? ind + rv : rv);
    };
    m["dictsort"] = [](const Value& v, CallArgs& a) {
      a.check("dictsort", 3, {"case_sensitive", "by", "reverse"});
      bool cs = a.get(0, "case_sensitive", Value(false)).truthy();
      std::string by = a.get(1, "by", Value("key")).to_str();
      bool rev = a.get(2, "reverse", Value(false)).truthy();
      if (!v.is_mapping()) throw LinelessError("dictsort: can only sort a mapping");
      List l;
      for (const auto& [k, x] : v.dict().entries) l.push_back(Value::list({k, x}, true));
      size_t pos = by == "value" ? 1 : 0;
      std::stable_sort(l.begin(), l.end(), [&](const Value& x, const Value& y) {
        int c = compare(sort_key(x.items()[pos], cs), sort_key(y.items()[pos], cs), "<");
        return rev ? c > 0 : c < 0;
      });
      return Value::list(std::move(l));
    };
    return m;
  }();
  return f;
}

}  // namespace

bool has_filter(const std::string& name) { return filters().count(name) != 0; }

Value apply_filter(const std::string& name, const Value& subject, CallArgs& args) {
  auto it = filters().find(name);
  if (it == filters().end()) throw LinelessError("unknown filter '" + name + "'");
  return it->second(subject, args);
}

}  // namespace sf::jinja
