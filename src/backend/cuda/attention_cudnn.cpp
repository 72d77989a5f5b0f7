// defines: sf::cuda::CudnnAttention (attention_cudnn.h) — libcudnn.so.9 loaded with dlopen, the
// SDPA forward/backward operation graphs built through the backend API, one execution plan per
// shape (cached), executed on the caller's stream.
//
// The graphs are those cudnn-frontend (1.x) lowers its sdpa / sdpa_backward nodes to for cuDNN
// 9.x — matmul, pointwise and reduction ops that cuDNN's engines recognise as fused flash
// attention: bmm1 (Q·Kᵀ, M/N overridden by the sample lengths) → ·scale → padding mask → causal
// mask (row ≥ col) → softmax with stats (max + log Σexp) → bmm2 (P·V); backward: rowsum(dO∘O),
// P recomputed from the stats, dV = Pᵀ·dO, dS = P∘(dP − rowsum)·scale, dK = dSᵀ·Q, dQ = dS·K
// accumulated in F32 (zeroed first) then converted; for GQA, dK/dV come from per-query-head
// partials reduced over each group. Only enum values and functions present since cuDNN 9.0 are
// used (the GPU machine has 9.14; GQA with ragged offsets needs 9.6, checked at load).
#include "backend/cuda/attention_cudnn.h"

#include <dlfcn.h>

#include <algorithm>
#include <array>
#include <cfloat>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <tuple>
#include <vector>

#include "core/error.h"

namespace sf::cuda {
namespace {

// ---- the parts of cudnn_graph_v9.h used here (values fixed since cuDNN 9.0.0) ----
// clang-format off
using Status = int;
using Handle = void*;
using Desc = void*;
enum : int {  // cudnnBackendDescriptorType_t
  kDescPointwise = 0, kDescEngineCfg = 3, kDescEngineHeur = 4, kDescPlan = 5,
  kDescOpPointwise = 13, kDescOpGraph = 15, kDescVariantPack = 16, kDescTensor = 17,
  kDescMatmul = 18, kDescOpMatmul = 19, kDescReduction = 21, kDescOpReduction = 22,
  kDescOpReshape = 31,
};
enum : int {  // cudnnBackendAttributeType_t
  kTypeHandle = 0, kTypeDataType = 1, kTypeBool = 2, kTypeInt64 = 3, kTypeFloat = 4,
  kTypeDouble = 5, kTypeVoidPtr = 6, kTypeHeurMode = 8, kTypePointwiseMode = 14, kTypeDesc = 15,
  kTypeReductionOp = 18,
};
enum : int { kF32 = 0, kI32 = 4, kBF16 = 9, kBool = 11 };  // cudnnDataType_t
enum : int {  // cudnnPointwiseMode_t
  kPwAdd = 0, kPwMul = 1, kPwDiv = 6, kPwSub = 9, kPwExp = 13, kPwLog = 15, kPwIdentity = 21,
  kPwCmpGe = 303, kPwCmpLt = 304, kPwAnd = 400, kPwGenIndex = 501, kPwSelect = 601,
};
enum : int { kReduceAdd = 0, kReduceMax = 3 };  // cudnnReduceTensorOp_t
enum : int { kHeurFallback = 2, kHeurA = 3 };   // cudnnBackendHeurMode_t
enum : int {  // cudnnBackendAttributeName_t
  kPwMode = 0, kPwMathPrec = 1, kPwAxis = 9, kHeurMode = 200, kHeurGraph = 201,
  kHeurResults = 202, kPlanHandle = 400, kPlanEngineCfg = 401, kPlanWorkspace = 402,
  kOpPwDesc = 750, kOpPwX = 751, kOpPwB = 752, kOpPwY = 753, kOpPwT = 758, kGraphHandle = 800,
  kGraphOps = 801, kTensorAlign = 900, kTensorType = 901, kTensorDims = 902, kTensorStrides = 903,
  kTensorUid = 906, kTensorVirtual = 907, kTensorByValue = 908, kTensorRagged = 913,
  kPackUids = 1000, kPackPtrs = 1001, kPackWorkspace = 1003, kMatmulCompType = 1500,
  kMatmulPadding = 1503, kOpMmA = 1520, kOpMmB = 1521, kOpMmC = 1522, kOpMmDesc = 1523,
  kOpMmM = 1525, kOpMmN = 1526, kOpMmK = 1527, kRedOp = 1600, kRedCompType = 1601, kOpRedX = 1610,
  kOpRedY = 1611, kOpRedDesc = 1612, kOpReshapeX = 2200, kOpReshapeY = 2201,
};
// clang-format on

struct Api {
  void* lib = nullptr;
  std::string error;
  Status (*create)(Handle*) = nullptr;
  Status (*destroy)(Handle) = nullptr;
  Status (*set_stream)(Handle, cudaStream_t) = nullptr;
  size_t (*get_version)() = nullptr;
  const char* (*error_string)(Status) = nullptr;
  void (*last_error)(char*, size_t) = nullptr;  // optional
  Status (*create_desc)(int, Desc*) = nullptr;
  Status (*destroy_desc)(Desc) = nullptr;
  Status (*finalize)(Desc) = nullptr;
  Status (*set_attr)(Desc, int, int, int64_t, const void*) = nullptr;
  Status (*get_attr)(Desc, int, int, int64_t, int64_t*, void*) = nullptr;
  Status (*execute)(Handle, Desc, Desc) = nullptr;
};

// Loaded once per process and never unloaded (cuDNN keeps kernels and threads alive).
const Api& api() {
  static const Api a = [] {
    Api r;
    // SF_CUDNN_LIB names another libcudnn.so.9 (e.g. a newer one from a Python wheel).
    const char* env = std::getenv("SF_CUDNN_LIB");
    const std::string path = env && *env ? env : "libcudnn.so.9";
    r.lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!r.lib) {
      const char* e = dlerror();
      r.error = "dlopen(" + path + "): " + (e ? e : "not found");
      return r;
    }
    auto get = [&](auto& fn, const char* name, bool required = true) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(r.lib, name));
      if (!fn && required && r.error.empty()) r.error = std::string("libcudnn.so.9 lacks ") + name;
    };
    get(r.create, "cudnnCreate");
    get(r.destroy, "cudnnDestroy");
    get(r.set_stream, "cudnnSetStream");
    get(r.get_version, "cudnnGetVersion");
    get(r.error_string, "cudnnGetErrorString");
    get(r.last_error, "cudnnGetLastErrorString", false);
    get(r.create_desc, "cudnnBackendCreateDescriptor");
    get(r.destroy_desc, "cudnnBackendDestroyDescriptor");
    get(r.finalize, "cudnnBackendFinalize");
    get(r.set_attr, "cudnnBackendSetAttribute");
    get(r.get_attr, "cudnnBackendGetAttribute");
    get(r.execute, "cudnnBackendExecute");
    return r;
  }();
  return a;
}

