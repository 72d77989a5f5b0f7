// defines: sf::cuda::cudnn::{api, status_text, check, verbose, Graph} (cudnn_graph.h) — loading
// libcudnn.so.9 and building operation graphs and plans through the backend descriptor API.
#include "backend/cuda/cudnn_graph.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/dl_library.h"

namespace sf::cuda::cudnn {
namespace {

// Opens $SF_CUDNN_LIB, else libcudnn.so.9, and resolves the entry points; r.error says why not.
Api load() {
  Api r;
  DlLibrary dl("SF_CUDNN_LIB", "libcudnn.so.9");
  dl.get(r.create, "cudnnCreate");
  dl.get(r.destroy, "cudnnDestroy");
  dl.get(r.set_stream, "cudnnSetStream");
  dl.get(r.get_version, "cudnnGetVersion");
  dl.get(r.error_string, "cudnnGetErrorString");
  dl.get(r.last_error, "cudnnGetLastErrorString", false);
  dl.get(r.create_desc, "cudnnBackendCreateDescriptor");
  dl.get(r.destroy_desc, "cudnnBackendDestroyDescriptor");
  dl.get(r.finalize, "cudnnBackendFinalize");
  dl.get(r.set_attr, "cudnnBackendSetAttribute");
  dl.get(r.get_attr, "cudnnBackendGetAttribute");
  dl.get(r.execute, "cudnnBackendExecute");
  r.lib = dl.lib, r.path = dl.path, r.error = dl.error;
  if (r.error.empty()) r.version = r.get_version();
  return r;
}

}  // namespace

const Api& api() {
  // $SF_CUDNN_LIB (e.g. a newer one from a pip wheel), else the loader's libcudnn.so.9. Not "the
  // newest of several": a version is known only once a library is loaded, and two libcudnn.so.9
  // in one process share sub-libraries (libcudnn_graph.so.9, ...) by soname. Tried on the H200
  // (system 9.14 loaded, then torch's 9.19): the 9.19 handle was not usable and 9.14 ran.
  static const Api a = load();
  return a;
}

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

Graph::~Graph() {
  for (auto it = all_.rbegin(); it != all_.rend(); ++it) api().destroy_desc(*it);
}

Desc Graph::make(int type) {
  Desc d = nullptr;
  check(api().create_desc(type, &d), "cudnnBackendCreateDescriptor");
  all_.push_back(d);
  return d;
}

void Graph::set(Desc d, int attr, int type, int64_t n, const void* v, const char* what) {
  check(api().set_attr(d, attr, type, n, v), what);
}

void Graph::finalize(Desc d, const char* what) { check(api().finalize(d), what); }

bool Graph::uses(int64_t uid) const {
  return std::find(io_uids_.begin(), io_uids_.end(), uid) != io_uids_.end();
}

Desc Graph::tensor(int64_t uid, int dtype, const Dims& dims, const Dims& strides, bool is_virtual,
                   Desc ragged, bool by_value) {
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

void Graph::pointwise(int mode, Desc x, Desc b, Desc y, Desc t, int prec, int64_t axis) {
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

void Graph::reduction(int mode, Desc x, Desc y) {
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

void Graph::matmul(Desc a, Desc b, Desc c, Desc m, Desc n, Desc k, bool zero_padding) {
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

void Graph::reshape(Desc x, Desc y) {
  Desc op = make(kDescOpReshape);
  set_desc(op, kOpReshapeX, x, "reshape x");
  set_desc(op, kOpReshapeY, y, "reshape y");
  finalize(op, "reshape op");
  ops_.push_back(op);
}

std::vector<Graph::Knob> Graph::knob_choices(Desc cfg) {
  // cuDNN fills at most one choice per knob type: room for all of them, as cudnn-frontend asks
  std::vector<Desc> choices;
  for (int i = 0; i < kKnobTypeCounts; ++i) choices.push_back(make(kDescKnobChoice));
  std::vector<Knob> out;
  int64_t got = 0;
  if (api().get_attr(cfg, kCfgKnobChoices, kTypeDesc, kKnobTypeCounts, &got, choices.data()) != 0)
    return out;
  for (int64_t i = 0; i < std::min<int64_t>(got, kKnobTypeCounts); ++i) {
    Knob k{};
    int64_t c = 0;
    if (api().get_attr(choices[size_t(i)], kKnobChoiceType, kTypeKnobType, 1, &c, &k.type) == 0 &&
        api().get_attr(choices[size_t(i)], kKnobChoiceValue, kTypeInt64, 1, &c, &k.value) == 0)
      out.push_back(k);
  }
  return out;
}

std::string Graph::label(Desc cfg) {
  Desc engine = make(kDescEngine);
  int64_t c = 0, index = -1;
  if (api().get_attr(cfg, kCfgEngine, kTypeDesc, 1, &c, &engine) == 0)
    api().get_attr(engine, kEngineGlobalIndex, kTypeInt64, 1, &c, &index);
  std::string s = "engine " + std::to_string(index);
  for (const Knob& k : knob_choices(cfg))
    if (k.type == kKnobKernelCfg) s += " KERNEL_CFG " + std::to_string(k.value);
  return s;
}

const std::vector<Graph::Plan>& Graph::plan(Handle h, int max_plans) {
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
    cfgs.resize(size_t(got));
    for (size_t i = 0; i < cfgs.size() && int(plans_.size()) < max_plans; ++i) {
      Desc p = make(kDescPlan);
      api().set_attr(p, kPlanHandle, kTypeHandle, 1, &h);
      set_desc(p, kPlanEngineCfg, cfgs[i], "plan engine config");
      if (const Status s = api().finalize(p); s != 0) {
        if (verbose())
          std::fprintf(stderr, "[sf] cuDNN plan %s: %s\n", label(cfgs[i]).c_str(),
                       status_text(s).c_str());
        if (tried.size() < 400) tried += " [cfg " + std::to_string(i) + ": " + status_text(s) + "]";
        continue;
      }
      int64_t ws = 0, cnt = 0;
      check(api().get_attr(p, kPlanWorkspace, kTypeInt64, 1, &cnt, &ws), "plan workspace");
      plans_.push_back({p, ws, label(cfgs[i])});
    }
    if (!plans_.empty()) return plans_;
  }
  throw Failure("no engine configuration finalizes" + tried);
}

}  // namespace sf::cuda::cudnn
