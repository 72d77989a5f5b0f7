// defines: sf::templates::builtin_chat_template — the chat templates SlideFormer ships for
// checkpoints whose tokenizer_config.json has none (`--chat-template llama3|llama2|chatml`).
// Header-only. The sources are byte-identical to tests/data/chat/{llama3,mistral_inst,chatml}.jinja
// (test_chat_template.cpp checks it).
#pragma once

#include <string>

namespace sf::templates {

struct BuiltinTemplate {
  const char* name;
  const char* source;     // Jinja source, as in the model cards
  const char* bos_token;  // the family's special tokens, used when no tokenizer dir supplies them
  const char* eos_token;
};

namespace detail {

// Meta-Llama-3-8B-Instruct's template (tokenizer_config.json, with add_generation_prompt).
inline constexpr const char* kLlama3 =
    R"JINJA({% set loop_messages = messages %}{% for message in loop_messages %}{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>

'+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>

' }}{% endif %})JINJA";

// Llama-2-chat's template (meta-llama/Llama-2-7b-chat-hf): [INST] turns, an optional <<SYS>>
// block in the first user turn, roles must alternate user/assistant. Also the format of
// Mistral-7B-Instruct.
inline constexpr const char* kLlama2 =
    R"JINJA({% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}{% set system_message = false %}{% endif %}{% for message in loop_messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if loop.index0 == 0 and system_message != false %}{% set content = '<<SYS>>\n' + system_message + '\n<</SYS>>\n\n' + message['content'] %}{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %})JINJA";

// ChatML, as in the transformers chat-templating documentation.
inline constexpr const char* kChatml =
    R"JINJA({% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %})JINJA";

inline constexpr BuiltinTemplate kTemplates[] = {
    {"llama3", kLlama3, "<|begin_of_text|>", "<|eot_id|>"},
    {"llama2", kLlama2, "<s>", "</s>"},
    {"chatml", kChatml, "", "<|im_end|>"},
};

}  // namespace detail

// nullptr when `name` is not one of llama3, llama2, chatml.
inline const BuiltinTemplate* builtin_chat_template(const std::string& name) {
  for (const auto& t : detail::kTemplates)
    if (name == t.name) return &t;
  return nullptr;
}

}  // namespace sf::templates
