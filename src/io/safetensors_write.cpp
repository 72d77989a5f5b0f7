// defines: write_safetensors (sharded with index), write_safetensors_file (one file) — every file
// under a temporary name, renamed only when complete.
#include <algorithm>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "io/atomic_file.h"
#include "io/safetensors.h"

namespace sf {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_mul_overflow(a, b, out) || *out > uint64_t(std::numeric_limits<int64_t>::max());
}

uint64_t numel_of(const TensorToWrite& t) {
  uint64_t n = 1;
  for (int64_t d : t.shape) {
    SF_CHECK(d >= 0 && !mul_overflows(n, uint64_t(d), &n), "write_safetensors: tensor '", t.name,
             "' has an invalid shape; fix the caller");
  }
  return n;
}

void write_shard(AtomicFile& out, const std::vector<const TensorToWrite*>& shard, DType dtype) {
  std::vector<const TensorToWrite*> sorted = shard;
  std::sort(sorted.begin(), sorted.end(),
            [](const TensorToWrite* a, const TensorToWrite* b) { return a->name < b->name; });
  json header = json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const TensorToWrite* t : sorted) {
    const uint64_t bytes = numel_of(*t) * dtype_size(dtype);
    header[t->name] = {{"dtype", std::string(dtype_name(dtype))},
                       {"shape", t->shape},
                       {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();             // keys sorted: nlohmann's object is a std::map
  text.append((8 - text.size() % 8) % 8, ' ');  // data section starts 8-byte aligned
  uint8_t len[8];
  for (int i = 0; i < 8; ++i) len[i] = uint8_t(uint64_t(text.size()) >> (8 * i));
  out.write(len, 8);
  out.write(text.data(), text.size());
  std::vector<uint16_t> buf;
  for (const TensorToWrite* t : sorted) {
    const uint64_t n = numel_of(*t);
    uint64_t written = 0;  // elements: the pieces come in order and cover the tensor
    auto write_data = [&](const float* data, int64_t begin, int64_t count) {
      SF_CHECK(begin >= 0 && uint64_t(begin) == written && written + uint64_t(count) <= n,
               "internal: tensor '", t->name, "' handed elements [", begin, ", ", begin + count,
               ") after ", written, " of ", n);
      written += uint64_t(count);
      if (dtype == DType::kF32) {
        out.write(data, uint64_t(count) * 4);
        return;
      }
      constexpr uint64_t kChunk = 1 << 20;
      buf.resize(std::min(uint64_t(count), kChunk));
      for (uint64_t i = 0; i < uint64_t(count); i += kChunk) {
        const uint64_t m = std::min(kChunk, uint64_t(count) - i);
        for (uint64_t k = 0; k < m; ++k) buf[k] = f32_to_bf16(data[i + k]);
        out.write(buf.data(), m * 2);  // host is little-endian (x86-64, aarch64)
      }
    };
    if (t->produce)
      t->produce(write_data);
    else
      write_data(t->data, 0, int64_t(n));
    SF_CHECK(written == n, "internal: tensor '", t->name, "' handed ", written, " of its ", n,
             " elements");
  }
  out.finish();
}

}  // namespace

void write_safetensors(const fs::path& dir, const std::vector<TensorToWrite>& tensors,
                       const SafetensorsWriteOptions& options) {
  const DType dtype = options.dtype;
  SF_CHECK(dtype == DType::kBF16 || dtype == DType::kF32, "write_safetensors(", dir.string(),
           "): dtype ", dtype_name(dtype), " is not supported; use BF16 or F32");
  SF_CHECK(options.max_shard_bytes > 0, "write_safetensors(", dir.string(),
           "): max_shard_bytes must be positive");
  // Validate everything before touching the disk.
  std::set<std::string> seen;
  for (const auto& t : tensors) {
    SF_CHECK(!t.name.empty() && t.name != "__metadata__", "write_safetensors(", dir.string(),
             "): invalid tensor name '", t.name, "'");
    SF_CHECK(seen.insert(t.name).second, "write_safetensors(", dir.string(), "): tensor '", t.name,
             "' given twice");
    SF_CHECK(t.data || t.produce || numel_of(t) == 0, "write_safetensors(", dir.string(), "): tensor '", t.name,
             "' has no data");
  }
  // Greedy sharding in the caller's (model) order, like transformers' save_pretrained.
  std::vector<std::vector<const TensorToWrite*>> shards(1);
  uint64_t shard_bytes = 0, total = 0;
  for (const auto& t : tensors) {
    const uint64_t bytes = numel_of(t) * dtype_size(dtype);
    if (!shards.back().empty() && shard_bytes + bytes > options.max_shard_bytes) {
      shards.emplace_back();
      shard_bytes = 0;
    }
    shards.back().push_back(&t);
    shard_bytes += bytes;
    total += bytes;
  }
  std::error_code ec;
  fs::create_directories(dir, ec);
  SF_CHECK(!ec && fs::is_directory(dir), "write_safetensors: cannot create directory ",
           dir.string(), " (", ec.message(), ")");

  remove_stale_temporaries(dir);

  const size_t n = shards.size();
  std::vector<std::unique_ptr<AtomicFile>> files;
  json weight_map = json::object();
  for (size_t k = 0; k < n; ++k) {
    char name[64];
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", k + 1, n);
    const std::string file = n == 1 ? std::string(kSingleName) : std::string(name);
    files.push_back(std::make_unique<AtomicFile>(dir / file));
    write_shard(*files.back(), shards[k], dtype);
    if (options.on_shard_written) options.on_shard_written(files.back()->tmp_path());
    for (const TensorToWrite* t : shards[k]) weight_map[t->name] = file;
  }
  if (n > 1) {
    json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
    const std::string text = index.dump(2) + "\n";
    files.push_back(std::make_unique<AtomicFile>(dir / kIndexName));
    files.back()->write(text.data(), text.size());
    files.back()->finish();
  }
  for (const auto& [name, text] : options.companion_files) {  // config.json: renamed last
    files.push_back(std::make_unique<AtomicFile>(dir / name));
    files.back()->write(text.data(), text.size());
    files.back()->finish();
  }
  // Every file is whole on disk; now give them their names, the index and the companions (the
  // config) last. If a rename fails,
  // the files already renamed are an incomplete set: remove them too.
  size_t renamed = 0;
  try {
    for (; renamed < files.size(); ++renamed) files[renamed]->rename_to_final();
  } catch (...) {
    for (size_t i = 0; i < renamed; ++i) fs::remove(files[i]->final_path(), ec);
    throw;
  }
  // transformers prefers model.safetensors over the index: drop whichever layout is stale.
  fs::remove(dir / (n == 1 ? kIndexName : kSingleName), ec);
  fsync_dir(dir);
}

void write_safetensors_file(const fs::path& file, const std::vector<TensorToWrite>& tensors,
                            DType dtype) {
  SF_CHECK(dtype == DType::kBF16 || dtype == DType::kF32, "write_safetensors_file(",
           file.string(), "): dtype ", dtype_name(dtype), " is not supported; use BF16 or F32");
  std::set<std::string> seen;
  std::vector<const TensorToWrite*> all;
  for (const auto& t : tensors) {
    SF_CHECK(!t.name.empty() && t.name != "__metadata__" && seen.insert(t.name).second,
             "write_safetensors_file(", file.string(), "): invalid or repeated tensor name '",
             t.name, "'");
    SF_CHECK(t.data || t.produce || numel_of(t) == 0, "write_safetensors_file(", file.string(),
             "): tensor '", t.name, "' has no data");
    all.push_back(&t);
  }
  AtomicFile out(file);
  write_shard(out, all, dtype);
  out.rename_to_final();
}

}  // namespace sf