// A cuDNN call that failed while building a graph or plan: the shape is refused, not fatal.
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string status_text(Status s) {
  const Api& a = api();
  std::string t = a.error_string ? a.error_string(s) : std::to_string(s);
  if (a.last_error) {
    char buf[512] = {0};
    a.last_error(buf, sizeof buf);
    if (buf[0]) t += std::string(" (") + buf + ")";
  }
  return t;
}

void check(Status s, const char* what) {
  if (s != 0) throw Failure(std::string(what) + ": " + status_text(s));
}

bool verbose() {
  static const bool v = [] {
    const char* e = std::getenv("SF_CUDNN_VERBOSE");
    return e && *e && std::strcmp(e, "0") != 0;
  }();
  return v;
}

// Tensor unique ids of the non-virtual tensors (virtual ones are numbered from kFirstVirtual).
enum Uid : int64_t {
  kQ = 1,
  kK,
  kV,
  kO,
  kStats,
  kDO,
  kDQ,
  kDK,
  kDV,
  kSeqQ,
  kSeqKV,
  kOffQ,
  kOffKV,
  kOffSt,
  kScale,
  kDQAccum,
  kSoftmaxSum,
  kOne,
  kDKFull,
  kDVFull,
  kFirstLowest = 100,
  kFirstVirtual = 1000,
};

using Dims = std::array<int64_t, 4>;
Dims dense(const Dims& d) { return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1}; }

int64_t pow2_at_least(int64_t n) {
  int64_t p = 1;
  while (p < n) p <<= 1;
  return p;
}

