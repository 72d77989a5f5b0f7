// defines: SafetensorsReader (mmap, every header field checked), write_safetensors (sharded,
// atomic per file). Format: u64 little-endian header length N, N bytes of JSON, then the data.
#include "io/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "core/error.h"
#include "core/input_file.h"

namespace sf {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr uint64_t kMaxHeaderBytes = 100ull << 20;  // HF's own limit; beyond it the file is junk
constexpr const char* kRedo = "re-download or re-export the checkpoint";
constexpr const char* kIndexName = "model.safetensors.index.json";
constexpr const char* kSingleName = "model.safetensors";

bool parse_dtype(const std::string& s, DType* out) {
  static const std::pair<const char*, DType> kTable[] = {{"F32", DType::kF32},
                                                         {"BF16", DType::kBF16},
                                                         {"F16", DType::kF16},
                                                         {"I32", DType::kI32},
                                                         {"I64", DType::kI64}};
  for (const auto& [name, t] : kTable) {
    if (s == name) {
      *out = t;
      return true;
    }
  }
  return false;
}

// A JSON value that is a non-negative integer fitting int64, or false.
bool get_nonneg(const json& v, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
  } else if (v.is_number_integer()) {
    int64_t x = v.get<int64_t>();
    if (x < 0) return false;
    *out = uint64_t(x);
  } else {
    return false;
  }
  return *out <= uint64_t(std::numeric_limits<int64_t>::max());
}

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_mul_overflow(a, b, out) || *out > uint64_t(std::numeric_limits<int64_t>::max());
}

std::string errno_str() { return std::strerror(errno); }

}  // namespace

struct SafetensorsReader::Mapping {
  fs::path file;
  void* addr = nullptr;
  size_t size = 0;
  ~Mapping() {
    if (addr) munmap(addr, size);
  }
};

SafetensorsReader::SafetensorsReader(const fs::path& path) : path_(path) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    // Same preference as transformers: the single file first, then the sharded index.
    if (fs::exists(path / kSingleName)) {
      open_file(path / kSingleName);
    } else if (fs::exists(path / kIndexName)) {
      open_index(path / kIndexName);
    } else {
      SF_FAIL(path.string(), ": no ", kSingleName, " or ", kIndexName,
              " in this directory; point at a Hugging Face checkpoint directory");
    }
  } else if (path.filename().string().ends_with(".json")) {
    open_index(path);
  } else {
    open_file(path);
  }
}

SafetensorsReader::~SafetensorsReader() = default;

