#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <optional>
#include <sstream>

#include "backend/cpu/cpu_backend.h"
#include "backend/cuda/cuda_backend.h"
#include "core/error.h"
#include "core/host_memory.h"
#include "engine/engine.h"
#include "engine/machine.h"
#include "engine/predict.h"
#include "io/atomic_file.h"
#include "io/nvme_probe.h"
#include "io/scratch_file.h"
#include "model/spec.h"
#include "train/checkpoint.h"
#include "train/config_file.h"
#include "train/data.h"
#include "train/options.h"
#include "train/progress.h"
#include "train/report.h"
#include "train/run_guard.h"
#include "train/run_setup.h"
#include "train/samples.h"
#include "train/tensorboard.h"
#include "train/train_state.h"

namespace sf {
namespace fs = std::filesystem;

namespace {

// The process's start (static initialisation runs before main): start-up is measured from here.
const std::chrono::steady_clock::time_point kLaunch = std::chrono::steady_clock::now();

// Start-up's phases, each from the end of the one before: "data 1.2 s, backend 3.4 s, …".
class PhaseClock {
 public:
  void mark(const char* phase) {
    const auto now = std::chrono::steady_clock::now();
    text_ += str_cat(text_.empty() ? "" : ", ", phase, " ", fixed(now - last_), " s");
    last_ = now;
  }
  double total() const { return seconds(std::chrono::steady_clock::now() - kLaunch); }
  const std::string& text() const { return text_; }

