// defines: load_run_samples — the training and evaluation samples of a run: its data files read
// with the tokenizer, chat template and loss mask of the configuration, and the seeded val_size
// split.
#pragma once

#include <filesystem>
#include <ostream>
#include <vector>

#include "data/sample.h"
#include "data/tokenizer.h"
#include "model/spec.h"
#include "train/config.h"

namespace sf {

struct RunSamples {
  std::vector<Sample> train, eval;
  std::filesystem::path tokenizer_dir;  // where the tokenizer came from (empty: none)
};

RunSamples load_run_samples(const TrainConfig& c, const ModelSpec& spec, std::ostream& log);

// A sample as text (decoded with `tok`, else its ids), the spans whose tokens carry the loss
// between « and ».
std::string render_sample(const Sample& s, const Tokenizer* tok);

// Holds out ceil(val_size × n) samples (val_size < 1) or val_size samples, chosen by a
// permutation from `seed`; both parts keep file order. At least one sample stays for training.
void split_validation(std::vector<Sample>& train, std::vector<Sample>& eval, double val_size,
                      uint64_t seed);

}  // namespace sf
