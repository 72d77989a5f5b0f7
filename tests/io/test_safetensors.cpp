// Tests: safetensors round trips (F32, BF16, single, sharded), the byte format, hostile headers
// and the writer's no-partial-files guarantee.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/host_memory.h"
#include "io/safetensors.h"

namespace sf {
namespace {
namespace fs = std::filesystem;

class SafetensorsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/sf_st_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A file made of an 8-byte little-endian header length, the header text and raw data.
  fs::path write_raw(const std::string& name, const std::string& header, const std::string& data,
                     int64_t claimed_len = -1) {
    const uint64_t n = claimed_len < 0 ? header.size() : uint64_t(claimed_len);
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i) bytes[i] = char(n >> (8 * i));
    bytes += header + data;
    std::ofstream(dir_ / name, std::ios::binary) << bytes;
    return dir_ / name;
  }
  static std::string slurp(const fs::path& p) {
    std::ifstream in(p, std::ios::binary);
    std::ostringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // Opening `path` must throw an sf::Error naming every one of `parts`.
  static void expect_error(const fs::path& path, const std::vector<std::string>& parts) {
    try {
      SafetensorsReader r(path);
      FAIL() << "no error for " << path;
    } catch (const Error& e) {
      for (const auto& p : parts)
        EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
            << "message lacks '" << p << "': " << e.what();
    }
  }
  size_t file_count() const {
    return size_t(std::distance(fs::directory_iterator(dir_), fs::directory_iterator()));
  }
  fs::path dir_;
};

std::vector<float> ramp(size_t n, float scale) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.37f * float(i) + 0.1f);
  return v;
}

TEST_F(SafetensorsTest, RoundTripF32SingleFile) {
  auto a = ramp(12, 3.0f), b = ramp(5, 1e-3f);
  std::vector<TensorToWrite> ts = {
      {"z.weight", {3, 4}, a.data()}, {"a.bias", {5}, b.data()}, {"empty", {0, 7}, nullptr}};
  write_safetensors(dir_, ts, {.dtype = DType::kF32});
  ASSERT_TRUE(fs::exists(dir_ / "model.safetensors"));
  EXPECT_FALSE(fs::exists(dir_ / "model.safetensors.index.json"));
  for (const fs::path& p : {dir_, dir_ / "model.safetensors"}) {
    SafetensorsReader r(p);
    EXPECT_EQ(r.names(), (std::vector<std::string>{"a.bias", "empty", "z.weight"}));
    EXPECT_EQ(r.get("z.weight").shape, (std::vector<int64_t>{3, 4}));
    EXPECT_EQ(r.get("z.weight").dtype, DType::kF32);
    std::vector<float> got(12);
    r.read_f32("z.weight", got.data(), got.size());
    EXPECT_EQ(got, a);
    got.resize(5);
    r.read_f32("a.bias", got.data(), got.size());
    EXPECT_EQ(got, b);
    EXPECT_EQ(r.get("empty").bytes, 0u);
  }
}

