// slideformer subcommands: argument parsing only; the work is in train/ and below.
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/size_parse.h"
#include "engine/engine.h"
#include "io/safetensors.h"
#include "model/init.h"
#include "model/spec.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "train/trainer.h"

namespace sf {

int cmd_train(const std::vector<std::string>& argv) {
  Args a(argv,
         {"model", "data", "output", "steps", "batch-size", "cutoff-len", "lr", "beta1", "beta2",
          "eps", "weight-decay", "max-grad-norm", "schedule", "warmup-steps", "seed", "window",
          "save-dtype", "backend", "tokenizer", "dataset-format", "columns", "chat-template", "loss-mask",
          "gpu-memory", "micro-batch-tokens", "trace"},
         {"shuffle", "packing", "skip-malformed", "no-cache"}, "train");
  TrainConfig c;
  c.model_dir = a.required("model");
  c.data = a.required("data");
  c.output_dir = a.str("output", "");
  c.steps = a.integer("steps", c.steps);
  c.batch_size = a.integer("batch-size", c.batch_size);
  c.cutoff_len = a.integer("cutoff-len", c.cutoff_len);
  c.lr = float(a.number("lr", c.lr));
  c.beta1 = float(a.number("beta1", c.beta1));
  c.beta2 = float(a.number("beta2", c.beta2));
  c.eps = float(a.number("eps", c.eps));
  c.weight_decay = float(a.number("weight-decay", c.weight_decay));
  c.max_grad_norm = float(a.number("max-grad-norm", c.max_grad_norm));
  c.schedule = a.str("schedule", c.schedule);
  c.warmup_steps = a.integer("warmup-steps", c.warmup_steps);
  c.shuffle = a.flag("shuffle");
  c.seed = uint64_t(a.integer("seed", int64_t(c.seed)));
  c.window = int(a.integer("window", c.window));
  if (const std::string g = a.str("gpu-memory", ""); !g.empty())
    c.gpu_memory = parse_size(g, "--gpu-memory");
  c.micro_batch_tokens = a.integer("micro-batch-tokens", 0);
  c.trace = a.str("trace", "");
  c.save_dtype = a.str("save-dtype", c.save_dtype);
  c.backend = a.str("backend", c.backend);
  c.tokenizer_dir = a.str("tokenizer", "");
  c.dataset_format = a.str("dataset-format", c.dataset_format);
  for (std::string cols = a.str("columns", ""); !cols.empty();) {
    auto comma = cols.find(',');
    c.columns.push_back(cols.substr(0, comma));
    cols = comma == std::string::npos ? "" : cols.substr(comma + 1);
  }
  c.chat_template = a.str("chat-template", "");
  c.loss_mask = a.str("loss-mask", c.loss_mask);
  c.packing = a.flag("packing");
  c.skip_malformed = a.flag("skip-malformed");
  c.cache = !a.flag("no-cache");
  run_training(c, std::cout);
  return 0;
}

int cmd_init_model(const std::vector<std::string>& argv) {
  Args a(argv,
         {"out", "arch", "hidden", "layers", "heads", "kv-heads", "head-dim", "intermediate",
          "vocab", "seed"},
         {"tie-embeddings"}, "init-model");
  TinyModelOptions o;
  o.arch = a.str("arch", o.arch);
  o.hidden = a.integer("hidden", o.hidden);
  o.layers = a.integer("layers", o.layers);
  o.heads = a.integer("heads", o.heads);
  o.kv_heads = a.integer("kv-heads", o.kv_heads);
  o.head_dim = a.integer("head-dim", o.head_dim);
  o.intermediate = a.integer("intermediate", o.intermediate);
  o.vocab = a.integer("vocab", o.vocab);
  o.seed = uint64_t(a.integer("seed", int64_t(o.seed)));
  o.tie_word_embeddings = a.flag("tie-embeddings");
  write_random_model(a.required("out"), o);
  std::cout << "wrote " << a.required("out") << "\n";
  return 0;
}

int cmd_logits(const std::vector<std::string>& argv) {
  Args a(argv, {"model", "batch", "out"}, {}, "logits");
  const std::filesystem::path model = a.required("model"), batch_file = a.required("batch");
  std::ifstream f(batch_file);
  SF_CHECK(f, "cannot open ", batch_file);
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(f);
  } catch (const nlohmann::json::exception& e) {
    SF_FAIL(batch_file.string(), ": not valid JSON (", e.what(), ")");
  }
  SF_CHECK(j.contains("input_ids") && j["input_ids"].is_array(), batch_file.string(),
           ": expected \"input_ids\": [[...], ...]");
  std::vector<Sample> samples;
  for (const auto& row : j["input_ids"]) {
    Sample s;
    s.ids = row.get<std::vector<int32_t>>();
    s.labels = s.ids;
    samples.push_back(std::move(s));
  }
  std::vector<const Sample*> ptrs;
  for (const auto& s : samples) ptrs.push_back(&s);
  Batch b = pack_samples(ptrs);
  const ModelSpec spec = load_model_spec(model);
  auto backend = make_cpu_backend();
  EngineOptions opt;
  opt.window = 1;
  opt.max_tokens = b.tokens();
  opt.max_sequences = int64_t(samples.size());
  Engine engine(*backend, spec, opt);
  load_model_weights(engine, model);
  std::vector<float> logits = engine.logits(b);
  const int64_t S = int64_t(samples[0].ids.size());
  for (const auto& s : samples)
    SF_CHECK(int64_t(s.ids.size()) == S, batch_file.string(), ": rows must have equal lengths");
  const std::filesystem::path out = a.required("out");
  write_safetensors_file(out, {TensorToWrite{"logits", {int64_t(samples.size()), S, spec.vocab},
                                             logits.data()}},
                         DType::kF32);
  std::cout << "wrote " << out.string() << "\n";
  return 0;
}

}  // namespace sf
