// slideformer subcommands: argument parsing only; the work is in train/ and below.
#include <unistd.h>

#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_backend.h"
#include "cli/args.h"
#include "cli/commands.h"
#include "cli/train_args.h"
#include "core/error.h"
#include "data/tokenizer.h"
#include "engine/engine.h"
#include "io/safetensors.h"
#include "model/init.h"
#include "model/spec.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "train/train_state.h"
#include "train/trainer.h"

namespace sf {

int cmd_train(const std::vector<std::string>& argv) {
  TrainArgs a = parse_train_args(argv, std::cout);
  if (a.exit_now) return 0;
  const TrainSummary sum = run_training(a.config, std::cout, isatty(STDOUT_FILENO) != 0);
  return sum.signal ? 128 + sum.signal : 0;
}

int cmd_init_model(const std::vector<std::string>& argv) {
  Args a(argv,
         {"out", "arch", "hidden", "layers", "heads", "kv-heads", "head-dim", "intermediate",
          "vocab", "seed", "tokenizer"},
         {"tie-embeddings"}, "init-model");
  TinyModelOptions o;
  o.arch = a.str("arch", o.arch);
  o.hidden = a.integer("hidden", o.hidden);
  o.layers = a.integer("layers", o.layers);
  o.heads = a.integer("heads", o.heads);
  o.kv_heads = a.integer("kv-heads", o.kv_heads);
  o.head_dim = a.integer("head-dim", o.head_dim);
  o.intermediate = a.integer("intermediate", o.intermediate);
  o.vocab = a.integer("vocab", o.vocab);
  o.seed = uint64_t(a.integer("seed", int64_t(o.seed)));
  o.tie_word_embeddings = a.flag("tie-embeddings");
  const std::filesystem::path out = a.required("out");
  if (!a.has("tokenizer")) {
    write_random_model(out, o);
    std::cout << "wrote " << out.string() << "\n";
    return 0;
  }
  // A model for a real tokenizer: its vocabulary (padded to a multiple of 64, as the published
  // models do, unless --vocab says otherwise), its BOS/EOS ids, and its files beside the weights.
  const std::filesystem::path tok_dir = a.str("tokenizer", "");
  const Tokenizer tok = Tokenizer::load(tok_dir);
  const int64_t need = tok.vocab_size();
  o.vocab = a.has("vocab") ? o.vocab : (need + 63) / 64 * 64;
  SF_CHECK(o.vocab >= need, "init-model: --vocab ", o.vocab, " is smaller than the ", need,
           " ids of the tokenizer in ", tok_dir.string());
  if (tok.bos_id() >= 0) o.bos_id = tok.bos_id();
  if (tok.eos_id() >= 0) o.eos_id = tok.eos_id();
  write_random_model(out, o);
  copy_tokenizer_files(tok_dir, out);
  std::cout << "wrote " << out.string() << " (vocabulary " << o.vocab << " for the " << need
            << " ids of the tokenizer in " << tok_dir.string() << ")\n";
  return 0;
}

}  // namespace sf