constexpr size_t kAlign = 256;
size_t aligned(size_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

// One operation graph and everything made for it; descriptors live as long as the plan.
class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  ~Graph() {
    for (auto it = all_.rbegin(); it != all_.rend(); ++it) api().destroy_desc(*it);
  }

  Desc make(int type) {
    Desc d = nullptr;
    check(api().create_desc(type, &d), "cudnnBackendCreateDescriptor");
    all_.push_back(d);
    return d;
  }
  void set(Desc d, int attr, int type, int64_t n, const void* v, const char* what) {
    check(api().set_attr(d, attr, type, n, v), what);
  }
  void set_desc(Desc d, int attr, Desc v, const char* what) {
    set(d, attr, kTypeDesc, 1, &v, what);
  }
  void finalize(Desc d, const char* what) { check(api().finalize(d), what); }

  Desc tensor(int64_t uid, int dtype, const Dims& dims, const Dims& strides, bool is_virtual,
              Desc ragged = nullptr, bool by_value = false) {
    Desc t = make(kDescTensor);
    if (!is_virtual) io_uids_.push_back(uid);
    const int64_t align = 16;
    const bool virt = is_virtual;
    set(t, kTensorType, kTypeDataType, 1, &dtype, "tensor data type");
    set(t, kTensorDims, kTypeInt64, 4, dims.data(), "tensor dims");
    set(t, kTensorStrides, kTypeInt64, 4, strides.data(), "tensor strides");
    set(t, kTensorUid, kTypeInt64, 1, &uid, "tensor uid");
    set(t, kTensorAlign, kTypeInt64, 1, &align, "tensor alignment");
    set(t, kTensorVirtual, kTypeBool, 1, &virt, "tensor virtual");
    if (by_value) set(t, kTensorByValue, kTypeBool, 1, &by_value, "tensor by value");
    if (ragged) set_desc(t, kTensorRagged, ragged, "tensor ragged offset");
    finalize(t, "tensor");
    return t;
  }
  Desc virt(int dtype, const Dims& dims) { return virt(dtype, dims, dense(dims)); }
  Desc virt(int dtype, const Dims& dims, const Dims& strides, Desc ragged = nullptr) {
    return tensor(next_uid_++, dtype, dims, strides, true, ragged);
  }
  // A host float passed by value at execution (its uid must be in the variant pack).
  Desc scalar(int64_t uid) {
    by_value_.push_back(uid);
    return tensor(uid, kF32, {1, 1, 1, 1}, {1, 1, 1, 1}, false, nullptr, true);
  }
  Desc lowest() { return scalar(kFirstLowest + n_lowest_++); }
  int n_lowest() const { return n_lowest_; }
  const std::vector<int64_t>& by_value() const { return by_value_; }

  // y = mode(x[, b][, t]); compute in `prec`; GEN_INDEX takes `axis`.
  void pointwise(int mode, Desc x, Desc b, Desc y, Desc t = nullptr, int prec = kF32,
                 int64_t axis = -1) {
    Desc pw = make(kDescPointwise);
    set(pw, kPwMode, kTypePointwiseMode, 1, &mode, "pointwise mode");
    set(pw, kPwMathPrec, kTypeDataType, 1, &prec, "pointwise precision");
    if (axis >= 0) set(pw, kPwAxis, kTypeInt64, 1, &axis, "pointwise axis");
    finalize(pw, "pointwise descriptor");
    Desc op = make(kDescOpPointwise);
    set_desc(op, kOpPwDesc, pw, "pointwise op");
    set_desc(op, kOpPwX, x, "pointwise x");
    if (b) set_desc(op, kOpPwB, b, "pointwise b");
    set_desc(op, kOpPwY, y, "pointwise y");
    if (t) set_desc(op, kOpPwT, t, "pointwise t");
    finalize(op, "pointwise op");
    ops_.push_back(op);
  }
  void reduction(int mode, Desc x, Desc y) {
    Desc r = make(kDescReduction);
    const int prec = kF32;
    set(r, kRedOp, kTypeReductionOp, 1, &mode, "reduction mode");
    set(r, kRedCompType, kTypeDataType, 1, &prec, "reduction precision");
    finalize(r, "reduction descriptor");
    Desc op = make(kDescOpReduction);
    set_desc(op, kOpRedDesc, r, "reduction op");
    set_desc(op, kOpRedX, x, "reduction x");
    set_desc(op, kOpRedY, y, "reduction y");
    finalize(op, "reduction op");
    ops_.push_back(op);
  }
  // c = a·b with the GEMM M/N/K extents overridden per batch by the sample-length tensors.
  void matmul(Desc a, Desc b, Desc c, Desc m, Desc n, Desc k, bool zero_padding) {
    Desc mm = make(kDescMatmul);
    const int prec = kF32;
    set(mm, kMatmulCompType, kTypeDataType, 1, &prec, "matmul precision");
    if (zero_padding) {
      const double zero = 0.0;
      if (api().set_attr(mm, kMatmulPadding, kTypeDouble, 1, &zero) != 0) {
        const float zf = 0.0f;
        set(mm, kMatmulPadding, kTypeFloat, 1, &zf, "matmul padding value");
      }
    }
    finalize(mm, "matmul descriptor");
    Desc op = make(kDescOpMatmul);
    set_desc(op, kOpMmA, a, "matmul a");
    set_desc(op, kOpMmB, b, "matmul b");
    set_desc(op, kOpMmC, c, "matmul c");
    set_desc(op, kOpMmDesc, mm, "matmul op");
    if (m) set_desc(op, kOpMmM, m, "matmul M override");
    if (n) set_desc(op, kOpMmN, n, "matmul N override");
    if (k) set_desc(op, kOpMmK, k, "matmul K override");
    finalize(op, "matmul op");
    ops_.push_back(op);
  }
  void reshape(Desc x, Desc y) {
    Desc op = make(kDescOpReshape);
    set_desc(op, kOpReshapeX, x, "reshape x");
    set_desc(op, kOpReshapeY, y, "reshape y");
    finalize(op, "reshape op");
    ops_.push_back(op);
  }

  // Score masks, as cudnn-frontend writes them: masked scores become -FLT_MAX.
  Desc padding_mask(Desc s, const Dims& dims, Desc seq_q, Desc seq_kv) {
    Desc row = virt(kI32, dims), col = virt(kI32, dims);
    pointwise(kPwGenIndex, s, nullptr, row, nullptr, kI32, 2);
    pointwise(kPwGenIndex, s, nullptr, col, nullptr, kI32, 3);
    Desc row_ok = virt(kBool, dims), col_ok = virt(kBool, dims), ok = virt(kBool, dims);
    pointwise(kPwCmpLt, row, seq_q, row_ok, nullptr, kBool);
    pointwise(kPwCmpLt, col, seq_kv, col_ok, nullptr, kBool);
    pointwise(kPwAnd, row_ok, col_ok, ok, nullptr, kBool);
    Desc y = virt(kF32, dims);
    pointwise(kPwSelect, s, lowest(), y, ok);
    return y;
  }
  Desc causal_mask(Desc s, const Dims& dims) {
    Desc row = virt(kI32, dims), col = virt(kI32, dims), ok = virt(kBool, dims);
    pointwise(kPwGenIndex, s, nullptr, row, nullptr, kI32, 2);
    pointwise(kPwGenIndex, s, nullptr, col, nullptr, kI32, 3);
    pointwise(kPwCmpGe, row, col, ok, nullptr, kBool);
    Desc y = virt(kF32, dims);
    pointwise(kPwSelect, s, lowest(), y, ok);
    return y;
  }

  // Finalizes the operation graph and the first engine configuration the heuristics offer that
  // finalizes into a plan. Returns the plan's workspace size.
  int64_t plan(Handle h) {
    Desc g = make(kDescOpGraph);
    set(g, kGraphOps, kTypeDesc, int64_t(ops_.size()), ops_.data(), "graph ops");
    api().set_attr(g, kGraphHandle, kTypeHandle, 1, &h);  // deprecated after 9.x: optional
    finalize(g, "operation graph");
    std::string tried;
    for (int mode : {kHeurA, kHeurFallback}) {
      Desc heur = make(kDescEngineHeur);
      set_desc(heur, kHeurGraph, g, "heuristics graph");
      set(heur, kHeurMode, kTypeHeurMode, 1, &mode, "heuristics mode");
      if (api().finalize(heur) != 0) continue;
      int64_t n = 0;
      if (api().get_attr(heur, kHeurResults, kTypeDesc, 0, &n, nullptr) != 0 || n <= 0) continue;
      std::vector<Desc> cfgs;
      for (int64_t i = 0; i < n; ++i) cfgs.push_back(make(kDescEngineCfg));
      int64_t got = 0;
      check(api().get_attr(heur, kHeurResults, kTypeDesc, n, &got, cfgs.data()),
            "heuristics results");
      for (int64_t i = 0; i < got; ++i) {
        Desc p = make(kDescPlan);
        api().set_attr(p, kPlanHandle, kTypeHandle, 1, &h);
        set_desc(p, kPlanEngineCfg, cfgs[size_t(i)], "plan engine config");
        const Status s = api().finalize(p);
        if (s != 0) {
          if (tried.size() < 400)
            tried += " [cfg " + std::to_string(i) + ": " + status_text(s) + "]";
          continue;
        }
        int64_t ws = 0, cnt = 0;
        check(api().get_attr(p, kPlanWorkspace, kTypeInt64, 1, &cnt, &ws), "plan workspace");
        plan_ = p;
        return ws;
      }
    }
    throw Failure("no engine configuration finalizes" + tried);
  }
  Desc plan_desc() const { return plan_; }
  // The non-virtual tensors: the variant pack binds exactly these.
  bool uses(int64_t uid) const {
    return std::find(io_uids_.begin(), io_uids_.end(), uid) != io_uids_.end();
  }
  size_t n_io() const { return io_uids_.size(); }

 private:
  std::vector<Desc> all_, ops_;
  std::vector<int64_t> by_value_, io_uids_;
  int64_t next_uid_ = kFirstVirtual;
  int n_lowest_ = 0;
  Desc plan_ = nullptr;
};