void SafetensorsReader::open_file(const fs::path& file) {
  const std::string f = file.string();
  int fd = ::open(f.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);  // a FIFO must not block
  SF_CHECK(fd >= 0, f, ": cannot open (", errno_str(), "); check the path");
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    SF_FAIL(f, ": not a regular file; point at a .safetensors file");
  }
  auto m = std::make_unique<Mapping>();
  m->file = file;
  m->size = size_t(st.st_size);
  if (m->size < 8) {
    ::close(fd);
    SF_FAIL(f, ": file is ", m->size,
            " bytes, shorter than the 8-byte header length (tensor: none "
            "readable); the file is truncated: ",
            kRedo);
  }
  m->addr = mmap(nullptr, m->size, PROT_READ, MAP_PRIVATE, fd, 0);
  ::close(fd);  // the mapping keeps the file alive
  if (m->addr == MAP_FAILED) {
    m->addr = nullptr;
    SF_FAIL(f, ": mmap failed (", errno_str(), ")");
  }
  const auto* base = static_cast<const uint8_t*>(m->addr);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | base[i];  // little-endian regardless of host
  SF_CHECK(n <= kMaxHeaderBytes, f, ": header length ", n, " bytes exceeds the ", kMaxHeaderBytes,
           "-byte limit (tensor: none readable); the file is corrupt or not safetensors: ", kRedo);
  SF_CHECK(n <= m->size - 8, f, ": header length ", n, " runs past the end of the ", m->size,
           "-byte file (tensor: none readable); the file is truncated: ", kRedo);
  const uint8_t* data = base + 8 + n;
  const uint64_t data_size = m->size - 8 - n;

  json header;
  try {
    check_json_depth(std::string_view(reinterpret_cast<const char*>(base + 8), n), f + " header");
    header = json::parse(base + 8, base + 8 + n);
  } catch (const json::exception& e) {
    SF_FAIL(f, ": header is not valid JSON (", e.what(), "; tensor: none readable): ", kRedo);
  }
  SF_CHECK(header.is_object(), f, ": header is not a JSON object (tensor: none readable): ", kRedo);

  struct Range {
    uint64_t begin, end;
    std::string name;
  };
  std::vector<Range> ranges;
  std::vector<TensorInfo> found;
  for (const auto& [name, entry] : header.items()) {
    const std::string where = str_cat(f, ": tensor '", name, "'");
    if (name == "__metadata__") {
      bool ok = entry.is_object();
      for (const auto& [k, v] : entry.items()) ok = ok && v.is_string();
      SF_CHECK(ok, f, ": tensor '__metadata__' must be an object of strings: ", kRedo);
      continue;
    }
    SF_CHECK(entry.is_object(), where, ": header entry is not an object: ", kRedo);
    SF_CHECK(entry.contains("dtype") && entry["dtype"].is_string(), where,
             ": missing or non-string 'dtype': ", kRedo);
    const std::string dt = entry["dtype"].get<std::string>();
    TensorInfo info;
    info.name = name;
    info.file = file;
    SF_CHECK(parse_dtype(dt, &info.dtype), where, ": unsupported dtype '", dt,
             "' (supported: BF16, F16, F32); convert the checkpoint to bf16 or fp32");
    SF_CHECK(entry.contains("shape") && entry["shape"].is_array(), where,
             ": missing or non-array 'shape': ", kRedo);
    uint64_t numel = 1;
    for (const auto& d : entry["shape"]) {
      uint64_t dim = 0;
      SF_CHECK(get_nonneg(d, &dim), where, ": shape ", entry["shape"].dump(),
               " has a dimension that is not a non-negative integer: ", kRedo);
      SF_CHECK(!mul_overflows(numel, dim, &numel), where, ": shape ", entry["shape"].dump(),
               " overflows the element count: ", kRedo);
      info.shape.push_back(int64_t(dim));
    }
    uint64_t bytes = 0;
    SF_CHECK(!mul_overflows(numel, dtype_size(info.dtype), &bytes), where, ": shape ",
             entry["shape"].dump(), " overflows the byte size: ", kRedo);
    const json* off = entry.contains("data_offsets") ? &entry["data_offsets"] : nullptr;
    uint64_t b = 0, e = 0;
    SF_CHECK(off && off->is_array() && off->size() == 2 && get_nonneg((*off)[0], &b) &&
                 get_nonneg((*off)[1], &e),
             where, ": 'data_offsets' must be [begin, end] of non-negative integers: ", kRedo);
    SF_CHECK(b <= e, where, ": data_offsets [", b, ", ", e, "] has begin > end: ", kRedo);
    SF_CHECK(e <= data_size, where, ": data_offsets [", b, ", ", e, "] runs past the ", data_size,
             "-byte data section; the file is truncated or corrupt: ", kRedo);
    SF_CHECK(e - b == bytes, where, ": data_offsets span ", e - b, " bytes but shape ",
             entry["shape"].dump(), " of ", dt, " needs ", bytes, ": ", kRedo);
    info.data = data + b;
    info.bytes = size_t(bytes);
    ranges.push_back({b, e, name});
    found.push_back(std::move(info));
  }
  std::sort(ranges.begin(), ranges.end(), [](const Range& x, const Range& y) {
    return x.begin != y.begin ? x.begin < y.begin : x.end < y.end;
  });
  // Sorted by begin, with all earlier ranges disjoint, the last non-empty one ends furthest.
  // Empty tensors may sit anywhere: they share no byte with anything.
  const Range* prev = nullptr;
  for (const Range& c : ranges) {
    if (c.begin == c.end) continue;
    SF_CHECK(!prev || c.begin >= prev->end, f, ": tensor '", c.name, "' data [", c.begin, ", ",
             c.end, ") overlaps tensor '", prev->name, "' [", prev->begin, ", ", prev->end,
             "): ", kRedo);
    prev = &c;
  }
  for (auto& info : found) {
    auto it = tensors_.find(info.name);
    SF_CHECK(it == tensors_.end(), f, ": tensor '", info.name, "' is also in ",
             it->second.file.string(), "; a tensor must be in exactly one shard: ", kRedo);
    tensors_.emplace(info.name, std::move(info));
  }
  maps_.push_back(std::move(m));
}