TEST_F(SafetensorsTest, RoundTripBf16ShardedThroughIndexAndDirectory) {
  std::vector<std::vector<float>> data;
  std::vector<TensorToWrite> ts;
  for (int i = 0; i < 7; ++i) data.push_back(ramp(100 + 10 * i, float(i + 1)));
  data.push_back(ramp(1000, 5.0f));  // bigger than a shard: gets one of its own
  for (size_t i = 0; i < data.size(); ++i)
    ts.push_back({"t" + std::to_string(i), {int64_t(data[i].size())}, data[i].data()});
  write_safetensors(dir_, ts, {.dtype = DType::kBF16, .max_shard_bytes = 600});
  EXPECT_FALSE(fs::exists(dir_ / "model.safetensors"));
  const fs::path index = dir_ / "model.safetensors.index.json";
  ASSERT_TRUE(fs::exists(index));
  auto j = nlohmann::json::parse(slurp(index));
  size_t total = 0;
  for (auto& d : data) total += 2 * d.size();
  EXPECT_EQ(j["metadata"]["total_size"].get<size_t>(), total);
  const std::string last = j["weight_map"]["t7"].get<std::string>();
  EXPECT_TRUE(last.starts_with("model-0000") && last.ends_with("-of-00005.safetensors")) << last;
  EXPECT_TRUE(fs::exists(dir_ / "model-00001-of-00005.safetensors"));
  for (auto& [name, file] : j["weight_map"].items())  // the oversized tensor is alone
    EXPECT_TRUE(name == "t7" || file != last) << name;
  EXPECT_EQ(file_count(), 6u);  // five shards and the index, no temporaries
  for (const fs::path& p : {index, dir_}) {
    SafetensorsReader r(p);
    ASSERT_EQ(r.names().size(), data.size());
    for (size_t i = 0; i < data.size(); ++i) {
      std::vector<float> got(data[i].size());
      r.read_f32("t" + std::to_string(i), got.data(), got.size());
      for (size_t k = 0; k < got.size(); ++k)
        ASSERT_EQ(got[k], bf16_to_f32(f32_to_bf16(data[i][k]))) << i << "," << k;
    }
  }
  // Writing one shard over a sharded checkpoint must drop the stale index.
  write_safetensors(dir_, {ts[0]}, {.dtype = DType::kF32});
  EXPECT_FALSE(fs::exists(index));
  EXPECT_EQ(SafetensorsReader(dir_).names(), std::vector<std::string>{"t0"});
}

TEST_F(SafetensorsTest, WrittenBytesFollowTheFormat) {
  auto a = ramp(3, 1.0f);
  write_safetensors(dir_, {{"b", {3}, a.data()}, {"a", {1, 3}, a.data()}});
  const std::string bytes = slurp(dir_ / "model.safetensors");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | uint8_t(bytes[i]);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + 12);
  const std::string header = bytes.substr(8, n);
  EXPECT_EQ(header, R"({"__metadata__":{"format":"pt"},"a":{"data_offsets":[0,6],"dtype":"BF16",)"
                    R"("shape":[1,3]},"b":{"data_offsets":[6,12],"dtype":"BF16","shape":[3]}})" +
                        std::string(n - header.find_last_of('}') - 1, ' '));
}

TEST_F(SafetensorsTest, ReadsAFileWrittenByHandPerTheSpec) {
  // As Python's safetensors writes it: F16 and BF16 and F32 in one file, metadata, no padding.
  std::string data;
  for (uint16_t h : {uint16_t(0x3c00), uint16_t(0xc000)}) data += std::string((char*)&h, 2);
  for (uint16_t h : {uint16_t(0x3f80), uint16_t(0x4049)}) data += std::string((char*)&h, 2);
  float f = -0.25f;
  data += std::string((char*)&f, 4);
  const fs::path p = write_raw(
      "x.safetensors",
      R"({"h":{"dtype":"F16","shape":[2],"data_offsets":[0,4]},)"
      R"("b":{"dtype":"BF16","shape":[2,1],"data_offsets":[4,8]},)"
      R"("s":{"dtype":"F32","shape":[],"data_offsets":[8,12]},"__metadata__":{"format":"pt"}})",
      data);
  SafetensorsReader r(p);
  float got[2];
  r.read_f32("h", got, 2);
  EXPECT_EQ(got[0], 1.0f);
  EXPECT_EQ(got[1], -2.0f);
  r.read_f32("b", got, 2);
  EXPECT_EQ(got[0], 1.0f);
  EXPECT_EQ(got[1], bf16_to_f32(0x4049));
  r.read_f32("s", got, 1);
  EXPECT_EQ(got[0], -0.25f);
  EXPECT_EQ(r.get("b").file, p);
  EXPECT_THROW(r.read_f32("b", got, 1), Error);  // element count checked
  EXPECT_THROW(r.get("nope"), Error);
}

