// defines: the fuzz entry points (see entry_points.h)
#include "entry_points.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string_view>

#include "core/error.h"
#include "data/chat_template.h"
#include "data/dataset.h"
#include "data/encode.h"
#include "data/pipeline.h"
#include "data/tokenizer.h"
#include "io/safetensors.h"
#include "model/spec.h"
#include "model/weights.h"
#include "train/config.h"
#include "train/data.h"
#include "train/trainer_state_file.h"

namespace sf::fuzz {
namespace {

std::string_view text_of(const uint8_t* data, size_t size) {
  return std::string_view(reinterpret_cast<const char*>(data), size);
}

// A fixed conversation the templates see (covers messages, roles, tools absent).
const nlohmann::ordered_json& conversation() {
  static const nlohmann::ordered_json m = nlohmann::ordered_json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hi ünï 🎉"},
    {"role": "assistant", "content": "<think>\nhmm\n</think>\n\nHello!", "reasoning_content": "r"},
    {"role": "user", "content": "2+2?"}])");
  return m;
}

}  // namespace

void run_jinja(const uint8_t* data, size_t size) {
  try {
    ChatTemplate t = ChatTemplate::from_string(std::string(text_of(data, size)), "fuzz");
    t.set_special_token("bos_token", "<s>");
    t.set_special_token("eos_token", "</s>");
    t.render(conversation(), true, nlohmann::ordered_json::object());
  } catch (const Error&) {
  }
}

void run_dataset(const uint8_t* data, size_t size) {
  const std::string content(text_of(data, size));
  for (bool skip : {false, true}) {
    DatasetReadOptions o;
    o.skip_malformed = skip;
    try {
      std::vector<Record> r = read_dataset_text(content, "fuzz.jsonl", o);
      // What the trainer does next with a conversation: render it (through a real template).
      static const ChatTemplate chat = ChatTemplate::builtin("chatml");
      for (const Record& rec : r)
        if (rec.kind == Record::Kind::kChat) {
          try {
            chat.render(rec.messages, false, nlohmann::ordered_json::object());
          } catch (const Error&) {
          }
        }
    } catch (const Error&) {
    }
  }
}

void run_tokenizer(const uint8_t* data, size_t size) {
  try {
    Tokenizer t = Tokenizer::from_json(text_of(data, size), "", "fuzz/tokenizer.json");
    for (std::string_view s : {std::string_view("Hello world! 123  \n\t x"),
                               std::string_view("ünïcødé 🎉 <s></s>"), std::string_view(""),
                               text_of(data, std::min<size_t>(size, 512))}) {
      std::vector<int32_t> ids = t.encode(s, true);
      t.decode(ids, false);
    }
  } catch (const Error&) {
  }
}

void run_model_config(const uint8_t* data, size_t size) {
  try {
    ModelSpec s = parse_model_spec(std::string(text_of(data, size)), "fuzz/config.json");
    (void)parameter_count(s);
    (void)expected_tensors(s);
  } catch (const Error&) {
  }
}

void run_safetensors(const uint8_t* data, size_t size) {
  // The reader maps a file: one per process, rewritten for each input.
  static const std::filesystem::path file =
      std::filesystem::temp_directory_path() / ("sf_fuzz_" + std::to_string(getpid()) +
                                                ".safetensors");
  {
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  }
  try {
    SafetensorsReader r(file);
    std::vector<float> buf;
    for (const std::string& name : r.names()) {
      const TensorInfo& t = r.get(name);
      size_t n = 1;
      for (int64_t d : t.shape) n *= size_t(d);
      if (n > (1u << 20)) continue;
      buf.resize(n);
      r.read_f32(name, buf.data(), n);
    }
  } catch (const Error&) {
  }
}

void run_samples_cache(const uint8_t* data, size_t size) {
  try {
    parse_samples_cache(text_of(data, size), "fuzz/tokenized.bin");
  } catch (const Error&) {
  }
}

// The samples the fuzzed data position is restored onto (corpus/train_state/seed_* carry their
// fingerprint, so a valid position reaches the order and generator parsing).
std::vector<Sample> train_state_samples() {
  std::vector<Sample> s;
  for (int32_t i = 0; i < 5; ++i) s.push_back(Sample{{1, 2 + i, 3}, {-100, 2 + i, 3}});
  return s;
}

void run_train_state(const uint8_t* data, size_t size) {
  try {
    const TrainerState st =
        parse_trainer_state(std::string(text_of(data, size)), "fuzz/trainer_state.json");
    // What a resume does next: compare the saved configuration, restore the data position.
    (void)resume_config_difference(st.config_yaml, TrainConfig{});
    Batcher b(train_state_samples(), 2, true, 7);
    b.restore_state(st.batcher);
    for (int i = 0; i < 4; ++i) (void)b.next();
  } catch (const Error&) {
  }
}

