// defines: the engine tests' shared pieces (sf::test_engine): tiny random models, the test
// batches, the options every training run uses and a CPU training run.
#pragma once

#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "backend/cpu/cpu_backend.h"
#include "engine/engine.h"
#include "model/init.h"
#include "model/spec.h"
#include "train/checkpoint.h"
#include "train/data.h"

namespace sf::test_engine {

namespace fs = std::filesystem;

inline fs::path tiny_model(const std::string& name, const std::string& arch, bool tied,
                           int64_t vocab = 97) {
  fs::path dir = fs::temp_directory_path() / ("sf_engine_" + name);
  fs::remove_all(dir);
  TinyModelOptions o;
  o.arch = arch;
  o.hidden = 32;
  o.layers = 5;
  o.heads = 4;
  o.kv_heads = 2;
  o.intermediate = 48;
  o.vocab = vocab;
  o.init_std = 0.1;
  o.tie_word_embeddings = tied;
  write_random_model(dir, o);
  return dir;
}

inline Batch random_batch(uint64_t seed, int64_t vocab, std::vector<int> lengths) {
  std::mt19937 rng{uint32_t(seed)};
  std::vector<Sample> samples;
  for (int len : lengths) {
    Sample s;
    for (int i = 0; i < len; ++i) s.ids.push_back(int32_t(rng() % uint32_t(vocab)));
    s.labels = s.ids;
    s.labels[size_t(len / 2)] = -100;
    samples.push_back(s);
  }
  std::vector<const Sample*> p;
  for (auto& s : samples) p.push_back(&s);
  return pack_samples(p);
}

struct TrainRun {
  std::vector<double> losses;
  std::vector<std::vector<float>> weights;
};

// The options every training run of these tests uses: steps of {13, 21, 7} tokens.
inline EngineOptions run_options(int window, float max_grad_norm) {
  EngineOptions opt;
  opt.window = window;
  opt.max_tokens = 64;
  opt.max_sequences = 4;
  opt.adamw = AdamWParams{1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f};
  opt.max_grad_norm = max_grad_norm;
  return opt;
}

// Every tensor's master weights (the first `prefix` values of each where prefix > 0).
inline std::vector<std::vector<float>> all_weights(Engine& e, int64_t prefix = 0) {
  std::vector<std::vector<float>> out;
  e.visit_weights([&](const TensorDesc& d, int64_t begin, int64_t count, const float* p) {
    int64_t n = 1;
    for (int64_t x : d.shape) n *= x;
    if (begin == 0) out.emplace_back();
    const int64_t keep = std::min(begin + count, prefix > 0 ? prefix : n) - begin;
    if (keep > 0) out.back().insert(out.back().end(), p, p + keep);
  });
  return out;
}

// `steps` steps of the alternating test batches; the losses and the first 8 values of every
// tensor after them (all of them with `whole`).
// `at_construction`: the weights given to the constructor (EngineOptions::initial_weights, as
// `train` does) instead of to init_weights after it.
inline TrainRun train(const fs::path& dir, const EngineOptions& opt, int steps, bool whole = false,
                      bool at_construction = false) {
  auto be = make_cpu_backend();
  ModelSpec spec = load_model_spec(dir);
  EngineOptions o = opt;
  const SafetensorsReader reader(dir);
  if (at_construction) o.initial_weights = model_weights_fill(reader, spec);
  Engine e(*be, spec, o);
  if (!at_construction) load_model_weights(e, dir);
  TrainRun r;
  for (int s = 0; s < steps; ++s)
    r.losses.push_back(e.step(random_batch(uint64_t(s % 2), spec.vocab, {13, 21, 7}), 1e-2f).loss);
  r.weights = all_weights(e, whole ? 0 : 8);
  return r;
}

// Every tensor's master, m and v, in visit order (what a resumable checkpoint holds).
inline std::vector<std::vector<float>> copy_state(Engine& e) {
  std::vector<std::vector<float>> saved;
  e.visit_state([&](const TensorState& t) {
    for (const float* a : {t.master, t.m, t.v}) saved.emplace_back(a, a + t.numel);
  });
  return saved;
}

// Writes copy_state's values back (a resume of a run that did `steps` optimizer steps).
inline void load_state(Engine& e, const std::vector<std::vector<float>>& saved, int64_t steps) {
  size_t k = 0;
  e.visit_state([&](const TensorState& t) {
    for (float* a : {t.master, t.m, t.v}) std::copy(saved[k].begin(), saved[k].end(), a), ++k;
  });
  e.set_steps_done(steps);
}

inline TrainRun train(const fs::path& dir, int window, float max_grad_norm, int steps,
                      int64_t micro_tokens = 0, int64_t grad_piece = 0) {
  EngineOptions opt = run_options(window, max_grad_norm);
  opt.micro_tokens = micro_tokens;
  opt.grad_piece = grad_piece;
  return train(dir, opt, steps);
}

}  // namespace sf::test_engine
