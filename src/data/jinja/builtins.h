// defines: the jinja2 builtins the interpreter calls — attribute/item access with jinja2's sandbox
// rules, Python methods of str/dict/list, operators, filters, tests, globals, tojson.
// Helpers throw LinelessError; the interpreter adds the template line.
#pragma once

#include <string>

#include "data/jinja/value.h"

namespace sf::jinja {

// jinja2 Environment.getattr: a Python attribute (bound method) first, then the item; missing →
// undefined with jinja2's hint. Undefined obj → error (jinja2's default Undefined).
Value get_attr(const Value& obj, const std::string& name);
// jinja2 Environment.getitem: the item first, then (string keys) the attribute.
Value get_item(const Value& obj, const Value& key);
Value get_slice(const Value& obj, const Value& start, const Value& stop, const Value& step);
// Python methods of str / dict / list as bound functions; undefined when `obj` has no such method.
Value get_method(const Value& obj, const std::string& name);

Value binary_op(const std::string& op, const Value& a, const Value& b);
Value negate(const Value& v);
bool contains(const Value& container, const Value& item);  // Python `item in container`

bool has_filter(const std::string& name);
bool has_test(const std::string& name);
Value apply_filter(const std::string& name, const Value& subject, CallArgs& args);
bool apply_test(const std::string& name, const Value& subject, CallArgs& args);

// Python json.dumps with transformers' tojson defaults (ensure_ascii=False, insertion order).
struct JsonOptions {
  bool ensure_ascii = false;
  Value indent;                   // none / undefined: single line; int: spaces; string: the string
  std::string item_sep, key_sep;  // empty: json.dumps defaults
  bool sort_keys = false;
};
std::string to_json(const Value& v, const JsonOptions& opt);

// range, dict, namespace, raise_exception, strftime_now.
Dict make_globals();

}  // namespace sf::jinja
