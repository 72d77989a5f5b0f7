// defines: sf::make_cuda_backend, sf::cuda_device_count, sf::cuda_stream_handle — the CUDA
// implementation of sf::Backend (compute dtype BF16).
//
// Memory: alloc() is cudaMalloc / registered huge-page memory (pinned_host); the backend's own scratch (cuBLASLt workspace,
// the fused head's F32 logits and BF16 dlogits chunks, the RMSNorm dw partials, the attention Δ,
// the embedding backward's sort buffers and partial sums) is allocated once here from
// CudaBackendOptions — nothing is allocated inside a step. That scratch is shared by the ops: issue
// compute ops on one stream at a time (the engine uses one compute stream). Streams are
// cudaStreamNonBlocking, events cudaEventDisableTiming.
//
// Determinism: every op gives bitwise-repeatable results, embedding_backward included (it sorts
// the tokens by id and adds each row's contributions in a fixed order, no float atomics:
// embedding.cu), except the cuDNN attention backward — the default attention, whose dQ cuDNN
// accumulates with atomics. SF_ATTENTION=own runs attention.cu instead, which has no atomics.
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <mutex>

#include "backend/cuda/attention_cudnn.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/cuda_common.cuh"
#include "backend/cuda/gemm.h"
#include "backend/cuda/kernels.h"
#include "core/host_memory.h"

