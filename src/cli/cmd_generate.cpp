// `slideformer generate --model DIR [--chat] --prompt TEXT | --messages FILE
//  [--max-new-tokens N] [--temperature T] [--top-p P] [--seed S] [--tokenizer DIR]
//  [--chat-template NAME|FILE] [--backend auto|cpu|cuda] [--print-ids]`
// Greedy (the default, temperature 0) or sampled decoding from a model directory, through its
// chat template with --chat / --messages; the new text on stdout. See train/generate.h.
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "data/chat_template.h"
#include "data/tokenizer.h"
#include "engine/engine.h"
#include "model/spec.h"
#include "train/run_setup.h"
#include "train/checkpoint.h"
#include "train/config_file.h"
#include "train/generate.h"
#include "train/trainer.h"

namespace sf {

int cmd_generate(const std::vector<std::string>& argv) {
  Args a(argv,
         {"model", "tokenizer", "prompt", "messages", "max-new-tokens", "temperature", "top-p",
          "seed", "chat-template", "backend"},
         {"chat", "print-ids"}, "generate");
  const std::filesystem::path model = a.required("model");
  SF_CHECK(a.has("prompt") != a.has("messages"), "generate: give --prompt TEXT or --messages FILE");
  GenerateOptions o;
  o.max_new_tokens = a.integer("max-new-tokens", o.max_new_tokens);
  SF_CHECK(o.max_new_tokens >= 1 && o.max_new_tokens <= (1 << 20),
           "generate: --max-new-tokens must be in [1, 1048576]");
  o.temperature = a.number("temperature", 0);
  o.top_p = a.number("top-p", 1);
  const int64_t seed = a.integer("seed", 0);
  SF_CHECK(seed >= 0, "generate: --seed must be >= 0");
  o.seed = uint64_t(seed);
  const ModelSpec spec = load_model_spec(model);
  o.eos_ids = eos_token_ids(model);

  const std::filesystem::path tok_dir =
      a.has("tokenizer") ? std::filesystem::path(a.str("tokenizer", "")) : model;
  std::optional<Tokenizer> tok;
  if (std::filesystem::exists(tok_dir / "tokenizer.json")) tok = Tokenizer::load(tok_dir);
  SF_CHECK(tok || spec.vocab == 256, "generate: no tokenizer.json in ", tok_dir.string(),
           " and the vocabulary is ", spec.vocab, " tokens: give --tokenizer DIR");
  std::vector<int32_t> prompt;
  const bool chat = a.flag("chat") || a.has("messages");
  if (chat) {
    SF_CHECK(tok, "generate: --chat needs a tokenizer (and its chat template)");
    nlohmann::ordered_json messages;
    if (a.has("messages")) {
      const std::filesystem::path f = a.str("messages", "");
      try {
        messages = nlohmann::ordered_json::parse(read_text_file(f, "the messages file"));
      } catch (const nlohmann::json::exception& e) {
        SF_FAIL(f.string(), ": not valid JSON (", e.what(), ")");
      }
      SF_CHECK(messages.is_array(), f.string(), ": expected a list of {\"role\", \"content\"}");
    } else {
      messages =
          nlohmann::ordered_json::array({{{"role", "user"}, {"content", a.str("prompt", "")}}});
    }
    const ChatTemplate t = resolve_chat_template(a.str("chat-template", ""), tok_dir, &*tok);
    prompt = tok->encode(t.render(messages, true, nlohmann::ordered_json::object()), false);
  } else if (tok) {
    prompt = tok->encode(a.str("prompt", ""), true);
  } else {
    for (char c : a.str("prompt", "")) prompt.push_back(int32_t(uint8_t(c)));
  }
  SF_CHECK(!prompt.empty(), "generate: the prompt is empty");

  auto backend =
      make_backend(a.str("backend", "auto"), spec, int64_t(prompt.size()) + o.max_new_tokens);
  EngineOptions opt;
  opt.window = 1;
  opt.max_tokens = int64_t(prompt.size()) + o.max_new_tokens;
  opt.max_sequences = 1;
  Engine engine(*backend, spec, opt);
  load_model_weights(engine, model);
  const std::vector<int32_t> ids = generate_tokens(engine, prompt, o);
  if (a.flag("print-ids")) {
    std::cout << "{\"prompt_ids\": " << nlohmann::json(prompt).dump()
              << ", \"new_ids\": " << nlohmann::json(ids).dump() << "}\n";
    return 0;
  }
  if (tok) {
    std::cout << tok->decode(ids, true) << "\n";
  } else {
    std::string text;
    for (int32_t id : ids) text += char(id);
    std::cout << text << "\n";
  }
  return 0;
}

}  // namespace sf