 private:
  static double seconds(std::chrono::steady_clock::duration d) {
    return std::chrono::duration<double>(d).count();
  }
  static std::string fixed(std::chrono::steady_clock::duration d) {
    char b[32];
    std::snprintf(b, sizeof b, "%.1f", seconds(d));
    return b;
  }
  std::chrono::steady_clock::time_point last_ = kLaunch;
  std::string text_;
};

const char* signal_name(int sig) {
  return sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "a signal";
}

// The token-weighted loss of the whole eval set: Σ loss_sum / Σ valid targets.
EvalResult evaluate_all(Engine& engine, const std::vector<Batch>& batches) {
  EvalResult total;
  for (const Batch& b : batches) {
    const EvalResult r = engine.evaluate(b);
    total.loss_sum += r.loss_sum;
    total.valid_targets += r.valid_targets;
  }
  return total;
}

struct Plan {
  int64_t steps_per_epoch = 0, total_steps = 0, warmup = 0;
  double epochs = 0;
};

Plan plan_schedule(const TrainConfig& c, const Batcher& batcher) {
  Plan p;
  p.steps_per_epoch = batcher.steps_per_epoch();
  if (c.steps > 0) {
    p.total_steps = c.steps;
  } else {
    const double t = std::ceil(c.num_train_epochs * double(p.steps_per_epoch));
    SF_CHECK(t <= 1e15, "num_train_epochs ", c.num_train_epochs, " × ", p.steps_per_epoch,
             " steps per epoch is too many steps");
    p.total_steps = std::max<int64_t>(1, int64_t(t));
  }
  p.epochs = batcher.epochs_after(p.total_steps);
  p.warmup = c.warmup_steps > 0 ? c.warmup_steps
                                : int64_t(std::ceil(c.warmup_ratio * double(p.total_steps)));
  return p;
}

}  // namespace

TrainSummary run_training(const TrainConfig& c, std::ostream& log, bool terminal) {
  // ---- every check that needs no data and no memory ----
  validate_config(c);
  const LrSchedule::Kind kind = parse_schedule_kind(c.schedule);
  const std::optional<fs::path> resume = find_resume_checkpoint(c);
  std::optional<TrainerState> resumed;
  if (resume) {
    resumed = read_trainer_state(*resume);
    const std::string diff = resume_config_difference(resumed->config_yaml, c);
    SF_CHECK(diff.empty(), "cannot resume from ", resume->string(), ": the configuration differs (",
             diff, "); resume with the same options, or start a ",
             "new run with another output_dir");
  }
  // An --nvme-dir that cannot hold the tier (missing, not a directory, not writable, no O_DIRECT)
  // is refused first, before the data is read or memory taken.
  if (!c.nvme_dir.empty()) ScratchFile probe(c.nvme_dir);
  check_readable_file(c.model_dir / "config.json", "the model's config.json");
  const ModelSpec spec = load_model_spec(c.model_dir);
  const std::string config_text = read_text_file(c.model_dir / "config.json", "the model's config");
  check_readable_file(c.data, "train_data");
  if (!c.eval_data.empty()) check_readable_file(c.eval_data, "eval_data");
  prepare_output_dir(c, resume.has_value(), log);
  prepare_trace_file(c.trace);
  const std::string config_yaml = config_to_yaml(c);
  if (!c.output_dir.empty()) {
    // The final model at least (the checkpoints are counted once the schedule is known, below).
    check_output_space(c.output_dir, output_bytes_needed(c, parameter_count(spec), 0, 0));
    write_file_atomic(c.output_dir / "training_args.yaml", config_yaml);
  }

  // ---- data ----
  PhaseClock startup;
  startup.mark("checks");
  RunSamples data = load_run_samples(c, spec, log);
  const int64_t n_train = int64_t(data.train.size());
  // A step holds every GPU's samples (gpus × batch_size); the engine gives each its share.
  Batcher batcher(std::move(data.train), c.batch_size * c.gpus, c.shuffle, c.seed,
                  c.packing ? c.batch_size * c.gpus * c.cutoff_len : 0, c.grad_accum);
  const Plan plan = plan_schedule(c, batcher);
  LrSchedule sched{kind, c.lr, plan.warmup, plan.total_steps, c.min_lr_ratio};
  sched.validate();
  const double output_bytes =
      c.output_dir.empty() ? 0
                           : output_bytes_needed(c, parameter_count(spec), plan.total_steps,
                                                 side_files_bytes(c.model_dir, data.tokenizer_dir));
  if (!c.output_dir.empty())  // before the engine is built and the first step runs
    check_output_space(c.output_dir, output_bytes);
  const std::vector<Batch> eval_batches = make_eval_batches(
      data.eval, (c.eval_batch_size > 0 ? c.eval_batch_size : c.batch_size) * c.gpus);

  // ---- engine ----
  const PlanRequest req = train_plan_request(c, spec, batcher, eval_batches);
  startup.mark("data");
  RunSetup setup = make_run_setup(c.backend, req);  // the plan first: M sizes the CUDA scratch
  startup.mark("backend");
  if (setup.plan.nvme_disk > 0)  // the disk's room before the host state is pinned
    check_nvme_space(c.nvme_dir, double(setup.plan.nvme_disk + kNvmeProbeBytes), c.output_dir,
                     output_bytes);
  std::unique_ptr<Backend>& backend = setup.backend;
  const fs::path machine_file = c.machine_file.empty() ? default_machine_file() : c.machine_file;
  // The NVMe tier's disk, measured in its directory: the predictions' disk rates (the weighing
  // below predicts too) and the floor the step is reported against.
  std::optional<NvmeBandwidth> disk;
  if (setup.plan.nvme_disk > 0) {
    disk = measure_nvme(c.nvme_dir, kNvmeProbeBytes, kNvmeProbeDepth);
    startup.mark("disk probe");
  }
  // This machine's constants at this M, where `plan` cached them (one GPU's: a data-parallel
  // step's prediction is planned): the plan's own held share, a smaller M with more of the model
  // on the device and later-written m and v only where they predict a gain (weigh_plan), and the
  // step time predicted below. The engine keeps the weighed plan's M.
  std::optional<MachineConstants> mc;
  if (c.gpus == 1)
    mc = cached_machine_constants(*backend, spec, setup.plan.micro_tokens, req.max_sample_tokens,
                                  machine_file);
  if (mc) {
    if (disk) *mc = mc->with_disk(*disk);
    for (const std::string& note : weigh_plan(setup, *mc, backend->device_memory().planned()))
      log << note << "\n";
  }
  EngineOptions opt = engine_options(c, setup);
  // nvme_gds auto: the faster path for these checkpoints, measured
  if (const std::string path = choose_checkpoint_path(opt, c, setup, spec); !path.empty())
    log << path << "\n";
  opt.trace_path = c.trace.string();
  if (!setup.devices_line.empty()) log << "data parallel: " << setup.devices_line << "\n";
  // A fresh run's weights are read and converted by the threads that pin the host memory, as
  // each unit's buffer is taken (EngineOptions::initial_weights); a resumed run's come after.
  if (!resume) opt.initial_weights = model_weights_fill_on_first_use(c.model_dir, spec);
  Engine engine(*backend, spec, opt);
  startup.mark(resume ? "allocation" : "allocation with the weights");
  log << "plan: " << engine.plan().describe() << "\n";
  if (!engine.cpu_placement().empty()) log << "  " << engine.cpu_placement() << "\n";
  if (disk) {
    const double floor = disk->seconds(engine.plan().nvme_read_bytes, engine.plan().nvme_write_bytes);
    log << "NVMe disk: " << describe(*disk, c.nvme_dir) << "; the disk floor of a step is " << floor
        << " s (" << engine.plan().nvme_read_bytes * 1e-9 << " GB read + "
        << engine.plan().nvme_write_bytes * 1e-9 << " GB written)\n";
  }
  std::optional<StepPrediction> predicted;
  if (mc) {
    predicted = predict_step(engine.plan(), spec, *mc, req.max_tokens, c.max_grad_norm > 0);
    log << predicted->describe(req.max_tokens) << " (" << describe(*mc) << ")\n";
  }
  startup.mark("prediction");
  int64_t start_step = 0;
  if (resume) {
    const TrainerState& st = *resumed;
    SF_CHECK(st.total_steps == plan.total_steps, "cannot resume from ", resume->string(),
             ": its schedule has ", st.total_steps, " steps, this run ", plan.total_steps);
    try {
      batcher.restore_state(st.batcher);
    } catch (const Error& e) {
      SF_FAIL("cannot resume from ", resume->string(), ": ", e.what());
    }
    load_training_tensors(engine, *resume, st.global_step);
    start_step = st.global_step;
    log << "resumed from " << resume->string() << " at step " << start_step << "\n";
    startup.mark("weights");
  } else if (c.resume_from_checkpoint == "auto") {
    log << "resume_from_checkpoint auto: no checkpoint in " << c.output_dir.string()
        << ", starting from the model\n";
  }
  const std::string plan_line =
      str_cat("model ", spec.arch_name, ": ", spec.layers, " layers, hidden ", spec.hidden, ", ",
              parameter_count(spec), " parameters; ", n_train, " samples of ≤ ", c.cutoff_len,
              " tokens; ", plan.steps_per_epoch, " steps per epoch (", c.batch_size, " × ",
              c.grad_accum, " accumulated), ", plan.total_steps, " steps (", plan.epochs,
              " epochs); backend ", backend->name(), ", window ", c.window);
  log << plan_line << "\n";

  const CheckpointSources src{c.model_dir, data.tokenizer_dir, config_text,
                              c.save_dtype == "f32" ? DType::kF32 : DType::kBF16};
  std::optional<TensorBoardWriter> tensorboard;
  if (c.report_to == "tensorboard") {
    tensorboard.emplace(c.logging_dir.empty() ? c.output_dir / "runs" : c.logging_dir);
    log << "TensorBoard: " << tensorboard->file().string() << "\n";
  }
  Progress progress(log, terminal, c.logging_steps, plan.total_steps, plan.epochs,
                    c.output_dir.empty() ? fs::path() : c.output_dir / "metrics.jsonl", start_step,
                    tensorboard ? &*tensorboard : nullptr);
  const PeakFlops peak = bf16_peak(*backend, c.peak_tflops);
  log << "MFU against " << peak.source << "\n";
  progress.set_device(peak.flops, [&backend] { return backend->device_memory(); });
  TrainSummary sum;
  sum.total_steps = plan.total_steps;
  sum.steps_per_epoch = plan.steps_per_epoch;
  sum.steps = start_step;
  auto save = [&](int64_t step) {
    check_weights_usable(engine, step, c.lr);
    TrainerState st{step, plan.total_steps, batcher.epoch_progress(), batcher.save_state(),
                    config_yaml};
    sum.last_checkpoint = save_training_checkpoint(engine, c.output_dir, src, st);
    prune_checkpoints(c.output_dir, c.save_total_limit, sum.last_checkpoint);
  };
  auto report = [&](const std::string& end) {
    if (c.output_dir.empty()) return;
    std::vector<std::string> lines = {plan_line, end};
    if (!sum.losses.empty()) lines.push_back(str_cat("last loss ", sum.last_loss));
    if (sum.eval_loss >= 0)
      lines.push_back(str_cat("eval_loss ", sum.eval_loss, ", perplexity ", std::exp(sum.eval_loss),
                              " over ", sum.eval_tokens, " tokens"));
    write_report(c.output_dir, config_yaml,
                 (setup.devices_line.empty() ? "" : "data parallel: " + setup.devices_line + "\n") +
                     engine.plan().describe(),
                 lines);
  };
  auto run_eval = [&](int64_t step) {
    const EvalResult r = evaluate_all(engine, eval_batches);
    SF_CHECK(r.valid_targets > 0, "the evaluation data has no token with a loss");
    sum.eval_loss = r.loss_sum / double(r.valid_targets);
    sum.eval_tokens = r.valid_targets;
    progress.eval(step, batcher.epoch_progress(), sum.eval_loss, r.valid_targets);
  };

  // ---- steps ----
  SignalGuard signals;
  double timed_secs = 0;  // the steps after this call's first, whose time the prediction is for
  int64_t timed_steps = 0, timed_tokens = 0;
  std::optional<NvmeStore::Stats> nvme_at_timing;  // the tier's I/O when the timed steps began
  startup.mark("other");
  log << "start-up: " << startup.total() << " s from launch to the first step (" << startup.text()
      << ")\n";
  // The host peak of the start-up (state allocated, weights read) apart from the steps'.
  const uint64_t startup_peak_rss = process_memory().peak_rss;
  const bool steps_peak_apart = reset_peak_rss();
  for (int64_t s = start_step; s < plan.total_steps; ++s) {
    Batch b = batcher.next();
    const float lr = sched.lr_at(s);
    const auto t0 = std::chrono::steady_clock::now();
    const StepResult r = engine.step(b, lr);
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    progress.step(StepReport{s + 1, batcher.epoch_progress(), r.loss, r.grad_norm, lr, b.tokens(),
                             r.valid_targets, secs, model_flops(spec, b)});
    if (!sum.losses.empty()) {
      timed_secs += secs;
      ++timed_steps;
      timed_tokens += b.tokens();
    } else {
      nvme_at_timing = engine.nvme_stats();
    }
    if (sum.losses.empty()) sum.first_loss = r.loss;
    sum.losses.push_back(r.loss);
    sum.last_loss = r.loss;
    sum.steps = s + 1;
    const bool last = s + 1 == plan.total_steps;
    if (int sig = signals.pending(); sig && !last) {
      sum.signal = sig;
      if (c.no_save) {
        progress.note(str_cat("stopped by ", signal_name(sig), " after step ", s + 1,
                              ": nothing saved (no_save)"));
      } else {
        save(s + 1);
        progress.note(str_cat("stopped by ", signal_name(sig), " after step ", s + 1,
                              ": checkpoint saved to ", sum.last_checkpoint.string(),
                              "; continue with resume_from_checkpoint=auto"));
      }
      report(str_cat("stopped by ", signal_name(sig), " after step ", s + 1, " of ",
                     plan.total_steps));
      return sum;
    }
    if (!eval_batches.empty() && c.eval_steps > 0 && (s + 1) % c.eval_steps == 0 && !last)
      run_eval(s + 1);
    if (!c.no_save && c.save_steps > 0 && (s + 1) % c.save_steps == 0 && !last) {
      save(s + 1);
      progress.note("saved " + sum.last_checkpoint.string());
    }
  }
  progress.finish();
  if (!c.trace.empty()) {
    for (const std::string& line : engine.finish_trace()) log << "trace " << line << "\n";
    log << "trace written to " << c.trace.string() << " (chrome://tracing or ui.perfetto.dev)\n";
  }
  {
    const ProcessMemory pm = process_memory();
    log << "memory: engine device buffer " << gib(engine.plan().device.engine());
    if (const uint64_t used = backend->device_memory().used)  // against the plan's device figure
      log << ", device in use (whole device) " << gib(used) << " (planned "
          << gib(engine.plan().device_total()) << ")";
    log << "; host peak RSS " << gib(std::max(pm.peak_rss, startup_peak_rss));
    if (steps_peak_apart)
      log << " (start-up " << gib(startup_peak_rss) << ", steps " << gib(pm.peak_rss) << ")";
    log << " (planned " << gib(engine.plan().host.total()) << ")\n";
  }
  if (timed_steps > 0) {
    const double mean = timed_secs / double(timed_steps);
    log << "timing: " << mean << " s a step on average over " << timed_steps
        << " steps after the first (" << double(timed_tokens) / timed_secs << " tok/s)";
    if (predicted)
      log << "; predicted " << predicted->step_s << " s for steps of " << req.max_tokens
          << " tokens (measured / predicted " << mean / predicted->step_s << ")";
    log << "\n";
    if (nvme_at_timing) {  // what the disk did in those steps, against the rates measured at start
      const NvmeStore::Stats now = *engine.nvme_stats();
      const double rd = double(now.bytes_read - nvme_at_timing->bytes_read);
      const double wr = double(now.bytes_written - nvme_at_timing->bytes_written);
      log << "NVMe I/O in those steps: " << rd * 1e-9 / double(timed_steps) << " GB read + "
          << wr * 1e-9 / double(timed_steps) << " GB written a step, "
          << (rd + wr) * 1e-9 / timed_secs << " GB/s together (" << now.max_in_flight
          << " requests in flight at most)";
      if (disk)
        log << "; at the rates measured at start they take "
            << disk->seconds(rd, wr) / double(timed_steps)
            << " s a step";
      log << "\n";
    }
  }

  // ---- the end: check, evaluate, save ----
  check_weights_usable(engine, sum.steps, c.lr);
  if (!eval_batches.empty()) {
    run_eval(sum.steps);
    log << "eval_loss " << sum.eval_loss << "  eval_perplexity " << std::exp(sum.eval_loss)
        << " over " << sum.eval_tokens << " tokens\n";
  }
  if (!c.no_save) {
    if (c.save_steps > 0) save(sum.steps);  // the last checkpoint resumes nothing but keeps state
    save_model_checkpoint(engine, c.output_dir, config_text, src.dtype);
    copy_model_side_files(c.model_dir, data.tokenizer_dir, c.output_dir);
    log << "saved " << c.output_dir.string() << "\n";
  }
  report(str_cat("finished: ", sum.steps, " steps"));
  if (!c.output_dir.empty()) log << "report " << (c.output_dir / "report.html").string() << "\n";
  return sum;
}

}  // namespace sf