namespace sf {
// What the device holds beyond the engine's plan once steps run, the plan having counted the
// device's use when the engine was made: kernels' modules loaded on first use (cuBLASLt, cuDNN,
// ours) and the libraries' own workspaces. Measured 0.15-0.26 GiB (NVML's peak against the plan's
// device figure, 18 runs of 8B at 8k-64k tokens, H100 2026-12-07): planned beside the device's use,
// so a plan up to the budget stays under it.
constexpr uint64_t kLibraryGrowth = uint64_t(256) << 20;

namespace {

using cuda::Mat;

class CudaStream final : public Stream {
 public:
  cudaStream_t s = nullptr;
  ~CudaStream() override {
    if (s) cudaStreamDestroy(s);
  }
};

class CudaEvent final : public Event {
 public:
  cudaEvent_t e = nullptr;
  ~CudaEvent() override {
    if (e) cudaEventDestroy(e);
  }
};

cudaStream_t raw(Stream& s) { return static_cast<CudaStream&>(s).s; }

struct CallbackFailure {
  std::mutex mu;
  std::exception_ptr first;
  std::atomic<bool> failed{false};
};

struct HostCall {
  std::function<void()> fn;
  CallbackFailure* failure;
};

void CUDART_CB run_host_call(void* p) {
  HostCall* c = static_cast<HostCall*>(p);
  try {
    c->fn();
  } catch (...) {
    std::lock_guard<std::mutex> lk(c->failure->mu);
    if (!c->failure->first) c->failure->first = std::current_exception();
    c->failure->failed = true;
  }
  delete c;
}

Mat mat(const Tensor& t) { return Mat{t.data, t.dtype, t.rows(), t.cols(), t.cols()}; }

// Every scratch buffer the backend allocates, from its options: the constructor allocates these
// and cuda_backend_scratch_bytes() adds them up for the planner.
struct ScratchSizes {
  cuda::CeRows ce;
  int64_t delta_floats = 0, partial_floats = 0;
  size_t cublaslt = 0, logits = 0, dlogits = 0, loss_rows = 0, embedding = 0;
  size_t cudnn = 0;  // cuDNN attention's workspace; 0 when SF_ATTENTION picks our kernel
  size_t total() const {
    return cublaslt + logits + dlogits + loss_rows + size_t(delta_floats + partial_floats) * 4 +
           embedding + cudnn;
  }
};

ScratchSizes scratch_sizes(const CudaBackendOptions& o) {
  ScratchSizes z;
  const int64_t heads = o.max_heads > 0 ? o.max_heads : o.hidden;
  z.ce = cuda::ce_workspace_rows(o.ce_chunk_bytes, o.vocab, o.max_tokens);
  z.delta_floats = o.max_tokens * heads;
  z.partial_floats = cuda::rmsnorm_partial_rows() * o.hidden;
  z.cublaslt = o.cublaslt_workspace_bytes;
  z.logits = size_t(z.ce.sub) * size_t(o.vocab) * 4;
  z.dlogits = size_t(z.ce.chunk) * size_t(o.vocab) * 2;
  z.loss_rows = size_t(z.ce.sub) * 4;
  z.embedding = cuda::embedding_scratch_bytes(o.max_tokens, o.hidden);
  // Attention through cuDNN unless SF_ATTENTION=own: the F32 dQ accumulator and the GQA
  // per-query-head dK/dV partials (T·NH·D each; NH·D bounded by hidden), the softmax row sums
  // and stats (T·NH each) and 64 MiB for the rest of cuDNN's plan workspace.
  if (cuda::attention_impl_from_env(cuda::AttentionImpl::kCudnn) == cuda::AttentionImpl::kCudnn)
    z.cudnn = size_t(o.max_tokens) * size_t(3 * o.hidden + 2 * heads) * 4 + (size_t(64) << 20);
  return z;
}

class CudaBackend final : public Backend {
 public:
  explicit CudaBackend(const CudaBackendOptions& o) : opt_(o) {
    const int n = cuda_device_count();
    SF_CHECK(n > 0, "make_cuda_backend: no CUDA device is visible (driver missing or no GPU)");
    SF_CHECK(o.device >= 0 && o.device < n, "make_cuda_backend: device ", o.device,
             " does not exist (", n, " visible)");
    SF_CHECK(o.max_tokens > 0 && o.hidden > 0 && o.vocab > 0,
             "make_cuda_backend: CudaBackendOptions needs max_tokens, hidden and vocab > 0 (got ",
             o.max_tokens, ", ", o.hidden, ", ", o.vocab, ")");
    dev_ = o.device;
    SF_CUDA_CHECK(cudaSetDevice(dev_), "make_cuda_backend device ", dev_);
    set_sync_mode();
    cudaDeviceProp prop{};
    SF_CUDA_CHECK(cudaGetDeviceProperties(&prop, dev_), "make_cuda_backend");
    name_ = str_cat("cuda:", dev_, " (", prop.name, ")");

    const ScratchSizes z = scratch_sizes(o);
    ce_rows_ = z.ce;
    delta_cap_ = z.delta_floats;
    partial_cap_ = z.partial_floats;
    lt_ws_ = device_scratch(z.cublaslt, "cuBLASLt workspace");
    logits_ = device_scratch(z.logits, "cross-entropy logits");
    dlogits_ = device_scratch(z.dlogits, "cross-entropy dlogits");
    loss_rows_ = device_scratch(z.loss_rows, "cross-entropy row losses");
    delta_ = device_scratch(size_t(delta_cap_) * 4, "attention backward Δ");
    partial_ = device_scratch(size_t(partial_cap_) * 4, "RMSNorm dw partials");
    emb_ = device_scratch(z.embedding, "embedding backward sort and partial sums");
    emb_scratch_ = cuda::embedding_scratch(emb_.data(), o.max_tokens, o.hidden, o.vocab);
    gemm_ = std::make_unique<cuda::Gemm>(lt_ws_.data(), lt_ws_.size());
    init_cudnn_attention(o, z.cudnn);
  }

