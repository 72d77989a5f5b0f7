// defines: sf::cuda::CudnnAttention (attention_cudnn.h) — the SDPA graphs of
// attention_cudnn_graphs.h planned once per shape (cached; the fastest of the heuristics'
// candidates, timed at the first call), executed on the caller's stream with the metadata and
// workspace laid out here.
#include "backend/cuda/attention_cudnn.h"

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>
#include <vector>

#include "backend/backend.h"
#include "backend/cuda/attention_cudnn_graphs.h"
#include "backend/cuda/cudnn_graph.h"
#include "core/error.h"

namespace sf::cuda {

using namespace cudnn;  // NOLINT: this file is the cuDNN path's own

namespace {

// SF_CUDNN_TUNE=0: take the heuristics' first plan without timing the others.
bool tune_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("SF_CUDNN_TUNE");
    return !(e && std::strcmp(e, "0") == 0);
  }();
  return on;
}

}  // namespace

AttentionImpl attention_impl_from_env(AttentionImpl fallback) {
  const char* e = std::getenv("SF_ATTENTION");
  if (!e) return fallback;
  if (std::strcmp(e, "cudnn") == 0) return AttentionImpl::kCudnn;
  if (std::strcmp(e, "own") == 0) return AttentionImpl::kOwn;
  return fallback;
}

struct CudnnAttention::Impl {
  // bwd, ragged, forced backward variant (-1: first that finalizes), B, S, NH, NKV, D
  using Key = std::tuple<bool, bool, int, int64_t, int64_t, int64_t, int64_t, int64_t>;
  struct Plan {
    std::unique_ptr<Graph> g;
    std::vector<int> fits;  // the graph's plans whose workspace fits, in the heuristics' order
    int chosen = -1;        // index into g->plans(): the fastest of `fits` once tuned
    bool tuned = false;
    double build_ms = 0;
    Variant variant{};
    std::string error;  // non-empty: no plan for this shape
    std::string what;   // "backward dense B=… S=… NH=… NKV=… D=…", for messages
    Desc desc() const { return g->plans()[size_t(chosen)].desc; }
    int64_t workspace() const { return g->plans()[size_t(chosen)].workspace; }
  };
  Handle handle = nullptr;
  size_t version = 0;
  int64_t max_tokens = 0, max_batch = 0;
  void* ws = nullptr;  // [dQ accumulator | softmax row sums | plan workspace]
  size_t ws_bytes = 0;
  int32_t* meta = nullptr;  // seq[B] | off_q[B+1] | off_kv[B+1] | off_st[B+1], each 256-B aligned
  int64_t meta_stride = 0;  // ints between the arrays
  int32_t* host_cu = nullptr;  // pinned, for reading cu_seqlens back
  std::map<Key, Plan> plans;
  const float one = 1.0f, lowest = -FLT_MAX;

  ~Impl() {
    if (handle) api().destroy(handle);
    if (ws) cudaFree(ws);
    if (meta) cudaFree(meta);
    if (host_cu) cudaFreeHost(host_cu);
  }

