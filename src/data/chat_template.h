// defines: sf::ChatTemplate — a Hugging Face chat template (Jinja source from
// tokenizer_config.json, a built-in, or a file) executed as written by our Jinja interpreter
// (data/jinja), rendering a conversation exactly as transformers'
// apply_chat_template(tokenize=False) does.
#pragma once

#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace sf {

namespace jinja {
class Template;
}

class ChatTemplate {
 public:
  // Reads <dir>/tokenizer_config.json: `chat_template` (a string, or a list of {"name","template"}:
  // `name`, else "default"), else <dir>/chat_template.jinja; bos/eos/unk/pad tokens from the
  // config. No template → sf::Error telling to pass --chat-template llama3|llama2|chatml or a
  // template file.
  static ChatTemplate from_tokenizer_dir(const std::filesystem::path& dir,
                                         const std::string& name = "");
  // "llama3", "llama2" (Llama-2-chat / Mistral-instruct [INST]), "chatml"; with the family's
  // bos/eos tokens (override with set_special_token).
  static ChatTemplate builtin(const std::string& name);
  static ChatTemplate from_file(const std::filesystem::path& path);
  static ChatTemplate from_string(std::string source, std::string name = "<string>");

  // Renders `messages` (a list of {"role","content",...}) with add_generation_prompt and
  // `extra_kwargs` (an object, e.g. {"enable_thinking": false}); the template sees messages, tools
  // (none), documents (none), add_generation_prompt, the special tokens and the extra kwargs. As
  // apply_chat_template does, message keys whose value is null are dropped and reasoning_content /
  // thinking / reasoning are aliased. raise_exception(msg) → sf::Error whose what() is msg.
  // nlohmann::json sorts object keys; pass ordered_json where tojson output must keep input order.
  std::string render(const nlohmann::json& messages, bool add_generation_prompt,
                     const nlohmann::json& extra_kwargs = nlohmann::json::object()) const;
  std::string render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                     const nlohmann::ordered_json& extra_kwargs) const;

  // Sets (or, with an empty value, removes) a special token the template sees, e.g. "bos_token".
  void set_special_token(const std::string& name, const std::string& value);
  const std::string& source() const;
  const std::string& name() const;

 private:
  ChatTemplate(std::string source, std::string name);
  // Parsed on the first render: a run that renders nothing (a dataset of tokens) is not stopped
  // by a template it never uses. Parse errors still name the template and line.
  struct Lazy;
  std::shared_ptr<Lazy> lazy_;
  const jinja::Template& tmpl() const;
  std::vector<std::pair<std::string, std::string>> special_tokens_;  // in config order
};

class Tokenizer;

// The template the user chose: "llama3" | "llama2" | "chatml" (built-ins), a file path, or ""
// (the tokenizer folder's own, an error naming the choices when it has none). A template not read
// from the folder sees the tokenizer's bos/eos tokens, as transformers passes them.
ChatTemplate resolve_chat_template(const std::string& choice,
                                   const std::filesystem::path& tokenizer_dir,
                                   const Tokenizer* tok);

}  // namespace sf
