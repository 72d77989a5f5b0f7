// defines: expected_tensors, load_tensor_f32, check_checkpoint_tensors, save_hf_checkpoint,
// with_saved_dtype, shape_str — the checks between a ModelSpec (config.json) and the tensors of a
// checkpoint.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "io/safetensors.h"
#include "model/spec.h"

namespace sf {

// "[4096, 11008]"
std::string shape_str(const std::vector<int64_t>& shape);

// Every tensor the model reads from a checkpoint, in model order (embedding, layers, norm,
// head); tensors the config leaves out (absent biases, a tied head) are not listed.
std::vector<TensorDesc> expected_tensors(const ModelSpec& spec);

// Converts one checkpoint tensor into dst (desc's element count of floats). Throws, naming the
// tensor, its file and the checkpoint, when it is missing, its shape differs from desc (config.json
// disagrees with the weights), its dtype is not BF16/F16/F32, or any value is NaN/Inf.
void load_tensor_f32(const SafetensorsReader& reader, const TensorDesc& desc, float* dst);
// Elements [begin, begin + count) of it into dst (a tensor loaded piece by piece), with the same
// checks; the piece's mapped pages are released after it.
void load_tensor_f32(const SafetensorsReader& reader, const TensorDesc& desc, int64_t begin,
                     int64_t count, float* dst);

// Checks before anything is allocated that the checkpoint holds exactly what spec expects: every
// tensor present with its shape, and nothing the model would silently ignore (apart from known
// harmless buffers such as *.rotary_emb.inv_freq). A tied config may carry lm_head.weight only
// when it equals the embedding. Errors list the first few offending names.
void check_checkpoint_tensors(const SafetensorsReader& reader, const ModelSpec& spec);

// Writes a Hugging Face checkpoint that transformers' from_pretrained(dir) loads: config.json
// (config_json_text as given, checked against spec; temporary file + rename) and the weights via
// write_safetensors. `tensors` must be exactly expected_tensors(spec) by name and shape, except
// that lm_head.weight of a tied model may be given and is then left out.
// config.json's text with its "torch_dtype" (and "dtype", where present) saying `dtype`, the
// saved weights' (unchanged text where it already does).
std::string with_saved_dtype(const std::string& config_json_text, DType dtype);

void save_hf_checkpoint(const std::filesystem::path& dir, const ModelSpec& spec,
                        const std::string& config_json_text,
                        const std::vector<TensorToWrite>& tensors, DType dtype = DType::kBF16,
                        size_t max_shard_bytes = 5ull << 30);

}  // namespace sf
