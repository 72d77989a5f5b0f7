// defines: sf::Error, SF_CHECK, SF_FAIL, sf::str_cat
// Errors are exceptions that carry what failed, where (file, tensor, line, key) and what to do.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

namespace sf {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

template <typename... Args>
std::string str_cat(Args&&... args) {
  std::ostringstream os;
  (os << ... << std::forward<Args>(args));
  return os.str();
}

}  // namespace sf

// Throws sf::Error with the concatenated message when `cond` is false. For input and
// runtime conditions; the message must say what failed, where, and what to do.
#define SF_CHECK(cond, ...)                          \
  do {                                               \
    if (!(cond)) throw ::sf::Error(::sf::str_cat(__VA_ARGS__)); \
  } while (0)

#define SF_FAIL(...) throw ::sf::Error(::sf::str_cat(__VA_ARGS__))