// The ragged tensors of one call: dims [B, H, S, D], element strides of our [T, H, D] rows.
// ragged: samples of any length (offsets + padding mask); otherwise every sample has length S and
// the rows are plain [B, S, H, D] (no offsets, no masks but the causal one: the graph torch uses).
struct Layout {
  int64_t B, S, NH, NKV, D;
  bool ragged;
  Dims q() const { return {B, NH, S, D}; }
  Dims q_strides() const { return {S * NH * D, D, NH * D, 1}; }
  Dims kv() const { return {B, NKV, S, D}; }
  Dims kv_strides() const { return {S * NKV * D, D, NKV * D, 1}; }
  Dims kv_t() const { return {B, NKV, D, S}; }  // Kᵀ / Vᵀ views of the same bytes
  Dims kv_t_strides() const { return {S * NKV * D, D, 1, NKV * D}; }
  Dims rows() const { return {B, NH, S, 1}; }
  // lse[T, NH] when ragged; cuDNN < 9.26 takes other stats only as packed [B, H, S, 1], so the
  // dense graphs use a scratch in that layout (cudnn_stats_layout converts).
  Dims rows_strides() const { return ragged ? Dims{S * NH, 1, NH, 1} : dense(rows()); }
  Dims scores() const { return {B, NH, S, S}; }
  Dims scores_t_strides() const { return {NH * S * S, S * S, 1, S}; }
};

