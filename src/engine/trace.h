// defines: sf::Trace, sf::TraceTrack — the engine's own timeline (`--trace FILE.json`), in the
// Chrome/Perfetto trace format: per stream the compute of each layer, the H2D loads and
// checkpoint restores, the checkpoint offloads, the gradient D2H pieces; on the host the CPU
// AdamW of each piece and the engine thread's waits for updates. GPU spans are timed by timing
// events (Backend::create_timing_event) recorded on the streams, so tracing adds no
// synchronisation to a step: spans of step s are read back at the end of step s + 1 (when all of
// step s's work is surely done), and a summary line per step is kept for the end of the run.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.h"

namespace sf {

enum class TraceTrack : int { kCompute = 1, kH2D, kCheckpointD2H, kGradD2H, kOptimizer, kEngine };

class Trace {
 public:
  Trace(Backend& backend, std::string path);
  ~Trace();  // writes the file if finish() was not called (errors then go to stderr)
  Trace(const Trace&) = delete;
  Trace& operator=(const Trace&) = delete;

  static double now_us();  // the host's steady clock, the timeline's clock
  // A timing event recorded on s now; spans join two marks of the same step.
  Event* mark(Stream& s);
  void gpu_span(TraceTrack track, std::string name, Event* begin, Event* end, uint64_t bytes = 0);
  // Thread-safe; `step` < 0: the open step (the optimizer names the step it updates for).
  void host_span(TraceTrack track, std::string name, double t0_us, double t1_us,
                 uint64_t bytes = 0, int64_t step = -1);
  void begin_step(int64_t step);  // resolves the spans of step - 2 and older
  void end_step(double t0_us, double t1_us);  // the open step's host wall time
  // Resolves everything (the caller has synchronised the streams), writes the file and returns
  // one summary line per step: wall time, GPU busy, H2D and D2H GB/s, CPU AdamW seconds, the
  // engine thread's waits for updates.
  std::vector<std::string> finish();

 private:
  struct Pending {
    int64_t step;
    TraceTrack track;
    std::string name;
    Event *begin, *end;
    uint64_t bytes;
  };
  struct Span {
    int64_t step;
    TraceTrack track;
    std::string name;
    double t0, t1;
    uint64_t bytes;
  };
  struct StepWall {
    int64_t step;
    double t0, t1;
  };
  void resolve(int64_t up_to_step);
  void write();

  Backend& be_;
  std::string path_;
  std::mutex mu_;
  int64_t step_ = 0;
  std::vector<std::unique_ptr<Event>> events_;  // owned; recycled once resolved
  std::vector<Event*> free_;
  std::vector<Pending> pending_;
  std::vector<Span> spans_;
  std::vector<StepWall> walls_;
  bool written_ = false;
};

}  // namespace sf
