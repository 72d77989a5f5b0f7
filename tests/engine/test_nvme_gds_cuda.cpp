// GPUDirect Storage for the NVMe checkpoints on CUDA: with the slots on the device and cuFile
// moving them (compatibility mode where nvidia-fs is absent, as on the GPU machine), a run is
// bit-identical with the same run's checkpoints in host memory and through pinned slots and
// io_uring; both paths' rates are measured. Skipped where cuFile does not open.
#include <gtest/gtest.h>

#include "backend/cuda/cuda_backend.h"
#include "engine/nvme_checkpoints.h"
#include "engine_test_util.h"
#include "io/nvme_store.h"

namespace sf {
namespace {

using namespace sf::test_engine;

TrainRun cuda_run(const fs::path& dir, EngineOptions opt) {
  const ModelSpec spec = load_model_spec(dir);
  CudaBackendOptions o;
  o.max_tokens = opt.max_tokens;
  o.hidden = spec.hidden;
  o.vocab = spec.vocab;
  o.max_heads = spec.heads;
  auto be = make_cuda_backend(o);
  Engine e(*be, spec, opt);
  EXPECT_EQ(e.plan().ckpt_gds, opt.nvme_gds);
  load_model_weights(e, dir);
  TrainRun r;
  for (int s = 0; s < 4; ++s)
    r.losses.push_back(e.step(random_batch(uint64_t(s % 2), spec.vocab, {13, 21, 7}), 1e-2f).loss);
  if (opt.nvme_checkpoints > 0) {
    const FileStore::Stats st = *e.nvme_stats();
    EXPECT_GT(st.bytes_written, 0u);
    EXPECT_GT(st.bytes_read, 0u);
  }
  r.weights = all_weights(e);
  return r;
}

TEST(NvmeGdsCuda, CheckpointsThroughGpuDirectAreBitIdentical) {
  if (cuda_device_count() == 0) GTEST_SKIP() << "skipped: no CUDA device";
  std::string why;
  if (!gds_available(&why)) GTEST_SKIP() << "skipped: GPUDirect Storage: " << why;
  if (!NvmeStore::io_uring_available(&why)) GTEST_SKIP() << "skipped: io_uring: " << why;
  const fs::path dir = tiny_model("gds_cuda", "llama", false);
  const fs::path scratch = fs::temp_directory_path() / "sf_gds_scratch";
  fs::remove_all(scratch);
  fs::create_directories(scratch);
  // cuFile registers a file only where it can read the block device's udev properties (also in
  // its compatibility mode); a container without the udev database (the GPU machine's) cannot.
  try {
    make_gds_store(scratch);
  } catch (const Error& e) {
    fs::remove_all(scratch);
    GTEST_SKIP() << "skipped: cuFile cannot use a file in " << scratch.string() << ": " << e.what();
  }
  for (float clip : {0.0f, 1.0f}) {
    EngineOptions host = run_options(2, clip);
    const TrainRun in_memory = cuda_run(dir, host);
    EngineOptions disk = host;
    disk.nvme_dir = scratch.string();
    disk.nvme_layers = 0;
    disk.nvme_checkpoints = 1;
    const TrainRun uring = cuda_run(dir, disk);
    disk.nvme_gds = true;
    const TrainRun gds = cuda_run(dir, disk);
    EXPECT_EQ(uring.losses, in_memory.losses) << "clip " << clip;
    EXPECT_EQ(gds.losses, in_memory.losses) << "clip " << clip;
    EXPECT_TRUE(gds.weights == in_memory.weights) << "clip " << clip;
    EXPECT_TRUE(uring.weights == in_memory.weights) << "clip " << clip;
  }
  EXPECT_TRUE(fs::is_empty(scratch));  // the scratch files were private and are gone
  // Both paths measured for a 64 MiB checkpoint (16k tokens of hidden 2048, bf16).
  CudaBackendOptions o;
  o.max_tokens = 16;
  o.hidden = 64;
  o.vocab = 64;
  auto be = make_cuda_backend(o);
  const CheckpointPathRates r = NvmeCheckpoints::measure_paths(*be, scratch, 64ull << 20);
  std::cout << r.describe() << "\n";
  EXPECT_GT(r.uring_write_gbps, 0);
  EXPECT_GT(r.gds_write_gbps, 0) << r.gds_error;
  EXPECT_GT(r.gds_read_gbps, 0) << r.gds_error;
  fs::remove_all(scratch);
}

}  // namespace
}  // namespace sf
