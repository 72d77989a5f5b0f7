// `slideformer generate --model DIR [--chat] --prompt TEXT | --messages FILE
//  [--max-new-tokens N] [--temperature T] [--top-p P] [--seed S] [--tokenizer DIR]
//  [--chat-template NAME|FILE] [--template-kwargs JSON] [--backend auto|cpu|cuda]
//  [--gpu-memory SIZE] [--print-ids]
//  [--prompt-ids 1,2,3 instead of a text prompt]`
// Greedy (the default, temperature 0) or sampled decoding from a model directory with a KV cache,
// through its chat template with --chat / --messages; the new text on stdout, where the layers
// live (resident or streamed) on stderr. See train/generate.h and engine/decode.h.
#include <algorithm>
#include <climits>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/input_file.h"
#include "core/size_parse.h"
#include "data/chat_template.h"
#include "data/tokenizer.h"
#include "model/spec.h"
#include "train/config_file.h"
#include "train/generate.h"
#include "train/run_setup.h"

namespace sf {
namespace {

// Prompt tokens one pass of the decoder takes: longer prompts run in several (each against the
// cache of the ones before), so the workspaces stay those of 512 tokens whatever the prompt.
constexpr int64_t kPrefillChunk = 512;

// "1,2,3" (spaces allowed); each a token id (checked against the vocabulary by the decoder).
std::vector<int32_t> parse_ids(const std::string& text) {
  std::vector<int32_t> ids;
  size_t at = 0;
  while (at < text.size()) {
    const size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(item, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    while (used < item.size() && item[used] == ' ') ++used;
    SF_CHECK(used == item.size() && !item.empty() && v >= 0 && v < INT32_MAX,
             "generate: --prompt-ids takes token ids separated by commas (1,2,3); '", item,
             "' is not one");
    ids.push_back(int32_t(v));
    at = comma + 1;
  }
  return ids;
}

}  // namespace

int cmd_generate(const std::vector<std::string>& argv) {
  Args a(argv,
         {"model", "tokenizer", "prompt", "messages", "max-new-tokens", "temperature", "top-p",
          "seed", "chat-template", "template-kwargs", "backend", "gpu-memory", "prompt-ids"},
         {"chat", "print-ids"}, "generate");
  const std::filesystem::path model = a.required("model");
  SF_CHECK(int(a.has("prompt")) + int(a.has("messages")) + int(a.has("prompt-ids")) == 1,
           "generate: give one of --prompt TEXT, --messages FILE or --prompt-ids 1,2,3");
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
  if (Tokenizer::present(tok_dir)) tok = Tokenizer::load(tok_dir);
  // Ids in and ids out need no tokenizer; anything with text does.
  SF_CHECK(tok || spec.vocab == 256 || (a.has("prompt-ids") && a.flag("print-ids")),
           "generate: no tokenizer.json in ", tok_dir.string(), " and the vocabulary is ",
           spec.vocab, " tokens: give --tokenizer DIR (or --prompt-ids with --print-ids)");
  std::vector<int32_t> prompt;
  const bool chat = a.flag("chat") || a.has("messages");
  SF_CHECK(!chat || !a.has("prompt-ids"), "generate: --chat renders text: use --prompt TEXT");
  SF_CHECK(chat || !a.has("template-kwargs"), "generate: --template-kwargs needs --chat");
  if (a.has("prompt-ids")) {
    prompt = parse_ids(a.str("prompt-ids", ""));
  } else if (chat) {
    SF_CHECK(tok, "generate: --chat needs a tokenizer (and its chat template)");
    nlohmann::ordered_json messages;
    if (a.has("messages")) {
      const std::filesystem::path f = a.str("messages", "");
      try {
        messages = nlohmann::ordered_json::parse(read_text_file(f, "the messages file"));
      } catch (const nlohmann::json::exception& e) {
        SF_FAIL(f.string(), ": not valid JSON (", json_error_text(e), ")");
      }
      SF_CHECK(messages.is_array(), f.string(), ": expected a list of {\"role\", \"content\"}");
    } else {
      messages =
          nlohmann::ordered_json::array({{{"role", "user"}, {"content", a.str("prompt", "")}}});
    }
    // The template's keyword options, as train's chat_template_kwargs (e.g. Qwen3's
    // {"enable_thinking": false}: the reply starts after an empty <think></think>).
    nlohmann::ordered_json kwargs = nlohmann::ordered_json::object();
    if (a.has("template-kwargs")) {
      try {
        kwargs = nlohmann::ordered_json::parse(a.str("template-kwargs", "{}"));
      } catch (const nlohmann::json::exception& e) {
        SF_FAIL("generate: --template-kwargs is not valid JSON (", json_error_text(e, true), ")");
      }
      SF_CHECK(kwargs.is_object(), "generate: --template-kwargs must be a JSON object, e.g. ",
               "'{\"enable_thinking\": false}'");
    }
    const ChatTemplate t = resolve_chat_template(a.str("chat-template", ""), tok_dir, &*tok);
    prompt = tok->encode(t.render(messages, true, kwargs), false);
  } else if (tok) {
    prompt = tok->encode(a.str("prompt", ""), true);
  } else {
    for (char c : a.str("prompt", "")) prompt.push_back(int32_t(uint8_t(c)));
  }
  SF_CHECK(!prompt.empty(), "generate: the prompt is empty");

  DecoderOptions dopt;
  dopt.max_tokens = int64_t(prompt.size()) + o.max_new_tokens;
  dopt.prefill_chunk = std::min(dopt.max_tokens, kPrefillChunk);
  if (a.has("gpu-memory")) dopt.device_budget = parse_size(a.str("gpu-memory", ""), "--gpu-memory");
  // The backend's own workspaces (attention, the fused head's chunks) are sized for one pass.
  auto backend = make_backend(a.str("backend", "auto"), spec, dopt.prefill_chunk);
  const std::unique_ptr<Decoder> decoder = load_decoder(*backend, model, dopt);
  std::cerr << decoder->summary() << "\n";
  const std::vector<int32_t> ids = generate_tokens(*decoder, prompt, o);
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
