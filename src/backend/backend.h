// defines: sf::Backend (the interface every engine and layer runs against), sf::Stream,
// sf::Event, sf::Buffer.
//
// Conventions for every op: T tokens (all samples of the step, packed), C hidden, NH query
// heads, NKV key/value heads, D head_dim, I intermediate, V vocab. Activations are row-major
// [T, ...]; weights keep Hugging Face's nn.Linear layout [out, in]. Activations and weights use
// the backend's compute dtype (F32 on the CPU reference, BF16 on CUDA); gradients of weights are
// always F32 accumulators ("+="); ids, positions and sequence offsets are I32. Every op is
// enqueued on the stream it is given and runs in stream order.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.h"
#include "optim/adamw.h"

namespace sf {

class Stream {
 public:
  virtual ~Stream() = default;
};

class Event {
 public:
  virtual ~Event() = default;
};

enum class MemoryKind { kDevice, kPinnedHost };

// Device memory in use on the backend's device by every process (total - free), and its total;
// zeros where there is no device (the CPU reference). `later`: what the backend's libraries will
// still take once their kernels run (modules loaded on first use, library workspaces), which a
// plan made now counts beside `used`.
struct DeviceMemoryInfo {
  uint64_t used = 0, total = 0, later = 0;
  uint64_t planned() const { return used + later; }
};

// Owned memory taken from the backend once, at start; engines sub-allocate from it.
class Buffer {
 public:
  Buffer() = default;
  Buffer(void* p, size_t n, std::function<void(void*)> release)
      : ptr_(p), size_(n), release_(std::move(release)) {}
  Buffer(Buffer&& o) noexcept { *this = std::move(o); }
  Buffer& operator=(Buffer&& o) noexcept {
    reset();
    ptr_ = o.ptr_;
    size_ = o.size_;
    release_ = std::move(o.release_);
    o.ptr_ = nullptr;
    o.size_ = 0;
    return *this;
  }
  ~Buffer() { reset(); }
  void reset() {
    if (ptr_ && release_) release_(ptr_);
    ptr_ = nullptr;
    size_ = 0;
  }
  void* data() const { return ptr_; }
  size_t size() const { return size_; }

 private:
  void* ptr_ = nullptr;
  size_t size_ = 0;
  std::function<void(void*)> release_;
};

// Every allocation of device or pinned host memory the backends make (cudaMalloc,
// cudaHostRegister / cudaHostAlloc, the CPU backend's alloc; the backends' scratch and library
// workspaces included), process-wide: the engine takes all it needs before its first step, and a
// test checks that steps add none (backend/allocations.cpp).
uint64_t backend_allocations();
void count_backend_allocation();

class Backend {
 public:
  virtual ~Backend() = default;

  virtual std::string name() const = 0;
  virtual DType compute_dtype() const = 0;
  virtual DeviceMemoryInfo device_memory() { return {}; }
  // The device's PCI bus id ("0000:1b:00.0"), where it has one: the optimizer threads go to its
  // NUMA node's CPUs (core/cpu_topology.h).
  virtual std::string pci_bus_id() const { return ""; }
  // Makes the calling thread's later calls without a stream (allocations, stream and event
  // creation) go to this backend's device (CUDA: cudaSetDevice): an engine per device, each
  // driven from a thread of its own, calls it first (data parallel, engine/engine.h).
  virtual void bind_thread() {}

  // ---- memory, streams, events, copies ----
  // Pinned host memory comes zeroed (the engine's fresh Adam moments rely on it); device memory
  // does not.
  virtual Buffer alloc(MemoryKind kind, size_t bytes, const char* what) = 0;
  virtual std::unique_ptr<Stream> create_stream(const char* name) = 0;
  virtual std::unique_ptr<Event> create_event() = 0;
  virtual void record(Event& e, Stream& s) = 0;        // e completes when s reaches this point
  virtual void wait(Stream& s, Event& e) = 0;          // s waits for e before later work
  virtual void synchronize(Event& e) = 0;              // the host waits for e
  virtual void synchronize(Stream& s) = 0;             // the host waits for all work on s
  // Events that also tell when they completed, for traces: event_time_us gives that moment on
  // the host's steady clock (µs); the event must have completed. -1 where a backend cannot.
  virtual std::unique_ptr<Event> create_timing_event() { return create_event(); }
  virtual double event_time_us(Event& e) { return -1; }
  // Any direction (host<->device, device<->device); bytes, no conversion.
  virtual void copy(void* dst, const void* src, size_t bytes, Stream& s) = 0;
  // Runs fn on a backend thread once all earlier work on s is done; later work on s waits for it.
  virtual void host_callback(Stream& s, std::function<void()> fn) = 0;

  // ---- elementwise and conversion ----
  virtual void fill_zero(Tensor x, Stream& s) = 0;
  virtual void convert(Tensor dst, Tensor src, Stream& s) = 0;     // dtype cast, same numel
  virtual void add(Tensor out, Tensor a, Tensor b, Stream& s) = 0;  // out = a + b (may alias)

