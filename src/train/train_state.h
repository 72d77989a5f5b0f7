// defines: save_training_checkpoint, load_training_tensors (TrainerState: trainer_state_file.h),
// find_resume_checkpoint, prune_checkpoints — OUTPUT/checkpoint-<step>/: a complete Hugging Face
// model directory plus everything an exact resume needs (docs/decisions.md, "Checkpoints").
//
//   model.safetensors, config.json      the weights (save_dtype) and the source's config
//   generation_config.json, tokenizer*  copied from the source model / tokenizer directory
//   training_state.safetensors          fp32 per tensor: NAME.master, NAME.exp_avg, NAME.exp_avg_sq
//   trainer_state.json                  step, epoch, data position and order, generator, config
//   training_args.yaml                  the configuration, as `slideformer train FILE` reads it
//
// Written in OUTPUT/.checkpoint-<step>.tmp-<pid>/ (every file fsync'd), renamed to its final
// name, then OUTPUT/latest (the directory's name) is replaced atomically: a crash at any point
// leaves the previous checkpoint and `latest` intact.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "core/dtype.h"
#include "engine/engine.h"
#include "train/config.h"
#include "train/trainer_state_file.h"  // TrainerState, read_trainer_state

namespace sf {

struct CheckpointSources {
  std::filesystem::path model_dir;      // config.json, generation_config.json
  std::filesystem::path tokenizer_dir;  // tokenizer files (empty: none)
  std::string config_json;              // the config.json text to write
  DType dtype = DType::kBF16;
};

// Writes OUTPUT/checkpoint-<global_step>/ as above and returns its path.
std::filesystem::path save_training_checkpoint(Engine& engine, const std::filesystem::path& output,
                                               const CheckpointSources& src,
                                               const TrainerState& state);

// The checkpoint's master weights and Adam moments into the engine, and its step count. Refuses,
// naming the tensor, a checkpoint of another model (names, shapes) and a truncated file.
void load_training_tensors(Engine& engine, const std::filesystem::path& dir, int64_t steps);

// resume_from_checkpoint: "" → none; "auto" → OUTPUT/latest when there is one (else none); a
// directory → that one, which must hold trainer_state.json.
std::optional<std::filesystem::path> find_resume_checkpoint(const TrainConfig& c);

// Removes the oldest OUTPUT/checkpoint-* beyond `limit` (0: keep all), never `keep`.
void prune_checkpoints(const std::filesystem::path& output, int64_t limit,
                       const std::filesystem::path& keep);

// The bytes copy_model_side_files writes (the files it would copy that exist).
uint64_t side_files_bytes(const std::filesystem::path& model_dir,
                          const std::filesystem::path& tokenizer_dir);

// Copies generation_config.json (from model_dir) and the tokenizer files (from tokenizer_dir)
// that exist into `out`, each written atomically.
void copy_model_side_files(const std::filesystem::path& model_dir,
                           const std::filesystem::path& tokenizer_dir,
                           const std::filesystem::path& out);

// Copies the tokenizer files of a Hugging Face model directory (tokenizer.json,
// tokenizer_config.json, tokenizer.model, ...) that exist in `tokenizer_dir` into `out`.
void copy_tokenizer_files(const std::filesystem::path& tokenizer_dir,
                          const std::filesystem::path& out);

}  // namespace sf
