// defines: sf::TrainConfig, sf::run_training — `slideformer train`: load a Hugging Face model
// directory, train N steps on the engine, print each step's loss, save an HF checkpoint.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "model/spec.h"
#include "optim/schedule.h"

namespace sf {

struct TrainConfig {
  std::filesystem::path model_dir;
  std::filesystem::path data;      // .txt (a text to continue) or .jsonl/.json (a dataset)
  std::filesystem::path tokenizer_dir;  // empty: the model directory when it has tokenizer.json
  std::string dataset_format = "auto";
  std::vector<std::string> columns;     // "key=name" remappings
  std::string chat_template;            // empty: the tokenizer's; or llama3|llama2|chatml|FILE
  std::string loss_mask = "assistant";  // assistant | all | last
  bool packing = false;
  bool skip_malformed = false;
  bool cache = true;                    // the tokenised cache next to the output
  std::filesystem::path output_dir;  // empty: do not save
  int64_t steps = 10;
  int64_t batch_size = 4;  // samples per step
  int64_t cutoff_len = 256;
  float lr = 1e-4f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
  float max_grad_norm = 1.0f;
  std::string schedule = "constant";
  int64_t warmup_steps = 0;
  bool shuffle = false;
  uint64_t seed = 42;
  int window = 2;
  uint64_t gpu_memory = 0;         // device budget for everything; 0: the whole device
  int64_t micro_batch_tokens = 0;  // M; 0: the largest that fits the budget
  std::filesystem::path trace;     // non-empty: the engine's timeline (Chrome trace JSON)
  std::string backend = "auto";  // auto (cuda when a GPU is present) | cpu | cuda
  std::string save_dtype = "bf16";  // bf16 | f32
};

struct TrainSummary {
  double first_loss = 0, last_loss = 0;
  int64_t steps = 0;
  uint64_t peak_device_used = 0;  // device-wide memory in use after a step, at most
  uint64_t peak_host_rss = 0;
};

TrainSummary run_training(const TrainConfig& config, std::ostream& log);

// "auto" (CUDA when a GPU is visible), "cpu" or "cuda", with workspaces sized for the model.
std::unique_ptr<Backend> make_backend(const std::string& name, const ModelSpec& spec,
                                      int64_t max_tokens);

}  // namespace sf