  std::string name() const override { return name_; }
  std::string pci_bus_id() const override {
    char id[32] = {};
    return cudaDeviceGetPCIBusId(id, sizeof(id), dev_) == cudaSuccess ? std::string(id) : "";
  }
  DType compute_dtype() const override { return DType::kBF16; }
  void bind_thread() override { set_device(); }
  DeviceMemoryInfo device_memory() override {
    set_device();
    size_t free = 0, total = 0;
    SF_CUDA_CHECK(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
    return DeviceMemoryInfo{uint64_t(total - free), uint64_t(total), kLibraryGrowth};
  }

  // ---- memory, streams, events, copies ----
  Buffer alloc(MemoryKind kind, size_t bytes, const char* what) override {
    set_device();
    if (bytes == 0) return Buffer();
    void* p = nullptr;
    if (kind == MemoryKind::kDevice) {
      p = device_malloc(bytes, what);
      return Buffer(p, bytes, [](void* q) { cudaFree(q); });
    }
    return pinned_host(bytes, what);
  }
  // Pinned host memory, zeroed. By default anonymous memory in transparent huge pages, touched
  // here (so the kernel zeroes it in this thread: alloc_pinned runs several such threads) and then
  // registered with cudaHostRegister, which pins 2 MiB pages instead of 4 KiB ones;
  // SF_PINNED=hostalloc takes cudaHostAlloc instead (the old path, for comparison).
  Buffer pinned_host(size_t bytes, const char* what) {
    static const bool hostalloc = [] {
      const char* e = std::getenv("SF_PINNED");
      return e && std::strcmp(e, "hostalloc") == 0;
    }();
    void* p = nullptr;
    count_backend_allocation();
    if (hostalloc) {
      SF_CUDA_CHECK(cudaHostAlloc(&p, bytes, cudaHostAllocPortable), "alloc: ", gib(bytes), " (",
                    bytes, " bytes) of pinned host memory for ", what);
      std::memset(p, 0, bytes);  // Backend::alloc's promise; CUDA makes none for this memory
      return Buffer(p, bytes, [](void* q) { cudaFreeHost(q); });
    }
    const size_t huge = size_t(2) << 20, n = (bytes + huge - 1) / huge * huge;
    p = mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    SF_CHECK(p != MAP_FAILED, "alloc: ", gib(bytes), " of host memory for ", what,
             ": mmap failed (", std::strerror(errno), ")");
    madvise(p, n, MADV_HUGEPAGE);  // a hint: without THP the pages are 4 KiB, still correct
    for (size_t off = 0; off < n; off += 4096) static_cast<volatile char*>(p)[off] = 0;
    if (const cudaError_t e = cudaHostRegister(p, n, cudaHostRegisterPortable); e != cudaSuccess) {
      cudaGetLastError();
      munmap(p, n);
      SF_FAIL("alloc: ", gib(bytes), " (", bytes, " bytes) of pinned host memory for ", what,
              ": cudaHostRegister failed: ", cudaGetErrorString(e),
              " (a locked-memory limit? see ulimit -l)");
    }
    return Buffer(p, bytes, [n](void* q) {
      cudaHostUnregister(q);
      munmap(q, n);
    });
  }
  std::unique_ptr<Stream> create_stream(const char* name) override {
    set_device();
    auto s = std::make_unique<CudaStream>();
    SF_CUDA_CHECK(cudaStreamCreateWithFlags(&s->s, cudaStreamNonBlocking), "create_stream ", name);
    return s;
  }
  std::unique_ptr<Event> create_timing_event() override {
    set_device();
    auto e = std::make_unique<CudaEvent>();
    SF_CUDA_CHECK(cudaEventCreate(&e->e), "create_timing_event");
    if (!clock_ref_) {  // the GPU moment every timing event is measured from, and its host time
      SF_CUDA_CHECK(cudaEventCreate(&clock_ref_), "create_timing_event");
      SF_CUDA_CHECK(cudaEventRecord(clock_ref_, nullptr), "create_timing_event");
      SF_CUDA_CHECK(cudaEventSynchronize(clock_ref_), "create_timing_event");
      clock_ref_us_ = std::chrono::duration<double, std::micro>(
                          std::chrono::steady_clock::now().time_since_epoch())
                          .count();
    }
    return e;
  }
  double event_time_us(Event& e) override {
    float ms = 0;
    SF_CUDA_CHECK(cudaEventElapsedTime(&ms, clock_ref_, static_cast<CudaEvent&>(e).e),
                  "event_time_us");
    return clock_ref_us_ + double(ms) * 1e3;
  }
  std::unique_ptr<Event> create_event() override {
    set_device();
    auto e = std::make_unique<CudaEvent>();
    SF_CUDA_CHECK(cudaEventCreateWithFlags(&e->e, cudaEventDisableTiming), "create_event");
    return e;
  }
  void record(Event& e, Stream& s) override {
    SF_CUDA_CHECK(cudaEventRecord(static_cast<CudaEvent&>(e).e, raw(s)), "record");
  }
  void wait(Stream& s, Event& e) override {
    SF_CUDA_CHECK(cudaStreamWaitEvent(raw(s), static_cast<CudaEvent&>(e).e, 0), "wait");
  }
  void synchronize(Event& e) override {
    SF_CUDA_CHECK(cudaEventSynchronize(static_cast<CudaEvent&>(e).e), "synchronize(event)");
    rethrow_callback_failure();
  }
  void synchronize(Stream& s) override {
    SF_CUDA_CHECK(cudaStreamSynchronize(raw(s)), "synchronize(stream)");
    rethrow_callback_failure();
  }
  void copy(void* dst, const void* src, size_t bytes, Stream& s) override {
    if (bytes == 0) return;
    SF_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, raw(s)), "copy of ", bytes,
                  " bytes");
  }
  void host_callback(Stream& s, std::function<void()> fn) override {
    auto* c = new HostCall{std::move(fn), &failure_};
    cudaError_t err = cudaLaunchHostFunc(raw(s), run_host_call, c);
    if (err != cudaSuccess) {
      delete c;
      SF_FAIL("host_callback: cudaLaunchHostFunc failed: ", cudaGetErrorString(err));
    }
  }

