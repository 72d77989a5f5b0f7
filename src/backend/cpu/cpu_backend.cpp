#include "backend/cpu/cpu_backend.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "backend/cpu/ops.h"
#include "core/error.h"

namespace sf {
namespace {

// The first failure of any queued op; later ops are skipped and every synchronize rethrows it,
// so an error inside a stream surfaces on the host instead of hanging or being lost.
struct FailureState {
  std::mutex mu;
  std::exception_ptr first;
  std::atomic<bool> failed{false};

  void set(std::exception_ptr e) {
    std::lock_guard<std::mutex> lk(mu);
    if (!first) first = e;
    failed = true;
  }
  void rethrow() {
    if (!failed) return;
    std::lock_guard<std::mutex> lk(mu);
    std::rethrow_exception(first);
  }
};

class CpuStream final : public Stream {
 public:
  CpuStream(const char* name, FailureState* failure) : name_(name), failure_(failure) {
    thread_ = std::thread([this] { loop(); });
  }
  ~CpuStream() override {
    {
      std::lock_guard<std::mutex> lk(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
  // `always` tasks (event signals, barriers) run even after a failure, so waiters never hang.
  void enqueue(std::function<void()> fn, bool always = false) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      queue_.push_back({std::move(fn), always});
    }
    cv_.notify_all();
  }

 private:
  struct Task {
    std::function<void()> fn;
    bool always;
  };
  void loop() {
    for (;;) {
      Task task;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      if (failure_->failed && !task.always) continue;
      try {
        task.fn();
      } catch (...) {
        failure_->set(std::current_exception());
      }
    }
  }

  std::string name_;
  FailureState* failure_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Task> queue_;
  bool stop_ = false;
  std::thread thread_;
};

// Recorded/completed counters, like a CUDA event: a wait captures the latest record.
class CpuEvent final : public Event {
 public:
  int64_t next_record() {
    std::lock_guard<std::mutex> lk(mu_);
    return ++recorded_;
  }
  int64_t last_record() {
    std::lock_guard<std::mutex> lk(mu_);
    return recorded_;
  }
  // Notifies under the lock: a waiter may own the event (synchronize(Stream)'s is on its stack)
  // and destroy it as soon as it sees the count; notifying after the unlock could then touch a
  // destroyed condition variable (seen as a hang in CI).
  void complete(int64_t target) {
    std::lock_guard<std::mutex> lk(mu_);
    if (target > completed_) completed_ = target;
    done_at_ = std::chrono::steady_clock::now();
    cv_.notify_all();
  }
  double done_us() {
    std::lock_guard<std::mutex> lk(mu_);
    return std::chrono::duration<double, std::micro>(done_at_.time_since_epoch()).count();
  }
  void wait_for(int64_t target) {
    std::unique_lock<std::mutex> lk(mu_);
    cv_.wait(lk, [&] { return completed_ >= target; });
  }

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  int64_t recorded_ = 0, completed_ = 0;
  std::chrono::steady_clock::time_point done_at_;
};

CpuStream& cs(Stream& s) { return static_cast<CpuStream&>(s); }
CpuEvent& ce(Event& e) { return static_cast<CpuEvent&>(e); }

class CpuBackend final : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  DType compute_dtype() const override { return DType::kF32; }

  Buffer alloc(MemoryKind kind, size_t bytes, const char* what) override {
    size_t rounded = (bytes + 63) / 64 * 64;
    if (rounded) count_backend_allocation();
    void* p = rounded ? std::aligned_alloc(64, rounded) : nullptr;
    SF_CHECK(p || rounded == 0, "out of host memory allocating ", bytes, " bytes for ", what);
    if (p) std::memset(p, 0, rounded);
    return Buffer(p, bytes, [](void* q) { std::free(q); });
  }
  std::unique_ptr<Stream> create_stream(const char* name) override {
    return std::make_unique<CpuStream>(name, &failure_);
  }
  std::unique_ptr<Event> create_event() override { return std::make_unique<CpuEvent>(); }
  double event_time_us(Event& e) override { return ce(e).done_us(); }
  void record(Event& e, Stream& s) override {
    CpuEvent* ev = &ce(e);
    int64_t target = ev->next_record();
    cs(s).enqueue([ev, target] { ev->complete(target); }, /*always=*/true);
  }
  void wait(Stream& s, Event& e) override {
    CpuEvent* ev = &ce(e);
    int64_t target = ev->last_record();
    cs(s).enqueue([ev, target] { ev->wait_for(target); }, /*always=*/true);
  }
  void synchronize(Event& e) override {
    ce(e).wait_for(ce(e).last_record());
    failure_.rethrow();
  }
  void synchronize(Stream& s) override {
    CpuEvent done;
    record(done, s);
    synchronize(done);
  }
  void copy(void* dst, const void* src, size_t bytes, Stream& s) override {
    enqueue(s, [=] { std::memcpy(dst, src, bytes); });
  }
  void host_callback(Stream& s, std::function<void()> fn) override { enqueue(s, std::move(fn)); }

