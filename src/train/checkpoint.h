// defines: load_model_weights, model_weights_fill(_on_first_use), save_model_checkpoint,
// state_to_write — between a Hugging Face model directory and the engine's fp32 master weights.
#pragma once

#include <filesystem>
#include <string>

#include "core/dtype.h"
#include "engine/engine.h"
#include "io/safetensors.h"

namespace sf {

// Checks the checkpoint in `model_dir` against the engine's spec (every tensor, shape, dtype,
// finiteness) and fills the master weights. Errors name the file and the tensor.
void load_model_weights(Engine& engine, const std::filesystem::path& model_dir);
// The same check against `spec`; returns the fill of the master weights from `reader`, which
// must outlive its use.
StateFill model_weights_fill(const SafetensorsReader& reader, const ModelSpec& spec);
// For EngineOptions::initial_weights (the load then overlaps the engine's allocation): the
// checkpoint in `model_dir` is opened and checked at the fill's first call — after the engine's
// own checks, so a run it refuses says why first, as when the weights load after construction —
// once, whichever thread calls first; the fill keeps it open.
StateFill model_weights_fill_on_first_use(const std::filesystem::path& model_dir,
                                          const ModelSpec& spec);

// Writes config.json (config_json_text) and the current master weights (in `dtype`) to out_dir,
// each file under a temporary name renamed when complete, loadable by from_pretrained(out_dir).
void save_model_checkpoint(Engine& engine, const std::filesystem::path& out_dir,
                           const std::string& config_json_text, DType dtype);

// One of a visited tensor's master (which = 0), m (1) or v (2) as a tensor to write under `name`:
// host tensors by pointer; GPU-resident ones fetched again when the writer reaches them (their
// pointers in `t` do not outlive the visit's callback).
TensorToWrite state_to_write(const TensorState& t, const std::string& name, int which);

}  // namespace sf
