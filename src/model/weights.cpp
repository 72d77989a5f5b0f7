// defines: expected_tensors, load_tensor_f32, check_checkpoint_tensors, save_hf_checkpoint, with_saved_dtype.
#include "model/weights.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/thread_pool.h"
#include "io/atomic_file.h"

namespace sf {
namespace fs = std::filesystem;

namespace {

constexpr size_t kListed = 5;  // names shown in an error before "... and N more"

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string list_names(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < kListed; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > kListed) s += str_cat(" ... and ", names.size() - kListed, " more");
  return s;
}

// Buffers HF modules register but that are not parameters; old exports saved them.
bool is_harmless(const std::string& name) { return name.ends_with(".rotary_emb.inv_freq"); }

void check_shape(const SafetensorsReader& reader, const TensorDesc& desc) {
  SF_CHECK(reader.contains(desc.name), "tensor '", desc.name, "' is missing from checkpoint ",
           reader.path().string(), "; the checkpoint does not match its config.json");
  const TensorInfo& t = reader.get(desc.name);
  SF_CHECK(t.shape == desc.shape, "tensor '", desc.name, "' in ", t.file.string(), " has shape ",
           shape_str(t.shape), " but config.json implies ", shape_str(desc.shape),
           "; config.json disagrees with the weights: use the config that came with them");
  SF_CHECK(t.dtype == DType::kBF16 || t.dtype == DType::kF16 || t.dtype == DType::kF32, "tensor '",
           desc.name, "' in ", t.file.string(), " has dtype ", dtype_name(t.dtype),
           "; only BF16, F16 and F32 weights are supported");
}

// Converts [begin, end) of a BF16/F16/F32 tensor; memcpy per element because the mapped data
// carries no alignment guarantee.
void convert_range(const TensorInfo& t, int64_t begin, int64_t end, float* dst) {
  const auto* src = static_cast<const uint8_t*>(t.data);
  if (t.dtype == DType::kF32) {
    std::memcpy(dst + begin, src + 4 * begin, size_t(end - begin) * 4);
    return;
  }
  for (int64_t i = begin; i < end; ++i) {
    uint16_t h;
    std::memcpy(&h, src + 2 * i, 2);
    dst[i] = t.dtype == DType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h);
  }
}

// True when the two tensors hold the same values (a tied head saved next to its embedding).
bool same_values(const TensorInfo& a, const TensorInfo& b) {
  if (a.shape != b.shape) return false;
  if (a.dtype == b.dtype) return std::memcmp(a.data, b.data, a.bytes) == 0;
  constexpr int64_t kChunk = 1 << 16;
  std::vector<float> x(kChunk), y(kChunk);
  const int64_t n = numel(a.shape);
  for (int64_t i = 0; i < n; i += kChunk) {
    const int64_t m = std::min(kChunk, n - i);
    convert_range(a, i, i + m, x.data() - i);
    convert_range(b, i, i + m, y.data() - i);
    if (!std::equal(x.begin(), x.begin() + m, y.begin())) return false;
  }
  return true;
}

}  // namespace

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

std::vector<TensorDesc> expected_tensors(const ModelSpec& spec) {
  std::vector<TensorDesc> out;
  const auto outer = outer_tensors(spec);
  out.push_back(outer[size_t(OuterTensor::kEmbed)]);
  for (int64_t i = 0; i < spec.layers; ++i)
    for (auto& d : layer_tensors(spec, i))
      if (d.present) out.push_back(std::move(d));
  for (auto k : {OuterTensor::kFinalNorm, OuterTensor::kLmHead})
    if (outer[size_t(k)].present) out.push_back(outer[size_t(k)]);
  return out;
}

void load_tensor_f32(const SafetensorsReader& reader, const TensorDesc& desc, float* dst) {
  load_tensor_f32(reader, desc, 0, numel(desc.shape), dst);
}

void load_tensor_f32(const SafetensorsReader& reader, const TensorDesc& desc, int64_t begin,
                     int64_t count, float* dst) {
  SF_CHECK(desc.present, "load_tensor_f32: tensor '", desc.name,
           "' is not part of this model (present=false); this is a caller bug");
  check_shape(reader, desc);
  const TensorInfo& t = reader.get(desc.name);
  const int64_t n = numel(t.shape);
  SF_CHECK(begin >= 0 && count >= 0 && begin + count <= n, "load_tensor_f32: elements [", begin,
           ", ", begin + count, ") of tensor '", desc.name, "' (", n,
           " elements); this is a caller bug");
  // Convert and scan in one pass per chunk, in parallel: an embedding is ~10^9 elements. Workers
  // must not throw, so each records the first bad index and the error is raised afterwards.
  const int64_t end = begin + count;
  std::atomic<int64_t> first_bad{end};
  float* const at = dst - begin;  // convert_range indexes by element
  ThreadPool::global().parallel_for(count, 1 << 18, [&](int64_t b, int64_t e) {
    convert_range(t, begin + b, begin + e, at);
    for (int64_t i = begin + b; i < begin + e; ++i) {
      if (!std::isfinite(at[i])) {
        int64_t cur = first_bad.load();
        while (i < cur && !first_bad.compare_exchange_weak(cur, i)) {
        }
        break;
      }
    }
  });
  // Read once: its mapped pages need not stay in this process.
  reader.release(desc.name, begin, count);
  const int64_t bad = first_bad.load();
  SF_CHECK(bad == end, "tensor '", desc.name, "' in ", t.file.string(), " holds ", at[bad],
           " at element ", bad, " (of ", n,
           "); the weights are corrupt or diverged: ", "re-download or re-export the checkpoint");
}

