#include "train/checkpoint.h"

#include <memory>
#include <mutex>
#include <optional>

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

StateFill model_weights_fill(const SafetensorsReader& reader, const ModelSpec& spec) {
  check_checkpoint_tensors(reader, spec);
  return [&reader](const TensorDesc& desc, int, int64_t begin, int64_t count, float* dst) {
    load_tensor_f32(reader, desc, begin, count, dst);
  };
}

StateFill model_weights_fill_on_first_use(const std::filesystem::path& model_dir,
                                          const ModelSpec& spec) {
  struct Source {
    std::mutex mu;
    std::optional<SafetensorsReader> reader;
    StateFill fill;  // set once, under mu
  };
  auto src = std::make_shared<Source>();
  return [src, model_dir, spec](const TensorDesc& desc, int part, int64_t begin, int64_t count,
                                float* dst) {
    {
      // A throw leaves `fill` unset: each later caller tries again and gets the same error.
      std::lock_guard<std::mutex> lk(src->mu);
      if (!src->fill) {
        src->reader.emplace(model_dir);
        src->fill = model_weights_fill(*src->reader, spec);
      }
    }
    src->fill(desc, part, begin, count, dst);
  };
}

void load_model_weights(Engine& engine, const std::filesystem::path& model_dir) {
  SafetensorsReader reader(model_dir);
  engine.init_weights(model_weights_fill(reader, engine.spec()));
}

void save_model_checkpoint(Engine& engine, const std::filesystem::path& out_dir,
                           const std::string& config_json_text, DType dtype) {
  std::vector<TensorToWrite> tensors;
  engine.visit_state_read(
      [&](const TensorState& t) { tensors.push_back(state_to_write(t, t.desc.name, 0)); });
  save_hf_checkpoint(out_dir, engine.spec(), config_json_text, tensors, dtype);
}

}  // namespace sf
