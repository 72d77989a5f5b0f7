#include "train/trainer.h"

#include <chrono>
#include <fstream>
#include <iomanip>
#include <sstream>

#include "backend/cpu/cpu_backend.h"
#include "core/error.h"
#include "engine/engine.h"
#include "model/spec.h"
#include "train/checkpoint.h"
#include "train/data.h"

namespace sf {
namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  SF_CHECK(f, "cannot read ", p);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

bool is_jsonl(const std::filesystem::path& p) {
  auto ext = p.extension().string();
  return ext == ".jsonl" || ext == ".json";
}

}  // namespace

TrainSummary run_training(const TrainConfig& c, std::ostream& log) {
  SF_CHECK(c.steps >= 1, "--steps must be at least 1 (got ", c.steps, ")");
  SF_CHECK(c.save_dtype == "bf16" || c.save_dtype == "f32", "--save-dtype must be bf16 or f32, not '",
           c.save_dtype, "'");
  LrSchedule sched{parse_schedule_kind(c.schedule), c.lr, c.warmup_steps, c.steps};
  sched.validate();
  const ModelSpec spec = load_model_spec(c.model_dir);
  const std::string config_text = read_file(c.model_dir / "config.json");

  int64_t truncated = 0;
  std::vector<Sample> samples =
      is_jsonl(c.data) ? load_jsonl_samples(c.data, c.cutoff_len, spec.vocab, &truncated)
                       : load_text_samples(c.data, c.cutoff_len, spec.vocab);
  if (truncated) log << "note: " << truncated << " samples truncated to " << c.cutoff_len << " tokens\n";
  const int64_t n_samples = int64_t(samples.size());
  Batcher batcher(std::move(samples), c.batch_size, c.shuffle, c.seed);

  auto backend = make_cpu_backend();
  EngineOptions opt;
  opt.window = c.window;
  opt.max_tokens = batcher.max_tokens();
  opt.max_sequences = c.batch_size;
  opt.adamw = AdamWParams{c.lr, c.beta1, c.beta2, c.eps, c.weight_decay};
  opt.max_grad_norm = c.max_grad_norm;
  Engine engine(*backend, spec, opt);
  load_model_weights(engine, c.model_dir);
  log << "model " << spec.arch_name << ": " << spec.layers << " layers, hidden " << spec.hidden
      << ", " << parameter_count(spec) << " parameters; " << n_samples << " samples of ≤ "
      << c.cutoff_len << " tokens; backend " << backend->name() << ", window " << c.window
      << "\n";

  TrainSummary sum;
  for (int64_t s = 0; s < c.steps; ++s) {
    Batch b = batcher.next();
    const float lr = sched.lr_at(s);
    auto t0 = std::chrono::steady_clock::now();
    StepResult r = engine.step(b, lr);
    double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    log << "step " << (s + 1) << "/" << c.steps << "  loss " << std::fixed << std::setprecision(4)
        << r.loss << "  grad_norm " << r.grad_norm << std::defaultfloat << std::setprecision(3)
        << "  lr " << lr << "  tokens " << b.tokens() << "  " << std::setprecision(4)
        << double(b.tokens()) / secs << " tok/s\n";
    log.flush();
    if (s == 0) sum.first_loss = r.loss;
    sum.last_loss = r.loss;
    sum.steps = s + 1;
  }
  if (!c.output_dir.empty()) {
    save_model_checkpoint(engine, c.output_dir, config_text,
                          c.save_dtype == "f32" ? DType::kF32 : DType::kBF16);
    log << "saved " << c.output_dir.string() << "\n";
  }
  return sum;
}

}  // namespace sf