void check_checkpoint_tensors(const SafetensorsReader& reader, const ModelSpec& spec) {
  const std::vector<TensorDesc> expected = expected_tensors(spec);
  std::vector<std::string> missing;
  std::set<std::string> wanted;
  for (const TensorDesc& d : expected) {
    wanted.insert(d.name);
    if (!reader.contains(d.name)) {
      missing.push_back(d.name);
    } else {
      check_shape(reader, d);
    }
  }
  const std::string ckpt = reader.path().string();
  const char* tie_hint = "";
  if (!spec.tie_word_embeddings &&
      std::find(missing.begin(), missing.end(), "lm_head.weight") != missing.end())
    tie_hint =
        " (config.json says tie_word_embeddings=false but there is no lm_head.weight: "
        "if the head is tied to the embedding, set tie_word_embeddings to true)";
  SF_CHECK(missing.empty(), "checkpoint ", ckpt, " lacks ", missing.size(),
           " tensor(s) that its config.json (", spec.arch_name, ", ", spec.layers,
           " layers) expects: ", list_names(missing), tie_hint,
           "; use the config.json that came with these weights");

  std::vector<std::string> unexpected;
  for (const std::string& name : reader.names()) {
    if (wanted.count(name) || is_harmless(name)) continue;
    if (name == "lm_head.weight" && spec.tie_word_embeddings) {
      // Some exporters write the tied head out; harmless only when it is the embedding.
      SF_CHECK(same_values(reader.get(name), reader.get("model.embed_tokens.weight")),
               "checkpoint ", ckpt, ": config.json says tie_word_embeddings=true but ",
               "lm_head.weight differs from model.embed_tokens.weight; set "
               "tie_word_embeddings to false if the head is trained separately");
      continue;
    }
    unexpected.push_back(name);
  }
  SF_CHECK(unexpected.empty(), "checkpoint ", ckpt, " holds ", unexpected.size(),
           " tensor(s) that a ", spec.arch_name,
           " with this config.json does not use: ", list_names(unexpected),
           "; the config.json does not match the weights (wrong architecture, layer count, "
           "bias or qk-norm settings)");
}

std::string with_saved_dtype(const std::string& config_json_text, DType dtype) {
  // transformers' save_pretrained records the weights' dtype ("torch_dtype"; "dtype" from v5):
  // loaders with dtype "auto" (vLLM, from_pretrained) take it. The text is kept as it was where
  // it already says so.
  const char* name = dtype == DType::kBF16 ? "bfloat16" : dtype == DType::kF16 ? "float16" : "float32";
  nlohmann::ordered_json j = nlohmann::ordered_json::parse(config_json_text);
  bool same = true;
  bool any = false;
  for (const char* key : {"torch_dtype", "dtype"})
    if (j.contains(key)) {
      any = true;
      same = same && j[key] == name;
      j[key] = name;
    }
  if (!any) {
    j["torch_dtype"] = name;
    same = false;
  }
  return same ? config_json_text : j.dump(2) + "\n";
}

void save_hf_checkpoint(const fs::path& dir, const ModelSpec& spec,
                        const std::string& config_json_text,
                        const std::vector<TensorToWrite>& tensors, DType dtype,
                        size_t max_shard_bytes) {
  const fs::path config_path = dir / "config.json";
  // The config must describe these tensors, or transformers would load them into the wrong model.
  const ModelSpec c = parse_model_spec(config_json_text, config_path.string());
  SF_CHECK(c.arch == spec.arch && c.hidden == spec.hidden && c.layers == spec.layers &&
               c.heads == spec.heads && c.kv_heads == spec.kv_heads &&
               c.head_dim == spec.head_dim && c.intermediate == spec.intermediate &&
               c.vocab == spec.vocab && c.attention_bias == spec.attention_bias &&
               c.o_bias == spec.o_bias && c.mlp_bias == spec.mlp_bias &&
               c.tie_word_embeddings == spec.tie_word_embeddings,
           "save_hf_checkpoint(", dir.string(),
           "): the config.json text does not describe the model being saved; pass the "
           "config.json the model was loaded from");
  std::map<std::string, const TensorToWrite*> given;
  for (const TensorToWrite& t : tensors) {
    SF_CHECK(given.emplace(t.name, &t).second, "save_hf_checkpoint(", dir.string(), "): tensor '",
             t.name, "' given twice");
  }
  std::vector<TensorToWrite> out;
  for (const TensorDesc& d : expected_tensors(spec)) {
    auto it = given.find(d.name);
    SF_CHECK(it != given.end(), "save_hf_checkpoint(", dir.string(), "): tensor '", d.name,
             "' was not given");
    SF_CHECK(it->second->shape == d.shape, "save_hf_checkpoint(", dir.string(), "): tensor '",
             d.name, "' has shape ", shape_str(it->second->shape), ", the model expects ",
             shape_str(d.shape));
    out.push_back(*it->second);
    given.erase(it);
  }
  if (spec.tie_word_embeddings) given.erase("lm_head.weight");  // tied: transformers re-ties it
  SF_CHECK(given.empty(), "save_hf_checkpoint(", dir.string(), "): tensor '",
           given.empty() ? "" : given.begin()->first, "' is not part of the model");

  SafetensorsWriteOptions options;
  options.dtype = dtype;
  options.max_shard_bytes = max_shard_bytes;
  // config.json is written with the weights and renamed after them (issue 14: a full disk used to
  // leave new weights without a config).
  options.companion_files.emplace_back("config.json", with_saved_dtype(config_json_text, dtype));
  write_safetensors(dir, out, options);  // creates dir
}

}  // namespace sf
