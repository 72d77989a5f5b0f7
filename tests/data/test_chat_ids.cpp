// Chat templates end to end: our template rendering, then our tokenizer, must give the ids of
// transformers' apply_chat_template(tokenize=True) for every fixture of
// tests/data/chat/chat_fixtures.json (where transformers' slow tokenizer and the `tokenizers`
// package disagree — the mistral folder's user-typed special-token lookalikes — the fixture keeps
// the `tokenizers` ids, our reference, as ids_tokenizers). Cases transformers refuses must be
// refused with its message.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"
#include "data/chat_template.h"
#include "data/tokenizer.h"

namespace {

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

const fs::path kChatDir = fs::path(SF_SOURCE_DIR) / "tests/data/chat";
const fs::path kTokRoot = fs::path(SF_SOURCE_DIR) / "../shared/data/tokenizers";

TEST(ChatIds, MatchTransformersApplyChatTemplate) {
  if (!fs::exists(kTokRoot)) GTEST_SKIP() << "skipped: ../shared/data is absent";
  std::ifstream f(kChatDir / "chat_fixtures.json");
  const ojson fx = ojson::parse(f);
  std::map<std::string, sf::Tokenizer> toks;
  std::map<std::string, std::pair<int, int>> tally;
  for (const ojson& c : fx["cases"]) {
    const std::string tok_name = c["tokenizer"];
    if (!toks.count(tok_name)) toks.emplace(tok_name, sf::Tokenizer::load(kTokRoot / tok_name));
    const sf::Tokenizer& tok = toks.at(tok_name);
    sf::ChatTemplate t = c["template"] == "tokenizer_config"
                             ? sf::ChatTemplate::from_tokenizer_dir(kTokRoot / tok_name)
                             : sf::ChatTemplate::from_file(kChatDir / c["template"].get<std::string>());
    if (c["template"] != "tokenizer_config")
      for (auto it = c["special_tokens"].begin(); it != c["special_tokens"].end(); ++it)
        t.set_special_token(it.key(), it.value().get<std::string>());
    const ojson& messages = fx["conversations"][c["conversation"].get<std::string>()];
    auto& [pass, total] = tally[tok_name + "/" + c["template"].get<std::string>()];
    ++total;
    if (c.contains("error")) {
      try {
        t.render(messages, c["add_generation_prompt"], c["kwargs"]);
        ADD_FAILURE() << c["id"] << ": transformers refuses this conversation, we did not";
      } catch (const sf::Error& e) {
        EXPECT_NE(std::string(e.what()).find(c["error"].get<std::string>()), std::string::npos)
            << c["id"];
        ++pass;
      }
      continue;
    }
    const std::string text = t.render(messages, c["add_generation_prompt"], c["kwargs"]);
    const std::vector<int32_t> ids = tok.encode(text, false);
    const ojson& want = c.contains("ids_tokenizers") ? c["ids_tokenizers"] : c["ids"];
    const bool same = ids == want.get<std::vector<int32_t>>();
    EXPECT_TRUE(same) << c["id"];
    pass += same;
  }
  for (const auto& [name, pt] : tally)
    std::cout << "[ chat ids ] " << name << ": " << pt.first << "/" << pt.second << " match\n";
}

}  // namespace
