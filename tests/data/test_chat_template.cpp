// Chat templates executed as written: our renderer against transformers' apply_chat_template
// (fixtures from tests/data/chat/make_chat_fixtures.py), byte for byte, plus the loading rules.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "core/error.h"
#include "data/chat_template.h"

#ifndef SF_SOURCE_DIR  // CMake defines it; a direct g++ build run from the repo root needs none
#define SF_SOURCE_DIR "."
#endif

namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

const fs::path kSource = SF_SOURCE_DIR;
const fs::path kChatDir = kSource / "tests" / "data" / "chat";
const fs::path kTokRoot = kSource / ".." / "shared" / "data" / "tokenizers";

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

ojson fixtures() {
  static const ojson j = ojson::parse(slurp(kChatDir / "chat_fixtures.json"));
  return j;
}

sf::ChatTemplate template_for(const ojson& c) {
  if (c["template"] == "tokenizer_config")
    return sf::ChatTemplate::from_tokenizer_dir(kTokRoot / c["tokenizer"].get<std::string>());
  auto t = sf::ChatTemplate::from_file(kChatDir / c["template"].get<std::string>());
  for (auto it = c["special_tokens"].begin(); it != c["special_tokens"].end(); ++it)
    t.set_special_token(it.key(), it.value().get<std::string>());
  return t;
}

}  // namespace

TEST(ChatTemplate, MatchesTransformersFixtures) {
  if (!fs::exists(kTokRoot)) GTEST_SKIP() << "skipped: ../shared/data is absent";
  const ojson fx = fixtures();
  std::map<std::string, std::pair<int, int>> tally;  // "<tokenizer>/<template>" → (pass, total)
  for (const auto& c : fx["cases"]) {
    SCOPED_TRACE(c["id"].get<std::string>());
    const ojson& msgs = fx["conversations"][c["conversation"].get<std::string>()];
    auto& [pass, total] =
        tally[c["tokenizer"].get<std::string>() + "/" + c["template"].get<std::string>()];
    ++total;
    sf::ChatTemplate t = template_for(c);
    if (c.contains("error")) {
      try {
        t.render(msgs, c["add_generation_prompt"].get<bool>(), c["kwargs"]);
        ADD_FAILURE() << "rendered, but transformers raised: " << c["error"];
      } catch (const sf::Error& e) {
        EXPECT_NE(std::string(e.what()).find(c["error"].get<std::string>()), std::string::npos)
            << e.what();
        pass += std::string(e.what()).find(c["error"].get<std::string>()) != std::string::npos;
      }
      continue;
    }
    std::string got;
    try {
      got = t.render(msgs, c["add_generation_prompt"].get<bool>(), c["kwargs"]);
    } catch (const sf::Error& e) {
      ADD_FAILURE() << "render failed: " << e.what();
      continue;
    }
    EXPECT_EQ(got, c["text"].get<std::string>());
    pass += got == c["text"].get<std::string>();
    // The nlohmann::json overload (sorted keys) renders the same where the template prints no
    // JSON of the input.
    if (c["conversation"] != "tool_turns") {
      auto sorted_msgs = nlohmann::json::parse(msgs.dump());
      auto sorted_kwargs = nlohmann::json::parse(c["kwargs"].dump());
      EXPECT_EQ(t.render(sorted_msgs, c["add_generation_prompt"].get<bool>(), sorted_kwargs), got);
    }
  }
  for (const auto& [name, pt] : tally)
    std::cout << "[ chat fixtures ] " << name << ": " << pt.first << "/" << pt.second << " match\n";
  EXPECT_GE(fx["cases"].size(), 100u);
}

TEST(ChatTemplate, BuiltinsAreTheFixtureTemplateFiles) {
  EXPECT_EQ(sf::ChatTemplate::builtin("llama3").source(), slurp(kChatDir / "llama3.jinja"));
  EXPECT_EQ(sf::ChatTemplate::builtin("llama2").source(), slurp(kChatDir / "mistral_inst.jinja"));
  EXPECT_EQ(sf::ChatTemplate::builtin("chatml").source(), slurp(kChatDir / "chatml.jinja"));
  EXPECT_THROW(sf::ChatTemplate::builtin("vicuna"), sf::Error);
}

