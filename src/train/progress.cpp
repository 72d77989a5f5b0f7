#include "train/progress.h"

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/host_memory.h"

namespace sf {
namespace {

double to_gib(uint64_t bytes) { return double(bytes) / double(uint64_t(1) << 30); }

// NVIDIA's datasheet figures: dense (no 2:4 sparsity) bf16 tensor-core throughput with fp32
// accumulation, TFLOPS. Matched as substrings of the device name, the longest first ("GH200"
// before "H200", "L40S" before "L40" and "L4"). GeForce cards accumulate in fp32 at half their
// fp16-accumulate rate: the figures here are the fp32-accumulate ones, which training uses.
struct KnownGpu {
  const char* name;
  double tflops;
};
constexpr KnownGpu kKnownGpus[] = {
    {"GB200", 2500},         {"B200", 2250},       {"B100", 1750},      {"GH200", 989.4},
    {"H200 NVL", 835.5},     {"H200", 989.4},      {"H100 NVL", 835.5}, {"H100 PCIe", 756.5},
    {"H100", 989.4},         {"H800 PCIe", 756.5}, {"H800", 989.4},     {"A100", 312},
    {"A800", 312},           {"L40S", 362.05},     {"L40", 181.05},     {"L4", 121},
    {"RTX 6000 Ada", 364.2}, {"RTX A6000", 154.8}, {"RTX 5090", 209.5}, {"RTX 4090", 165.2},
    {"RTX 3090", 71},
};

// Dense bf16 FLOPs per SM per cycle by compute capability (tensor cores, fp32 accumulation), for
// GPUs not in the table: 8.0 A100 (108 SMs × 1.41 GHz × 2048 = 312 T), 8.6/8.9 professional
// cards (A6000: 84 × 1.80 GHz × 1024 = 155 T), 9.0 Hopper (132 × 1.83 GHz × 4096 = 989 T),
// 10.0 Blackwell (8192). 0: unknown.
int flops_per_sm_cycle(int major, int minor) {
  if (major == 8) return minor == 0 ? 2048 : (minor == 6 || minor == 9) ? 1024 : 0;
  if (major == 9 && minor == 0) return 4096;
  if (major == 10 && minor == 0) return 8192;
  return 0;
}

}  // namespace

double model_flops(const ModelSpec& spec, const Batch& batch) {
  const double matmul_params =
      double(parameter_count(spec)) -
      (spec.tie_word_embeddings ? 0.0 : double(spec.vocab) * double(spec.hidden));
  double squares = 0;
  for (size_t i = 1; i < batch.cu_seqlens.size(); ++i) {
    const double len = double(batch.cu_seqlens[i] - batch.cu_seqlens[i - 1]);
    squares += len * len;
  }
  return 6.0 * matmul_params * double(batch.tokens()) +
         6.0 * double(spec.layers) * double(spec.heads * spec.head_dim) * squares;
}

PeakFlops bf16_peak(const CudaDeviceProperties& d) {
  const KnownGpu* best = nullptr;
  for (const KnownGpu& g : kKnownGpus)
    if (d.name.find(g.name) != std::string::npos &&
        (!best || std::strlen(g.name) > std::strlen(best->name)))
      best = &g;
  if (best)
    return {best->tflops * 1e12,
            str_cat(d.name, ": ", best->tflops, " TFLOPS bf16 dense (datasheet)")};
  const int per = flops_per_sm_cycle(d.major, d.minor);
  if (per == 0 || d.sm_count <= 0 || d.clock_khz <= 0)
    return {0, str_cat(d.name, " (sm_", d.major, d.minor, "): bf16 peak unknown, no MFU; ",
                       "set peak_tflops to show one")};
  const double flops = double(d.sm_count) * double(d.clock_khz) * 1e3 * per;
  std::ostringstream os;
  os << d.name << ": " << std::fixed << std::setprecision(0) << flops / 1e12
     << " TFLOPS bf16 dense, estimated as " << d.sm_count << " SMs × " << std::setprecision(2)
     << d.clock_khz / 1e6 << " GHz × " << per << " FLOP/cycle (sm_" << d.major << d.minor
     << "); set peak_tflops for the datasheet figure";
  return {flops, os.str()};
}

PeakFlops bf16_peak(Backend& backend, double tflops_override) {
  if (tflops_override > 0)
    return {tflops_override * 1e12, str_cat(tflops_override, " TFLOPS (peak_tflops)")};
  const std::string name = backend.name();
  if (name.rfind("cuda:", 0) == 0)
    return bf16_peak(cuda_device_properties(std::atoi(name.c_str() + 5)));
  return {0, str_cat("no bf16 peak for the ", name, " backend, no MFU (set peak_tflops for one)")};
}

std::string format_duration(double seconds) {
  const int64_t s = int64_t(std::llround(std::max(0.0, seconds)));
  std::ostringstream os;
  if (s >= 3600)
    os << s / 3600 << ":" << std::setw(2) << std::setfill('0') << (s / 60) % 60;
  else
    os << s / 60;
  os << ":" << std::setw(2) << std::setfill('0') << s % 60;
  return os.str();
}

Progress::Progress(std::ostream& log, bool terminal, int64_t logging_steps, int64_t total_steps,
                   double total_epochs, const std::filesystem::path& metrics, int64_t first_step,
                   TensorBoardWriter* tensorboard)
    : log_(log),
      terminal_(terminal),
      logging_steps_(std::max<int64_t>(1, logging_steps)),
      total_(total_steps),
      first_step_(first_step),
      total_epochs_(total_epochs),
      tb_(tensorboard),
      metrics_path_(metrics),
      start_(std::chrono::steady_clock::now()) {
  if (!metrics.empty()) {
    metrics_.open(metrics, std::ios::app);
    SF_CHECK(metrics_, metrics.string(), ": cannot open for writing; check output_dir");
  }
}

void Progress::write_metrics(const std::string& json_line) {
  if (!metrics_.is_open()) return;
  metrics_ << json_line << "\n";
  metrics_.flush();
  SF_CHECK(metrics_, metrics_path_.string(), ": write failed; check free space");
}

void Progress::set_device(double peak_flops, std::function<DeviceMemoryInfo()> device_memory) {
  peak_flops_ = peak_flops;
  device_memory_ = std::move(device_memory);
}

void Progress::step(const StepReport& r) {
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  const double tok_s = r.seconds > 0 ? double(r.tokens) / r.seconds : 0;
  nlohmann::ordered_json j;
  j["step"] = r.step;
  j["epoch"] = r.epoch;
  j["loss"] = r.loss;
  j["grad_norm"] = r.grad_norm;
  j["learning_rate"] = double(r.learning_rate);
  j["num_tokens"] = r.tokens;
  j["num_loss_tokens"] = r.valid_targets;
  j["tokens_per_second"] = tok_s;
  j["elapsed_seconds"] = elapsed;
  const double mfu = peak_flops_ > 0 && r.seconds > 0 && r.model_flops > 0
                         ? r.model_flops / r.seconds / peak_flops_
                         : -1;
  if (mfu >= 0) j["mfu"] = mfu;
  const DeviceMemoryInfo dev = device_memory_ ? device_memory_() : DeviceMemoryInfo{};
  const double device_gib = to_gib(dev.used);
  if (dev.total > 0) j["device_memory_gib"] = device_gib;
  const double host_gib = to_gib(process_memory().rss);
  j["host_memory_gib"] = host_gib;
  write_metrics(j.dump());
  if (tb_) {
    tb_->scalar("train/loss", r.step, r.loss);
    tb_->scalar("train/grad_norm", r.step, r.grad_norm);
    tb_->scalar("train/learning_rate", r.step, r.learning_rate);
    tb_->scalar("train/epoch", r.step, r.epoch);
    tb_->scalar("train/tokens_per_second", r.step, tok_s);
    if (mfu >= 0) tb_->scalar("train/mfu", r.step, mfu);
  }

  const bool show =
      terminal_ || r.step == first_step_ + 1 || r.step == total_ || r.step % logging_steps_ == 0;
  if (!show) return;
  const int64_t done = r.step - first_step_;
  const double eta = done > 0 ? elapsed / double(done) * double(total_ - r.step) : 0;
  std::ostringstream os;
  os << "step " << r.step << "/" << total_ << "  loss " << std::fixed << std::setprecision(4)
     << r.loss << "  grad_norm " << r.grad_norm << "  epoch " << std::setprecision(2) << r.epoch
     << "/" << total_epochs_ << "  lr " << std::defaultfloat << std::setprecision(3)
     << r.learning_rate << "  tokens " << r.tokens << "  " << std::fixed << std::setprecision(0)
     << tok_s << " tok/s";
  if (mfu >= 0) os << "  MFU " << std::setprecision(1) << 100 * mfu << "%";
  os << std::setprecision(2);
  if (dev.total > 0) os << "  device " << device_gib << " GiB";
  os << "  host " << host_gib << " GiB  elapsed " << format_duration(elapsed) << "  eta "
     << format_duration(eta);
  if (terminal_) {
    log_ << "\r\033[K" << os.str();
    line_open_ = true;
  } else {
    log_ << os.str() << "\n";
  }
  log_.flush();
}

void Progress::eval(int64_t step, double epoch, double loss, int64_t valid_targets) {
  const double ppl = std::exp(loss);
  nlohmann::ordered_json j;
  j["step"] = step;
  j["epoch"] = epoch;
  j["eval_loss"] = loss;
  j["eval_perplexity"] = ppl;
  j["eval_num_loss_tokens"] = valid_targets;
  write_metrics(j.dump());
  if (tb_) {
    tb_->scalar("eval/loss", step, loss);
    tb_->scalar("eval/perplexity", step, ppl);
  }
  std::ostringstream os;
  os << "eval at step " << step << ": eval_loss " << std::fixed << std::setprecision(4) << loss
     << "  perplexity " << std::defaultfloat << std::setprecision(6) << ppl << "  ("
     << valid_targets << " tokens)";
  note(os.str());
}

void Progress::note(const std::string& line) {
  if (line_open_) log_ << "\n";
  line_open_ = false;
  log_ << line << "\n";
  log_.flush();
}

void Progress::finish() {
  if (line_open_) log_ << "\n";
  line_open_ = false;
  log_.flush();
}

}  // namespace sf