  // ---- elementwise and conversion ----
  void fill_zero(Tensor x, Stream& s) override {
    if (x.numel() == 0) return;
    SF_CUDA_CHECK(cudaMemsetAsync(x.data, 0, x.bytes(), raw(s)), "fill_zero ", x.shape_str());
  }
  void convert(Tensor dst, Tensor src, Stream& s) override {
    set_device();
    cuda::convert(dst, src, raw(s));
  }
  void add(Tensor out, Tensor a, Tensor b, Stream& s) override {
    set_device();
    cuda::add(out, a, b, raw(s));
  }

  // ---- the optimizer on the device ----
  void adamw(Tensor p, Tensor m, Tensor v, Tensor g, Tensor w, const AdamWParams& hp, int64_t step,
             float grad_scale, int64_t* nonfinite, Stream& s) override {
    set_device();
    cuda::adamw(p, m, v, g, w, adamw_consts(step, hp, grad_scale), nonfinite, raw(s));
  }
  void sum_squares(double* out, double* partials, Tensor x, Stream& s) override {
    set_device();
    cuda::sum_squares(out, partials, kSumSquaresPartials, x, raw(s));
  }

  // ---- linear layers ----
  void linear_forward(Tensor y, Tensor x, Tensor w, Tensor bias, Stream& s) override {
    const char* op = "linear_forward";
    set_device();
    for (auto [n, t] : {std::pair{"y", &y}, {"x", &x}, {"w", &w}})
      cuda::check_dtype(op, n, *t, DType::kBF16);
    const int64_t N = w.dim(0), K = x.cols();
    SF_CHECK(w.ndim == 2 && w.dim(1) == K && y.rows() == x.rows() && y.cols() == N, op,
             ": shapes do not match y[M,N] = x[M,K]·w[N,K]^T: y ", y.shape_str(), ", x ",
             x.shape_str(), ", w ", w.shape_str());
    if (!bias.empty()) {
      cuda::check_dtype(op, "bias", bias, DType::kBF16);
      SF_CHECK(bias.numel() == N, op, ": bias ", bias.shape_str(), " must have N=", N, " elements");
    }
    gemm_->run(op, mat(y), mat(x), false, mat(w), true, 1.0f, 0.0f,
               bias.empty() ? nullptr : bias.data, raw(s));
  }
  void linear_backward_input(Tensor dx, Tensor dy, Tensor w, bool accumulate, Stream& s) override {
    const char* op = "linear_backward_input";
    set_device();
    for (auto [n, t] : {std::pair{"dx", &dx}, {"dy", &dy}, {"w", &w}})
      cuda::check_dtype(op, n, *t, DType::kBF16);
    SF_CHECK(w.ndim == 2 && w.dim(0) == dy.cols() && dx.rows() == dy.rows() &&
                 dx.cols() == w.dim(1),
             op, ": shapes do not match dx[M,K] = dy[M,N]·w[N,K]: dx ", dx.shape_str(), ", dy ",
             dy.shape_str(), ", w ", w.shape_str());
    gemm_->run(op, mat(dx), mat(dy), false, mat(w), false, 1.0f, accumulate ? 1.0f : 0.0f,
               nullptr, raw(s));
  }
  void linear_backward_weight(Tensor dw, Tensor dbias, Tensor dy, Tensor x, Stream& s) override {
    const char* op = "linear_backward_weight";
    set_device();
    cuda::check_dtype(op, "dw", dw, DType::kF32);
    cuda::check_dtype(op, "dy", dy, DType::kBF16);
    cuda::check_dtype(op, "x", x, DType::kBF16);
    SF_CHECK(x.rows() == dy.rows() && dw.ndim == 2 && dw.dim(0) == dy.cols() &&
                 dw.dim(1) == x.cols(),
             op, ": shapes do not match dw[N,K] += dy[M,N]^T·x[M,K]: dw ", dw.shape_str(),
             ", dy ", dy.shape_str(), ", x ", x.shape_str());
    if (dy.rows() > 0) gemm_->run(op, mat(dw), mat(dy), true, mat(x), false, 1.0f, 1.0f, nullptr, raw(s));
    if (!dbias.empty()) cuda::bias_grad(dbias, dy, raw(s));
  }

