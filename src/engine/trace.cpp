#include "engine/trace.h"

#include <chrono>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"

namespace sf {

Trace::Trace(Backend& backend, std::string path) : be_(backend), path_(std::move(path)) {}

Trace::~Trace() {
  if (written_) return;
  try {
    finish();
  } catch (const std::exception& e) {
    std::cerr << "warning: the trace " << path_ << " was not written: " << e.what() << "\n";
  }
}

double Trace::now_us() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

Event* Trace::mark(Stream& s) {
  Event* e;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (free_.empty()) {
      events_.push_back(be_.create_timing_event());
      free_.push_back(events_.back().get());
    }
    e = free_.back();
    free_.pop_back();
  }
  be_.record(*e, s);
  return e;
}

void Trace::gpu_span(TraceTrack track, std::string name, Event* begin, Event* end,
                     uint64_t bytes) {
  std::lock_guard<std::mutex> lk(mu_);
  pending_.push_back(Pending{step_, track, std::move(name), begin, end, bytes});
}

void Trace::host_span(TraceTrack track, std::string name, double t0, double t1, uint64_t bytes,
                      int64_t step) {
  std::lock_guard<std::mutex> lk(mu_);
  spans_.push_back(Span{step < 0 ? step_ : step, track, std::move(name), t0, t1, bytes});
}

void Trace::begin_step(int64_t step) {
  resolve(step - 2);
  std::lock_guard<std::mutex> lk(mu_);
  step_ = step;
}

void Trace::end_step(double t0, double t1) {
  std::lock_guard<std::mutex> lk(mu_);
  walls_.push_back(StepWall{step_, t0, t1});
}

void Trace::resolve(int64_t up_to) {
  std::vector<Pending> keep;
  std::vector<Pending> todo;
  {
    std::lock_guard<std::mutex> lk(mu_);
    for (Pending& p : pending_) (p.step <= up_to ? todo : keep).push_back(std::move(p));
    pending_ = std::move(keep);
  }
  for (Pending& p : todo) {
    be_.synchronize(*p.end);  // long done: step up_to ended two steps ago
    const double t0 = be_.event_time_us(*p.begin), t1 = be_.event_time_us(*p.end);
    std::lock_guard<std::mutex> lk(mu_);
    spans_.push_back(Span{p.step, p.track, std::move(p.name), t0, t1, p.bytes});
    free_.push_back(p.begin);
    free_.push_back(p.end);
  }
}

std::vector<std::string> Trace::finish() {
  resolve(INT64_MAX);
  write();
  // Per step: sums over its spans against its host wall time.
  std::map<int64_t, std::map<TraceTrack, std::pair<double, uint64_t>>> sums;
  for (const Span& s : spans_) {
    auto& v = sums[s.step][s.track];
    v.first += (s.t1 - s.t0) * 1e-6;
    v.second += s.bytes;
  }
  std::vector<std::string> lines;
  for (const StepWall& w : walls_) {
    auto& t = sums[w.step];
    const double wall = (w.t1 - w.t0) * 1e-6;
    auto gbs = [&](uint64_t b) { return wall > 0 ? double(b) / wall * 1e-9 : 0.0; };
    std::ostringstream o;
    o << std::fixed << std::setprecision(3) << "step " << w.step << ": " << wall
      << " s, GPU busy " << std::setprecision(1)
      << (wall > 0 ? 100.0 * t[TraceTrack::kCompute].first / wall : 0.0) << " %, H2D "
      << gbs(t[TraceTrack::kH2D].second) << " GB/s, D2H "
      << gbs(t[TraceTrack::kCheckpointD2H].second + t[TraceTrack::kGradD2H].second)
      << " GB/s, CPU AdamW " << std::setprecision(3) << t[TraceTrack::kOptimizer].first
      << " s, engine waited for updates " << t[TraceTrack::kEngine].first << " s";
    lines.push_back(o.str());
  }
  return lines;
}

void Trace::write() {
  written_ = true;
  static const char* kNames[] = {"",         "compute",  "H2D (loads, restores)",
                                 "D2H checkpoints", "D2H gradients", "CPU AdamW",
                                 "engine thread"};
  double origin = walls_.empty() ? 0 : walls_.front().t0;
  for (const Span& s : spans_) origin = std::min(origin, s.t0);
  nlohmann::json events = nlohmann::json::array();
  for (int k = 1; k <= 6; ++k)
    events.push_back({{"ph", "M"}, {"name", "thread_name"}, {"pid", 1}, {"tid", k},
                      {"args", {{"name", kNames[k]}}}});
  for (const StepWall& w : walls_)
    events.push_back({{"ph", "X"}, {"name", "step " + std::to_string(w.step)}, {"pid", 1},
                      {"tid", 0}, {"ts", w.t0 - origin}, {"dur", w.t1 - w.t0}});
  for (const Span& s : spans_) {
    nlohmann::json e = {{"ph", "X"},         {"name", s.name},          {"pid", 1},
                        {"tid", int(s.track)}, {"ts", s.t0 - origin}, {"dur", s.t1 - s.t0},
                        {"args", {{"step", s.step}}}};
    if (s.bytes) e["args"]["bytes"] = s.bytes;
    events.push_back(std::move(e));
  }
  const std::string tmp = path_ + ".tmp";
  {
    std::ofstream f(tmp);
    SF_CHECK(f, "--trace: cannot write ", tmp, ": check the directory exists and is writable");
    f << nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump() << "\n";
    SF_CHECK(f.good(), "--trace: writing ", tmp, " failed (disk full?)");
  }
  SF_CHECK(std::rename(tmp.c_str(), path_.c_str()) == 0, "--trace: cannot rename ", tmp, " to ",
           path_);
}

}  // namespace sf
