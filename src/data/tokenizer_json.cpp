#include "core/error.h"
#include "data/tokenizer_pipeline.h"

namespace sf::tok {

void JsonSource::fail(const std::string& path, const std::string& what) const {
  SF_FAIL(file, ": at `", path.empty() ? std::string("(root)") : path, "`: ", what);
}

const Json& JsonSource::at(const Json& obj, const std::string& path, const char* key) const {
  if (!obj.is_object()) fail(path, "expected an object");
  auto it = obj.find(key);
  if (it == obj.end()) fail(json_path(path, key), "missing required key");
  return *it;
}

std::string JsonSource::str(const Json& obj, const std::string& path, const char* key) const {
  const Json& v = at(obj, path, key);
  if (!v.is_string()) fail(json_path(path, key), "expected a string");
  return v.get<std::string>();
}

bool JsonSource::boolean(const Json& obj, const std::string& path, const char* key,
                         bool def) const {
  if (!obj.is_object()) fail(path, "expected an object");
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return def;
  if (!it->is_boolean()) fail(json_path(path, key), "expected true or false");
  return it->get<bool>();
}

std::string JsonSource::type(const Json& obj, const std::string& path) const {
  return str(obj, path, "type");
}

std::string json_path(const std::string& parent, const char* key) {
  return parent.empty() ? std::string(key) : parent + "." + key;
}

std::string json_path(const std::string& parent, size_t index) {
  return parent + "[" + std::to_string(index) + "]";
}

PatternSpec parse_pattern(const Json& j, const std::string& path, const JsonSource& src) {
  if (!j.is_object()) src.fail(path, "expected {\"String\": ...} or {\"Regex\": ...}");
  if (j.contains("String")) return {src.str(j, path, "String"), false};
  if (j.contains("Regex")) return {src.str(j, path, "Regex"), true};
  src.fail(path, "unsupported pattern (expected a String or Regex key)");
}

}  // namespace sf::tok