TEST_F(SafetensorsTest, HostileHeadersNameFileAndTensor) {
  const std::string d16(16, '\0');
  auto entry = [](const std::string& name, const std::string& dtype, const std::string& shape,
                  const std::string& offs) {
    return "\"" + name + "\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape +
           ",\"data_offsets\":" + offs + "}";
  };
  {
    std::ofstream(dir_ / "tiny.safetensors") << "abc";
    expect_error(dir_ / "tiny.safetensors", {"tiny.safetensors", "re-download"});
  }
  expect_error(write_raw("eof.safetensors", "{}", "", 1000), {"eof.safetensors", "past the end"});
  expect_error(write_raw("big.safetensors", "{}", "", int64_t(1) << 40), {"big.safetensors"});
  expect_error(write_raw("json.safetensors", "{\"w\": [", d16), {"json.safetensors", "JSON"});
  expect_error(write_raw("arr.safetensors", "[1,2]", d16), {"arr.safetensors", "object"});
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"cut", entry("cut.w", "F32", "[4]", "[0,16]")},        // data section truncated
      {"beyond", entry("beyond.w", "F32", "[8]", "[0,32]")},  // offsets beyond data
      {"order", entry("order.w", "F32", "[0]", "[8,4]")},     // begin > end
      {"size", entry("size.w", "F32", "[3]", "[0,16]")},      // shape/size mismatch
      {"neg", entry("neg.w", "F32", "[-1,4]", "[0,16]")},     // negative dim
      {"huge", entry("huge.w", "BF16", "[4294967296,4294967296]", "[0,16]")},  // overflow
      {"huge2", entry("huge2.w", "F32", "[9223372036854775807,2]", "[0,16]")},
      {"dims", entry("dims.w", "F32", "[2.5]", "[0,16]")},
      {"dtype", entry("dtype.w", "F8_E4M3", "[16]", "[0,16]")},  // unsupported dtype
      {"offs", entry("offs.w", "F32", "[4]", "[0]")},
      {"overlap", entry("overlap.a", "F32", "[2]", "[0,8]") + "," +
                      entry("overlap.w", "F32", "[2]", "[4,12]")},
      {"hidden", entry("hidden.a", "F32", "[4]", "[0,16]") + "," +  // an empty tensor between
                     entry("hidden.e", "F32", "[0]", "[4,4]") + "," +
                     entry("hidden.w", "F32", "[1]", "[8,12]")},
      {"nodtype", "\"nodtype.w\":{\"shape\":[1],\"data_offsets\":[0,4]}"},
      {"meta", "\"__metadata__\":{\"format\":3}"},
  };
  for (const auto& [name, body] : cases) {
    const std::string data = name == "cut" ? d16.substr(0, 10) : d16;
    const std::string tensor = name == "meta" ? "__metadata__" : name + ".w";
    SCOPED_TRACE(name);
    expect_error(write_raw(name + ".safetensors", "{" + body + "}", data),
                 {name + ".safetensors", tensor});
  }
}

TEST_F(SafetensorsTest, HostileIndexes) {
  auto a = ramp(64, 1.0f);
  std::vector<TensorToWrite> ts = {{"x", {64}, a.data()}, {"y", {64}, a.data()}};
  write_safetensors(dir_, ts, {.dtype = DType::kF32, .max_shard_bytes = 256});
  const fs::path index = dir_ / "model.safetensors.index.json";
  const std::string good = slurp(index);
  auto with_map = [&](const std::string& map) {
    std::ofstream(index) << R"({"metadata":{},"weight_map":)" + map + "}";
  };
  with_map(R"({"x":"model-00001-of-00002.safetensors","z":"gone.safetensors"})");
  expect_error(index, {"gone.safetensors", "'z'", "does not exist"});
  with_map(R"({"x":"model-00001-of-00002.safetensors","w":"model-00001-of-00002.safetensors"})");
  expect_error(index, {"model-00001-of-00002.safetensors", "'w'"});
  with_map(R"({"x":"../etc/passwd"})");
  expect_error(index, {"index.json", "'x'"});
  with_map(R"({"x":7})");
  expect_error(index, {"index.json", "'x'"});
  std::ofstream(index) << "{]";
  expect_error(index, {"index.json", "JSON"});
  // The same tensor in two shards.
  fs::copy_file(dir_ / "model-00001-of-00002.safetensors", dir_ / "dup.safetensors");
  with_map(R"({"x":"model-00001-of-00002.safetensors","y":"dup.safetensors"})");
  expect_error(index, {"dup.safetensors", "'x'", "exactly one shard"});
  std::ofstream(index) << good;
  EXPECT_EQ(SafetensorsReader(dir_).names(), (std::vector<std::string>{"x", "y"}));
  expect_error(dir_ / "missing-dir", {"missing-dir"});
}

