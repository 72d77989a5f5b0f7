// Checkpoints of `slideformer train`: OUTPUT/checkpoint-<step>/ is a complete HF model directory
// plus the training state; a run resumed from one continues with bit-identical losses and ends
// with the same weights; save_total_limit prunes; a resume that does not fit is refused naming
// what differs; the output directory is checked before the first step; diverged weights are
// never saved.
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <csignal>
#include <map>
#include <sstream>

#include "io/atomic_file.h"
#include "io/safetensors.h"
#include "model/spec.h"
#include "train/options.h"
#include "train/run_guard.h"
#include "train/train_state.h"
#include "train/trainer.h"
#include "train_test_util.h"

namespace sf {
namespace {

using namespace sf::testing;

TrainConfig resumable_config(const fs::path& d) {
  TrainConfig c;
  c.model_dir = tiny_model(d);
  write_text(c.model_dir / "generation_config.json",
             "{\"bos_token_id\": 1, \"eos_token_id\": 2}\n");
  c.data = token_dataset(d / "data.jsonl", 10);
  c.cutoff_len = 16;
  c.lr = 2e-3f;
  c.cache = false;
  c.shuffle = true;        // the data order and the generator must be restored
  c.num_train_epochs = 3;  // 3 steps per epoch: the resume point is inside the second epoch
  c.batch_size = 2;
  c.grad_accum = 2;
  c.schedule = "cosine";
  c.warmup_steps = 2;
  c.weight_decay = 0.01f;
  return c;
}

std::vector<float> weights_of(const fs::path& dir, const std::string& name) {
  SafetensorsReader r(dir);
  const TensorInfo& t = r.get(name);
  size_t n = 1;
  for (int64_t s : t.shape) n *= size_t(s);
  std::vector<float> w(n);
  r.read_f32(name, w.data(), n);
  return w;
}

TEST(TrainCheckpoint, ResumedRunIsBitIdenticalToTheUninterruptedOne) {
  const fs::path d = fresh_dir("resume");
  TrainConfig c = resumable_config(d);
  c.save_dtype = "f32";
  std::ostringstream log;
  c.output_dir = d / "straight";
  const TrainSummary straight = run_training(c, log);
  ASSERT_EQ(straight.losses.size(), 9u);

  c.output_dir = d / "saving";
  c.save_steps = 2;
  c.save_total_limit = 3;
  const TrainSummary saving = run_training(c, log);
  EXPECT_EQ(saving.losses, straight.losses);  // saving does not change the run
  // checkpoints 2, 4, 6, 8 and the final 9, the oldest pruned down to 3
  EXPECT_FALSE(fs::exists(c.output_dir / "checkpoint-2"));
  EXPECT_FALSE(fs::exists(c.output_dir / "checkpoint-4"));
  const fs::path ck = c.output_dir / "checkpoint-6";
  ASSERT_TRUE(fs::exists(ck));
  EXPECT_TRUE(fs::exists(c.output_dir / "checkpoint-8"));
  EXPECT_TRUE(fs::exists(c.output_dir / "checkpoint-9"));
  EXPECT_EQ(read_text(c.output_dir / "latest"), "checkpoint-9\n");
  // A complete model directory plus the training state.
  for (const char* f : {"model.safetensors", "config.json", "generation_config.json",
                        "training_state.safetensors", "trainer_state.json", "training_args.yaml"})
    EXPECT_TRUE(fs::exists(ck / f)) << f;
  EXPECT_EQ(read_text(ck / "config.json"), read_text(c.model_dir / "config.json"));
  SafetensorsReader state(ck / "training_state.safetensors");
  EXPECT_TRUE(state.contains("model.layers.1.mlp.down_proj.weight.exp_avg_sq"));
  EXPECT_EQ(state.get("model.norm.weight.master").dtype, DType::kF32);
  for (const auto& e : fs::directory_iterator(c.output_dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();

  // Resumed from step 6 into another directory: steps 7..9 as in the uninterrupted run, bit for
  // bit, and the same final weights.
  c.output_dir = d / "resumed";
  c.save_steps = 0;
  c.resume_from_checkpoint = ck.string();
  std::ostringstream rlog;
  const TrainSummary resumed = run_training(c, rlog);
  EXPECT_NE(rlog.str().find("resumed from " + ck.string() + " at step 6"), std::string::npos)
      << rlog.str();
  ASSERT_EQ(resumed.losses.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(resumed.losses[i], straight.losses[6 + i]) << i;
  EXPECT_EQ(resumed.steps, 9);
  const std::string t = "model.layers.0.self_attn.q_proj.weight";
  EXPECT_EQ(weights_of(d / "resumed", t), weights_of(d / "straight", t));
  EXPECT_NE(weights_of(d / "resumed", t), weights_of(c.model_dir, t));
}

// The optimizer state in every tier resumes bit-identically: the embedding and head updated on
// the device (their parts pass through the host one at a time: Engine::load_state, fetch), and
// two layers' state on NVMe (written through the tier's staging slot).
TEST(TrainCheckpoint, ResumeRestoresDeviceAndNvmeStateBitIdentically) {
  for (const char* tier : {"device", "nvme"}) {
    const fs::path d = fresh_dir(std::string("resume_") + tier);
    TrainConfig c = resumable_config(d);
    c.num_train_epochs = 2;
    if (std::string(tier) == "device") {
      c.device_optimizer = "all";
    } else {
      c.nvme_dir = d / "nvme";
      fs::create_directories(c.nvme_dir);
      c.nvme_layers = 2;
      c.nvme_masters = 1;  // layer 0 all on the disk, layer 1's m and v
    }
    std::ostringstream log;
    c.output_dir = d / "straight";
    const TrainSummary straight = run_training(c, log);
    ASSERT_EQ(straight.losses.size(), 6u) << tier;
    c.output_dir = d / "saving";
    c.save_steps = 3;
    run_training(c, log);
    c.output_dir = d / "resumed";
    c.save_steps = 0;
    c.resume_from_checkpoint = (d / "saving" / "checkpoint-3").string();
    const TrainSummary resumed = run_training(c, log);
    ASSERT_EQ(resumed.losses.size(), 3u) << tier << log.str();
    for (size_t i = 0; i < 3; ++i) EXPECT_EQ(resumed.losses[i], straight.losses[3 + i]) << tier;
    for (const char* t :
         {"model.embed_tokens.weight", "model.layers.0.mlp.up_proj.weight", "lm_head.weight"})
      EXPECT_EQ(weights_of(d / "resumed", t), weights_of(d / "straight", t)) << tier << " " << t;
  }
}

TEST(TrainCheckpoint, ResumeThatDoesNotFitIsRefused) {
  const fs::path d = fresh_dir("badresume");
  TrainConfig c = resumable_config(d);
  c.output_dir = d / "run";
  c.save_steps = 3;
  std::ostringstream log;
  run_training(c, log);
  const fs::path ck = d / "run" / "checkpoint-3";
  ASSERT_TRUE(fs::exists(ck));

  TrainConfig r = c;
  r.output_dir = d / "r1";
  r.resume_from_checkpoint = ck.string();
  r.lr = 1e-3f;
  std::string e = error_text([&] { run_training(r, log); });
  EXPECT_NE(e.find("the configuration differs (learning_rate was '0.002', now '0.001')"),
            std::string::npos)
      << e;

  r = c;
  r.output_dir = d / "r2";
  r.resume_from_checkpoint = (d / "nowhere").string();
  e = error_text([&] { run_training(r, log); });
  EXPECT_NE(e.find("is not a directory"), std::string::npos) << e;
  r.resume_from_checkpoint = c.model_dir.string();  // a model, not a checkpoint
  e = error_text([&] { run_training(r, log); });
  EXPECT_NE(e.find("holds no trainer_state.json"), std::string::npos) << e;

  // Another model (other shapes) under the same configuration text.
  const fs::path other = d / "other";
  fs::copy(ck, other, fs::copy_options::recursive);
  {
    TinyModelOptions o;
    o.hidden = 48;
    o.layers = 2;
    o.heads = 2;
    o.kv_heads = 1;
    o.intermediate = 64;
    o.vocab = 256;
    write_random_model(d / "m48", o);
    TrainConfig t = c;
    t.model_dir = d / "m48";
    t.output_dir = d / "t48";
    t.steps = 2;
    t.save_steps = 1;
    run_training(t, log);
    fs::remove(other / "training_state.safetensors");
    fs::copy_file(d / "t48" / "checkpoint-1" / "training_state.safetensors",
                  other / "training_state.safetensors");
  }
  r = c;
  r.output_dir = d / "r3";
  r.resume_from_checkpoint = other.string();
  e = error_text([&] { run_training(r, log); });
  EXPECT_NE(e.find("is of another model"), std::string::npos) << e;
  // ... naming the tensor and both shapes.
  EXPECT_NE(e.find("tensor model.embed_tokens.weight.master is F32 [256, 48] in the checkpoint "
                   "but F32 [256, 32] in this model"),
            std::string::npos)
      << e;

  // Truncated files.
  const fs::path cut = d / "cut";
  fs::copy(ck, cut, fs::copy_options::recursive);
  const std::string js = read_text(cut / "trainer_state.json");
  write_text(cut / "trainer_state.json", js.substr(0, js.size() / 2));
  r.resume_from_checkpoint = cut.string();
  r.output_dir = d / "r4";
  e = error_text([&] { run_training(r, log); });
  EXPECT_NE(e.find("trainer_state.json: not valid JSON (truncated or corrupt checkpoint)"),
            std::string::npos)
      << e;
  // Corrupt: valid JSON whose fields are wrong.
  write_text(cut / "trainer_state.json",
             "{\"format\": \"slideformer-trainer-state-1\", \"global_step\": \"three\"}");
  e = error_text([&] { run_training(r, log); });
  EXPECT_NE(e.find("trainer_state.json: \"global_step\" is \"three\", not an integer of 64 bits: "
                   "corrupt checkpoint"),
            std::string::npos)
      << e;
  write_text(cut / "trainer_state.json",
             "{\"format\": \"slideformer-trainer-state-1\", \"global_step\": 3}");
  e = error_text([&] { run_training(r, log); });
  EXPECT_NE(e.find("trainer_state.json: a field is missing or of the wrong type ("),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("): corrupt checkpoint"), std::string::npos) << e;
  EXPECT_EQ(e.find("json.exception"), std::string::npos) << e;
  write_text(cut / "trainer_state.json", js);
  const std::string st = read_text(cut / "training_state.safetensors");
  write_text(cut / "training_state.safetensors", st.substr(0, st.size() - 100));
  r.output_dir = d / "r5";
  e = error_text([&] { run_training(r, log); });
  EXPECT_NE(e.find("training_state.safetensors"), std::string::npos) << e;

  // Same count of samples, other tokens: the data changed under the run.
  r = c;
  r.output_dir = d / "r6";
  r.resume_from_checkpoint = ck.string();
  const std::string data = read_text(c.data);
  write_text(c.data, std::string(data).replace(data.find("[") + 1, 1, "9"));
  e = error_text([&] { run_training(r, log); });
  EXPECT_NE(e.find("the training samples differ from the checkpoint's"), std::string::npos) << e;
  write_text(c.data, data);

  // A corrupt OUTPUT/latest is named, never a silent restart from the model.
  r = c;
  r.resume_from_checkpoint = "auto";
  const std::string latest = read_text(c.output_dir / "latest");
  write_text(c.output_dir / "latest", "../elsewhere\n");
  e = error_text([&] { run_training(r, log); });
  EXPECT_NE(e.find((c.output_dir / "latest").string() + ": does not name a checkpoint directory"),
            std::string::npos)
      << e;
  write_text(c.output_dir / "latest", latest);

  // auto: OUTPUT/latest; the run continues where it stopped.
  r = c;
  r.resume_from_checkpoint = "auto";
  std::ostringstream alog;
  const TrainSummary s = run_training(r, alog);
  EXPECT_NE(alog.str().find("resumed from " + (d / "run" / "checkpoint-9").string()),
            std::string::npos)
      << alog.str();
  EXPECT_TRUE(s.losses.empty());  // it had finished: nothing left to do
}

TEST(TrainCheckpoint, OutputDirectoryIsCheckedBeforeTheFirstStep) {
  const fs::path d = fresh_dir("outdir");
  TrainConfig c = resumable_config(d);
  c.steps = 2;
  std::ostringstream log;
  c.output_dir = c.model_dir;
  std::string e = error_text([&] { run_training(c, log); });
  EXPECT_NE(e.find("is the model directory"), std::string::npos) << e;

  write_text(d / "file", "x");
  c.output_dir = d / "file" / "out";
  e = error_text([&] { run_training(c, log); });
  EXPECT_NE(e.find("output_dir " + (d / "file" / "out").string() + " cannot be created"),
            std::string::npos)
      << e;

  c.output_dir = d / "out";
  run_training(c, log);
  e = error_text([&] { run_training(c, log); });
  EXPECT_NE(e.find("already holds a run (training_args.yaml)"), std::string::npos) << e;
  EXPECT_NE(e.find("resume_from_checkpoint=auto"), std::string::npos) << e;
  c.overwrite_output_dir = true;
  c.save_steps = 1;
  run_training(c, log);
  EXPECT_EQ(read_text(c.output_dir / "latest"), "checkpoint-2\n");
  EXPECT_EQ(read_metrics(c.output_dir / "metrics.jsonl").size(), 2u);  // the old ones removed
}

// --lr 1e30: one step makes the weights ~1e30 (finite in float and bf16). Nothing is saved.
TEST(TrainCheckpoint, DivergedWeightsAreNeverSaved) {
  const fs::path d = fresh_dir("diverged");
  TrainConfig c = resumable_config(d);
  c.steps = 1;
  c.lr = 1e30f;
  c.warmup_steps = 0;
  c.output_dir = d / "out";
  std::ostringstream log;
  const std::string e = error_text([&] { run_training(c, log); });
  EXPECT_NE(e.find("after step 1 the weights are unusable"), std::string::npos) << e;
  EXPECT_NE(e.find("beyond ±1e6"), std::string::npos) << e;
  EXPECT_NE(e.find("lower learning_rate (it is 1e+30)"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(c.output_dir / "model.safetensors"));
}

// Without save_steps, divergence in the middle of a run stops it at the next step (the engine
// refuses a non-finite loss), and after the last step the weights are checked before anything is
// saved: no run exits normally with unusable weights, whichever step diverged.
TEST(TrainCheckpoint, DivergenceStopsTheRunAndSavesNothing) {
  const fs::path d = fresh_dir("diverged_mid");
  TrainConfig c = resumable_config(d);
  c.steps = 5;
  c.lr = 1e30f;
  c.warmup_steps = 0;
  c.output_dir = d / "out";
  std::ostringstream log;
  const std::string e = error_text([&] { run_training(c, log); });
  // The engine's refusal (a NaN/inf loss or gradient norm) or the trainer's (unusable weights):
  // either names the learning rate as what to lower.
  EXPECT_TRUE(e.find("lower the learning rate") != std::string::npos ||
              e.find("lower learning_rate") != std::string::npos)
      << e;
  EXPECT_FALSE(fs::exists(c.output_dir / "model.safetensors"));
  EXPECT_FALSE(fs::exists(c.output_dir / "latest"));
}

// The space check counts what the run keeps on disk at once (the final model, the checkpoints
// save_total_limit keeps plus the one being written, side files), before the first step.
TEST(TrainCheckpoint, OutputSpaceIsCheckedBeforeTheFirstStep) {
  const fs::path d = fresh_dir("space");
  TrainConfig c = resumable_config(d);
  c.output_dir = d / "out";
  c.save_steps = 2;
  c.save_total_limit = 2;
  std::ostringstream log;
  const TrainSummary s = run_training(c, log);
  uint64_t written = 0;
  for (const auto& e : fs::recursive_directory_iterator(c.output_dir))
    if (e.is_regular_file()) written += e.file_size();
  const int64_t params = parameter_count(load_model_spec(c.model_dir));
  const double need =
      output_bytes_needed(c, params, s.total_steps, side_files_bytes(c.model_dir, ""));
  // What stays is the final model and 2 checkpoints; the estimate holds one more checkpoint
  // (the one being written before the oldest is pruned).
  EXPECT_GE(need, double(written));
  EXPECT_LT(need, 3.0 * double(written));
  c.save_total_limit = 0;  // all 4 checkpoints (2, 4, 6, 8, 9: 5 saves) are kept
  EXPECT_GT(output_bytes_needed(c, params, s.total_steps, 0), need);
  c.no_save = true;
  EXPECT_EQ(output_bytes_needed(c, params, s.total_steps, 0), 0.0);
  c.no_save = false;
  c.save_total_limit = 2;

  // A disk with one byte less than that: refused before any step, naming the directory.
  c.output_dir = d / "full";
  override_free_space_for_test(int64_t(need) - 1);
  std::ostringstream flog;
  const std::string e = error_text([&] { run_training(c, flog); });
  override_free_space_for_test(-1);
  EXPECT_NE(e.find("output_dir " + c.output_dir.string() + " has "), std::string::npos) << e;
  EXPECT_NE(e.find("GiB free, but this run writes about"), std::string::npos) << e;
  EXPECT_NE(e.find("lower save_total_limit"), std::string::npos) << e;
  EXPECT_EQ(flog.str().find("step 1"), std::string::npos) << flog.str();
  EXPECT_FALSE(fs::exists(c.output_dir / "metrics.jsonl"));
}

// A run killed while saving leaves OUTPUT/.checkpoint-<step>.tmp-<pid>/ (up to a checkpoint's
// size); the next run into that directory removes it before its first step, and keeps the
// complete checkpoints it resumes from.
TEST(TrainCheckpoint, StaleCheckpointTemporariesAreRemovedByTheNextRun) {
  const fs::path d = fresh_dir("stale_ck");
  TrainConfig c = resumable_config(d);
  c.output_dir = d / "out";
  c.steps = 4;
  c.save_steps = 2;
  std::ostringstream log;
  run_training(c, log);
  const fs::path stale = c.output_dir / ".checkpoint-4.tmp-999999";
  fs::create_directories(stale);
  write_text(stale / "model.safetensors", std::string(4096, 'x'));
  fs::remove_all(c.output_dir / "checkpoint-4");
  write_text(c.output_dir / "latest", "checkpoint-2\n");
  c.resume_from_checkpoint = "auto";
  std::ostringstream rlog;
  const TrainSummary s = run_training(c, rlog);
  EXPECT_NE(rlog.str().find("resumed from " + (c.output_dir / "checkpoint-2").string()),
            std::string::npos)
      << rlog.str();
  EXPECT_EQ(s.steps, 4);
  EXPECT_FALSE(fs::exists(stale));
  for (const auto& e : fs::directory_iterator(c.output_dir))
    EXPECT_EQ(e.path().filename().string().find(".tmp-"), std::string::npos) << e.path();
}

// An output directory that exists but cannot be written (/proc/self, even for root) is refused
// before the first step, not at the first save.
TEST(TrainCheckpoint, UnwritableOutputDirectoryIsRefusedBeforeTheFirstStep) {
  const fs::path d = fresh_dir("unwritable");
  TrainConfig c = resumable_config(d);
  c.output_dir = "/proc/self";
  std::ostringstream log;
  std::string e = error_text([&] { run_training(c, log); });
  EXPECT_NE(e.find("output_dir /proc/self is not writable"), std::string::npos) << e;
  EXPECT_NE(e.find("give a writable output_dir"), std::string::npos) << e;
  c.output_dir = "/proc/self/sf_out";
  e = error_text([&] { run_training(c, log); });
  EXPECT_NE(e.find("output_dir /proc/self/sf_out cannot be created"), std::string::npos) << e;
  EXPECT_EQ(log.str().find("step 1"), std::string::npos) << log.str();
}

// A checkpoint write that fails part-way (a file-size limit: EFBIG; then ENOSPC at several
// points) stops the run with the reason; the previous checkpoint, unchanged, `latest` and nothing
// else stay, and it resumes.
TEST(TrainCheckpoint, FailedSaveLeavesThePreviousCheckpointIntact) {
  const fs::path d = fresh_dir("enospc");
  TrainConfig c = resumable_config(d);
  c.output_dir = d / "out";
  c.steps = 4;
  c.save_steps = 2;
  std::ostringstream log;
  ASSERT_EQ(run_training(c, log).steps, 4);
  // Back to the moment checkpoint-2 was the latest; resuming from it, the save at step 4 fails.
  fs::remove_all(c.output_dir / "checkpoint-4");
  write_text(c.output_dir / "latest", "checkpoint-2\n");
  TrainConfig again = c;
  again.resume_from_checkpoint = "auto";
  struct rlimit old {};
  getrlimit(RLIMIT_FSIZE, &old);
  auto* old_handler = std::signal(SIGXFSZ, SIG_IGN);  // a write past the limit fails with EFBIG
  struct rlimit small = old;
  small.rlim_cur = 32 * 1024;  // the weights of the tiny model are larger
  setrlimit(RLIMIT_FSIZE, &small);
  const std::string e = error_text([&] { run_training(again, log); });
  setrlimit(RLIMIT_FSIZE, &old);
  std::signal(SIGXFSZ, old_handler);
  EXPECT_NE(e.find("saving checkpoint " + (c.output_dir / "checkpoint-4").string() + " failed"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("the previous checkpoint is intact"), std::string::npos) << e;
  EXPECT_FALSE(fs::exists(c.output_dir / "checkpoint-4"));
  EXPECT_EQ(read_text(c.output_dir / "latest"), "checkpoint-2\n");
  for (const auto& entry : fs::directory_iterator(c.output_dir))
    EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos) << entry.path();

  // ENOSPC itself, injected through the atomic-file layer every checkpoint file is written by:
  // the disk fills at the checkpoint's first byte, half-way and near its end.
  const fs::path prev = c.output_dir / "checkpoint-2";
  uint64_t ck_bytes = 0;
  std::map<std::string, std::string> prev_files;
  for (const auto& entry : fs::directory_iterator(prev)) {
    ck_bytes += fs::file_size(entry.path());
    prev_files[entry.path().filename().string()] = read_text(entry.path());
  }
  // The resumed run writes the output_dir probe ("ok\n") and its training_args.yaml first, then
  // nothing through the layer until the save at step 4.
  const int64_t before = 3 + int64_t(config_to_yaml(again).size());
  for (double f : {0.0, 0.5, 0.98}) {
    const int64_t budget = before + int64_t(f * double(ck_bytes));
    inject_write_failure_after(budget);
    const std::string full = error_text([&] { run_training(again, log); });
    inject_write_failure_after(-1);
    EXPECT_NE(
        full.find("saving checkpoint " + (c.output_dir / "checkpoint-4").string() + " failed"),
        std::string::npos)
        << f << ": " << full;
    EXPECT_NE(full.find("No space left on device"), std::string::npos) << f << ": " << full;
    EXPECT_NE(full.find("the previous checkpoint is intact"), std::string::npos) << full;
    EXPECT_FALSE(fs::exists(c.output_dir / "checkpoint-4")) << f;
    EXPECT_EQ(read_text(c.output_dir / "latest"), "checkpoint-2\n") << f;
    for (const auto& entry : fs::directory_iterator(c.output_dir))
      EXPECT_EQ(entry.path().filename().string().find(".tmp-"), std::string::npos)
          << f << ": " << entry.path();
    std::map<std::string, std::string> now;
    for (const auto& entry : fs::directory_iterator(prev))
      now[entry.path().filename().string()] = read_text(entry.path());
    EXPECT_TRUE(now == prev_files) << f << ": checkpoint-2 changed";
  }

  std::ostringstream rlog;
  const TrainSummary s = run_training(again, rlog);
  EXPECT_NE(rlog.str().find("resumed from " + (c.output_dir / "checkpoint-2").string()),
            std::string::npos)
      << rlog.str();
  EXPECT_EQ(s.steps, 4);
}

// The NVMe tier's room in nvme_dir is checked before anything is allocated; an output_dir on the
// same file system adds what the run writes there, one elsewhere does not.
TEST(TrainCheckpoint, NvmeDirectoryWithoutRoomIsRefusedFirst) {
  const fs::path d = fs::temp_directory_path() / "sf_nvme_space";
  fs::remove_all(d);
  fs::create_directories(d / "out");
  const double gib = double(1ull << 30);
  override_free_space_for_test(int64_t(3 * gib));
  EXPECT_NO_THROW(check_nvme_space(d, 2 * gib, "", 0));
  EXPECT_NO_THROW(check_nvme_space(d, 2 * gib, "/nonexistent_output", 5 * gib));
  const std::string alone = error_text([&] { check_nvme_space(d, 4 * gib, "", 0); });
  const std::string shared = error_text([&] { check_nvme_space(d, 2 * gib, d / "out", 2 * gib); });
  override_free_space_for_test(-1);
  EXPECT_NE(alone.find("nvme_dir " + d.string() + " has 3 GiB free, but the NVMe tier needs 4 GiB"),
            std::string::npos)
      << alone;
  EXPECT_NE(shared.find("and output_dir, on the same file system, about 2 GiB"), std::string::npos)
      << shared;
  fs::remove_all(d);
}

}  // namespace
}  // namespace sf