struct Inputs {  // the graph's index tensors
  Desc seq_q, seq_kv, off_q, off_kv, off_st;
};

Inputs index_tensors(Graph& g, const Layout& l) {
  const Dims one{1, 1, 1, 1};
  Inputs in{};
  if (!l.ragged) return in;
  in.off_q = g.tensor(kOffQ, kI32, {l.B + 1, 1, 1, 1}, one, false);
  in.off_kv = g.tensor(kOffKV, kI32, {l.B + 1, 1, 1, 1}, one, false);
  in.off_st = g.tensor(kOffSt, kI32, {l.B + 1, 1, 1, 1}, one, false);
  in.seq_q = g.tensor(kSeqQ, kI32, {l.B, 1, 1, 1}, one, false);
  in.seq_kv = g.tensor(kSeqKV, kI32, {l.B, 1, 1, 1}, one, false);
  return in;
}

void build_forward(Graph& g, const Layout& l) {
  const Inputs in = index_tensors(g, l);
  Desc q = g.tensor(kQ, kBF16, l.q(), l.q_strides(), false, in.off_q);
  Desc kt = g.tensor(kK, kBF16, l.kv_t(), l.kv_t_strides(), false, in.off_kv);
  Desc v = g.tensor(kV, kBF16, l.kv(), l.kv_strides(), false, in.off_kv);
  Desc o = g.tensor(kO, kBF16, l.q(), l.q_strides(), false, in.off_q);
  Desc stats = g.tensor(kStats, kF32, l.rows(), l.rows_strides(), false, in.off_st);
  Desc scale = g.scalar(kScale);
  const Dims ss = l.scores(), rs = l.rows();

  Desc s1 = g.virt(kF32, ss), s2 = g.virt(kF32, ss);
  g.matmul(q, kt, s1, in.seq_q, in.seq_kv, nullptr, l.ragged);
  g.pointwise(kPwMul, s1, scale, s2);
  Desc s3 = l.ragged ? g.padding_mask(s2, ss, in.seq_q, in.seq_kv) : s2;
  Desc s4 = g.causal_mask(s3, ss);
  // softmax with stats: m = max, e = exp(s − m), z = Σe, stats = m + log z, P = e / z (bf16)
  Desc m = g.virt(kF32, rs), sub = g.virt(kF32, ss), e = g.virt(kF32, ss);
  Desc z = g.virt(kF32, rs), logz = g.virt(kF32, rs), p = g.virt(kBF16, ss);
  g.reduction(kReduceMax, s4, m);
  g.pointwise(kPwSub, s4, m, sub);
  g.pointwise(kPwExp, sub, nullptr, e);
  g.reduction(kReduceAdd, e, z);
  g.pointwise(kPwLog, z, nullptr, logz);
  g.pointwise(kPwAdd, m, logz, stats);
  g.pointwise(kPwDiv, e, z, p);
  g.matmul(p, v, o, in.seq_q, nullptr, in.seq_kv, false);
}