// fuzz_safetensors_index: a shard name with a NUL byte ("\u0000" in the JSON) passed every
// name check and opened the file named by its part before the NUL — a tensor read from another
// file than the index named. Refused, naming the tensor.
TEST_F(SafetensorsTest, IndexShardNameWithNulIsRefused) {
  auto a = ramp(64, 1.0f);
  std::vector<TensorToWrite> ts = {{"x", {64}, a.data()}, {"y", {64}, a.data()}};
  write_safetensors(dir_, ts, {.dtype = DType::kF32, .max_shard_bytes = 256});
  const fs::path index = dir_ / "model.safetensors.index.json";
  std::ofstream(index) << R"({"weight_map":{"x":"model-00001-of-00002.safetensors\u0000junk",)"
                       << R"("y":"model-00002-of-00002.safetensors"}})";
  expect_error(index, {"index.json", "'x'", "NUL"});
  expect_error(dir_, {"index.json", "'x'", "NUL"});
}

TEST_F(SafetensorsTest, FailedWriteLeavesNoFiles) {
  auto a = ramp(64, 1.0f);
  std::vector<TensorToWrite> ts = {
      {"x", {64}, a.data()}, {"y", {64}, a.data()}, {"z", {64}, a.data()}};
  int shards = 0;
  SafetensorsWriteOptions opt{.dtype = DType::kF32, .max_shard_bytes = 256};
  opt.on_shard_written = [&](const fs::path& p) {
    EXPECT_TRUE(fs::exists(p));
    EXPECT_NE(p.filename().string().find(".tmp-"), std::string::npos);
    if (++shards == 2) throw std::runtime_error("disk full (simulated)");
  };
  EXPECT_THROW(write_safetensors(dir_ / "out", ts, opt), std::runtime_error);
  EXPECT_EQ(shards, 2);
  EXPECT_TRUE(fs::is_empty(dir_ / "out"));

  std::vector<TensorToWrite> bad = {{"x", {64}, a.data()}, {"y", {64}, nullptr}};
  EXPECT_THROW(write_safetensors(dir_ / "out2", bad), Error);
  EXPECT_FALSE(fs::exists(dir_ / "out2"));
  EXPECT_THROW(write_safetensors(dir_ / "out3", {ts[0], ts[0]}), Error);  // duplicate name
  EXPECT_THROW(write_safetensors(dir_ / "out4", ts, {.dtype = DType::kF16}), Error);
  // A path below a regular file cannot be created.
  std::ofstream(dir_ / "file") << "x";
  EXPECT_THROW(write_safetensors(dir_ / "file" / "sub", ts), Error);
}

}  // namespace
}  // namespace sf

namespace sf {
namespace {

// Reading a tensor faults its mapped pages into the process (they count in RSS); release() drops
// them, and the data reads back the same afterwards (from the page cache or the file).
TEST(SafetensorsRelease, DropsTheTensorsPagesFromTheProcess) {
  const fs::path dir = fs::temp_directory_path() / ("sf_st_release_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const int64_t n = int64_t(32) << 20;  // 128 MiB of F32
  std::vector<float> data(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) data[size_t(i)] = float(i % 1000) * 0.5f;
  write_safetensors_file(dir / "model.safetensors", {{"w", {n}, data.data()}}, DType::kF32);
  data.assign(data.size(), 0.0f);
  SafetensorsReader r(dir / "model.safetensors");
  const TensorInfo& t = r.get("w");
  double sum = 0;
  for (size_t i = 0; i < t.bytes; i += 4096) sum += static_cast<const uint8_t*>(t.data)[i];
  const uint64_t touched = process_memory().rss;
  r.release("w");
  const uint64_t released = process_memory().rss;
  EXPECT_GT(touched, released + (uint64_t(100) << 20)) << "sum " << sum;  // ≥ 100 of 128 MiB
  r.read_f32("w", data.data(), size_t(n));
  for (int64_t i = 0; i < n; i += 4099) ASSERT_EQ(data[size_t(i)], float(i % 1000) * 0.5f);
  fs::remove_all(dir);
}

}  // namespace
}  // namespace sf
