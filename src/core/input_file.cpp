// defines: check_regular_file, read_input_file, check_json_depth, parse_json (see input_file.h)
#include "core/input_file.h"

#include <fstream>
#include <sstream>
#include <system_error>

#include "core/error.h"

namespace sf {

void check_regular_file(const std::filesystem::path& path, const std::string& what) {
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  SF_CHECK(!ec && std::filesystem::exists(st), "cannot open ", what, " ", path.string(),
           ": no such file (check the path)");
  if (std::filesystem::is_regular_file(st)) return;
  const char* kind = std::filesystem::is_directory(st) ? "a folder"
                     : std::filesystem::is_fifo(st)    ? "a FIFO (named pipe)"
                     : std::filesystem::is_socket(st)  ? "a socket"
                                                       : "not a regular file";
  SF_FAIL(what, " ", path.string(), " is ", kind, ": give a regular file",
          std::filesystem::is_directory(st) ? "" : " (pipes and devices are not read: they could "
                                                   "block forever, and the cache keys on a file)");
}

std::string read_input_file(const std::filesystem::path& path, const std::string& what) {
  check_regular_file(path, what);
  std::ifstream f(path, std::ios::binary);
  SF_CHECK(f, "cannot open ", what, " ", path.string(), ": check the permissions");
  std::ostringstream ss;
  ss << f.rdbuf();
  SF_CHECK(!f.bad(), "cannot read ", what, " ", path.string(), ": read error");
  return ss.str();
}

void check_json_depth(std::string_view text, const std::string& where, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\')
        ++i;
      else if (c == '"')
        in_string = false;
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth)
        SF_FAIL(where, ": JSON nested deeper than ", max_depth, " levels (at byte ", i,
                "); no real file nests this deep, so it is refused (kMaxJsonDepth, core/input_file.h)");
    } else if (c == ']' || c == '}') {
      --depth;  // unbalanced text: the parser names the syntax error
    }
  }
}

std::string json_error_text(const nlohmann::json::exception& e, bool one_line) {
  std::string s = e.what();
  if (s.rfind("[json.exception.", 0) == 0) {
    const size_t close = s.find("] ");
    if (close != std::string::npos) s.erase(0, close + 2);
  }
  const std::string lead = "parse error at line 1, column ";
  if (one_line && s.rfind(lead, 0) == 0) s = "at column " + s.substr(lead.size());
  return s;
}

nlohmann::ordered_json parse_json(std::string_view text, const std::string& where,
                                  int max_depth) {
  check_json_depth(text, where, max_depth);
  try {
    return nlohmann::ordered_json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    const bool one_line = text.find('\n') == std::string_view::npos;
    SF_FAIL(where, ": not valid JSON (", json_error_text(e, one_line), ")");
  }
}

}  // namespace sf
