// defines: sf::check_regular_file, read_input_file, check_json_depth, parse_json — reading what a
// user hands us (datasets, tokenizer.json, config.json, safetensors headers) without hanging on a
// FIFO, failing on a folder with a message that names nothing, or overflowing the stack on JSON
// nested 10^5 deep (nlohmann copies, dumps and converts values recursively).
#pragma once

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace sf {

// JSON nesting the readers accept: real files nest < 12 deep (a tool call's arguments inside a
// message inside the record); nlohmann's recursion is safe far beyond this.
inline constexpr int kMaxJsonDepth = 128;

// Fails unless `path` is a regular file (or a link to one): a folder, FIFO, socket or device is
// refused with an error naming `what` and the path.
void check_regular_file(const std::filesystem::path& path, const std::string& what);

// The whole file, read once (after check_regular_file); errors name `what` and the path.
std::string read_input_file(const std::filesystem::path& path, const std::string& what);

// Fails when brackets in the JSON text nest deeper than `max_depth` (strings skipped), naming
// `where` (e.g. "data.jsonl:12"), the offset and the limit. Linear, no recursion.
void check_json_depth(std::string_view text, const std::string& where,
                      int max_depth = kMaxJsonDepth);

// check_json_depth, then nlohmann::ordered_json::parse; a syntax error names `where`.
nlohmann::ordered_json parse_json(std::string_view text, const std::string& where,
                                  int max_depth = kMaxJsonDepth);

// A JSON library error in words for users: without the library's "[json.exception.type.N]" tag,
// and for a parse error of one line (a JSONL record) "at column C" instead of "at line 1,
// column C" (the caller names the file's line).
std::string json_error_text(const nlohmann::json::exception& e, bool one_line = false);

}  // namespace sf
