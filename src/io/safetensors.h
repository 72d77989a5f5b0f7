// defines: sf::SafetensorsReader (mmap; single file or sharded via model.safetensors.index.json),
// sf::SafetensorsWriter (sharded with index; written under a temporary name, renamed when whole).
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/dtype.h"

namespace sf {

struct TensorInfo {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  const void* data = nullptr;  // inside the mapped file
  size_t bytes = 0;
  std::filesystem::path file;  // the shard that holds it (for error messages)
};

class SafetensorsReader {
 public:
  // `path` is a .safetensors file, a model.safetensors.index.json, or a directory holding either.
  // Every header field, shape, dtype and offset is checked; errors name the file and the tensor.
  explicit SafetensorsReader(const std::filesystem::path& path);
  ~SafetensorsReader();
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;

  bool contains(const std::string& name) const;
  const TensorInfo& get(const std::string& name) const;  // throws naming the tensor and file
  std::vector<std::string> names() const;                // sorted
  // Copies a tensor into dst as F32 (from BF16, F16 or F32), checking the element count.
  void read_f32(const std::string& name, float* dst, size_t count) const;
  // Elements [begin, begin + count) of it (within its element count).
  void read_f32(const std::string& name, int64_t begin, int64_t count, float* dst) const;
  // Drops the tensor's pages from this process's memory once it has been read: a mapped page
  // counts in the process's RSS until unmapped, so reading a 16 GB checkpoint would otherwise
  // hold 16 GB beside the training state. The data stays valid (a later read faults it back in
  // from the page cache or the file); pages shared with a neighbouring tensor are dropped too.
  void release(const std::string& name) const;
  // The pages of elements [begin, begin + count) alone (a tensor read piece by piece).
  void release(const std::string& name, int64_t begin, int64_t count) const;
  // What the reader was opened on (for error messages that name the checkpoint).
  const std::filesystem::path& path() const { return path_; }

 private:
  struct Mapping;
  void open_file(const std::filesystem::path& file);
  void open_index(const std::filesystem::path& index);
  std::filesystem::path path_;
  std::vector<std::unique_ptr<Mapping>> maps_;
  std::map<std::string, TensorInfo> tensors_;
};

struct TensorToWrite {
  std::string name;
  std::vector<int64_t> shape;
  const float* data = nullptr;  // always given as F32; converted to the writer's dtype
  // Where `data` cannot stay valid until the write (a GPU-resident tensor copied to the host on
  // demand): called when the tensor's bytes are written, with a function to hand them to, valid
  // during that call: write(values, begin, count) for elements [begin, begin + count), in order,
  // covering the tensor (pieces of any size). Set either this or `data`.
  using Sink = std::function<void(const float* values, int64_t begin, int64_t count)>;
  std::function<void(const Sink&)> produce = nullptr;
};

struct SafetensorsWriteOptions {
  DType dtype = DType::kBF16;           // BF16 or F32
  size_t max_shard_bytes = 5ull << 30;  // like HF's default "5GB"
  // Called after each shard is complete under its temporary name (progress reporting). An
  // exception thrown from it aborts the write like any other error: nothing is left behind.
  std::function<void(const std::filesystem::path& shard)> on_shard_written = nullptr;
  // Small files of the same checkpoint (name in dir, content), e.g. config.json: written under
  // temporary names with the shards and renamed after every shard and the index, so a failure
  // (a full disk) never leaves new weights without their config, nor a config without weights.
  std::vector<std::pair<std::string, std::string>> companion_files = {};
};

// Writes `tensors` into dir as model.safetensors (one shard) or model-0000k-of-0000n.safetensors
// plus model.safetensors.index.json. Each file is written under a temporary name and renamed
// only once every file is complete and flushed; on any error no partial file is left behind.
// First removes stale temporary files of dead processes in dir (remove_stale_temporaries).
void write_safetensors(const std::filesystem::path& dir, const std::vector<TensorToWrite>& tensors,
                       const SafetensorsWriteOptions& options = {});

// One safetensors file at `file` (no sharding), under a temporary name until complete.
void write_safetensors_file(const std::filesystem::path& file,
                            const std::vector<TensorToWrite>& tensors, DType dtype);

}  // namespace sf
