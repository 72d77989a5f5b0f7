// defines: sf::ChatTemplate (see chat_template.h)
#include "data/chat_template.h"

#include <mutex>

#include "core/error.h"
#include "core/input_file.h"
#include "data/jinja/template.h"
#include "data/tokenizer.h"
#include "data/templates/builtin_templates.h"

namespace sf {

namespace {

std::string read_file(const std::filesystem::path& path) {
  return read_input_file(path, "the chat template file");
}

// cfg[key] as a string, or an error naming the file and key.
std::string config_string(const nlohmann::json& v, const std::filesystem::path& file,
                          const std::string& key) {
  SF_CHECK(v.is_string(), file.string(), ": \"", key, "\" must be a string, found ",
           v.type_name());
  return v.get<std::string>();
}

constexpr const char* kPassTemplate =
    "pass --chat-template llama3|llama2|chatml or --chat-template <file.jinja>";

// apply_chat_template's preprocessing: drop keys whose value is None, then alias reasoning fields
// ({"thinking": r, **message, "reasoning_content": r}).
jinja::Value prepare_messages(const jinja::Value& messages) {
  SF_CHECK(messages.is_sequence(),
           "chat template: messages must be a JSON array of message objects");
  jinja::List out;
  for (const auto& m : messages.items()) {
    SF_CHECK(m.is_mapping(), "chat template: each message must be a JSON object, got ", m.repr());
    jinja::Dict d;
    for (const auto& [k, v] : m.dict().entries)
      if (!v.is_none()) d.entries.emplace_back(k, v);
    const jinja::Value* reasoning = nullptr;
    for (const char* key : {"reasoning_content", "thinking", "reasoning"})
      if (!reasoning) reasoning = d.find(std::string(key));
    if (reasoning) {
      jinja::Value r = *reasoning;
      jinja::Dict a;
      a.set(jinja::Value("thinking"), r);
      for (const auto& [k, v] : d.entries) a.set(k, v);
      a.set(jinja::Value("reasoning_content"), r);
      d = std::move(a);
    }
    out.push_back(jinja::Value::dict(std::move(d)));
  }
  return jinja::Value::list(std::move(out));
}

}  // namespace

struct ChatTemplate::Lazy {
  std::string source, name;
  std::once_flag once;
  std::unique_ptr<const jinja::Template> tmpl;
};

ChatTemplate::ChatTemplate(std::string source, std::string name) : lazy_(std::make_shared<Lazy>()) {
  lazy_->source = std::move(source);
  lazy_->name = std::move(name);
}

const jinja::Template& ChatTemplate::tmpl() const {
  // A parse error leaves `once` unset: every render reports it again.
  std::call_once(lazy_->once, [&] {
    lazy_->tmpl = std::make_unique<const jinja::Template>(lazy_->source, lazy_->name);
  });
  return *lazy_->tmpl;
}

ChatTemplate ChatTemplate::from_string(std::string source, std::string name) {
  return ChatTemplate(std::move(source), std::move(name));
}

ChatTemplate ChatTemplate::from_file(const std::filesystem::path& path) {
  return ChatTemplate(read_file(path), path.string());
}

ChatTemplate ChatTemplate::builtin(const std::string& name) {
  const auto* t = templates::builtin_chat_template(name);
  SF_CHECK(t, "unknown built-in chat template '", name,
           "': use llama3, llama2 or chatml, or pass a ", "template file");
  ChatTemplate ct(t->source, "builtin:" + name);
  ct.set_special_token("bos_token", t->bos_token);
  ct.set_special_token("eos_token", t->eos_token);
  return ct;
}

ChatTemplate ChatTemplate::from_tokenizer_dir(const std::filesystem::path& dir,
                                              const std::string& name) {
  auto cfg_path = dir / "tokenizer_config.json";
  nlohmann::json cfg = nlohmann::json::object();
  if (std::filesystem::exists(cfg_path)) {
    try {
      const std::string text = read_file(cfg_path);
      check_json_depth(text, cfg_path.string());
      cfg = nlohmann::json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      SF_FAIL(cfg_path.string(), " is not valid JSON: ", e.what());
    }
  }
  std::string source, label = cfg_path.string() + " chat_template";
  const auto it = cfg.find("chat_template");
  if (it != cfg.end() && it->is_string()) {
    SF_CHECK(name.empty() || name == "default", cfg_path.string(), " has a single chat template; ",
             "it has no template named '", name, "'");
    source = it->get<std::string>();
  } else if (it != cfg.end() && it->is_array()) {
    std::string want = name.empty() ? "default" : name, names;
    for (const auto& e : *it) {
      SF_CHECK(e.is_object() && e.contains("name") && e.contains("template"), cfg_path.string(),
               ": chat_template entries must be {\"name\", \"template\"} objects");
      const std::string entry = config_string(e["name"], cfg_path, "chat_template[].name");
      names += (names.empty() ? "" : ", ") + entry;
      if (entry == want) {
        source = config_string(e["template"], cfg_path, "chat_template[].template");
        label += "['" + want + "']";
      }
    }
    SF_CHECK(!source.empty() || names.empty(), cfg_path.string(), " has no chat template named '",
             want, "' (it has: ", names, ")");
  } else if (std::filesystem::exists(dir / "chat_template.jinja") &&
             (name.empty() || name == "default")) {
    source = read_file(dir / "chat_template.jinja");
    label = (dir / "chat_template.jinja").string();
  }
  SF_CHECK(!source.empty(), "no chat template in ", cfg_path.string(), " (nor ",
           (dir / "chat_template.jinja").string(), "): ", kPassTemplate);
  ChatTemplate ct(source, label);
  // transformers passes special_tokens_map: the tokens set in the config, as strings.
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                          "cls_token", "mask_token"}) {
    auto t = cfg.find(key);
    if (t == cfg.end() || t->is_null()) continue;
    if (t->is_string())
      ct.set_special_token(key, t->get<std::string>());
    else if (t->is_object() && t->contains("content"))
      ct.set_special_token(key, config_string((*t)["content"], cfg_path,
                                              std::string(key) + ".content"));
  }
  return ct;
}

