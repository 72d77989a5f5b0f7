#include "cli/args.h"

#include <cmath>

#include "core/error.h"

namespace sf {

Args::Args(const std::vector<std::string>& argv, std::set<std::string> options,
           std::set<std::string> flags, const std::string& command)
    : command_(command) {
  auto accepted = [&] {
    std::string s;
    for (const auto& o : options) s += " --" + o + " VALUE";
    for (const auto& f : flags) s += " --" + f;
    return s;
  };
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    SF_CHECK(a.rfind("--", 0) == 0, command_, ": unexpected argument '", a,
             "'; accepted:", accepted());
    std::string key = a.substr(2), value;
    if (auto eq = key.find('='); eq != std::string::npos) {
      value = key.substr(eq + 1);
      key = key.substr(0, eq);
      SF_CHECK(options.count(key), command_, ": unknown option --", key, "; accepted:", accepted());
    } else if (flags.count(key)) {
      value = "1";
    } else {
      SF_CHECK(options.count(key), command_, ": unknown option --", key, "; accepted:", accepted());
      SF_CHECK(i + 1 < argv.size(), command_, ": --", key, " needs a value");
      value = argv[++i];
    }
    values_[key] = value;
  }
}

std::string Args::str(const std::string& key, const std::string& def) const {
  auto it = values_.find(key);
  return it == values_.end() ? def : it->second;
}

std::string Args::required(const std::string& key) const {
  auto it = values_.find(key);
  SF_CHECK(it != values_.end(), command_, ": --", key, " is required");
  return it->second;
}

int64_t Args::integer(const std::string& key, int64_t def) const {
  auto it = values_.find(key);
  if (it == values_.end()) return def;
  size_t used = 0;
  int64_t v = 0;
  try {
    v = std::stoll(it->second, &used);
  } catch (...) {
    used = 0;
  }
  SF_CHECK(used == it->second.size() && used > 0, command_, ": --", key,
           " expects an integer, got '", it->second, "'");
  return v;
}

double Args::number(const std::string& key, double def) const {
  auto it = values_.find(key);
  if (it == values_.end()) return def;
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(it->second, &used);
  } catch (...) {
    used = 0;
  }
  SF_CHECK(used == it->second.size() && used > 0 && std::isfinite(v), command_, ": --", key,
           " expects a number, got '", it->second, "'");
  return v;
}

}  // namespace sf
