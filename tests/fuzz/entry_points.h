// defines: sf::fuzz::run_* — one entry point per hostile-input surface, shared by the libFuzzer
// targets (tests/fuzz/targets/*.cc, built with -DSF_FUZZ=ON and clang) and by the replay test of
// the default suite (test_fuzz_replay.cpp), which runs every committed corpus file through them.
// Each returns normally for any input: an sf::Error is the expected way to refuse one; anything
// else escaping (std::bad_alloc, a nlohmann exception, a crash, a hang) is a finding.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace sf::fuzz {

struct Target {
  const char* name;  // also the corpus folder: tests/fuzz/corpus/<name>/
  void (*run)(const uint8_t* data, size_t size);
};

void run_jinja(const uint8_t* data, size_t size);         // template source: parse + render
void run_dataset(const uint8_t* data, size_t size);       // a JSONL / JSON dataset file
void run_tokenizer(const uint8_t* data, size_t size);     // tokenizer.json + encode/decode
void run_model_config(const uint8_t* data, size_t size);  // config.json → ModelSpec
void run_safetensors(const uint8_t* data, size_t size);   // a .safetensors file (header + data)
void run_samples_cache(const uint8_t* data, size_t size); // a tokenised cache file
void run_train_state(const uint8_t* data, size_t size);   // a checkpoint's trainer_state.json
void run_safetensors_index(const uint8_t* data, size_t size);  // model.safetensors.index.json
void run_tokenizer_config(const uint8_t* data, size_t size);   // tokenizer_config.json (+ template)

const std::vector<Target>& targets();

}  // namespace sf::fuzz