void ChatTemplate::set_special_token(const std::string& name, const std::string& value) {
  for (auto it = special_tokens_.begin(); it != special_tokens_.end(); ++it)
    if (it->first == name) {
      special_tokens_.erase(it);
      break;
    }
  if (!value.empty()) special_tokens_.emplace_back(name, value);
}

const std::string& ChatTemplate::source() const { return lazy_->source; }
const std::string& ChatTemplate::name() const { return lazy_->name; }

namespace {
template <typename J>
std::string render_impl(const jinja::Template& t,
                        const std::vector<std::pair<std::string, std::string>>& tokens,
                        const J& messages, bool add_generation_prompt, const J& extra) {
  SF_CHECK(extra.is_null() || extra.is_object(), "chat template kwargs must be a JSON object");
  jinja::Dict ctx;
  ctx.set(jinja::Value("messages"), prepare_messages(jinja::Value::from_json(messages)));
  ctx.set(jinja::Value("tools"), jinja::Value::none());
  ctx.set(jinja::Value("documents"), jinja::Value::none());
  ctx.set(jinja::Value("add_generation_prompt"), jinja::Value(add_generation_prompt));
  for (const auto& [k, v] : tokens) ctx.set(jinja::Value(k), jinja::Value(v));
  if (extra.is_object())
    for (auto it = extra.begin(); it != extra.end(); ++it) {
      SF_CHECK(it.key() != "messages" && it.key() != "add_generation_prompt",
               "chat template kwargs: '", it.key(), "' is set by render() itself");
      ctx.set(jinja::Value(it.key()), jinja::Value::from_json(it.value()));
    }
  return t.render(jinja::Value::dict(std::move(ctx)));
}
}  // namespace

std::string ChatTemplate::render(const nlohmann::json& messages, bool add_generation_prompt,
                                 const nlohmann::json& extra_kwargs) const {
  return render_impl(tmpl(), special_tokens_, messages, add_generation_prompt, extra_kwargs);
}

std::string ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                 const nlohmann::ordered_json& extra_kwargs) const {
  return render_impl(tmpl(), special_tokens_, messages, add_generation_prompt, extra_kwargs);
}

ChatTemplate resolve_chat_template(const std::string& choice,
                                   const std::filesystem::path& tokenizer_dir,
                                   const Tokenizer* tok) {
  if (choice.empty()) return ChatTemplate::from_tokenizer_dir(tokenizer_dir);
  const bool builtin = choice == "llama3" || choice == "llama2" || choice == "chatml";
  // A name that is not a file is taken for a built-in's name, misspelt (e.g. "qwen", "llama-3").
  SF_CHECK(builtin || std::filesystem::exists(choice), "chat template '", choice,
           "' is neither a built-in template (llama3, llama2, chatml) nor a file: give one of ",
           "those names or a Jinja template file (without chat_template, the tokenizer's own ",
           "template is used)");
  ChatTemplate t = builtin ? ChatTemplate::builtin(choice) : ChatTemplate::from_file(choice);
  if (tok) {
    if (!tok->bos_token().empty()) t.set_special_token("bos_token", tok->bos_token());
    if (!tok->eos_token().empty()) t.set_special_token("eos_token", tok->eos_token());
  }
  return t;
}

}  // namespace sf
