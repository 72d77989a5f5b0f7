#include "train/train_state.h"

#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/input_file.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "model/weights.h"
#include "train/checkpoint.h"
#include "train/config_file.h"

namespace sf {
namespace fs = std::filesystem;

namespace {

constexpr const char* kStateFile = "training_state.safetensors";

// Side files a Hugging Face model directory carries besides config.json and the weights.
const char* const kTokenizerFiles[] = {"tokenizer.json",
                                       "tokenizer_config.json",
                                       "special_tokens_map.json",
                                       "tokenizer.model",
                                       "vocab.json",
                                       "merges.txt",
                                       "added_tokens.json",
                                       "chat_template.jinja",
                                       "chat_template.json"};

void copy_file_atomic(const fs::path& from, const fs::path& to) {
  write_file_atomic(to, read_text_file(from, "the model file"));
}

}  // namespace

void copy_tokenizer_files(const fs::path& tokenizer_dir, const fs::path& out) {
  for (const char* name : kTokenizerFiles)
    if (fs::is_regular_file(tokenizer_dir / name))
      copy_file_atomic(tokenizer_dir / name, out / name);
}

uint64_t side_files_bytes(const fs::path& model_dir, const fs::path& tokenizer_dir) {
  std::error_code ec;
  uint64_t n = 0;
  auto add = [&](const fs::path& p) {
    if (fs::is_regular_file(p, ec)) n += fs::file_size(p, ec);
  };
  add(model_dir / "generation_config.json");
  if (!tokenizer_dir.empty())
    for (const char* name : kTokenizerFiles) add(tokenizer_dir / name);
  return n;
}

void copy_model_side_files(const fs::path& model_dir, const fs::path& tokenizer_dir,
                           const fs::path& out) {
  if (fs::is_regular_file(model_dir / "generation_config.json"))
    copy_file_atomic(model_dir / "generation_config.json", out / "generation_config.json");
  if (!tokenizer_dir.empty()) copy_tokenizer_files(tokenizer_dir, out);
}

fs::path save_training_checkpoint(Engine& engine, const fs::path& output,
                                  const CheckpointSources& src, const TrainerState& state) {
  const std::string name = str_cat("checkpoint-", state.global_step);
  const fs::path final_dir = output / name;
  const fs::path tmp = output / str_cat(".", name, ".tmp-", getpid());
  std::error_code ec;
  fs::remove_all(tmp, ec);
  try {
    fs::create_directories(tmp);
    // Weights (in save_dtype, loadable by from_pretrained) and the fp32 optimizer state.
    std::vector<TensorToWrite> weights, opt_state;
    engine.visit_state_read([&](const TensorState& t) {
      weights.push_back(state_to_write(t, t.desc.name, 0));
      opt_state.push_back(state_to_write(t, t.desc.name + ".master", 0));
      opt_state.push_back(state_to_write(t, t.desc.name + ".exp_avg", 1));
      opt_state.push_back(state_to_write(t, t.desc.name + ".exp_avg_sq", 2));
    });
    save_hf_checkpoint(tmp, engine.spec(), src.config_json, weights, src.dtype);
    write_safetensors_file(tmp / kStateFile, opt_state, DType::kF32);
    copy_model_side_files(src.model_dir, src.tokenizer_dir, tmp);
    nlohmann::ordered_json j;
    j["format"] = kTrainerStateFormat;
    j["global_step"] = state.global_step;
    j["max_steps"] = state.total_steps;
    j["epoch"] = state.epoch;
    j["optimizer_steps_done"] = engine.steps_done();
    j["data_position"] = state.batcher;
    j["training_args"] = state.config_yaml;
    write_file_atomic(tmp / kTrainerStateFile, j.dump(1) + "\n");
    write_file_atomic(tmp / "training_args.yaml", state.config_yaml);
    fsync_dir(tmp);
    if (fs::exists(final_dir)) fs::remove_all(final_dir);  // the same step saved again
    fs::rename(tmp, final_dir);
    fsync_dir(output);
    write_file_atomic(output / "latest", name + "\n");
    fsync_dir(output);
  } catch (const fs::filesystem_error& e) {
    fs::remove_all(tmp, ec);
    SF_FAIL("saving checkpoint ", final_dir.string(), " failed: ", e.code().message(), " (",
            e.path1().string(), "); the previous checkpoint is intact");
  } catch (const Error& e) {
    fs::remove_all(tmp, ec);
    SF_FAIL("saving checkpoint ", final_dir.string(), " failed: ", e.what(),
            "; the previous checkpoint is intact");
  }
  return final_dir;
}

void load_training_tensors(Engine& engine, const fs::path& dir, int64_t steps) {
  SafetensorsReader reader(dir / kStateFile);
  std::set<std::string> expected;
  // Every name and shape first, so a checkpoint of another model changes nothing.
  engine.visit_state_read([&](const TensorState& t) {
    for (const char* part : {".master", ".exp_avg", ".exp_avg_sq"}) {
      const std::string name = t.desc.name + part;
      expected.insert(name);
      SF_CHECK(reader.contains(name), reader.path().string(), ": no tensor ", name,
               ": the checkpoint is of another model (or corrupt)");
      const TensorInfo& info = reader.get(name);
      SF_CHECK(info.dtype == DType::kF32 && info.shape == t.desc.shape, reader.path().string(),
               ": tensor ", name, " is ", dtype_name(info.dtype), " ", shape_str(info.shape),
               " in the checkpoint but F32 ", shape_str(t.desc.shape),
               " in this model: the checkpoint is of another model");
    }
  });
  for (const auto& n : reader.names())
    SF_CHECK(expected.count(n), reader.path().string(), ": tensor ", n,
             " is not part of this model: the checkpoint is of another model");
  engine.load_state(
      [&](const TensorDesc& desc, int part, int64_t begin, int64_t count, float* dst) {
        const std::string name = desc.name + (part == 0 ? ".master" : part == 1 ? ".exp_avg"
                                                                                 : ".exp_avg_sq");
        reader.read_f32(name, begin, count, dst);
        reader.release(name, begin, count);  // read once
      });
  engine.set_steps_done(steps);
}

std::optional<fs::path> find_resume_checkpoint(const TrainConfig& c) {
  const std::string& r = c.resume_from_checkpoint;
  if (r.empty()) return std::nullopt;
  if (r == "auto") {
    const fs::path latest = c.output_dir / "latest";
    if (!fs::exists(latest)) return std::nullopt;
    std::string name = read_text_file(latest, "the latest-checkpoint pointer");
    while (!name.empty() && (name.back() == '\n' || name.back() == '\r')) name.pop_back();
    SF_CHECK(!name.empty() && name.find('/') == std::string::npos, latest.string(),
             ": does not name a checkpoint directory (corrupt); give resume_from_checkpoint=DIR");
    SF_CHECK(fs::is_directory(c.output_dir / name), latest.string(), " names ", name,
             ", which is not in ", c.output_dir.string(), "; give resume_from_checkpoint=DIR");
    return c.output_dir / name;
  }
  const fs::path dir = r;
  SF_CHECK(fs::is_directory(dir), "resume_from_checkpoint: ", dir.string(),
           " is not a directory; give a checkpoint-<step> directory or auto");
  SF_CHECK(fs::exists(dir / kTrainerStateFile), "resume_from_checkpoint: ", dir.string(),
           " holds no ", kTrainerStateFile, ": it is not a training checkpoint (a final model ",
           "cannot be resumed; train from it with model_name_or_path instead)");
  return dir;
}

void prune_checkpoints(const fs::path& output, int64_t limit, const fs::path& keep) {
  if (limit <= 0) return;
  std::vector<std::pair<int64_t, fs::path>> found;
  for (const auto& e : fs::directory_iterator(output)) {
    const std::string n = e.path().filename().string();
    if (!e.is_directory() || n.rfind("checkpoint-", 0) != 0) continue;
    const std::string digits = n.substr(11);
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), ::isdigit)) continue;
    found.emplace_back(std::stoll(digits), e.path());
  }
  std::sort(found.begin(), found.end());
  for (size_t i = 0; i + size_t(limit) < found.size(); ++i)
    if (found[i].second != keep) fs::remove_all(found[i].second);
}

}  // namespace sf
