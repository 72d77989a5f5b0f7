// defines: sf::TrainConfig — every option of `slideformer train` (the option table in
// train/options.cpp names, documents and validates each one; validate_config the combinations).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace sf {

struct TrainConfig {
  // model and data
  std::filesystem::path model_dir;      // model_name_or_path
  std::filesystem::path data;           // train_data: .txt (a text to continue) or .jsonl/.json
  std::filesystem::path eval_data;      // a held-out file, or empty
  double val_size = 0;                  // (0, 1): fraction held out; >= 1: that many samples
  std::filesystem::path tokenizer_dir;  // empty: the model directory when it has tokenizer.json
  std::string dataset_format = "auto";
  std::vector<std::string> columns;     // "key=name" remappings
  std::string chat_template;            // empty: the tokenizer's; or llama3|llama2|chatml|FILE
  std::string chat_template_kwargs = "{}";  // a JSON object: the template's keyword options
  std::string enable_thinking = "auto";     // auto | true | false: the template's enable_thinking
  std::string loss_mask = "assistant";  // assistant | all | last
  bool packing = false;
  bool skip_malformed = false;
  bool cache = true;  // the tokenised cache next to the output
  int64_t cutoff_len = 256;
  std::string text_overflow = "chunk";  // chunk | truncate: dataset text records > cutoff_len
  bool show_sample = false;             // print the first sample, rendered, with its loss mask
  // output
  std::filesystem::path output_dir;  // required unless no_save
  bool no_save = false;
  bool overwrite_output_dir = false;
  std::string save_dtype = "bf16";     // bf16 | f32
  int64_t save_steps = 0;              // 0: only at the end
  int64_t save_total_limit = 0;        // checkpoints kept; 0: all
  std::string resume_from_checkpoint;  // "" | auto | DIR
  // schedule
  int64_t steps = -1;  // max_steps; -1: num_train_epochs decides
  double num_train_epochs = 3;
  int64_t batch_size = 4;       // per_device_train_batch_size: samples per micro-batch
  int64_t eval_batch_size = 0;  // per_device_eval_batch_size; 0: batch_size
  int64_t grad_accum = 1;       // gradient_accumulation_steps
  float lr = 1e-4f;
  float beta1 = 0.9f, beta2 = 0.999f, eps = 1e-8f, weight_decay = 0.0f;
  float max_grad_norm = 1.0f;
  std::string schedule = "constant";  // lr_scheduler_type
  int64_t warmup_steps = 0;           // > 0 wins over warmup_ratio, as in transformers
  double warmup_ratio = 0;
  float min_lr_ratio = 0;
  bool shuffle = false;
  uint64_t seed = 42;
  // evaluation and logging
  int64_t eval_steps = 0;             // 0: only at the end
  int64_t logging_steps = 10;         // lines per N steps when stdout is not a terminal
  std::string report_to = "none";     // none | tensorboard
  std::filesystem::path logging_dir;  // TensorBoard events; empty: OUTPUT/runs
  double peak_tflops = 0;             // the MFU's peak; 0: the device's (none on the CPU)
  // engine
  int window = 2;
  uint64_t gpu_memory = 0;         // device budget for everything; 0: the whole device
  uint64_t host_memory = 0;        // host budget for everything; 0: what the machine has
  std::filesystem::path machine_file;  // the measured machine constants; empty: the default
  int64_t micro_batch_tokens = 0;  // M; 0: the largest that fits the budget
  std::string device_optimizer = "auto";  // auto | off | all: the GPU-resident optimizer share
  int64_t held_gradients = -1;  // without clipping, units with a host gradient of their own; -1: auto
  int64_t moments_later = -1;   // with clipping, units whose m and v are written later; -1: auto
  std::filesystem::path nvme_dir;  // the NVMe tier's scratch directory; empty: no tier
  int64_t nvme_layers = -1;        // layers whose m, v go there; -1: what host_memory needs
  int64_t nvme_masters = -1;       // of those, layers whose master goes too; -1: as needed
  std::string nvme_checkpoints = "auto";  // auto | on | off: the activation checkpoints there
  std::string nvme_gds = "auto";  // auto | on | off: those through GPUDirect Storage (cuFile)
  double nvme_bandwidth = 0;       // GB/s read and write for `plan`; 0: measured in nvme_dir
  std::filesystem::path trace;     // non-empty: the engine's timeline (Chrome trace JSON)
  std::string backend = "auto";  // auto (cuda when a GPU is present) | cpu | cuda
  int gpus = 1;  // data parallel: GPUs of this host, batch_size samples each (engine/engine.h)
};

}  // namespace sf
