// defines: helpers of the trainer and CLI tests — temporary directories, tiny random models,
// files, metrics.jsonl read back, a token dataset of uneven lengths and its samples, the
// slideformer binary run with its output, occurrences of a string.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/pipeline.h"
#include "io/safetensors.h"
#include "model/init.h"

namespace sf::testing {

namespace fs = std::filesystem;

inline fs::path fresh_dir(const std::string& name) {
  fs::path d = fs::temp_directory_path() / ("sf_trainer_" + name);
  fs::remove_all(d);
  fs::create_directories(d);
  return d;
}

inline void write_text(const fs::path& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary);
  f << s;
}

inline std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// A random model of `arch` (hidden 32, `layers` layers) with the vocabulary `vocab` (151936:
// Qwen2.5's and Qwen3's embedding rows), in `dir`.
inline fs::path tiny_arch_model(const fs::path& dir, const std::string& arch, int64_t vocab,
                                int layers = 1) {
  TinyModelOptions o;
  o.arch = arch;
  o.hidden = 32;
  o.layers = layers;
  o.heads = 2;
  o.kv_heads = 1;
  o.intermediate = 64;
  o.vocab = vocab;
  write_random_model(dir, o);
  return dir;
}

// Rewrites the model in `model_dir` (one model.safetensors, F32) with every value of tensor
// `name` set to `value` (e.g. 3.4e38: finite, loadable, overflowing the forward).
inline void set_tensor(const fs::path& model_dir, const std::string& name, float value) {
  {
    SafetensorsReader r(model_dir);
    std::vector<std::vector<float>> keep;
    std::vector<TensorToWrite> all;
    for (const auto& n : r.names()) {
      size_t count = 1;
      for (int64_t s : r.get(n).shape) count *= size_t(s);
      keep.emplace_back(count);
      r.read_f32(n, keep.back().data(), count);
      if (n == name)
        for (float& w : keep.back()) w = value;
    }
    size_t i = 0;
    for (const auto& n : r.names()) all.push_back({n, r.get(n).shape, keep[i++].data()});
    write_safetensors_file(model_dir / "model.safetensors.new", all, DType::kF32);
  }
  fs::rename(model_dir / "model.safetensors.new", model_dir / "model.safetensors");
}
// A random Llama of 2 layers, hidden 32, vocabulary `vocab`, in dir/model.
inline fs::path tiny_model(const fs::path& dir, int64_t vocab = 256) {
  return tiny_arch_model(dir / "model", "llama", vocab, 2);
}

// `n` token records of lengths 3 + (7 i mod 11), ids < 200: uneven, so the token-weighted mean
// differs from the mean of per-sample means.
inline fs::path token_dataset(const fs::path& file, int n) {
  std::ofstream f(file);
  for (int i = 0; i < n; ++i) {
    f << "{\"input_ids\": [";
    const int len = 3 + (7 * i) % 11;
    for (int k = 0; k < len; ++k) f << (k ? ", " : "") << (i * 31 + k * 17) % 200;
    f << "]}\n";
  }
  return file;
}

// The samples of a token dataset as the trainer reads them (no tokenizer, vocabulary 256).
inline std::vector<Sample> token_samples(const fs::path& file, int64_t cutoff_len) {
  DataConfig dc;
  dc.file = file;
  dc.vocab = 256;
  dc.encode.cutoff_len = cutoff_len;
  return prepare_samples(dc, nullptr, nullptr, nullptr);
}

inline size_t count_of(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = 0; (at = s.find(what, at)) != std::string::npos; at += what.size()) ++n;
  return n;
}

#ifdef SF_BINARY
// `slideformer ARGS 2>&1`: its exit code and output.
struct CommandResult {
  int code;
  std::string out;
};

inline CommandResult run_slideformer(const std::string& args) {
  const std::string cmd = std::string(SF_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  CommandResult r{-1, ""};
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}
#endif

inline std::vector<nlohmann::json> read_metrics(const fs::path& file) {
  std::vector<nlohmann::json> out;
  std::ifstream f(file);
  for (std::string line; std::getline(f, line);) out.push_back(nlohmann::json::parse(line));
  return out;
}

template <typename Fn>
std::string error_text(Fn&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace sf::testing
