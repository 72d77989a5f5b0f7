#include "train/progress.h"

#include <unistd.h>

#include <cmath>
#include <fstream>
#include <iomanip>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"

namespace sf {
namespace {

// Resident memory of this process (host), from /proc/self/statm; 0 where it cannot be read.
double host_resident_gib() {
  std::ifstream f("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  if (!(f >> size >> resident)) return 0;
  return double(resident) * double(sysconf(_SC_PAGESIZE)) / double(1ull << 30);
}

}  // namespace

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
  const double host_gib = host_resident_gib();
  j["host_memory_gib"] = host_gib;
  write_metrics(j.dump());
  if (tb_) {
    tb_->scalar("train/loss", r.step, r.loss);
    tb_->scalar("train/grad_norm", r.step, r.grad_norm);
    tb_->scalar("train/learning_rate", r.step, r.learning_rate);
    tb_->scalar("train/epoch", r.step, r.epoch);
    tb_->scalar("train/tokens_per_second", r.step, tok_s);
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
     << tok_s << " tok/s  host " << std::setprecision(2) << host_gib << " GiB  elapsed "
     << format_duration(elapsed) << "  eta " << format_duration(eta);
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
