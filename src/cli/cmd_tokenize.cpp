// `slideformer tokenize --tokenizer DIR [--add-special-tokens] [--decode [--skip-special-tokens]]`
// JSONL {"text": "..."} on stdin → {"ids": [...]} on stdout, one line per input line, in order.
// --decode also writes "decoded": the text of those ids (for parity checks).
// `--chat [--add-generation-prompt] [--chat-template NAME|FILE] [--template-kwargs JSON]`:
// lines {"messages": [...]} rendered by the chat template and encoded as transformers'
// apply_chat_template(tokenize=True) does; a template that refuses a conversation stops with its
// message and a non-zero exit.
// Raw bytes that are not valid UTF-8 in a line are replaced by U+FFFD before JSON parsing (the
// tokenizer's policy, see data/tokenizer.h); a \uD800-style lone surrogate escape is an error.
#include <charconv>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "data/chat_template.h"
#include "data/tokenizer.h"
#include "data/unicode_utf8.h"

namespace sf {

namespace {

constexpr size_t kBatchLines = 4096;       // lines parsed and encoded together
constexpr size_t kBatchBytes = 16u << 20;  // or this many bytes, whichever first

// Parses `line` (number `line_no`) into its "text"; returns an error message or "".
std::string parse_line(const std::string& line, size_t line_no, std::string& text) {
  nlohmann::json j;
  try {
    j = utf8::is_valid(line) ? nlohmann::json::parse(line)
                             : nlohmann::json::parse(utf8::repair(line));
  } catch (const nlohmann::json::parse_error& e) {
    return str_cat("stdin line ", line_no, ": not valid JSON (", e.what(),
                   "); expected {\"text\": \"...\"}");
  }
  if (!j.is_object() || !j.contains("text")) {
    return str_cat("stdin line ", line_no, ": expected a JSON object with a \"text\" key");
  }
  if (!j["text"].is_string()) {
    return str_cat("stdin line ", line_no, ": \"text\" must be a string");
  }
  text = j["text"].get<std::string>();
  return {};
}

void append_ids(std::string& out, const std::vector<int32_t>& ids) {
  out += "{\"ids\":[";
  char num[16];
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ',';
    auto r = std::to_chars(num, num + sizeof(num), ids[i]);
    out.append(num, r.ptr);
  }
  out += ']';
}

int tokenize_chat(const Args& args, const Tokenizer& tok) {
  const ChatTemplate chat =
      resolve_chat_template(args.str("chat-template", ""), args.required("tokenizer"), &tok);
  const bool gen = args.flag("add-generation-prompt");
  nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
  if (args.has("template-kwargs")) {
    try {
      kwargs = nlohmann::ordered_json::parse(args.str("template-kwargs", "{}"));
    } catch (const nlohmann::json::exception& e) {
      SF_FAIL("tokenize: --template-kwargs is not valid JSON (", e.what(), ")");
    }
    SF_CHECK(kwargs.is_object(), "tokenize: --template-kwargs must be a JSON object");
  }
  std::string line, out;
  size_t line_no = 0;
  while (std::getline(std::cin, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    nlohmann::ordered_json j;
    try {
      j = nlohmann::ordered_json::parse(utf8::is_valid(line) ? line : utf8::repair(line));
    } catch (const nlohmann::json::parse_error& e) {
      SF_FAIL("stdin line ", line_no, ": not valid JSON (", e.what(), ")");
    }
    SF_CHECK(j.is_object() && j.contains("messages") && j["messages"].is_array(), "stdin line ",
             line_no, ": expected a JSON object with a \"messages\" list");
    std::string text;
    try {
      text = chat.render(j["messages"], gen, kwargs);
    } catch (const Error& e) {
      SF_FAIL("stdin line ", line_no, ": ", e.what());
    }
    out.clear();
    append_ids(out, tok.encode(text, false));  // the template writes BOS where it wants one
    out += "}\n";
    std::fwrite(out.data(), 1, out.size(), stdout);
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace

int cmd_tokenize(const std::vector<std::string>& argv) {
  Args args(argv, {"tokenizer", "chat-template", "template-kwargs"},
            {"add-special-tokens", "decode", "skip-special-tokens", "chat", "add-generation-prompt"},
            "tokenize");
  const Tokenizer tok = Tokenizer::load(args.required("tokenizer"));
  if (args.flag("chat")) return tokenize_chat(args, tok);
  SF_CHECK(!args.has("chat-template") && !args.flag("add-generation-prompt") &&
               !args.has("template-kwargs"),
           "tokenize: --chat-template, --add-generation-prompt and --template-kwargs need --chat");
  const bool add_special = args.flag("add-special-tokens");
  const bool decode = args.flag("decode");
  const bool skip_special = args.flag("skip-special-tokens");

  std::ios::sync_with_stdio(false);
  std::vector<std::string> lines, texts, errors;
  std::string line, out;
  size_t line_no = 0;
  bool eof = false;
  while (!eof) {
    lines.clear();
    size_t bytes = 0;
    while (lines.size() < kBatchLines && bytes < kBatchBytes) {
      if (!std::getline(std::cin, line)) {
        eof = true;
        break;
      }
      if (!line.empty() && line.back() == '\r') line.pop_back();
      bytes += line.size();
      lines.push_back(std::move(line));
    }
    if (lines.empty()) break;
    texts.assign(lines.size(), std::string());
    errors.assign(lines.size(), std::string());
    parallel_for(int64_t(lines.size()), 64, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i)
        errors[size_t(i)] = parse_line(lines[size_t(i)], line_no + size_t(i) + 1, texts[size_t(i)]);
    });
    size_t good = 0;
    while (good < lines.size() && errors[good].empty()) ++good;
    texts.resize(good);
    auto ids = tok.encode_batch(texts, add_special);
    out.clear();
    for (size_t i = 0; i < good; ++i) {
      append_ids(out, ids[i]);
      if (decode) {
        out += ",\"decoded\":";
        out += nlohmann::json(tok.decode(ids[i], skip_special))
                   .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
      }
      out += "}\n";
    }
    std::fwrite(out.data(), 1, out.size(), stdout);
    if (good < lines.size()) {
      std::fflush(stdout);
      SF_FAIL(errors[good]);
    }
    line_no += lines.size();
  }
  std::fflush(stdout);
  return 0;
}

}  // namespace sf
