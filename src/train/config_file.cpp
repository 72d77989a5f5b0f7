#include "train/config_file.h"

#include <yaml-cpp/yaml.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.h"
#include "train/options.h"

namespace sf {

namespace fs = std::filesystem;

namespace {

// A YAML value as JSON (chat_template_kwargs written as a mapping): plain scalars that read as
// booleans or numbers become those, quoted ones stay strings.
nlohmann::ordered_json yaml_to_json(const YAML::Node& n) {
  if (n.IsMap()) {
    nlohmann::ordered_json o = nlohmann::ordered_json::object();
    for (const auto& kv : n) o[kv.first.as<std::string>()] = yaml_to_json(kv.second);
    return o;
  }
  if (n.IsSequence()) {
    nlohmann::ordered_json a = nlohmann::ordered_json::array();
    for (const auto& item : n) a.push_back(yaml_to_json(item));
    return a;
  }
  if (!n.IsScalar()) return nullptr;
  const std::string s = n.as<std::string>();
  if (n.Tag() == "!") return s;  // quoted
  if (s == "true" || s == "True") return true;
  if (s == "false" || s == "False") return false;
  if (s == "null" || s == "~") return nullptr;
  try {
    size_t used = 0;
    const long long i = std::stoll(s, &used);
    if (used == s.size()) return i;
    const double d = std::stod(s, &used);
    if (used == s.size()) return d;
  } catch (const std::exception&) {
  }
  return s;
}

}  // namespace

void check_readable_file(const fs::path& p, const std::string& what) {
  std::error_code ec;
  const fs::file_status st = fs::status(p, ec);
  SF_CHECK(!ec && fs::exists(st), what, " ", p.string(), " does not exist: check the path");
  SF_CHECK(!fs::is_directory(st), what, " ", p.string(), " is a directory: give a file (e.g. ",
           (p / "...").string(), ")");
  SF_CHECK(fs::is_regular_file(st), what, " ", p.string(),
           " is not a regular file (a FIFO or a device): give a file");
  std::ifstream f(p, std::ios::binary);
  SF_CHECK(f, what, " ", p.string(), " cannot be opened: ", std::strerror(errno));
}

std::string read_text_file(const fs::path& p, const std::string& what) {
  check_readable_file(p, what);
  std::ifstream f(p, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  SF_CHECK(!f.bad(), what, " ", p.string(), ": read error: ", std::strerror(errno));
  return s;
}

void load_config_file(TrainConfig& c, const fs::path& file) {
  const std::string text = read_text_file(file, "the configuration file");
  YAML::Node root;
  try {
    root = YAML::Load(text);
  } catch (const YAML::Exception& e) {
    SF_FAIL(file.string(), ":", e.mark.line + 1, ":", e.mark.column + 1, ": not valid YAML (",
            e.msg, ")");
  }
  if (root.IsNull()) return;  // an empty file sets nothing
  SF_CHECK(root.IsMap(), file.string(), ": expected a mapping of option: value lines, e.g. ",
           "'learning_rate: 2e-5'");
  std::map<std::string, int> seen;  // canonical name -> line
  for (const auto& kv : root) {
    const int line = kv.first.Mark().line + 1;
    const std::string where0 = str_cat(file.string(), ":", line);
    SF_CHECK(kv.first.IsScalar(), where0, ": a key must be a plain name");
    const std::string key = kv.first.as<std::string>();
    const std::string where = str_cat(where0, ": ", key);
    const OptionSpec* o = find_train_option(key);
    SF_CHECK(o, where0, ": unknown option '", key, "'; did you mean '", nearest_train_option(key),
             "'? (slideformer train --help lists them all)");
    auto [it, fresh] = seen.emplace(o->name, line);
    SF_CHECK(fresh, where, ": ", o->name, " is already set on line ", it->second,
             " (an alias names the same option): keep one");
    const YAML::Node& v = kv.second;
    std::string value;
    if (v.IsScalar()) {
      value = v.as<std::string>();
    } else if (v.IsSequence() && o->type == OptionSpec::Type::kList) {
      for (const auto& item : v) {
        SF_CHECK(item.IsScalar(), where, ": expects a list of key=name strings");
        value += (value.empty() ? "" : ",") + item.as<std::string>();
      }
    } else if (v.IsMap() && o->name == "chat_template_kwargs") {
      value = yaml_to_json(v).dump();
    } else if (v.IsNull()) {
      SF_FAIL(where, ": has no value (write '", key, ": VALUE', or remove the line)");
    } else {
      SF_FAIL(where, ": expects a single value (", o->accepted, "), not a ",
              v.IsMap() ? "mapping" : "list");
    }
    o->set(c, value, where);
  }
}

}  // namespace sf