// How the backward's F32/partial tensors live in the workspace. cudnn-frontend uses the first
// (ragged, T-sized) layout when given max_total_seq_len and cuDNN >= 9.6, and then also keeps the
// GQA per-query-head dK/dV partials in the workspace; the others are its layouts without it.
// Plans are tried in this order until one finalizes.
struct Variant {
  bool ragged_acc;     // dQ accumulator and row sums as ragged [T, ...]; else dense [B, H, S, ...]
  bool full_heads_ws;  // GQA dK/dV partials in the workspace (ragged); else virtual
};
constexpr Variant kVariants[] = {{true, false}, {true, true}, {false, false}};

// Workspace bytes of the backward's own tensors, in this order: dQ accumulator, row sums, dK and
// dV partials; cuDNN's plan workspace follows.
struct BwdWorkspace {
  size_t acc = 0, sums = 0, full = 0, stats = 0;  // stats: the dense graphs' [B, H, S] scratch
  size_t total() const { return acc + sums + 2 * full + stats; }
};

BwdWorkspace bwd_workspace(const Variant& v, bool ragged, int64_t T, int64_t B, int64_t S,
                           int64_t NH, int64_t NKV, int64_t D) {
  BwdWorkspace w;
  if (!ragged) w.stats = aligned(size_t(T * NH) * 4);
  const int64_t rows = v.ragged_acc ? T : B * S;
  w.acc = aligned(size_t(rows * NH * D) * 4);
  w.sums = aligned(size_t(rows * NH) * 4);
  // sized as the frontend sizes them (4 bytes an element, though they are declared BF16)
  if (v.full_heads_ws && NH != NKV) w.full = aligned(size_t(T * NH * D) * 4);
  return w;
}