  Plan& plan(const Key& key) {
    auto it = plans.find(key);
    if (it != plans.end()) return it->second;
    Plan& p = plans[key];
    const auto [bwd, ragged, forced, B, S, NH, NKV, D] = key;
    const Layout l{B, S, NH, NKV, D, ragged};
    const int n_variants = bwd ? int(std::size(kVariants)) : 1;
    for (int i = 0; i < n_variants; ++i) {
      if (bwd && forced >= 0 && i != forced) continue;
      if (bwd && kVariants[i].full_heads_ws && NH == NKV) continue;  // same graph as variant 0
      // without ragged offsets only the dense layout exists (frontend without max_total_seq_len)
      if (bwd && !ragged && (kVariants[i].ragged_acc || kVariants[i].full_heads_ws)) continue;
      try {
        p.g = std::make_unique<Graph>();
        if (bwd) {
          build_backward(*p.g, l, kVariants[i]);
        } else {
          build_forward(*p.g, l);
        }
        const auto t0 = std::chrono::steady_clock::now();
        const auto& candidates = p.g->plan(handle, tune_enabled() ? 8 : 1);
        p.build_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        p.variant = kVariants[i];
        // Plans whose workspace (ours at the largest T this plan serves, plus cuDNN's) does not
        // fit are passed over; with none left, the next variant is tried, e.g. one that keeps
        // the GQA partials T-sized.
        const int64_t T = std::min(B * S, max_tokens);
        const size_t ours = bwd ? bwd_workspace(p.variant, ragged, T, B, S, NH, NKV, D).total()
                                : (ragged ? 0 : aligned(size_t(T * NH) * 4));
        p.fits.clear();
        for (size_t j = 0; j < candidates.size(); ++j)
          if (ours + size_t(candidates[j].workspace) <= ws_bytes) p.fits.push_back(int(j));
        if (p.fits.empty()) {
          p.error += str_cat(p.error.empty() ? "" : "; ", "variant ", i, ": workspace ",
                             ours + size_t(candidates[0].workspace), " > ", ws_bytes, " bytes");
          p.g.reset();
          continue;
        }
        p.chosen = p.fits[0];
        p.tuned = p.fits.size() == 1;
        p.error.clear();
        break;
      } catch (const Failure& f) {
        p.error +=
            str_cat(p.error.empty() ? "" : "; ", bwd ? str_cat("variant ", i, ": ") : "", f.what());
        p.g.reset();
      }
    }
    if (p.g == nullptr && p.error.empty()) p.error = "no backward variant applies";
    p.what = str_cat(bwd ? "backward" : "forward", ragged ? " ragged" : " dense", " B=", B,
                     " S=", S, " NH=", NH, " NKV=", NKV, " D=", D);
    const std::string& what = p.what;
    if (!p.error.empty()) {
      std::fprintf(stderr, "[sf] cuDNN attention %s: no plan (%s); using the built-in kernel\n",
                   what.c_str(), p.error.c_str());
    } else if (verbose()) {
      std::fprintf(stderr,
                   "[sf] cuDNN %zu attention %s: %zu plan(s) ready in %.0f ms (variant %d/%d)\n",
                   version, what.c_str(), p.fits.size(), p.build_ms, int(p.variant.ragged_acc),
                   int(p.variant.full_heads_ws));
    }
    return p;
  }
};

CudnnAttention::CudnnAttention(std::unique_ptr<Impl> impl) : p_(std::move(impl)) {}
CudnnAttention::~CudnnAttention() = default;
size_t CudnnAttention::version() const { return p_->version; }
const std::string& CudnnAttention::library() const { return api().path; }

std::unique_ptr<CudnnAttention> CudnnAttention::create(int64_t max_tokens, size_t workspace_bytes,
                                                       std::string* why) {
  auto fail = [&](std::string w) {
    if (why) *why = std::move(w);
    return std::unique_ptr<CudnnAttention>();
  };
  const Api& a = api();
  if (!a.error.empty()) return fail(a.error);
  auto impl = std::make_unique<Impl>();
  impl->version = a.version;
  // Ragged (THD) tensors with grouped-query heads in the backward need cuDNN 9.6.
  if (impl->version < 90600) return fail(str_cat("cuDNN ", impl->version, " is older than 9.6"));
  int dev = 0;
  cudaDeviceProp prop{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaGetDeviceProperties(&prop, dev) != cudaSuccess)
    return fail("no CUDA device");
  if (prop.major < 9) return fail("cuDNN ragged attention needs compute capability 9.0 (Hopper)");
  if (Status s = a.create(&impl->handle); s != 0) return fail("cudnnCreate: " + status_text(s));
  impl->max_tokens = max_tokens;
  impl->max_batch = pow2_at_least(std::max<int64_t>(1, max_tokens));
  impl->ws_bytes = workspace_bytes;
  impl->meta_stride = int64_t(aligned(size_t(impl->max_batch + 1) * 4) / 4);
  const size_t meta_ints = size_t(4 * impl->meta_stride);
  for (int k = 0; k < 3; ++k) count_backend_allocation();
  if (cudaMalloc(&impl->ws, std::max<size_t>(workspace_bytes, kAlign)) != cudaSuccess ||
      cudaMalloc(reinterpret_cast<void**>(&impl->meta), meta_ints * 4) != cudaSuccess ||
      cudaHostAlloc(reinterpret_cast<void**>(&impl->host_cu), size_t(max_tokens + 2) * 4,
                    cudaHostAllocPortable) != cudaSuccess) {
    cudaGetLastError();
    return fail(
        str_cat("cannot allocate the cuDNN attention workspace (", workspace_bytes, " bytes)"));
  }
  return std::unique_ptr<CudnnAttention>(new CudnnAttention(std::move(impl)));
}

