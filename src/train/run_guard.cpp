#include "train/run_guard.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "io/atomic_file.h"

namespace sf {
namespace fs = std::filesystem;

namespace {

volatile std::sig_atomic_t g_signal = 0;

void on_signal(int sig) {
  if (g_signal != 0) {  // the second one: stop now
    std::signal(sig, SIG_DFL);
    std::raise(sig);
  }
  g_signal = sig;
}

bool same_dir(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  return fs::exists(a, ec) && fs::exists(b, ec) && fs::equivalent(a, b, ec);
}

// What marks a directory as holding a run (or a model) that a new run would overwrite.
std::string run_marker(const fs::path& out) {
  for (const char* f : {"training_args.yaml", "latest", "metrics.jsonl", "model.safetensors",
                        "model.safetensors.index.json"})
    if (fs::exists(out / f)) return f;
  for (const auto& e : fs::directory_iterator(out))
    if (e.path().filename().string().rfind("checkpoint-", 0) == 0)
      return e.path().filename().string();
  return "";
}

}  // namespace

void prepare_output_dir(const TrainConfig& c, bool resuming, std::ostream& log) {
  if (c.output_dir.empty()) return;
  const fs::path& out = c.output_dir;
  SF_CHECK(!same_dir(out, c.model_dir), "output_dir ", out.string(),
           " is the model directory: saving would overwrite the model being trained; give "
           "another output_dir");
  std::error_code ec;
  if (fs::exists(out, ec)) {
    SF_CHECK(fs::is_directory(out), "output_dir ", out.string(), " exists and is not a directory");
    const std::string marker = run_marker(out);
    if (!marker.empty() && !resuming) {
      SF_CHECK(c.overwrite_output_dir || c.resume_from_checkpoint != "auto", "output_dir ",
               out.string(), " holds a run (", marker, ") but no checkpoint to resume from ",
               "(no ", (out / "latest").string(),
               "): start afresh with overwrite_output_dir=true, ", "or give another output_dir");
      SF_CHECK(c.overwrite_output_dir, "output_dir ", out.string(), " already holds a run (",
               marker, "): continue it with resume_from_checkpoint=auto, start afresh with ",
               "overwrite_output_dir=true, or give another output_dir");
      for (const auto& e : fs::directory_iterator(out)) {
        const std::string n = e.path().filename().string();
        if (n.rfind("checkpoint-", 0) == 0 || n == "latest" || n == "metrics.jsonl" || n == "runs")
          fs::remove_all(e.path());
      }
      log << "overwrite_output_dir: removed the previous run's checkpoints and metrics in "
          << out.string() << "\n";
    }
    // Temporaries of a run killed while saving.
    for (const auto& e : fs::directory_iterator(out)) {
      const std::string n = e.path().filename().string();
      if (n.rfind(".checkpoint-", 0) == 0 && n.find(".tmp-") != std::string::npos)
        fs::remove_all(e.path(), ec);
    }
  } else {
    fs::create_directories(out, ec);
    SF_CHECK(!ec, "output_dir ", out.string(), " cannot be created: ", ec.message(),
             "; give a writable output_dir");
  }
  const fs::path probe = out / str_cat(".write-test-", getpid());
  try {
    write_file_atomic(probe, "ok\n");
  } catch (const Error& e) {
    SF_FAIL("output_dir ", out.string(), " is not writable (", e.what(),
            "); give a writable output_dir");
  }
  fs::remove(probe, ec);
}

void prepare_trace_file(const fs::path& trace) {
  if (trace.empty()) return;
  std::error_code ec;
  SF_CHECK(!fs::is_directory(trace, ec), "trace ", trace.string(),
           " is a directory: give a file path (e.g. ", (trace / "trace.json").string(), ")");
  const fs::path dir = trace.parent_path();
  if (!dir.empty() && !fs::exists(dir, ec)) {
    fs::create_directories(dir, ec);
    SF_CHECK(!ec, "trace ", trace.string(), ": its directory cannot be created (", ec.message(),
             "); give a writable path");
  }
  // The file the trace is written to at the end (then renamed): proven writable now, so a long run
  // does not end in an error after its last step.
  const fs::path probe = trace.string() + ".tmp";
  {
    std::ofstream f(probe);
    SF_CHECK(f, "trace ", trace.string(), ": cannot write ", probe.string(), " (",
             dir.empty() ? std::string(".") : dir.string(),
             " is not a writable directory); give a writable path");
  }
  fs::remove(probe, ec);
}

double output_bytes_needed(const TrainConfig& c, int64_t parameters, int64_t total_steps,
                           uint64_t side_bytes) {
  if (c.no_save || c.output_dir.empty()) return 0;
  const double p = double(parameters), dtype_bytes = c.save_dtype == "f32" ? 4 : 2;
  const double per_dir = double(side_bytes) + 65536;
  double need = p * dtype_bytes + per_dir;  // the final model
  if (c.save_steps > 0) {
    // Saves at every save_steps (a stop by signal saves instead of one of them) and at the end.
    double saves = double(total_steps / c.save_steps) + 1;
    if (c.save_total_limit > 0) saves = std::min(saves, double(c.save_total_limit) + 1);
    need += saves * (p * (dtype_bytes + 12) + per_dir);
  }
  return need * 1.02;
}

namespace {
std::atomic<int64_t> g_free_space_override{-1};
}  // namespace

void override_free_space_for_test(int64_t bytes) { g_free_space_override = bytes; }

void check_output_space(const fs::path& output, double bytes_needed) {
  std::error_code ec;
  fs::space_info s = fs::space(output, ec);
  if (g_free_space_override >= 0) s.available = uintmax_t(g_free_space_override.load()), ec = {};
  if (ec) return;  // unknown: the writes will say
  const double gib = double(1ull << 30);
  SF_CHECK(double(s.available) >= bytes_needed, "output_dir ", output.string(), " has ",
           double(s.available) / gib, " GiB free, but this run writes about ", bytes_needed / gib,
           " GiB (the final model, and with save_steps the checkpoints kept, each with its fp32 ",
           "optimizer state): free space, lower save_total_limit, or give another output_dir");
}

void check_nvme_space(const fs::path& nvme_dir, double bytes_needed, const fs::path& output,
                      double output_bytes) {
  std::error_code ec;
  fs::space_info s = fs::space(nvme_dir, ec);
  if (g_free_space_override >= 0) s.available = uintmax_t(g_free_space_override.load()), ec = {};
  if (ec) return;  // unknown: the scratch file's reservation will say
  struct stat a {
  }, b{};
  const bool shared = !output.empty() && stat(nvme_dir.c_str(), &a) == 0 &&
                      stat(output.c_str(), &b) == 0 && a.st_dev == b.st_dev;
  const double need = bytes_needed + (shared ? output_bytes : 0);
  const double gib = double(1ull << 30);
  SF_CHECK(double(s.available) >= need, "nvme_dir ", nvme_dir.string(), " has ",
           double(s.available) / gib, " GiB free, but the NVMe tier needs ", bytes_needed / gib,
           " GiB there (the state of the layers the plan puts on disk, the checkpoints if there, "
           "and the 1 GiB bandwidth probe)",
           shared ? str_cat(" and output_dir, on the same file system, about ", output_bytes / gib,
                            " GiB")
                  : std::string(),
           ": free space, give another nvme_dir, or raise host_memory so fewer layers go there");
}

SignalGuard::SignalGuard() {
  g_signal = 0;
  struct sigaction sa {};
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, &old_int_);
  sigaction(SIGTERM, &sa, &old_term_);
}

SignalGuard::~SignalGuard() {
  sigaction(SIGINT, &old_int_, nullptr);
  sigaction(SIGTERM, &old_term_, nullptr);
}

int SignalGuard::pending() const { return int(g_signal); }

void check_weights_usable(Engine& engine, int64_t step, float lr) {
  constexpr float kAbsurd = 1e6f;
  engine.visit_weights([&](const TensorDesc& d, int64_t begin, int64_t count, const float* w) {
    for (int64_t i = 0; i < count; ++i)
      SF_CHECK(std::isfinite(w[i]) && std::fabs(w[i]) <= kAbsurd, "after step ", step,
               " the weights are unusable: ", d.name, " element ", begin + i, " is ", w[i],
               std::isfinite(w[i]) ? " (beyond ±1e6)" : "",
               "; the run diverged, nothing was saved: lower learning_rate (it is ", lr,
               ") or check the data");
  });
}

}  // namespace sf