  // ---- the optimizer on the device (the plan's GPU-resident share, engine/plan.h) ----
  // One AdamW step over fp32 p, m, v (n elements) from an F32 or BF16 gradient g scaled by
  // grad_scale, with adamw_step's arithmetic: bit-identical to adamw_step_reference. The updated p
  // is also written into `weights` (the compute-dtype copy the layers read; may be empty).
  // `nonfinite` (one int64 in device memory, or null) receives the number of master weights the
  // step left non-finite (NaN or ±inf), adamw_step's count: the caller reads it back to stop a
  // diverged run.
  virtual void adamw(Tensor p, Tensor m, Tensor v, Tensor g, Tensor weights, const AdamWParams& hp,
                     int64_t step, float grad_scale, int64_t* nonfinite, Stream& s) = 0;
  // out[0] = Σ x² over an F32 or BF16 tensor, in double, deterministic (fixed blocks reduced in a
  // fixed order); `partials` holds kSumSquaresPartials doubles of scratch. Both in device memory.
  static constexpr int kSumSquaresPartials = 1024;
  virtual void sum_squares(double* out, double* partials, Tensor x, Stream& s) = 0;

  // ---- linear layers ----
  // y[M,N] = x[M,K] · w[N,K]^T (+ bias[N])
  virtual void linear_forward(Tensor y, Tensor x, Tensor w, Tensor bias, Stream& s) = 0;
  // dx[M,K] (+)= dy[M,N] · w[N,K]; accumulate adds into dx instead of overwriting it.
  virtual void linear_backward_input(Tensor dx, Tensor dy, Tensor w, bool accumulate,
                                     Stream& s) = 0;
  // dw[N,K] += dy^T · x;  dbias[N] += Σ_rows dy (dbias may be empty). dw/dbias are F32.
  virtual void linear_backward_weight(Tensor dw, Tensor dbias, Tensor dy, Tensor x,
                                      Stream& s) = 0;

  // ---- embedding ----
  virtual void embedding_forward(Tensor out, Tensor ids, Tensor table, Stream& s) = 0;
  virtual void embedding_backward(Tensor dtable, Tensor ids, Tensor dout, Stream& s) = 0;

  // ---- RMSNorm over the last dimension: out = x · rstd · w, rstd[R] (F32) saved for backward ----
  virtual void rmsnorm_forward(Tensor out, Tensor rstd, Tensor x, Tensor w, float eps,
                               Stream& s) = 0;
  // sum = a + b, then out = rmsnorm(sum): the residual add fused with the next norm.
  virtual void add_rmsnorm_forward(Tensor sum, Tensor out, Tensor rstd, Tensor a, Tensor b,
                                   Tensor w, float eps, Stream& s) = 0;
  // dx (+)= ∂/∂x, dw += ∂/∂w (F32).
  virtual void rmsnorm_backward(Tensor dx, Tensor dw, Tensor dout, Tensor x, Tensor w,
                                Tensor rstd, bool accumulate_dx, Stream& s) = 0;

  // ---- rotary embedding, in place on x[T, heads, D]; Hugging Face's rotate_half pairing ----
  // angle(t, i) = positions[t] · inv_freq[i], i < D/2; inv_freq (F32) already carries any scaling.
  virtual void rope_forward(Tensor x, Tensor positions, Tensor inv_freq, Stream& s) = 0;
  virtual void rope_backward(Tensor dx, Tensor positions, Tensor inv_freq, Stream& s) = 0;

  // ---- causal grouped-query attention over packed sequences ----
  // q[T,NH,D], k/v[T,NKV,D], out[T,NH,D], lse[T,NH] (F32, log-sum-exp of the scaled scores).
  // cu_seqlens[nseq+1] (I32) are the sample boundaries: no token attends across them.
  virtual void attention_forward(Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v,
                                 Tensor cu_seqlens, float scale, Stream& s) = 0;
  // A hint for the attention calls that follow: `host` is what the device tensor `cu_seqlens`
  // holds, so a backend need not read the boundaries back (a synchronising copy) in every call.
  // Calls with another cu_seqlens tensor ignore it; the next hint replaces it.
  virtual void set_host_cu_seqlens(Tensor cu_seqlens, const std::vector<int32_t>& host) {}
  // dq, dk, dv are overwritten.
  virtual void attention_backward(Tensor dq, Tensor dk, Tensor dv, Tensor dout, Tensor q,
                                  Tensor k, Tensor v, Tensor out, Tensor lse, Tensor cu_seqlens,
                                  float scale, Stream& s) = 0;

  // ---- attention of new queries against a key/value cache (decoding, no backward) ----
  // One sequence of Tk tokens whose last Tq are the queries: q[Tq,NH,D], k/v[Tk,NKV,D] (the
  // cache's first Tk rows, Tk >= Tq >= 1), out[Tq,NH,D]; query i sees keys 0 .. Tk-Tq+i.
  virtual void attention_decode(Tensor out, Tensor q, Tensor k, Tensor v, float scale,
                                Stream& s) = 0;

  // ---- SwiGLU: out = silu(gate) · up ----
  virtual void swiglu_forward(Tensor out, Tensor gate, Tensor up, Stream& s) = 0;
  virtual void swiglu_backward(Tensor dgate, Tensor dup, Tensor dout, Tensor gate, Tensor up,
                               Stream& s) = 0;

  // ---- the head: linear + cross-entropy, fused, never holding T×V logits ----
  // For each token t with targets[t] != -100: loss_sum[0] += -log softmax(x[t]·wᵀ)[targets[t]].
  // dx[T,C] = grad_scale · ∂loss_sum/∂x (overwritten; zero for ignored tokens);
  // dw[V,C] += grad_scale · ∂loss_sum/∂w (F32). loss_sum is one F32 accumulator.
  virtual void linear_cross_entropy(Tensor loss_sum, Tensor dx, Tensor dw, Tensor x, Tensor w,
                                    Tensor targets, float grad_scale, Stream& s) = 0;
};

}  // namespace sf