  // ---- embedding ----
  void embedding_forward(Tensor out, Tensor ids, Tensor table, Stream& s) override {
    set_device();
    cuda::embedding_forward(out, ids, table, raw(s));
  }
  void embedding_backward(Tensor dtable, Tensor ids, Tensor dout, Stream& s) override {
    set_device();
    cuda::embedding_backward(dtable, ids, dout, emb_scratch_, raw(s));
  }

  // ---- RMSNorm ----
  void rmsnorm_forward(Tensor out, Tensor rstd, Tensor x, Tensor w, float eps, Stream& s) override {
    set_device();
    cuda::rmsnorm_forward(Tensor(), out, rstd, x, Tensor(), w, eps, raw(s));
  }
  void add_rmsnorm_forward(Tensor sum, Tensor out, Tensor rstd, Tensor a, Tensor b, Tensor w,
                           float eps, Stream& s) override {
    set_device();
    SF_CHECK(!sum.empty() && !b.empty(), "add_rmsnorm_forward: sum and b must be given");
    cuda::rmsnorm_forward(sum, out, rstd, a, b, w, eps, raw(s));
  }
  void rmsnorm_backward(Tensor dx, Tensor dw, Tensor dout, Tensor x, Tensor w, Tensor rstd,
                        bool accumulate_dx, Stream& s) override {
    set_device();
    const int64_t C = std::max<int64_t>(1, x.cols());
    SF_CHECK(C <= opt_.hidden, "rmsnorm_backward: rows of ", C,
             " are wider than CudaBackendOptions::hidden = ", opt_.hidden);
    cuda::rmsnorm_backward(dx, dw, dout, x, w, rstd, accumulate_dx, partial_.as<float>(),
                           partial_cap_ / C, raw(s));
  }

