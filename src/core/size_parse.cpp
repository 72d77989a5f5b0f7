#include "core/size_parse.h"

#include <cctype>
#include <cmath>
#include <cstdlib>

#include "core/error.h"

namespace sf {

uint64_t parse_size(const std::string& text, const std::string& option) {
  auto fail = [&]() -> uint64_t {
    SF_FAIL(option, ": '", text, "' is not a size; write it as 24GiB, 24G, 24000MiB or a byte ",
            "count (K, M, G, T are powers of 1024)");
  };
  size_t i = 0;
  while (i < text.size() && (std::isdigit(uint8_t(text[i])) || text[i] == '.')) ++i;
  if (i == 0) return fail();
  char* end = nullptr;
  const std::string num = text.substr(0, i);
  const double value = std::strtod(num.c_str(), &end);
  if (end != num.c_str() + num.size() || !std::isfinite(value)) return fail();
  std::string unit;
  for (size_t k = i; k < text.size(); ++k) unit += char(std::toupper(uint8_t(text[k])));
  if (!unit.empty() && unit.back() == 'B') unit.pop_back();
  if (unit.size() == 2 && unit[1] == 'I') unit.pop_back();
  int shift = 0;
  if (unit == "K") shift = 10;
  else if (unit == "M") shift = 20;
  else if (unit == "G") shift = 30;
  else if (unit == "T") shift = 40;
  else if (!unit.empty()) return fail();
  const double bytes = std::ldexp(value, shift);
  SF_CHECK(bytes >= 1 && bytes < 0x1p62, option, ": '", text, "' is out of range (give at least ",
           "one byte and less than 4 EiB)");
  return uint64_t(bytes);
}

}  // namespace sf