TEST(ChatTemplate, BuiltinLlama2RendersAndRefuses) {
  auto t = sf::ChatTemplate::builtin("llama2");
  nlohmann::json ok = {{{"role", "system"}, {"content", "Sys"}},
                       {{"role", "user"}, {"content", " Hi "}},
                       {{"role", "assistant"}, {"content", "Hello"}},
                       {{"role", "user"}, {"content", "Bye"}}};
  EXPECT_EQ(t.render(ok, false),
            "<s>[INST] <<SYS>>\nSys\n<</SYS>>\n\n Hi [/INST] Hello </s><s>[INST] Bye [/INST]");
  nlohmann::json bad = {{{"role", "user"}, {"content", "a"}}, {{"role", "user"}, {"content", "b"}}};
  try {
    t.render(bad, false);
    FAIL() << "expected raise_exception";
  } catch (const sf::Error& e) {
    EXPECT_STREQ(e.what(), "Conversation roles must alternate user/assistant/user/assistant/...");
  }
}

TEST(ChatTemplate, BuiltinLlama3AndChatml) {
  nlohmann::json m = {{{"role", "user"}, {"content", " hi "}}};
  EXPECT_EQ(sf::ChatTemplate::builtin("llama3").render(m, true),
            "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(sf::ChatTemplate::builtin("chatml").render(m, false),
            "<|im_start|>user\n hi <|im_end|>\n");
}

TEST(ChatTemplate, MissingTemplateSaysWhatToPass) {
  if (!fs::exists(kTokRoot)) GTEST_SKIP() << "skipped: ../shared/data is absent";
  for (const char* dir : {"mistral", "gpt2"}) {
    try {
      sf::ChatTemplate::from_tokenizer_dir(kTokRoot / dir);
      FAIL() << dir << " has no chat template";
    } catch (const sf::Error& e) {
      EXPECT_NE(std::string(e.what()).find("--chat-template llama3|llama2|chatml"),
                std::string::npos)
          << e.what();
    }
  }
}

// A --chat-template that is neither a built-in name nor a file lists the built-in names.
TEST(ChatTemplate, UnknownNameListsTheBuiltins) {
  for (const char* name : {"qwen", "llama-3", "chatml2"}) {
    try {
      sf::resolve_chat_template(name, {}, nullptr);
      FAIL() << name << " is no template";
    } catch (const sf::Error& e) {
      EXPECT_NE(std::string(e.what()).find(std::string("chat template '") + name +
                                           "' is neither a built-in template (llama3, llama2, "
                                           "chatml) nor a file"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_EQ(sf::resolve_chat_template("chatml", {}, nullptr).name(), "builtin:chatml");
}

TEST(ChatTemplate, NamedTemplatesAndTokenObjects) {
  fs::path dir =
      fs::temp_directory_path() / ("sf_chat_template_test_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  ojson cfg = {
      {"bos_token", {{"content", "<B>"}, {"lstrip", false}}},
      {"eos_token", "<E>"},
      {"chat_template",
       ojson::array({{{"name", "default"}, {"template", "D{{ bos_token }}{{ eos_token }}"}},
                     {{"name", "tool_use"}, {"template", "T{{ messages|length }}"}}})}};
  std::ofstream(dir / "tokenizer_config.json") << cfg.dump();
  nlohmann::json m = nlohmann::json::array();
  EXPECT_EQ(sf::ChatTemplate::from_tokenizer_dir(dir).render(m, false), "D<B><E>");
  EXPECT_EQ(sf::ChatTemplate::from_tokenizer_dir(dir, "tool_use").render(m, false), "T0");
  EXPECT_THROW(sf::ChatTemplate::from_tokenizer_dir(dir, "rag"), sf::Error);
  fs::remove_all(dir);
}

TEST(ChatTemplate, KwargsNullKeysAndReasoningAliases) {
  auto t = sf::ChatTemplate::from_string(
      "{% for m in messages %}{{ m|tojson }}{% endfor %}|{{ enable_thinking }}|{{ tools is none "
      "}}");
  ojson m = ojson::array(
      {{{"role", "assistant"}, {"content", "x"}, {"tool_calls", nullptr}, {"reasoning", "r"}}});
  EXPECT_EQ(
      t.render(m, false, ojson{{"enable_thinking", false}}),
      "{\"thinking\": \"r\", \"role\": \"assistant\", \"content\": \"x\", \"reasoning\": \"r\", "
      "\"reasoning_content\": \"r\"}|False|True");
}