void build_backward(Graph& g, const Layout& l, const Variant& var) {
  const Inputs in = index_tensors(g, l);
  Desc q = g.tensor(kQ, kBF16, l.q(), l.q_strides(), false, in.off_q);
  Desc kt = g.tensor(kK, kBF16, l.kv_t(), l.kv_t_strides(), false, in.off_kv);
  Desc vt = g.tensor(kV, kBF16, l.kv_t(), l.kv_t_strides(), false, in.off_kv);
  Desc o = g.tensor(kO, kBF16, l.q(), l.q_strides(), false, in.off_q);
  Desc dout = g.tensor(kDO, kBF16, l.q(), l.q_strides(), false, in.off_q);
  Desc stats = g.tensor(kStats, kF32, l.rows(), l.rows_strides(), false, in.off_st);
  Desc dq = g.tensor(kDQ, kBF16, l.q(), l.q_strides(), false, in.off_q);
  Desc dk = g.tensor(kDK, kBF16, l.kv(), l.kv_strides(), false, in.off_kv);
  Desc dv = g.tensor(kDV, kBF16, l.kv(), l.kv_strides(), false, in.off_kv);
  Desc scale = g.scalar(kScale);
  const Dims ss = l.scores(), rs = l.rows();
  const bool gqa = l.NH != l.NKV;

  // softmax_sum = rowsum(dO ∘ O), kept in the workspace in lse's layout
  Desc doo = g.virt(kF32, l.q(), {l.NH * l.S * l.D, l.S * l.D, l.NH * l.D, 1});
  Desc rsum = g.virt(kF32, rs);
  Desc ssum = var.ragged_acc ? g.tensor(kSoftmaxSum, kF32, rs, l.rows_strides(), false, in.off_st)
                             : g.tensor(kSoftmaxSum, kF32, rs, dense(rs), false);
  g.pointwise(kPwMul, dout, o, doo);
  g.reduction(kReduceAdd, doo, rsum);
  g.pointwise(kPwMul, rsum, g.scalar(kOne), ssum);

  // P = exp(scale·Q·Kᵀ − stats), masked as in the forward
  Desc s1 = g.virt(kF32, ss), s2 = g.virt(kF32, ss), s4 = g.virt(kF32, ss), e = g.virt(kF32, ss);
  g.matmul(q, kt, s1, in.seq_q, in.seq_kv, nullptr, false);
  g.pointwise(kPwMul, s1, scale, s2);
  Desc s3 = l.ragged ? g.padding_mask(s2, ss, in.seq_q, in.seq_kv) : s2;
  g.pointwise(kPwSub, s3, stats, s4);
  // the padding mask again after the stats (cudnn-frontend's workaround for cuDNN 9)
  Desc s5 = l.ragged ? g.padding_mask(s4, ss, in.seq_q, in.seq_kv) : s4;
  Desc s6 = g.causal_mask(s5, ss);
  g.pointwise(kPwExp, s6, nullptr, e);

  // dV = Pᵀ·dO (per query head, then summed over each group for GQA)
  Desc pt = g.virt(kBF16, ss, l.scores_t_strides());
  g.reshape(e, pt);
  if (gqa) {
    Desc dv_full = var.full_heads_ws
                       ? g.tensor(kDVFull, kBF16, l.q(), l.q_strides(), false, in.off_kv)
                       : g.virt(kBF16, l.q());
    g.matmul(pt, dout, dv_full, in.seq_kv, nullptr, in.seq_q, false);
    g.reduction(kReduceAdd, dv_full, dv);
  } else {
    g.matmul(pt, dout, dv, in.seq_kv, nullptr, in.seq_q, false);
  }

  // dS = P ∘ (dO·Vᵀ − softmax_sum) · scale
  Desc dp = g.virt(kF32, ss), dp2 = g.virt(kF32, ss), dp3 = g.virt(kF32, ss), ds = g.virt(kF32, ss);
  g.matmul(dout, vt, dp, in.seq_q, in.seq_kv, nullptr, false);
  g.pointwise(kPwSub, dp, ssum, dp2);
  g.pointwise(kPwMul, dp2, e, dp3);
  g.pointwise(kPwMul, dp3, scale, ds);

  // dK = dSᵀ·Q
  Desc dst = g.virt(kBF16, ss, l.scores_t_strides());
  g.reshape(ds, dst);
  if (gqa) {
    Desc dk_full = var.full_heads_ws
                       ? g.tensor(kDKFull, kBF16, l.q(), l.q_strides(), false, in.off_kv)
                       : g.virt(kBF16, l.q());
    g.matmul(dst, q, dk_full, in.seq_kv, nullptr, in.seq_q, false);
    g.reduction(kReduceAdd, dk_full, dk);
  } else {
    g.matmul(dst, q, dk, in.seq_kv, nullptr, in.seq_q, false);
  }

  // dQ = dS·K, accumulated in F32 (workspace, zeroed before each run), then converted
  Desc kr = g.virt(kBF16, l.kv(), l.kv_strides(), in.off_kv);
  g.reshape(kt, kr);
  Desc dq_acc = var.ragged_acc ? g.tensor(kDQAccum, kF32, l.q(), l.q_strides(), false, in.off_q)
                               : g.tensor(kDQAccum, kF32, l.q(), dense(l.q()), false);
  g.matmul(ds, kr, dq_acc, in.seq_q, nullptr, in.seq_kv, false);
  g.pointwise(kPwIdentity, dq_acc, nullptr, dq);
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
    int64_t workspace = 0;
    double build_ms = 0;
    Variant variant{};
    std::string error;  // non-empty: no plan for this shape
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
        p.workspace = p.g->plan(handle);
        p.build_ms =
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count();
        p.variant = kVariants[i];
        // A variant whose workspace (ours at the largest T this plan serves, plus cuDNN's) does
        // not fit is passed over for the next one, e.g. one that keeps the GQA partials T-sized.
        const int64_t T = std::min(B * S, max_tokens);
        const size_t need = size_t(p.workspace) +
                            (bwd ? bwd_workspace(p.variant, ragged, T, B, S, NH, NKV, D).total()
                                 : (ragged ? 0 : aligned(size_t(T * NH) * 4)));
        if (need > ws_bytes) {
          p.error += str_cat(p.error.empty() ? "" : "; ", "variant ", i, ": workspace ", need,
                             " > ", ws_bytes, " bytes");
          p.g.reset();
          continue;
        }
        p.error.clear();
        break;
      } catch (const Failure& f) {
        p.error +=
            str_cat(p.error.empty() ? "" : "; ", bwd ? str_cat("variant ", i, ": ") : "", f.what());
        p.g.reset();
      }
    }
    if (p.g == nullptr && p.error.empty()) p.error = "no backward variant applies";
    const std::string what = str_cat(bwd ? "backward" : "forward", ragged ? " ragged" : " dense",
                                     " B=", B, " S=", S, " NH=", NH, " NKV=", NKV, " D=", D);
    if (!p.error.empty()) {
      std::fprintf(stderr, "[sf] cuDNN attention %s: no plan (%s); using the built-in kernel\n",
                   what.c_str(), p.error.c_str());
    } else if (verbose()) {
      std::fprintf(stderr,
                   "[sf] cuDNN attention %s: plan ready in %.0f ms (variant %d/%d), workspace "
                   "%lld bytes\n",
                   what.c_str(), p.build_ms, int(p.variant.ragged_acc),
                   int(p.variant.full_heads_ws), static_cast<long long>(p.workspace));
    }
    return p;
  }
};