  // ---- rotary embedding ----
  void rope_forward(Tensor x, Tensor positions, Tensor inv_freq, Stream& s) override {
    set_device();
    cuda::rope("rope_forward", x, positions, inv_freq, 1.0f, raw(s));
  }
  void rope_backward(Tensor dx, Tensor positions, Tensor inv_freq, Stream& s) override {
    set_device();
    cuda::rope("rope_backward", dx, positions, inv_freq, -1.0f, raw(s));
  }

  // ---- attention ----
  void attention_forward(Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v, Tensor cu_seqlens,
                         float scale, Stream& s) override {
    set_device();
    if (cudnn_attn_ &&
        cudnn_attn_->forward(out, lse, q, k, v, cu_seqlens, host_cu(cu_seqlens), scale, raw(s)))
      return;
    cuda::attention_forward(out, lse, q, k, v, cu_seqlens, scale, raw(s));
  }
  void set_host_cu_seqlens(Tensor cu_seqlens, const std::vector<int32_t>& host) override {
    hint_data_ = cu_seqlens.data;
    hint_numel_ = cu_seqlens.numel();
    hint_ = host;
  }
  // The host copy of `cu` when the engine handed one over, else null (cuDNN then reads it back).
  const int32_t* host_cu(const Tensor& cu) const {
    return cu.data == hint_data_ && cu.numel() == hint_numel_ &&
                   int64_t(hint_.size()) == hint_numel_
               ? hint_.data()
               : nullptr;
  }
  void attention_backward(Tensor dq, Tensor dk, Tensor dv, Tensor dout, Tensor q, Tensor k,
                          Tensor v, Tensor out, Tensor lse, Tensor cu_seqlens, float scale,
                          Stream& s) override {
    set_device();
    if (cudnn_attn_ && cudnn_attn_->backward(dq, dk, dv, dout, q, k, v, out, lse, cu_seqlens,
                                             host_cu(cu_seqlens), scale, raw(s)))
      return;
    cuda::attention_backward(dq, dk, dv, dout, q, k, v, out, lse, cu_seqlens, scale,
                             delta_.as<float>(), delta_cap_, raw(s));
  }

  void attention_decode(Tensor out, Tensor q, Tensor k, Tensor v, float scale,
                        Stream& s) override {
    set_device();
    cuda::attention_decode(out, q, k, v, scale, raw(s));
  }

  // ---- SwiGLU ----
  void swiglu_forward(Tensor out, Tensor gate, Tensor up, Stream& s) override {
    set_device();
    cuda::swiglu_forward(out, gate, up, raw(s));
  }
  void swiglu_backward(Tensor dgate, Tensor dup, Tensor dout, Tensor gate, Tensor up,
                       Stream& s) override {
    set_device();
    cuda::swiglu_backward(dgate, dup, dout, gate, up, raw(s));
  }