namespace {

struct Call {
  int64_t T, NH, NKV, D, nseq, B, S;
  bool ragged;
};

// Checks what cuDNN's graphs need; on success fills c (B and S still to choose).
bool accept(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& cu, int64_t max_tokens,
            std::initializer_list<const Tensor*> bf16, Call* c, std::string* why) {
  if (q.ndim != 3 || k.ndim != 3 || cu.ndim != 1 || cu.dtype != DType::kI32) {
    *why = "shapes are not [T, heads, D]";
    return false;
  }
  c->T = q.dim(0), c->NH = q.dim(1), c->D = q.dim(2), c->NKV = k.dim(1), c->nseq = cu.numel() - 1;
  if (c->T <= 0 || c->nseq < 1 || c->T > max_tokens) {
    *why = str_cat("T=", c->T, " outside 1..", max_tokens);
    return false;
  }
  // cuDNN's fused attention takes head_dim <= 256 in multiples of 8; the sm_90 engines are
  // measured and tested here at 64 and 128 only.
  if (c->D != 64 && c->D != 128) {
    *why = str_cat("head_dim ", c->D, " (cuDNN path: 64 or 128)");
    return false;
  }
  if (c->NKV <= 0 || c->NH % c->NKV != 0 || k.dim(0) != c->T || v.dim(0) != c->T ||
      v.dim(1) != c->NKV || k.dim(2) != c->D || v.dim(2) != c->D) {
    *why = "q/k/v shapes do not match";
    return false;
  }
  if (c->T * c->NH * c->D > INT32_MAX) {
    *why = "T·NH·D exceeds the int32 ragged offsets";
    return false;
  }
  for (const Tensor* t : bf16) {
    if (t->dtype != DType::kBF16 || reinterpret_cast<uintptr_t>(t->data) % 16 != 0) {
      *why = "a tensor is not 16-byte aligned BF16";
      return false;
    }
  }
  return true;
}

}  // namespace