CudnnAttention::CudnnAttention(std::unique_ptr<Impl> impl) : p_(std::move(impl)) {}
CudnnAttention::~CudnnAttention() = default;
size_t CudnnAttention::version() const { return p_->version; }

std::unique_ptr<CudnnAttention> CudnnAttention::create(int64_t max_tokens, size_t workspace_bytes,
                                                       std::string* why) {
  auto fail = [&](std::string w) {
    if (why) *why = std::move(w);
    return std::unique_ptr<CudnnAttention>();
  };
  const Api& a = api();
  if (!a.error.empty()) return fail(a.error);
  auto impl = std::make_unique<Impl>();
  impl->version = a.get_version();
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
  c.ragged = !(opt.dense_when_equal && equal && hc[0] == 0 && hc[1] > 0 && hc[c.nseq] == c.T);
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

void execute(Handle h, Graph& g, const std::vector<std::pair<int64_t, const void*>>& io,
             void* workspace, const float* lowest, cudaStream_t stream, const char* what) {
  std::vector<int64_t> uids;
  std::vector<void*> ptrs;
  for (const auto& [u, p] : io) {
    if (!g.uses(u)) continue;  // e.g. the offsets of a dense graph
    uids.push_back(u);
    ptrs.push_back(const_cast<void*>(p));
  }
  for (int i = 0; i < g.n_lowest(); ++i) {
    uids.push_back(kFirstLowest + i);
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
  if (s == 0) s = a.execute(h, g.plan_desc(), pack);
  if (pack) a.destroy_desc(pack);
  if (s != 0) SF_FAIL("cuDNN attention ", what, ": execution failed: ", status_text(s));
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
  if (stats_bytes + size_t(m.plan->workspace) > P.ws_bytes) {
    refusal_ = str_cat("plan workspace ", m.plan->workspace, " > ", P.ws_bytes, " bytes");
    return false;
  }
  char* ws = static_cast<char*>(P.ws);
  if (c.ragged)
    cudnn_ragged_metadata(cu_seqlens.i32(), int(c.nseq), int(c.B), c.NH * c.D, c.NKV * c.D, c.NH,
                          m.seq, m.off_q, m.off_kv, m.off_st, stream);
  execute(P.handle, *m.plan->g,
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
          ws + stats_bytes, &P.lowest, stream, "forward");
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
  const Impl::Plan& plan = *m.plan;
  const BwdWorkspace w = bwd_workspace(plan.variant, c.ragged, c.T, c.B, c.S, c.NH, c.NKV, c.D);
  if (w.total() + size_t(plan.workspace) > P.ws_bytes) {
    refusal_ =
        str_cat("workspace: dQ accumulator ", w.acc, " + row sums ", w.sums, " + dK/dV partials 2×",
                w.full, " + plan ", plan.workspace, " > ", P.ws_bytes, " bytes");
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
  // the accumulator is summed into: zero the rows the plan touches
  const size_t acc_used = size_t((plan.variant.ragged_acc ? c.T : c.B * c.S) * c.NH * c.D) * 4;
  SF_CUDA_RT(cudaMemsetAsync(ws, 0, acc_used, stream));
  std::vector<std::pair<int64_t, const void*>> io = {
      {kQ, q.data},       {kK, k.data},       {kV, v.data},
      {kO, out.data},     {kDO, dout.data},   {kStats, c.ragged ? lse.data : stats},
      {kDQ, dq.data},     {kDK, dk.data},     {kDV, dv.data},
      {kSeqQ, m.seq},     {kSeqKV, m.seq},    {kOffQ, m.off_q},
      {kOffKV, m.off_kv}, {kOffSt, m.off_st}, {kScale, &scale},
      {kOne, &P.one},     {kDQAccum, ws},     {kSoftmaxSum, ws + w.acc}};
  if (w.full) {
    io.push_back({kDKFull, ws + w.acc + w.sums});
    io.push_back({kDVFull, ws + w.acc + w.sums + w.full});
  }
  execute(P.handle, *plan.g, io, ws + w.total(), &P.lowest, stream, "backward");
  return true;
}

}  // namespace sf::cuda