  // ---- the head: chunked as cross_entropy.cu describes; T×V is never held ----
  void linear_cross_entropy(Tensor loss_sum, Tensor dx, Tensor dw, Tensor x, Tensor w,
                            Tensor targets, float grad_scale, Stream& s) override {
    const char* op = "linear_cross_entropy";
    set_device();
    cuda::check_dtype(op, "loss_sum", loss_sum, DType::kF32);
    cuda::check_dtype(op, "dx", dx, DType::kBF16);
    cuda::check_dtype(op, "dw", dw, DType::kF32);
    cuda::check_dtype(op, "x", x, DType::kBF16);
    cuda::check_dtype(op, "w", w, DType::kBF16);
    cuda::check_dtype(op, "targets", targets, DType::kI32);
    const int64_t T = x.rows(), C = x.cols(), V = w.dim(0);
    SF_CHECK(w.ndim == 2 && w.dim(1) == C && dx.rows() == T && dx.cols() == C &&
                 dw.numel() == w.numel() && targets.numel() == T && loss_sum.numel() == 1,
             op, ": shapes do not match x[T,C], w[V,C], dx[T,C], dw[V,C], targets[T], loss_sum[1]:",
             " x ", x.shape_str(), ", w ", w.shape_str(), ", dx ", dx.shape_str(), ", dw ",
             dw.shape_str(), ", targets ", targets.shape_str());
    SF_CHECK(V <= opt_.vocab, op, ": vocab ", V, " exceeds CudaBackendOptions::vocab = ",
             opt_.vocab, " (the logits chunk is sized from it)");
    cuda::linear_cross_entropy(*gemm_, loss_sum, dx, dw, x, w, targets, grad_scale,
                               cuda::CeWorkspace{ce_rows_, logits_.as<float>(),
                                                 dlogits_.as<cuda::bf16>(), loss_rows_.as<float>()},
                               raw(s));
  }

 private:
  using bf16_t = uint16_t;
  struct Scratch {
    void* p = nullptr;
    size_t n = 0;
    ~Scratch() {
      if (p) cudaFree(p);
    }
    Scratch() = default;
    Scratch(Scratch&& o) noexcept : p(o.p), n(o.n) { o.p = nullptr; }
    Scratch& operator=(Scratch&& o) noexcept {
      std::swap(p, o.p);
      std::swap(n, o.n);
      return *this;
    }
    void* data() const { return p; }
    size_t size() const { return n; }
    template <typename T>
    T* as() const {
      return static_cast<T*>(p);
    }
  };
  // cudaMalloc, or an sf::Error naming the request, the buffer, the free memory and what to do.
  static void* device_malloc(size_t bytes, const char* what) {
    void* p = nullptr;
    count_backend_allocation();
    if (const cudaError_t e = cudaMalloc(&p, bytes); e != cudaSuccess) {
      cudaGetLastError();  // so that a later launch check does not report it
      size_t free = 0, total = 0;
      cudaMemGetInfo(&free, &total);
      SF_FAIL("alloc: ", gib(bytes), " (", bytes, " bytes) of device memory for ", what,
              ": cudaMalloc failed: ", cudaGetErrorString(e), " with ", gib(free), " free of ",
              gib(total), ". Lower --window or the tokens per step (--batch-size, --cutoff-len)");
    }
    return p;
  }
  Scratch device_scratch(size_t bytes, const char* what) {
    Scratch s;
    s.n = bytes;
    if (bytes) s.p = device_malloc(bytes, what);
    return s;
  }
  // Attention through cuDNN's fused flash attention unless SF_ATTENTION=own. Default by
  // measurement (H200, cuDNN 9.14, bench_attention, 2026-12-02; causal GQA 32/8, D 128, fwd+bwd,
  // lengths read back as here): 8×2048 cuDNN 2.36 ms vs our kernel 8.79 ms; 2×8192 7.54 vs
  // 31.5 ms (torch SDPA cuDNN backend, same run: 2.24 / 7.55 ms). Its workspace — the F32 dQ
  // accumulator and the GQA per-query-head dK/dV partials (T·NH·D each, F32-sized as
  // cudnn-frontend sizes them; NH·D bounded by hidden), the softmax row sums and stats (T·NH
  // each) and 64 MiB for the rest of cuDNN's plan workspace — is allocated here (~0.8 GiB at
  // 16384 tokens × hidden 4096); a shape that needs more, or that cuDNN has no plan for, runs our
  // kernel (logged once per shape).
  void init_cudnn_attention(const CudaBackendOptions& o, size_t bytes) {
    if (bytes == 0) return;
    std::string why;
    cudnn_attn_ = cuda::CudnnAttention::create(o.max_tokens, bytes, &why);
    const char* env = std::getenv("SF_ATTENTION");
    SF_CHECK(cudnn_attn_ || !env || std::strcmp(env, "cudnn") != 0,
             "SF_ATTENTION=cudnn: cuDNN attention is unavailable: ", why);
  }
  void set_device() { SF_CUDA_CHECK(cudaSetDevice(dev_), "cudaSetDevice ", dev_); }
  // How a host thread waits for the device (cudaStreamSynchronize, cudaEventSynchronize). CUDA's
  // default with one context on a many-core host is to spin: the engine's thread then burns a
  // core through the whole backward while it waits at the step's end, one of the cores the CPU
  // AdamW's pool runs on (its chunks go to the other threads meanwhile). SF_CUDA_SYNC=blocking
  // makes it sleep until the device signals (a wake-up of some µs per wait): measured against
  // spinning, 8B on the H200 machine, no difference beyond the noise (docs/perf.md, 2026-12-07),
  // so spinning stays the default; a driver that refuses the flag on a device already
  // in use keeps spinning (no error: only speed depends on it).
  void set_sync_mode() {
    const char* e = std::getenv("SF_CUDA_SYNC");
    SF_CHECK(!e || !*e || std::strcmp(e, "spin") == 0 || std::strcmp(e, "blocking") == 0,
             "SF_CUDA_SYNC=", e, ": accepted values are spin (the default) and blocking");
    if (!e || std::strcmp(e, "blocking") != 0) return;
    if (cudaSetDeviceFlags(cudaDeviceScheduleBlockingSync) != cudaSuccess) (void)cudaGetLastError();
  }
  void rethrow_callback_failure() {
    if (!failure_.failed) return;
    std::lock_guard<std::mutex> lk(failure_.mu);
    std::rethrow_exception(failure_.first);
  }

