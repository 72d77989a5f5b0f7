// defines: sf::Args — `--key value` / `--flag` command-line parsing with errors that name the
// option and list the accepted ones.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace sf {

class Args {
 public:
  // `options` take a value, `flags` do not.
  Args(const std::vector<std::string>& argv, std::set<std::string> options,
       std::set<std::string> flags, const std::string& command);
  bool has(const std::string& key) const { return values_.count(key) > 0; }
  std::string str(const std::string& key, const std::string& def) const;
  std::string required(const std::string& key) const;
  int64_t integer(const std::string& key, int64_t def) const;
  double number(const std::string& key, double def) const;
  bool flag(const std::string& key) const { return values_.count(key) > 0; }

 private:
  std::string command_;
  std::map<std::string, std::string> values_;
};

}  // namespace sf
