// slideformer subcommands: argument parsing only; the work is in train/ and below.
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/train_args.h"
#include "core/error.h"
#include "engine/engine.h"
#include "io/safetensors.h"
#include "model/init.h"
#include "model/spec.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "train/trainer.h"

namespace sf {

int cmd_train(const std::vector<std::string>& argv) {
  TrainArgs a = parse_train_args(argv, std::cout);
  if (a.exit_now) return 0;
  const TrainSummary sum = run_training(a.config, std::cout, isatty(STDOUT_FILENO) != 0);
  return sum.signal ? 128 + sum.signal : 0;
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