  CudaBackendOptions opt_;
  int dev_ = 0;
  std::string name_;
  int64_t delta_cap_ = 0, partial_cap_ = 0;
  cuda::CeRows ce_rows_;
  Scratch lt_ws_, logits_, dlogits_, loss_rows_, delta_, partial_, emb_;
  cuda::EmbeddingScratch emb_scratch_;  // pointers into emb_
  std::unique_ptr<cuda::Gemm> gemm_;
  std::unique_ptr<cuda::CudnnAttention> cudnn_attn_;  // null: our kernel (attention.cu) only
  // set_host_cu_seqlens: the boundaries of the device tensor at hint_data_, on the host.
  const void* hint_data_ = nullptr;
  int64_t hint_numel_ = 0;
  std::vector<int32_t> hint_;
  CallbackFailure failure_;
  cudaEvent_t clock_ref_ = nullptr;  // create_timing_event's reference (never destroyed: tiny)
  double clock_ref_us_ = 0;
};

}  // namespace

DeviceMemoryInfo cuda_device_memory(int device) {
  SF_CUDA_CHECK(cudaSetDevice(device), "cudaSetDevice ", device);
  size_t free = 0, total = 0;
  SF_CUDA_CHECK(cudaMemGetInfo(&free, &total), "cudaMemGetInfo");
  return DeviceMemoryInfo{uint64_t(total - free), uint64_t(total)};
}

size_t cuda_backend_scratch_bytes(const CudaBackendOptions& options) {
  return scratch_sizes(options).total();
}

std::unique_ptr<Backend> make_cuda_backend(const CudaBackendOptions& options) {
  return std::make_unique<CudaBackend>(options);
}

int cuda_device_count() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver / no device" state
    return 0;
  }
  return n;
}

void* cuda_stream_handle(Stream& s) {
  auto* cs = dynamic_cast<CudaStream*>(&s);
  SF_CHECK(cs != nullptr, "cuda_stream_handle: the stream was not made by a CUDA backend");
  return cs->s;
}

}  // namespace sf
