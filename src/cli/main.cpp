// slideformer — command-line entry: dispatches to the subcommands of cli/commands.h.
#include <iostream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "cli/train_args.h"

namespace {

const char* kUsage =
    "usage: slideformer <command> [options]\n"
    "  train       [run.yaml] [key=value ...] [--key value ...]\n"
    "              (slideformer train --help lists every option, its default and accepted values;\n"
    "              e.g. slideformer train --model DIR --data FILE.txt --output DIR --max-steps "
    "100)\n"
    "  plan        [run.yaml] [key=value ...] [--key value ...] [--remeasure]\n"
    "              (the options of train: the plan, device and host peaks, the predicted step\n"
    "              time from this machine's measured constants; --gpu-memory, --host-memory\n"
    "              plan for another machine)\n"
    "  init-model  --out DIR [--arch llama|mistral|qwen2|qwen3] [--hidden N] [--layers N]\n"
    "              [--heads N] [--kv-heads N] [--head-dim N] [--intermediate N] [--vocab N]\n"
    "              [--tie-embeddings] [--seed N] [--tokenizer DIR (its vocabulary, padded to a\n"
    "              multiple of 64, its BOS/EOS, its files copied)]\n"
    "              (a random-initialised HF model directory)\n"
    "  logits      --model DIR --batch BATCH.json --out LOGITS.safetensors\n"
    "              (forward only; BATCH.json holds \"input_ids\": [[...], ...])\n"
    "  generate    --model DIR [--chat] --prompt TEXT | --messages FILE [--max-new-tokens N]\n"
    "              [--temperature T (0 = greedy)] [--top-p P] [--seed S] [--tokenizer DIR]\n"
    "              [--chat-template NAME|FILE] [--template-kwargs '{\"enable_thinking\": false}']\n"
    "              [--backend auto|cpu|cuda] [--gpu-memory SIZE]\n"
    "              [--print-ids] [--prompt-ids 1,2,3 (instead of a text prompt)]\n"
    "              (KV cache; layers resident, or streamed when they do not fit)\n"
    "  tokenize    --tokenizer DIR [--add-special-tokens] [--decode [--skip-special-tokens]]\n"
    "              [--chat [--add-generation-prompt] [--chat-template llama3|llama2|chatml|FILE]\n"
    "              [--template-kwargs '{\"enable_thinking\": false}']]\n"
    "              (JSONL {\"text\": ...} or, with --chat, {\"messages\": [...]} on stdin\n"
    "              -> {\"ids\": [...]} on stdout)\n";

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2 || std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h") {
    std::cout << kUsage;
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  if (cmd == "--version") {
    std::cout << "slideformer " << sf::kSlideformerVersion << "\n";
    return 0;
  }
  std::vector<std::string> rest(argv + 2, argv + argc);
  try {
    if (cmd == "train") return sf::cmd_train(rest);
    if (cmd == "plan") return sf::cmd_plan(rest);
    if (cmd == "init-model") return sf::cmd_init_model(rest);
    if (cmd == "logits") return sf::cmd_logits(rest);
    if (cmd == "tokenize") return sf::cmd_tokenize(rest);
    if (cmd == "generate") return sf::cmd_generate(rest);
    std::cerr << "slideformer: unknown command '" << cmd << "'\n" << kUsage;
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "slideformer " << cmd << ": error: " << e.what() << "\n";
    return 1;
  }
}
