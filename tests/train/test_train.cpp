// `slideformer train` end to end on the CPU backend: the loss of a tiny model falls on real text,
// JSONL data is used in file order, checkpoints round-trip, and bad input gets a clear error.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "core/error.h"
#include "core/host_memory.h"
#include "data/pipeline.h"
#include "engine/host_check.h"
#include "io/safetensors.h"
#include "model/init.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "train/trainer.h"

namespace sf {
namespace {

namespace fs = std::filesystem;

fs::path temp_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("sf_train_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

fs::path make_model(const std::string& name, int64_t vocab = 256) {
  fs::path d = temp_dir(name) / "model";
  TinyModelOptions o;
  o.hidden = 64;
  o.layers = 2;
  o.heads = 4;
  o.kv_heads = 2;
  o.intermediate = 128;
  o.vocab = vocab;
  write_random_model(d, o);
  return d;
}

void write_text(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary);
  f << s;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Train, LossFallsOnSharedText) {
  const fs::path text = fs::path(SF_SOURCE_DIR) / "../shared/data/text/shakespeare-hamlet.txt";
  if (!fs::exists(text)) GTEST_SKIP() << "skipped: ../shared/data/text is absent here";
  TrainConfig c;
  c.model_dir = make_model("falls");
  c.data = text;
  c.steps = 30;
  c.batch_size = 4;
  c.cutoff_len = 64;
  c.lr = 3e-3f;
  c.schedule = "cosine";
  c.warmup_steps = 3;
  c.shuffle = true;
  c.output_dir = c.model_dir.parent_path() / "out";
  std::ostringstream log;
  TrainSummary s = run_training(c, log);
  EXPECT_EQ(s.steps, 30);
  // A random byte-level model starts near ln(256) = 5.55; 30 steps must learn byte statistics.
  EXPECT_GT(s.first_loss, 5.0);
  EXPECT_LT(s.last_loss, s.first_loss - 1.5) << log.str();
  EXPECT_NE(log.str().find("step 30/30  loss "), std::string::npos);
  // The saved checkpoint loads back with the trained weights.
  SafetensorsReader r(c.output_dir);
  EXPECT_TRUE(r.contains("model.layers.1.mlp.down_proj.weight"));
  EXPECT_TRUE(fs::exists(c.output_dir / "config.json"));
  for (const auto& entry : fs::directory_iterator(c.output_dir))
    EXPECT_EQ(entry.path().string().find(".tmp-"), std::string::npos) << entry.path();
}

TEST(Train, JsonlIsUsedInFileOrderWithLabels) {
  fs::path d = temp_dir("jsonl");
  write_text(d / "a.jsonl",
             "{\"input_ids\": [1, 2, 3], \"labels\": [-100, 2, 3]}\n"
             "\n"
             "{\"input_ids\": [4, 5, 6, 7, 8]}\n"
             "{\"input_ids\": [9, 10]}\n");
  DataConfig cfg;
  cfg.file = d / "a.jsonl";
  cfg.vocab = 100;
  cfg.encode.cutoff_len = 4;
  DataStats st;
  auto samples = prepare_samples(cfg, nullptr, nullptr, &st);
  ASSERT_EQ(samples.size(), 3u);
  EXPECT_EQ(st.truncated, 1);
  Batcher b(samples, 2, /*shuffle=*/false, 0);
  Batch first = b.next();
  EXPECT_EQ(first.ids, (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7}));
  // targets are labels shifted by one inside each sample; the last token of a sample has none
  EXPECT_EQ(first.targets, (std::vector<int32_t>{2, 3, -100, 5, 6, 7, -100}));
  EXPECT_EQ(first.positions, (std::vector<int32_t>{0, 1, 2, 0, 1, 2, 3}));
  EXPECT_EQ(first.cu_seqlens, (std::vector<int32_t>{0, 3, 7}));
  // The last step of an epoch takes what is left (as transformers' dataloader), then the next
  // epoch starts.
  Batch second = b.next();
  EXPECT_EQ(second.ids, (std::vector<int32_t>{9, 10}));
  EXPECT_EQ(b.epoch(), 1);
  EXPECT_EQ(b.steps_per_epoch(), 2);
  Batch third = b.next();
  EXPECT_EQ(third.ids, (std::vector<int32_t>{1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(b.epoch(), 2);
}

TEST(Train, ShuffleIsDeterministicFromTheSeed) {
  std::vector<Sample> s(10);
  for (int i = 0; i < 10; ++i) s[size_t(i)].ids = s[size_t(i)].labels = {i, i};
  Batcher a(s, 3, true, 7), b(s, 3, true, 7), c(s, 3, true, 8);
  std::vector<int32_t> ia, ib, ic;
  for (int k = 0; k < 5; ++k) {
    auto x = a.next().ids, y = b.next().ids, z = c.next().ids;
    ia.insert(ia.end(), x.begin(), x.end());
    ib.insert(ib.end(), y.begin(), y.end());
    ic.insert(ic.end(), z.begin(), z.end());
  }
  EXPECT_EQ(ia, ib);
  EXPECT_NE(ia, ic);
}

// Epochs count in steps, as transformers' Trainer does: 10 samples at 3 a step make 4 steps an
// epoch (the last of 1 sample), so one step is a quarter epoch, not 3/10 (a max_steps run of
// one step once showed "epoch 0.3/0.25"); a restored batcher counts on from where it was.
TEST(Train, EpochProgressCountsSteps) {
  std::vector<Sample> s(10);
  for (int i = 0; i < 10; ++i) s[size_t(i)].ids = s[size_t(i)].labels = {i, i};
  for (int64_t budget : {int64_t(0), int64_t(6)}) {  // 3 samples a step, by count or packed
    Batcher b(s, 3, true, 7, budget);
    ASSERT_EQ(b.steps_per_epoch(), 4) << budget;
    EXPECT_EQ(b.epoch_progress(), 0.0);
    b.next();
    EXPECT_EQ(b.epoch_progress(), 0.25) << budget;
    Batcher r(s, 3, true, 7, budget);
    r.restore_state(b.save_state());
    EXPECT_EQ(r.epoch_progress(), 0.25) << budget;
    for (int k = 0; k < 3; ++k) b.next(), r.next();
    EXPECT_EQ(b.epoch_progress(), 1.0) << budget;
    b.next(), r.next();
    EXPECT_EQ(b.epoch_progress(), 1.25) << budget;
    EXPECT_EQ(r.epoch_progress(), 1.25) << budget;
  }
}

TEST(Train, BadDataGivesClearErrors) {
  fs::path d = temp_dir("baddata");
  write_text(d / "empty.txt", "");
  EXPECT_NE(error_of([&] { load_text_samples(d / "empty.txt", 16, 256); }).find("empty"),
            std::string::npos);
  write_text(d / "one.txt", "x");
  EXPECT_NE(error_of([&] { load_text_samples(d / "one.txt", 16, 256); }).find("too short"),
            std::string::npos);
  EXPECT_NE(error_of([&] { load_text_samples(d / "missing.txt", 16, 256); }).find("missing.txt"),
            std::string::npos);
  EXPECT_NE(error_of([&] { load_text_samples(d / "one.txt", 16, 100); }).find("at least 256"),
            std::string::npos);
  auto tokens = [&](const fs::path& file) {
    DataConfig cfg;
    cfg.file = file;
    cfg.vocab = 100;
    cfg.encode.cutoff_len = 16;
    prepare_samples(cfg, nullptr, nullptr, nullptr);
  };
  write_text(d / "bad.jsonl", "{\"input_ids\": [1, 2]}\n{\"input_ids\": [1, 2\n");
  std::string e = error_of([&] { tokens(d / "bad.jsonl"); });
  EXPECT_NE(e.find("bad.jsonl:2"), std::string::npos) << e;
  write_text(d / "len.jsonl", "{\"input_ids\": [1, 2], \"labels\": [1]}\n");
  e = error_of([&] { tokens(d / "len.jsonl"); });
  EXPECT_NE(e.find("len.jsonl:1"), std::string::npos) << e;
  write_text(d / "vocab.jsonl", "{\"input_ids\": [1, 200]}\n");
  e = error_of([&] { tokens(d / "vocab.jsonl"); });
  EXPECT_NE(e.find("outside the model's vocabulary"), std::string::npos) << e;
  write_text(d / "type.jsonl", "{\"input_ids\": [1, \"a\"]}\n");
  e = error_of([&] { tokens(d / "type.jsonl"); });
  EXPECT_NE(e.find("non-integer"), std::string::npos) << e;
}

TEST(Train, BadModelGivesClearErrors) {
  TrainConfig c;
  c.no_save = true;
  fs::path d = temp_dir("badmodel");
  write_text(d / "t.txt", "some text that is long enough to train on for a step or two");
  c.data = d / "t.txt";
  c.steps = 1;
  c.cutoff_len = 16;
  std::ostringstream log;
  c.model_dir = d / "nowhere";
  EXPECT_NE(error_of([&] { run_training(c, log); }).find("config.json"), std::string::npos);

  // config.json disagrees with the tensors: the error names the tensor and both shapes.
  c.model_dir = make_model("badshape");
  {
    std::ifstream f(c.model_dir / "config.json");
    std::string cfg((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
    auto pos = cfg.find("\"intermediate_size\": 128");
    ASSERT_NE(pos, std::string::npos);
    cfg.replace(pos, 24, "\"intermediate_size\": 96");
    write_text(c.model_dir / "config.json", cfg);
  }
  std::string e = error_of([&] { run_training(c, log); });
  EXPECT_NE(e.find("mlp"), std::string::npos) << e;
  EXPECT_NE(e.find("[96, 64]"), std::string::npos) << e;

  // NaN in the weights: the error names the tensor.
  c.model_dir = make_model("nan");
  {
    SafetensorsReader r(c.model_dir);
    std::vector<std::vector<float>> keep;
    std::vector<TensorToWrite> all;
    for (const auto& n : r.names()) {
      const TensorInfo& t = r.get(n);
      size_t count = 1;
      for (int64_t s : t.shape) count *= size_t(s);
      keep.emplace_back(count);
      r.read_f32(n, keep.back().data(), count);
      if (n == "model.layers.1.self_attn.v_proj.weight") keep.back()[5] = std::nanf("");
    }
    size_t i = 0;
    for (const auto& n : r.names()) all.push_back({n, r.get(n).shape, keep[i++].data()});
    write_safetensors_file(c.model_dir / "model.safetensors.new", all, DType::kF32);
  }
  fs::rename(c.model_dir / "model.safetensors.new", c.model_dir / "model.safetensors");
  e = error_of([&] { run_training(c, log); });
  EXPECT_NE(e.find("model.layers.1.self_attn.v_proj.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("nan at element 5"), std::string::npos) << e;
}

// The error of one training step on a short text (or, with `tokens`, pre-tokenised data) with
// the model in `model`.
std::string train_error(const fs::path& model, bool tokens = false) {
  TrainConfig c;
  c.no_save = true;
  c.model_dir = model;
  write_text(model.parent_path() / "t.txt", "enough text to make a couple of samples from");
  write_text(model.parent_path() / "t.jsonl", "{\"input_ids\": [1, 2, 3, 4]}\n");
  c.data = model.parent_path() / (tokens ? "t.jsonl" : "t.txt");
  c.steps = 1;
  c.cutoff_len = 16;
  std::ostringstream log;
  return error_of([&] { run_training(c, log); });
}

// A model whose host state cannot fit (Llama-3.1-405B's shapes, fp32 state: ~6 TB) is refused
// with the figures before anything is allocated or read: config.json is all there is of it.
TEST(Train, ModelLargerThanHostMemoryIsRefused) {
  if (!host_memory_available()) GTEST_SKIP() << "skipped: no /proc/meminfo or cgroup figure here";
  fs::path d = temp_dir("huge");
  fs::create_directories(d / "model");
  write_text(d / "model" / "config.json", R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_act": "silu",
  "hidden_size": 16384, "intermediate_size": 53248, "num_attention_heads": 128,
  "num_key_value_heads": 8, "head_dim": 128, "num_hidden_layers": 126, "vocab_size": 128256,
  "max_position_embeddings": 131072, "rms_norm_eps": 1e-05, "rope_theta": 500000.0,
  "tie_word_embeddings": false, "torch_dtype": "bfloat16"
})");
  const std::string e = train_error(d / "model", /*tokens=*/true);
  EXPECT_NE(e.find("not enough host memory for this run"), std::string::npos) << e;
  EXPECT_NE(e.find("GiB (available"), std::string::npos) << e;
  EXPECT_NE(e.find("126 layers"), std::string::npos) << e;
}

// The host check counts what the process itself holds (its heap: data, tokenizer, a checkpoint
// being read) besides the plan's pinned total and the margin, and its refusal says each part
// (issue 14: a check that counted the plan alone passed, then the OOM killer ended the run).
TEST(Train, HostCheckCountsTheProcessAndSaysWhatItCounted) {
  EnginePlan plan;
  plan.host.state = uint64_t(3) << 30;
  const HostCheck before = check_host(plan, uint64_t(1) << 20, /*also_available=*/false);
  std::vector<char> heap(size_t(256) << 20);
  for (size_t i = 0; i < heap.size(); i += 4096) heap[i] = char(i);  // resident
  // The allocation is not elided.
  volatile const char* keep = heap.data();
  (void)keep;
  const HostCheck after = check_host(plan, uint64_t(1) << 20, /*also_available=*/false);
  EXPECT_GE(after.held, before.held + (uint64_t(200) << 20)) << "the heap is counted";
  EXPECT_EQ(after.pinned, uint64_t(3) << 30);
  EXPECT_GE(after.margin, uint64_t(2) << 30);  // driver, libraries, a checkpoint being written
  EXPECT_EQ(after.need(), after.pinned + after.held + after.margin);
  EXPECT_FALSE(after.fits());
  const std::string e = after.refusal(plan);
  for (const char* part :
       {"not enough host memory for this run: it needs", "for the engine",
        "this process already holds (data, tokenizer)", "and a margin of", "(--host-memory)"})
    EXPECT_NE(e.find(part), std::string::npos) << part << "\n" << e;
}

// A checkpoint whose tensor has an integer dtype, written byte by byte per the safetensors format.
TEST(Train, WrongDtypeIsNamed) {
  fs::path model = make_model("dtype");
  SafetensorsReader r(model);
  std::string header = "{";
  std::string data;
  for (const auto& n : r.names()) {
    const TensorInfo& t = r.get(n);
    std::string shape = "[";
    for (size_t i = 0; i < t.shape.size(); ++i)
      shape += (i ? "," : "") + std::to_string(t.shape[i]);
    shape += "]";
    const bool bad = n == "model.norm.weight";
    std::string bytes(static_cast<const char*>(t.data), t.bytes);  // F32 or I32: 4 bytes each
    header += (header.size() > 1 ? "," : "") + ("\"" + n + "\":{\"dtype\":\"") +
              (bad ? "I32" : "F32") + "\",\"shape\":" + shape + ",\"data_offsets\":[" +
              std::to_string(data.size()) + "," + std::to_string(data.size() + bytes.size()) + "]}";
    data += bytes;
  }
  header += "}";
  header.append((8 - header.size() % 8) % 8, ' ');
  std::string file(8, '\0');
  for (int i = 0; i < 8; ++i) file[size_t(i)] = char((uint64_t(header.size()) >> (8 * i)) & 0xff);
  write_text(model / "model.safetensors.new", file + header + data);
  fs::rename(model / "model.safetensors.new", model / "model.safetensors");
  const std::string e = train_error(model);
  EXPECT_NE(e.find("model.norm.weight"), std::string::npos) << e;
  EXPECT_NE(e.find("I32"), std::string::npos) << e;
}

// A text for a model without tokenizer.json whose vocabulary is not bytes: refused (it used to
// train byte ids into the 128k vocabulary).
TEST(Train, TextWithoutTokenizerNeedsAByteVocabulary) {
  fs::path model = make_model("notok", 1000);
  const std::string e = train_error(model);
  EXPECT_NE(e.find("has no tokenizer.json and a vocabulary of 1000 tokens"), std::string::npos)
      << e;
  EXPECT_NE(e.find("give tokenizer: DIR"), std::string::npos) << e;
}

// A folder with a SentencePiece tokenizer.model and no tokenizer.json: refused, saying how to
// write the tokenizer.json (never the byte stand-in, never "not found"), as the model's own
// tokenizer and as tokenizer: DIR.
TEST(Train, SentencePieceOnlyFolderSaysHowToConvert) {
  fs::path model = make_model("sponly", 1000);
  write_text(model / "tokenizer.model", std::string("\x0a\x05\x0a\x01a\x15", 8));
  std::string e = train_error(model, true);
  EXPECT_NE(e.find(model.string() + " holds tokenizer.model (a SentencePiece model) but no "
                                    "tokenizer.json"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("AutoTokenizer.from_pretrained(d).save_pretrained(d)"), std::string::npos) << e;
  EXPECT_NE(e.find("give tokenizer: DIR"), std::string::npos) << e;

  fs::path other = make_model("sponly_model", 256);  // a byte vocabulary: no stand-in either
  TrainConfig c;
  c.no_save = true;
  c.model_dir = other;
  c.tokenizer_dir = model;
  c.data = model.parent_path() / "t.txt";
  c.steps = 1;
  c.cutoff_len = 16;
  std::ostringstream log;
  e = error_of([&] { run_training(c, log); });
  EXPECT_NE(e.find("holds tokenizer.model (a SentencePiece model) but no tokenizer.json"),
            std::string::npos)
      << e;
  fs::copy_file(model / "tokenizer.model", other / "tokenizer.model");
  e = train_error(other);
  EXPECT_NE(e.find("holds tokenizer.model"), std::string::npos) << e;
  EXPECT_EQ(log.str().find("byte-level stand-in"), std::string::npos) << log.str();
}

TEST(Train, MissingWeightsAreNamed) {
  fs::path model = make_model("noweights");
  fs::remove(model / "model.safetensors");
  const std::string e = train_error(model);
  EXPECT_NE(e.find("safetensors"), std::string::npos) << e;
  EXPECT_NE(e.find(model.string()), std::string::npos) << e;
}

TEST(Train, BadHyperParametersAreRefused) {
  TrainConfig c;
  c.no_save = true;
  c.model_dir = make_model("badhp");
  c.data = c.model_dir / "config.json";
  std::ostringstream log;
  c.steps = 2;
  c.schedule = "exponential";
  EXPECT_NE(error_of([&] { run_training(c, log); }).find("cosine"), std::string::npos);
}

}  // namespace
}  // namespace sf