namespace {

// The checkpoint directory the fuzzed index is written into, made once per process: two real
// shards (a, b in F32; c, d in BF16), and beside them what a hostile index may name instead — a
// third shard repeating tensor a, a directory, a FIFO and a file that is not safetensors. One
// level up, outside the checkpoint, a real shard (tensor z): reading it through any name is a
// finding, as is a tensor read from a file whose name is not the one the index gave.
class IndexCheckpoint {
 public:
  IndexCheckpoint() {
    namespace fs = std::filesystem;
    root_ = fs::temp_directory_path() / ("sf_fuzz_index_" + std::to_string(getpid()));
    dir_ = root_ / "ckpt";
    fs::remove_all(root_);
    fs::create_directories(dir_ / "dir.safetensors");
    const float v[6] = {1.0f, -2.0f, 0.5f, 3.0f, -0.25f, 8.0f};
    write_safetensors_file(dir_ / "model-00001-of-00002.safetensors",
                           {{"a", {2, 3}, v}, {"b", {4}, v}}, DType::kF32);
    write_safetensors_file(dir_ / "model-00002-of-00002.safetensors",
                           {{"c", {3}, v}, {"d", {1, 2}, v}}, DType::kBF16);
    write_safetensors_file(dir_ / "extra.safetensors", {{"a", {2, 3}, v}, {"e", {0}, v}},
                           DType::kF32);
    write_safetensors_file(root_ / "outside.safetensors", {{"z", {2}, v}}, DType::kF32);
    std::ofstream(dir_ / "config.json") << R"({"model_type": "llama"})";
    if (mkfifo((dir_ / "fifo.safetensors").c_str(), 0600) != 0) std::abort();
  }
  ~IndexCheckpoint() {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path root_, dir_;
};

[[noreturn]] void index_finding(const std::string& what) {
  std::fprintf(stderr, "fuzz_safetensors_index finding: %s\n", what.c_str());
  std::abort();
}

}  // namespace

void run_safetensors_index(const uint8_t* data, size_t size) {
  static const IndexCheckpoint ckpt;
  {
    std::ofstream out(ckpt.dir() / "model.safetensors.index.json",
                      std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  }
  try {
    // What loading a sharded model does: open the directory (no model.safetensors: the index),
    // then check and convert every tensor through load_tensor_f32, dropping its pages.
    SafetensorsReader r(ckpt.dir());
    std::vector<float> buf;
    for (const std::string& name : r.names()) {
      const TensorInfo& t = r.get(name);
      if (t.file.parent_path() != ckpt.dir())
        index_finding("tensor '" + name + "' read from " + t.file.string() +
                      ", outside the checkpoint directory");
      if (t.file.string().find('\0') != std::string::npos)
        index_finding("tensor '" + name + "' read from a shard name holding a NUL byte");
      size_t n = 1;
      for (int64_t d : t.shape) n *= size_t(d);
      buf.resize(n);
      load_tensor_f32(r, TensorDesc{name, t.shape, true}, buf.data());
    }
  } catch (const Error&) {
  }
}

namespace {

// GPT-2's bytes_to_unicode: byte b → the UTF-8 of the character ByteLevel maps it to.
std::string byte_level_char(int b) {
  const bool printable = (b >= 0x21 && b <= 0x7e) || (b >= 0xa1 && b <= 0xac) || b >= 0xae;
  int cp = b;
  if (!printable) {
    cp = 256;
    for (int c = 0; c < b; ++c)
      if (!((c >= 0x21 && c <= 0x7e) || (c >= 0xa1 && c <= 0xac) || c >= 0xae)) ++cp;
  }
  if (cp < 0x80) return std::string(1, char(cp));
  return {char(0xc0 | (cp >> 6)), char(0x80 | (cp & 0x3f))};
}

// The fixed tokenizer.json beside the fuzzed config: a small but real byte-level BPE (all 256
// byte tokens, a few merges, a ByteLevel post-processor so that add_bos_token / add_eos_token
// decide) with the added tokens the seed configs of Llama-3, Mistral, Qwen and GPT-2 name.
std::string small_byte_level_tokenizer_json() {
  nlohmann::ordered_json vocab = nlohmann::ordered_json::object(),
                         merges = nlohmann::ordered_json::array();
  for (int b = 0; b < 256; ++b) vocab[byte_level_char(b)] = b;
  for (const char* m : {"H e", "l l", "He ll", "Hell o", "Ġ w", "o r", "Ġw or", "l d", "Ġwor ld",
                        "Ġ t", "h e", "Ġt he", "Ġ H", "Ġ a", "i n", "Ġ 2"}) {
    const std::string pair(m),
        merged = pair.substr(0, pair.find(' ')) + pair.substr(pair.find(' ') + 1);
    merges.push_back(pair);
    if (!vocab.contains(merged)) vocab[merged] = int(vocab.size());
  }
  nlohmann::ordered_json added = nlohmann::ordered_json::array();
  for (const char* t : {"<unk>", "<s>", "</s>", "<|endoftext|>", "<|im_start|>", "<|im_end|>",
                        "<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                        "<|end_header_id|>", "<|eot_id|>", "<think>", "</think>"}) {
    const bool special = std::string_view(t).find("think") == std::string_view::npos;  // Qwen3
    added.push_back({{"id", int(vocab.size() + added.size())},
                     {"content", t},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", !special},
                     {"special", special}});
  }
  nlohmann::ordered_json j = {{"version", "1.0"},
                              {"truncation", nullptr},
                              {"padding", nullptr},
                              {"added_tokens", added},
                              {"normalizer", nullptr},
                              {"pre_tokenizer",
                               {{"type", "ByteLevel"},
                                {"add_prefix_space", false},
                                {"trim_offsets", true},
                                {"use_regex", true}}},
                              {"post_processor",
                               {{"type", "ByteLevel"},
                                {"add_prefix_space", false},
                                {"trim_offsets", false},
                                {"use_regex", true}}},
                              {"decoder",
                               {{"type", "ByteLevel"},
                                {"add_prefix_space", true},
                                {"trim_offsets", true},
                                {"use_regex", true}}},
                              {"model",
                               {{"type", "BPE"},
                                {"dropout", nullptr},
                                {"unk_token", nullptr},
                                {"continuing_subword_prefix", nullptr},
                                {"end_of_word_suffix", nullptr},
                                {"fuse_unk", false},
                                {"byte_fallback", false},
                                {"ignore_merges", false},
                                {"vocab", vocab},
                                {"merges", merges}}}};
  return j.dump();
}

// The tokenizer folder the fuzzed tokenizer_config.json is written into, made once per process:
// the fixed tokenizer.json, and a chat_template.jinja (ChatML) that the folder's template falls
// back to when the config has no chat_template.
class TokenizerDir {
 public:
  TokenizerDir() {
    dir_ = std::filesystem::temp_directory_path() / ("sf_fuzz_tokcfg_" + std::to_string(getpid()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    std::ofstream(dir_ / "tokenizer.json") << small_byte_level_tokenizer_json();
    std::ofstream(dir_ / "chat_template.jinja")
        << "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + "
           "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}"
           "{{ '<|im_start|>assistant\\n' }}{% endif %}";
  }
  ~TokenizerDir() {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  std::filesystem::path dir_;
};

}  // namespace

void run_tokenizer_config(const uint8_t* data, size_t size) {
  static const TokenizerDir folder;
  {
    std::ofstream out(folder.dir() / "tokenizer_config.json", std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), std::streamsize(size));
  }
  // What the trainer does with a tokenizer folder (train/samples.cpp): load the tokenizer, then
  // its chat template (resolve_chat_template with no choice: the folder's own).
  std::optional<Tokenizer> tok;
  try {
    tok = Tokenizer::load(folder.dir());
    for (std::string_view s :
         {std::string_view("Hello world! the 2+2 ünï 🎉"),
          std::string_view("<s>Hi</s><|im_start|>user\nHello<|im_end|>\n<think>x</think>"),
          std::string_view("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi"
                           "<|eot_id|><|endoftext|>"),
          std::string_view("")}) {
      for (bool specials : {true, false}) {
        const std::vector<int32_t> ids = tok->encode(s, specials);
        (void)tok->decode(ids, false);
        (void)tok->decode(ids, true);
      }
    }
    (void)tok->token_to_id(tok->bos_token());
    (void)tok->id_to_token(tok->eos_id());
    (void)tok->is_special(tok->bos_id());
  } catch (const Error&) {
    tok.reset();
  }
  try {
    const ChatTemplate chat = resolve_chat_template("", folder.dir(), tok ? &*tok : nullptr);
    if (!tok) {  // the trainer stops at the tokenizer; the template is still read and rendered
      chat.render(conversation(), true, nlohmann::ordered_json::object());
      return;
    }
    // A conversation as the trainer encodes it: rendered, tokenised, assistant turns labelled.
    Record r;
    r.kind = Record::Kind::kChat;
    r.messages = conversation();
    r.messages.push_back({{"role", "assistant"}, {"content", "4"}});
    EncodeOptions o;
    (void)encode_record(r, &*tok, &chat, o);
  } catch (const Error&) {
  }
}

const std::vector<Target>& targets() {
  static const std::vector<Target> t = {{"jinja", run_jinja},
                                        {"dataset", run_dataset},
                                        {"tokenizer", run_tokenizer},
                                        {"model_config", run_model_config},
                                        {"safetensors", run_safetensors},
                                        {"samples_cache", run_samples_cache},
                                        {"train_state", run_train_state},
                                        {"safetensors_index", run_safetensors_index},
                                        {"tokenizer_config", run_tokenizer_config}};
  return t;
}

}  // namespace sf::fuzz
