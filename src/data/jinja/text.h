// defines: sf::jinja::text — UTF-8 and Python str semantics the interpreter needs (len, strip,
// split, case mapping, repr, float repr, JSON string escaping), all on UTF-8 std::string.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sf::jinja::text {

// Code points of a UTF-8 string (invalid bytes decode as U+FFFD, as Python's surrogateescape never
// reaches a template: inputs arrive from JSON, which is valid UTF-8).
std::vector<char32_t> decode(const std::string& s);
std::string encode(const std::vector<char32_t>& cps);
std::string encode(char32_t cp);
size_t length(const std::string& s);  // Python len(): code points

bool is_space(char32_t cp);  // Python str.isspace()

// Python str.strip/lstrip/rstrip: `chars` absent → whitespace, else the set of code points in it.
std::string strip(const std::string& s, const std::optional<std::string>& chars, bool left,
                  bool right);
// Python str.split(sep=None, maxsplit=-1).
std::vector<std::string> split(const std::string& s, const std::optional<std::string>& sep,
                               int64_t maxsplit);
std::string replace(const std::string& s, const std::string& old, const std::string& repl,
                    int64_t count);
// Case mapping. ASCII, Latin-1, Greek and Cyrillic basic letters are mapped as Python does; a
// string holding other cased letters throws rather than risk a mapping that differs from Python's.
std::string upper(const std::string& s);
std::string lower(const std::string& s);
std::string title(const std::string& s);       // Python str.title()
std::string capitalize(const std::string& s);  // Python str.capitalize()
bool is_upper(const std::string& s);
bool is_lower(const std::string& s);

std::string float_repr(double d);               // Python repr(float): 1.0, 0.1, 1e+16, inf, nan
std::string string_repr(const std::string& s);  // Python repr(str): 'abc', "it's"
// Python json.dumps of a string (with quotes). ensure_ascii escapes non-ASCII as \uXXXX.
std::string json_string(const std::string& s, bool ensure_ascii);

}  // namespace sf::jinja::text
