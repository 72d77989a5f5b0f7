// defines: sf::templates::builtin_chat_template — the chat templates SlideFormer ships for
// checkpoints whose tokenizer_config.json has none (`--chat-template llama3|llama2|chatml`)
#pragma once

#include <string>

namespace sf::templates {

struct BuiltinTemplate {
  const char* name;
  const char* source;     // Jinja source, as in the model cards
  const char* bos_token;  // the family's special tokens, used when no tokenizer dir supplies them
  const char* eos_token;
};

// nullptr when `name` is not one of llama3, llama2, chatml.
const BuiltinTemplate* builtin_chat_template(const std::string& name);

}  // namespace sf::templates