  void fill_zero(Tensor x, Stream& s) override { enqueue(s, [=] { cpu::fill_zero(x); }); }
  void convert(Tensor d, Tensor src, Stream& s) override {
    enqueue(s, [=] { cpu::convert(d, src); });
  }
  void add(Tensor o, Tensor a, Tensor b, Stream& s) override {
    enqueue(s, [=] { cpu::add(o, a, b); });
  }
  void adamw(Tensor p, Tensor m, Tensor v, Tensor g, Tensor w, const AdamWParams& hp, int64_t step,
             float grad_scale, int64_t* nonfinite, Stream& s) override {
    const int64_t n = p.numel();
    for (auto [name, t] : {std::pair{"m", &m}, {"v", &v}})
      SF_CHECK(t->dtype == DType::kF32 && t->numel() == n, "adamw: ", name, " ", t->shape_str(),
               " must be F32 with the ", n, " elements of p");
    SF_CHECK((g.dtype == DType::kF32 || g.dtype == DType::kBF16) && g.numel() == n, "adamw: g ",
             g.shape_str(), " must be F32 or BF16 with the ", n, " elements of p");
    SF_CHECK(p.dtype == DType::kF32 && (w.empty() || w.numel() == n),
             "adamw: p must be F32 and weights empty or of its size");
    adamw_consts(step, hp, grad_scale);  // validates now: errors name the caller's values
    enqueue(s, [=] {
      const int64_t bad =
          adamw_step(p.f32(), m.f32(), v.f32(), g.data, g.dtype, n, step, hp, grad_scale);
      if (nonfinite) *nonfinite = bad;
      if (!w.empty()) cpu::convert(w, p);
    });
  }
  void sum_squares(double* out, double* partials, Tensor x, Stream& s) override {
    SF_CHECK(x.dtype == DType::kF32 || x.dtype == DType::kBF16,
             "sum_squares: x must be F32 or BF16, not ", dtype_name(x.dtype));
    enqueue(s, [=] { *out = sf::sum_squares(x.data, x.dtype, x.numel()); });
  }
  void linear_forward(Tensor y, Tensor x, Tensor w, Tensor b, Stream& s) override {
    enqueue(s, [=] { cpu::linear_forward(y, x, w, b); });
  }
  void linear_backward_input(Tensor dx, Tensor dy, Tensor w, bool acc, Stream& s) override {
    enqueue(s, [=] { cpu::linear_backward_input(dx, dy, w, acc); });
  }
  void linear_backward_weight(Tensor dw, Tensor db, Tensor dy, Tensor x, Stream& s) override {
    enqueue(s, [=] { cpu::linear_backward_weight(dw, db, dy, x); });
  }
  void embedding_forward(Tensor o, Tensor ids, Tensor t, Stream& s) override {
    enqueue(s, [=] { cpu::embedding_forward(o, ids, t); });
  }
  void embedding_backward(Tensor dt, Tensor ids, Tensor d, Stream& s) override {
    enqueue(s, [=] { cpu::embedding_backward(dt, ids, d); });
  }
  void rmsnorm_forward(Tensor o, Tensor r, Tensor x, Tensor w, float eps, Stream& s) override {
    enqueue(s, [=] { cpu::rmsnorm_forward(o, r, x, w, eps); });
  }
  void add_rmsnorm_forward(Tensor sum, Tensor o, Tensor r, Tensor a, Tensor b, Tensor w,
                           float eps, Stream& s) override {
    enqueue(s, [=] { cpu::add_rmsnorm_forward(sum, o, r, a, b, w, eps); });
  }
  void rmsnorm_backward(Tensor dx, Tensor dw, Tensor d, Tensor x, Tensor w, Tensor r, bool acc,
                        Stream& s) override {
    enqueue(s, [=] { cpu::rmsnorm_backward(dx, dw, d, x, w, r, acc); });
  }
  void rope_forward(Tensor x, Tensor pos, Tensor f, Stream& s) override {
    enqueue(s, [=] { cpu::rope_forward(x, pos, f); });
  }
  void rope_backward(Tensor dx, Tensor pos, Tensor f, Stream& s) override {
    enqueue(s, [=] { cpu::rope_backward(dx, pos, f); });
  }
  void attention_forward(Tensor o, Tensor lse, Tensor q, Tensor k, Tensor v, Tensor cu,
                         float scale, Stream& s) override {
    enqueue(s, [=] { cpu::attention_forward(o, lse, q, k, v, cu, scale); });
  }
  void attention_backward(Tensor dq, Tensor dk, Tensor dv, Tensor d, Tensor q, Tensor k, Tensor v,
                          Tensor o, Tensor lse, Tensor cu, float scale, Stream& s) override {
    enqueue(s, [=] { cpu::attention_backward(dq, dk, dv, d, q, k, v, o, lse, cu, scale); });
  }
  void attention_decode(Tensor o, Tensor q, Tensor k, Tensor v, float scale, Stream& s) override {
    enqueue(s, [=] { cpu::attention_decode(o, q, k, v, scale); });
  }
  void swiglu_forward(Tensor o, Tensor g, Tensor u, Stream& s) override {
    enqueue(s, [=] { cpu::swiglu_forward(o, g, u); });
  }
  void swiglu_backward(Tensor dg, Tensor du, Tensor d, Tensor g, Tensor u, Stream& s) override {
    enqueue(s, [=] { cpu::swiglu_backward(dg, du, d, g, u); });
  }
  void linear_cross_entropy(Tensor loss, Tensor dx, Tensor dw, Tensor x, Tensor w, Tensor tg,
                            float scale, Stream& s) override {
    enqueue(s, [=] { cpu::linear_cross_entropy(loss, dx, dw, x, w, tg, scale); });
  }

 private:
  void enqueue(Stream& s, std::function<void()> fn) { cs(s).enqueue(std::move(fn)); }
  FailureState failure_;
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace sf