void SafetensorsReader::open_index(const fs::path& index) {
  const std::string f = index.string();
  std::string text;
  {
    std::error_code ec;
    SF_CHECK(fs::is_regular_file(index, ec), f, ": index file not found; check the path");
    FILE* fp = std::fopen(f.c_str(), "rb");
    SF_CHECK(fp, f, ": cannot open (", errno_str(), ")");
    char buf[65536];
    size_t got;
    while ((got = std::fread(buf, 1, sizeof buf, fp)) > 0) text.append(buf, got);
    std::fclose(fp);
  }
  json j;
  try {
    check_json_depth(text, f);
    j = json::parse(text);
  } catch (const json::exception& e) {
    SF_FAIL(f, ": not valid JSON (", e.what(), "): ", kRedo);
  }
  SF_CHECK(j.is_object() && j.contains("weight_map") && j["weight_map"].is_object(), f,
           ": missing the 'weight_map' object: ", kRedo);
  std::map<std::string, std::string> first_tensor_of;  // file → a tensor it should hold
  for (const auto& [name, file] : j["weight_map"].items()) {
    SF_CHECK(file.is_string(), f, ": weight_map entry for tensor '", name,
             "' is not a file name: ", kRedo);
    const std::string text = file.get<std::string>();
    // JSON may spell a NUL ("\u0000"); the system's calls would stop there and open another
    // file than the one named (fuzz_safetensors_index).
    SF_CHECK(text.find('\0') == std::string::npos, f, ": weight_map maps tensor '", name,
             "' to a file name holding a NUL byte, which names no file: ", kRedo);
    const fs::path rel = text;
    // Shards are siblings of the index; anything else could read files outside the checkpoint.
    SF_CHECK(
        !rel.empty() && rel.is_relative() && rel == rel.filename() && rel != "." && rel != "..", f,
        ": weight_map maps tensor '", name, "' to '", rel.string(),
        "', which is not a file name in the checkpoint directory: ", kRedo);
    first_tensor_of.emplace(rel.string(), name);
  }
  const fs::path dir = index.parent_path();
  for (const auto& [file, tensor] : first_tensor_of) {
    std::error_code ec;
    SF_CHECK(fs::is_regular_file(dir / file, ec), f, ": shard '", (dir / file).string(),
             "' (holding tensor '", tensor, "') does not exist: ", kRedo);
    open_file(dir / file);
  }
  for (const auto& [name, file] : j["weight_map"].items()) {
    auto it = tensors_.find(name);
    const fs::path expected = dir / file.get<std::string>();
    SF_CHECK(it != tensors_.end() && it->second.file == expected, f, ": tensor '", name,
             "' is mapped to ", expected.string(), " but that file does not hold it: ", kRedo);
  }
}

bool SafetensorsReader::contains(const std::string& name) const {
  return tensors_.count(name) != 0;
}

const TensorInfo& SafetensorsReader::get(const std::string& name) const {
  auto it = tensors_.find(name);
  SF_CHECK(it != tensors_.end(), path_.string(), ": tensor '", name,
           "' is not in the checkpoint; check that the checkpoint matches config.json");
  return it->second;
}

std::vector<std::string> SafetensorsReader::names() const {
  std::vector<std::string> out;
  out.reserve(tensors_.size());
  for (const auto& kv : tensors_) out.push_back(kv.first);
  return out;  // std::map keeps them sorted
}

void SafetensorsReader::release(const std::string& name) const {
  const TensorInfo& t = get(name);
  release(name, 0, int64_t(t.bytes / std::max<size_t>(1, dtype_size(t.dtype))));
}

void SafetensorsReader::release(const std::string& name, int64_t begin, int64_t count) const {
  const TensorInfo& t = get(name);
  const size_t elem = dtype_size(t.dtype);
  if (t.bytes == 0 || count <= 0) return;
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t data = reinterpret_cast<uintptr_t>(t.data) + uintptr_t(begin) * elem;
  const uintptr_t first = data / page * page;
  const uintptr_t end = (data + uintptr_t(count) * elem + page - 1) / page * page;
  // Advice only: a failure leaves the pages where they are, which is correct, just larger.
  madvise(reinterpret_cast<void*>(first), end - first, MADV_DONTNEED);
}

void SafetensorsReader::read_f32(const std::string& name, float* dst, size_t count) const {
  const TensorInfo& t = get(name);
  const size_t n = t.bytes / dtype_size(t.dtype);
  SF_CHECK(n == count, t.file.string(), ": tensor '", name, "' has ", n,
           " elements, the caller expected ", count);
  read_f32(name, 0, int64_t(n), dst);
}

void SafetensorsReader::read_f32(const std::string& name, int64_t begin, int64_t count,
                                 float* dst) const {
  const TensorInfo& t = get(name);
  const int64_t n = int64_t(t.bytes / dtype_size(t.dtype));
  SF_CHECK(begin >= 0 && count >= 0 && begin + count <= n, t.file.string(), ": tensor '", name,
           "' has ", n, " elements, the caller asked for [", begin, ", ", begin + count, ")");
  // memcpy per element: the mapped data carries no alignment guarantee.
  const auto* src = static_cast<const uint8_t*>(t.data) + size_t(begin) * dtype_size(t.dtype);
  switch (t.dtype) {
    case DType::kF32:
      if (count) std::memcpy(dst, src, size_t(count) * 4);
      return;
    case DType::kBF16:
    case DType::kF16:
      for (int64_t i = 0; i < count; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        dst[i] = t.dtype == DType::kBF16 ? bf16_to_f32(h) : f16_to_f32(h);
      }
      return;
    default:
      SF_FAIL(t.file.string(), ": tensor '", name, "' has dtype ", dtype_name(t.dtype),
              ", which cannot be read as float (supported: BF16, F16, F32)");
  }
}

}  // namespace sf