#define SF_CUDA_RT(call)                                                                      \
  do {                                                                                        \
    cudaError_t e_ = (call);                                                                  \
    if (e_ != cudaSuccess) SF_FAIL("cuDNN attention: ", #call, ": ", cudaGetErrorString(e_)); \
  } while (0)

namespace {

// What forward and backward share: B and S chosen, the plan found, the metadata pointers.
struct Prepared {
  CudnnAttention::Impl::Plan* plan = nullptr;
  int32_t *seq = nullptr, *off_q = nullptr, *off_kv = nullptr, *off_st = nullptr;
};

struct Options {
  CudnnAttention::UnknownLengths unknown;
  bool dense_when_equal;
  int variant;
};

bool prepare(CudnnAttention::Impl& P, bool bwd, Call& c, const Tensor& cu_seqlens,
             const int32_t* host_cu, const Options& opt, cudaStream_t stream, Prepared* out,
             std::string* why) {
  int64_t max_len = c.T;  // the bound when the lengths stay unknown
  const int32_t* hc = host_cu;
  if (!hc && opt.unknown == CudnnAttention::UnknownLengths::kRead) {
    SF_CUDA_RT(cudaMemcpyAsync(P.host_cu, cu_seqlens.data, size_t(c.nseq + 1) * 4,
                               cudaMemcpyDeviceToHost, stream));
    SF_CUDA_RT(cudaStreamSynchronize(stream));
    hc = P.host_cu;
  }
  bool equal = hc != nullptr;
  if (hc) {
    max_len = 1;
    for (int64_t i = 0; i < c.nseq; ++i) {
      max_len = std::max<int64_t>(max_len, hc[i + 1] - hc[i]);
      equal = equal && hc[i + 1] - hc[i] == hc[1] - hc[0];
    }
  }
  // Dense graphs need S % 128 == 0 up to cuDNN 9.15 (cudnn-frontend adds a padding mask to
  // dense backward graphs otherwise, for a known bug): other lengths take the ragged graphs.
  const bool dense_ok = equal && hc[0] == 0 && hc[1] > 0 && hc[c.nseq] == c.T &&
                        (P.version > 91500 || (hc[1] - hc[0]) % 128 == 0);
  c.ragged = !(opt.dense_when_equal && dense_ok);
  if (c.ragged) {
    // Powers of two keep the number of plans (each built once, ~0.1–1 s) small as lengths vary.
    c.B = pow2_at_least(c.nseq);
    c.S = pow2_at_least(std::max<int64_t>(max_len, 64));
  } else {
    c.B = c.nseq;
    c.S = max_len;
  }
  if (c.B > P.max_batch) {
    *why = str_cat(c.nseq, " samples exceed the metadata capacity");
    return false;
  }
  out->plan = &P.plan({bwd, c.ragged, bwd ? opt.variant : -1, c.B, c.S, c.NH, c.NKV, c.D});
  if (!out->plan->error.empty()) {
    *why = out->plan->error;
    return false;
  }
  out->seq = P.meta;
  out->off_q = out->seq + P.meta_stride;
  out->off_kv = out->off_q + P.meta_stride;
  out->off_st = out->off_kv + P.meta_stride;
  return true;
}

}  // namespace

namespace {

using IoList = std::vector<std::pair<int64_t, const void*>>;

void execute(Handle h, const Graph& g, Desc plan, const IoList& io, void* workspace,
             const float* lowest, cudaStream_t stream, const char* what) {
  std::vector<int64_t> uids;
  std::vector<void*> ptrs;
  for (const auto& [u, p] : io) {
    if (!g.uses(u)) continue;  // e.g. the offsets of a dense graph
    uids.push_back(u);
    ptrs.push_back(const_cast<void*>(p));
  }
  for (int i = 0; i < g.n_lowest(); ++i) {
    uids.push_back(Graph::kFirstLowest + i);
    ptrs.push_back(const_cast<float*>(lowest));
  }
  SF_CHECK(uids.size() == g.n_io(), "cuDNN attention ", what, ": the variant pack binds ",
           uids.size(), " of the graph's ", g.n_io(), " tensors");
  const Api& a = api();
  Desc pack = nullptr;
  Status s = a.create_desc(kDescVariantPack, &pack);
  if (s == 0) s = a.set_attr(pack, kPackUids, kTypeInt64, int64_t(uids.size()), uids.data());
  if (s == 0) s = a.set_attr(pack, kPackPtrs, kTypeVoidPtr, int64_t(ptrs.size()), ptrs.data());
  if (s == 0) s = a.set_attr(pack, kPackWorkspace, kTypeVoidPtr, 1, &workspace);
  if (s == 0) s = a.finalize(pack);
  if (s == 0) s = a.set_stream(h, stream);
  if (s == 0) s = a.execute(h, plan, pack);
  if (pack) a.destroy_desc(pack);
  if (s != 0) SF_FAIL("cuDNN attention ", what, ": execution failed: ", status_text(s));
}

// Times each of the plan's candidates (a warm-up, then the best of 3, on `stream`) and keeps the
// fastest. Runs once per shape, at its first call: the heuristics' first choice need not be the
// fastest (on 9.14 and 9.19 it was, in every shape measured: docs/perf.md).
void tune(CudnnAttention::Impl& P, CudnnAttention::Impl::Plan& plan, const IoList& io,
          void* workspace, cudaStream_t stream) {
  const char* what = plan.what.c_str();
  struct Events {
    cudaEvent_t a = nullptr, b = nullptr;
    ~Events() {
      if (a) cudaEventDestroy(a);
      if (b) cudaEventDestroy(b);
    }
  } ev;
  SF_CUDA_RT(cudaEventCreate(&ev.a));
  SF_CUDA_RT(cudaEventCreate(&ev.b));
  float best = INFINITY;
  std::string times;
  for (int j : plan.fits) {
    const Desc d = plan.g->plans()[size_t(j)].desc;
    auto once = [&] { execute(P.handle, *plan.g, d, io, workspace, &P.lowest, stream, what); };
    once();
    float t = INFINITY;
    for (int r = 0; r < 3; ++r) {
      SF_CUDA_RT(cudaEventRecord(ev.a, stream));
      once();
      SF_CUDA_RT(cudaEventRecord(ev.b, stream));
      SF_CUDA_RT(cudaEventSynchronize(ev.b));
      float ms = 0;
      SF_CUDA_RT(cudaEventElapsedTime(&ms, ev.a, ev.b));
      t = std::min(t, ms);
    }
    times += str_cat(times.empty() ? "" : ", ", "#", j, " (", plan.g->plans()[size_t(j)].label,
                     ") ", t, " ms");
    if (t < best) {
      best = t;
      plan.chosen = j;
    }
  }
  plan.tuned = true;
  if (verbose())
    std::fprintf(stderr, "[sf] cuDNN attention %s: plans timed (%s): #%d (%s) chosen\n", what,
                 times.c_str(), plan.chosen, plan.g->plans()[size_t(plan.chosen)].label.c_str());
}

// Runs the plan's chosen engine configuration, tuning first where there is a choice. Failures
// name the op and the shapes (plan.what).
void run(CudnnAttention::Impl& P, CudnnAttention::Impl::Plan& plan, const IoList& io,
         void* workspace, cudaStream_t stream) {
  if (!plan.tuned) tune(P, plan, io, workspace, stream);
  execute(P.handle, *plan.g, plan.desc(), io, workspace, &P.lowest, stream, plan.what.c_str());
}

}  // namespace

bool CudnnAttention::forward(Tensor out, Tensor lse, Tensor q, Tensor k, Tensor v,
                             Tensor cu_seqlens, const int32_t* host_cu, float scale,
                             cudaStream_t stream) {
  refusal_.clear();
  Call c{};
  if (!accept(q, k, v, cu_seqlens, p_->max_tokens, {&out, &q, &k, &v}, &c, &refusal_)) return false;
  if (lse.dtype != DType::kF32 || lse.numel() != c.T * c.NH || out.numel() != q.numel()) {
    refusal_ = "out/lse shapes";
    return false;
  }
  Impl& P = *p_;
  Prepared m;
  if (!prepare(P, false, c, cu_seqlens, host_cu, {unknown_, dense_, variant_}, stream, &m,
               &refusal_))
    return false;
  // dense graphs write the stats [B, H, S] to a scratch, converted to lse[T, H] afterwards
  const size_t stats_bytes = c.ragged ? 0 : aligned(size_t(c.T * c.NH) * 4);
  if (stats_bytes + size_t(m.plan->workspace()) > P.ws_bytes) {
    refusal_ = str_cat("plan workspace ", m.plan->workspace(), " > ", P.ws_bytes, " bytes");
    return false;
  }
  char* ws = static_cast<char*>(P.ws);
  if (c.ragged)
    cudnn_ragged_metadata(cu_seqlens.i32(), int(c.nseq), int(c.B), c.NH * c.D, c.NKV * c.D, c.NH,
                          m.seq, m.off_q, m.off_kv, m.off_st, stream);
  run(P, *m.plan,
      {{kQ, q.data},
       {kK, k.data},
       {kV, v.data},
       {kO, out.data},
       {kStats, c.ragged ? lse.data : ws},
       {kSeqQ, m.seq},
       {kSeqKV, m.seq},
       {kOffQ, m.off_q},
       {kOffKV, m.off_kv},
       {kOffSt, m.off_st},
       {kScale, &scale}},
      ws + stats_bytes, stream);
  if (!c.ragged)
    cudnn_stats_layout(reinterpret_cast<float*>(ws), lse.f32(), c.B, c.NH, c.S, false, stream);
  return true;
}

bool CudnnAttention::backward(Tensor dq, Tensor dk, Tensor dv, Tensor dout, Tensor q, Tensor k,
                              Tensor v, Tensor out, Tensor lse, Tensor cu_seqlens,
                              const int32_t* host_cu, float scale, cudaStream_t stream) {
  refusal_.clear();
  Call c{};
  if (!accept(q, k, v, cu_seqlens, p_->max_tokens, {&dq, &dk, &dv, &dout, &q, &k, &v, &out}, &c,
              &refusal_))
    return false;
  if (lse.dtype != DType::kF32 || lse.numel() != c.T * c.NH || dq.numel() != q.numel() ||
      dk.numel() != k.numel() || dv.numel() != v.numel() || dout.numel() != q.numel()) {
    refusal_ = "gradient/lse shapes";
    return false;
  }
  Impl& P = *p_;
  Prepared m;
  if (!prepare(P, true, c, cu_seqlens, host_cu, {unknown_, dense_, variant_}, stream, &m,
               &refusal_))
    return false;
  Impl::Plan& plan = *m.plan;
  const BwdWorkspace w = bwd_workspace(plan.variant, c.ragged, c.T, c.B, c.S, c.NH, c.NKV, c.D);
  if (w.total() + size_t(plan.workspace()) > P.ws_bytes) {
    refusal_ =
        str_cat("workspace: dQ accumulator ", w.acc, " + row sums ", w.sums, " + dK/dV partials 2×",
                w.full, " + plan ", plan.workspace(), " > ", P.ws_bytes, " bytes");
    return false;
  }
  char* ws = static_cast<char*>(P.ws);
  char* stats = ws + w.acc + w.sums + 2 * w.full;
  if (c.ragged) {
    cudnn_ragged_metadata(cu_seqlens.i32(), int(c.nseq), int(c.B), c.NH * c.D, c.NKV * c.D, c.NH,
                          m.seq, m.off_q, m.off_kv, m.off_st, stream);
  } else {
    cudnn_stats_layout(lse.f32(), reinterpret_cast<float*>(stats), c.B, c.NH, c.S, true, stream);
  }
  // The dQ accumulator needs no zeroing: cuDNN >= 9.6 clears it inside the engine
  // (cudnn-frontend memsets it only for older releases); 9.6 is our minimum.
  IoList io = {{kQ, q.data},       {kK, k.data},       {kV, v.data},
               {kO, out.data},     {kDO, dout.data},   {kStats, c.ragged ? lse.data : stats},
               {kDQ, dq.data},     {kDK, dk.data},     {kDV, dv.data},
               {kSeqQ, m.seq},     {kSeqKV, m.seq},    {kOffQ, m.off_q},
               {kOffKV, m.off_kv}, {kOffSt, m.off_st}, {kScale, &scale},
               {kOne, &P.one},     {kDQAccum, ws},     {kSoftmaxSum, ws + w.acc}};
  if (w.full) {
    io.push_back({kDKFull, ws + w.acc + w.sums});
    io.push_back({kDVFull, ws + w.acc + w.sums + w.full});
  }
  run(P, plan, io, ws + w.total(), stream);
  return true;
}

}  // namespace sf::cuda
