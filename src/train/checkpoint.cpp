#include "train/checkpoint.h"

#include "io/safetensors.h"
#include "model/weights.h"

namespace sf {

void load_model_weights(Engine& engine, const std::filesystem::path& model_dir) {
  SafetensorsReader reader(model_dir);
  check_checkpoint_tensors(reader, engine.spec());
  engine.init_weights(
      [&](const TensorDesc& desc, float* dst) { load_tensor_f32(reader, desc, dst); });
}

void save_model_checkpoint(Engine& engine, const std::filesystem::path& out_dir,
                           const std::string& config_json_text, DType dtype) {
  std::vector<TensorToWrite> tensors;
  engine.visit_weights([&](const TensorDesc& desc, const float* src) {
    tensors.push_back(TensorToWrite{desc.name, desc.shape, src});
  });
  save_hf_checkpoint(out_dir, engine.spec(), config_json_text, tensors, dtype);
}

}  // namespace sf
