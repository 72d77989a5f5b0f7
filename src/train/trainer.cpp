#include "train/trainer.h"

#include <chrono>
#include <fstream>
#include <iomanip>
#include <optional>
#include <sstream>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "core/error.h"
#include "data/chat_template.h"
#include "data/pipeline.h"
#include "data/tokenizer.h"
#include "engine/engine.h"
#include "model/spec.h"
#include "train/checkpoint.h"
#include "train/data.h"
#include "train/run_setup.h"
#include "core/host_memory.h"

namespace sf {
namespace {

std::string read_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  SF_CHECK(f, "cannot read ", p);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

bool is_dataset(const std::filesystem::path& p) {
  auto ext = p.extension().string();
  return ext == ".jsonl" || ext == ".json";
}

// The tokenizer: --tokenizer, else the model directory's tokenizer.json, else none (byte-level
// stand-in for plain text; datasets of tokens need none).
std::optional<Tokenizer> find_tokenizer(const TrainConfig& c) {
  if (!c.tokenizer_dir.empty()) return Tokenizer::load(c.tokenizer_dir);
  if (std::filesystem::exists(c.model_dir / "tokenizer.json")) return Tokenizer::load(c.model_dir);
  return std::nullopt;
}

// The chat template, when one can be found: a missing one is an error only when a conversation
// needs it (encode_record says so).
std::optional<ChatTemplate> find_template(const TrainConfig& c, const std::filesystem::path& dir,
                                          const Tokenizer* tok) {
  if (c.chat_template.empty() && dir.empty()) return std::nullopt;
  try {
    return resolve_chat_template(c.chat_template, dir, tok);
  } catch (const Error&) {
    if (!c.chat_template.empty()) throw;  // the user's choice must load
    return std::nullopt;
  }
}

std::vector<Sample> load_training_samples(const TrainConfig& c, const ModelSpec& spec,
                                          std::ostream& log) {
  std::optional<Tokenizer> tok = find_tokenizer(c);
  if (!is_dataset(c.data)) {
    if (!tok) log << "note: no tokenizer.json: using the byte-level stand-in tokenizer\n";
    return load_text_samples(c.data, c.cutoff_len, spec.vocab, tok ? &*tok : nullptr);
  }
  const std::filesystem::path tok_dir =
      !c.tokenizer_dir.empty() ? c.tokenizer_dir : (tok ? c.model_dir : std::filesystem::path());
  std::optional<ChatTemplate> chat = find_template(c, tok_dir, tok ? &*tok : nullptr);
  DataConfig d;
  d.file = c.data;
  d.tokenizer_dir = tok_dir;
  d.vocab = spec.vocab;
  d.read.format = parse_dataset_format(c.dataset_format);
  for (const std::string& col : c.columns) d.read.columns.set(col);
  d.read.skip_malformed = c.skip_malformed;
  d.encode.mask = parse_loss_mask(c.loss_mask);
  d.encode.cutoff_len = c.cutoff_len;
  if (c.cache && !c.output_dir.empty()) d.cache_dir = c.output_dir / "tokenized-cache";
  DataStats st;
  std::vector<Sample> s = prepare_samples(d, tok ? &*tok : nullptr, chat ? &*chat : nullptr, &st);
  log << "data " << c.data.string() << ": " << s.size() << " samples, " << st.tokens
      << " tokens" << (st.from_cache ? " (from the tokenised cache " + st.cache_file.string() + ")"
                                     : "");
  if (st.truncated) log << ", " << st.truncated << " truncated to " << c.cutoff_len;
  if (st.skipped_malformed) log << ", " << st.skipped_malformed << " malformed skipped";
  if (st.no_loss) log << ", " << st.no_loss << " without labels dropped";
  log << "\n";
  return s;
}

}  // namespace

std::unique_ptr<Backend> make_backend(const std::string& name, const ModelSpec& spec,
                                      int64_t max_tokens) {
  SF_CHECK(name == "auto" || name == "cpu" || name == "cuda", "--backend must be auto, cpu or ",
           "cuda, not '", name, "'");
  const bool cuda = name == "cuda" || (name == "auto" && cuda_device_count() > 0);
  if (!cuda) return make_cpu_backend();
  SF_CHECK(cuda_device_count() > 0, "--backend cuda: no CUDA device is visible (",
           "check nvidia-smi), or use --backend cpu");
  CudaBackendOptions o;
  o.max_tokens = max_tokens;
  o.hidden = spec.hidden;
  o.vocab = spec.vocab;
  o.max_heads = spec.heads;
  return make_cuda_backend(o);
}

TrainSummary run_training(const TrainConfig& c, std::ostream& log) {
  SF_CHECK(c.steps >= 1, "--steps must be at least 1 (got ", c.steps, ")");
  SF_CHECK(c.save_dtype == "bf16" || c.save_dtype == "f32", "--save-dtype must be bf16 or f32, not '",
           c.save_dtype, "'");
  LrSchedule sched{parse_schedule_kind(c.schedule), c.lr, c.warmup_steps, c.steps};
  sched.validate();
  const ModelSpec spec = load_model_spec(c.model_dir);
  const std::string config_text = read_file(c.model_dir / "config.json");

  std::vector<Sample> samples = load_training_samples(c, spec, log);
  const int64_t n_samples = int64_t(samples.size());
  Batcher batcher(std::move(samples), c.batch_size, c.shuffle, c.seed,
                  c.packing ? c.batch_size * c.cutoff_len : 0);

  PlanRequest req;
  req.spec = spec;
  req.window = c.window;
  req.max_tokens = batcher.max_tokens();
  req.max_sequences = batcher.max_sequences();
  req.max_sample_tokens = batcher.max_sample_tokens();
  req.micro_tokens = c.micro_batch_tokens;
  req.gpu_budget = c.gpu_memory;
  req.clipping = c.max_grad_norm > 0;
  RunSetup setup = make_run_setup(c.backend, req);
  Backend* backend = setup.backend.get();
  EngineOptions opt;
  opt.window = c.window;
  opt.max_tokens = req.max_tokens;
  opt.max_sequences = req.max_sequences;
  opt.max_sample_tokens = req.max_sample_tokens;
  opt.micro_tokens = setup.plan.micro_tokens;
  opt.gpu_budget = setup.plan.gpu_budget;
  opt.adamw = AdamWParams{c.lr, c.beta1, c.beta2, c.eps, c.weight_decay};
  opt.max_grad_norm = c.max_grad_norm;
  opt.trace_path = c.trace.string();
  const auto t_start = std::chrono::steady_clock::now();
  auto since = [](std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  Engine engine(*backend, spec, opt);
  log << "plan: " << engine.plan().describe() << "\n";
  const double t_alloc = since(t_start);
  load_model_weights(engine, c.model_dir);
  log << "start-up: " << std::setprecision(3) << since(t_start) << " s (allocation " << t_alloc
      << " s, weights " << since(t_start) - t_alloc << " s)\n";
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
    sum.peak_device_used = std::max(sum.peak_device_used, backend->device_memory().used);
  }
  if (!c.trace.empty()) {
    for (const std::string& line : engine.finish_trace()) log << "trace " << line << "\n";
    log << "trace written to " << c.trace.string() << " (chrome://tracing or ui.perfetto.dev)\n";
  }
  const ProcessMemory pm = process_memory();
  sum.peak_host_rss = pm.peak_rss;
  log << "memory: engine device buffer " << gib(engine.plan().device.engine());
  if (sum.peak_device_used) log << ", device in use (whole device) " << gib(sum.peak_device_used);
  log << "; host peak RSS " << gib(pm.peak_rss) << " (planned " << gib(engine.plan().host.total())
      << ")\n";
  if (!c.output_dir.empty()) {
    save_model_checkpoint(engine, c.output_dir, config_text,
                          c.save_dtype == "f32" ? DType::kF32 : DType::kBF16);
    log << "saved " << c.output_dir.string() << "\n";
  }
  return sum;
}

}  // namespace sf
