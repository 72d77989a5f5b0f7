#include "train/checkpoint.h"

#include "io/safetensors.h"
#include "model/weights.h"

namespace sf {

TensorToWrite state_to_write(const TensorState& t, const std::string& name, int which) {
  TensorToWrite w{name, t.desc.shape, nullptr};
  if (!t.fetch) {  // host memory: valid until the write
    w.data = which == 0 ? t.master : which == 1 ? t.m : t.v;
    return w;
  }
  // GPU-resident or on NVMe: copied to the host when the writer reaches it, one tensor at a time.
  w.produce = [fetch = t.fetch, which](const TensorToWrite::Sink& write) { fetch(which, write); };
  return w;
}

void load_model_weights(Engine& engine, const std::filesystem::path& model_dir) {
  SafetensorsReader reader(model_dir);
  check_checkpoint_tensors(reader, engine.spec());
  engine.init_weights([&](const TensorDesc& desc, int, int64_t begin, int64_t count, float* dst) {
    load_tensor_f32(reader, desc, begin, count, dst);
  });
}

void save_model_checkpoint(Engine& engine, const std::filesystem::path& out_dir,
                           const std::string& config_json_text, DType dtype) {
  std::vector<TensorToWrite> tensors;
  engine.visit_state_read(
      [&](const TensorState& t) { tensors.push_back(state_to_write(t, t.desc.name, 0)); });
  save_hf_checkpoint(out_dir, engine.spec(), config_json_text, tensors, dtype);
}

}  // namespace sf
