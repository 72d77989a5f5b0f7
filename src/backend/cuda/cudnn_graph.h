// defines: sf::cuda::cudnn::{Api, api, Failure, status_text, check, verbose, Dims, dense, Graph}
// — the part of cuDNN's backend (graph) API the attention path uses, reached through dlopen so
// that nothing links cuDNN or needs its headers: the enum values of cudnn_graph_v9.h it needs
// (fixed since cuDNN 9.0.0), the loaded library's entry points, and a small builder that owns the
// descriptors of one operation graph and its execution plans.
#pragma once

#include <cuda_runtime.h>

#include <array>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <vector>

namespace sf::cuda::cudnn {

// ---- the parts of cudnn_graph_v9.h used here (values fixed since cuDNN 9.0.0) ----
// clang-format off
using Status = int;
using Handle = void*;
using Desc = void*;
enum : int {  // cudnnBackendDescriptorType_t
  kDescPointwise = 0, kDescEngine = 2, kDescEngineCfg = 3, kDescEngineHeur = 4, kDescPlan = 5,
  kDescKnobChoice = 7, kDescOpPointwise = 13, kDescOpGraph = 15, kDescVariantPack = 16,
  kDescTensor = 17, kDescMatmul = 18, kDescOpMatmul = 19, kDescReduction = 21,
  kDescOpReduction = 22, kDescOpReshape = 31,
};
enum : int {  // cudnnBackendAttributeType_t
  kTypeHandle = 0, kTypeDataType = 1, kTypeBool = 2, kTypeInt64 = 3, kTypeFloat = 4,
  kTypeDouble = 5, kTypeVoidPtr = 6, kTypeHeurMode = 8, kTypeKnobType = 9, kTypePointwiseMode = 14,
  kTypeDesc = 15, kTypeReductionOp = 18,
};
enum : int { kF32 = 0, kI32 = 4, kBF16 = 9, kBool = 11 };  // cudnnDataType_t
enum : int {  // cudnnPointwiseMode_t
  kPwAdd = 0, kPwMul = 1, kPwDiv = 6, kPwSub = 9, kPwExp = 13, kPwLog = 15, kPwIdentity = 21,
  kPwCmpGe = 303, kPwCmpLt = 304, kPwAnd = 400, kPwGenIndex = 501, kPwSelect = 601,
};
enum : int { kReduceAdd = 0, kReduceMax = 3 };  // cudnnReduceTensorOp_t
enum : int { kHeurFallback = 2, kHeurA = 3 };   // cudnnBackendHeurMode_t
enum : int { kKnobKernelCfg = 24, kKnobTypeCounts = 44 };  // cudnnBackendKnobType_t
enum : int {  // cudnnBackendAttributeName_t
  kPwMode = 0, kPwMathPrec = 1, kPwAxis = 9, kHeurMode = 200, kHeurGraph = 201,
  kHeurResults = 202, kCfgEngine = 300, kCfgKnobChoices = 302, kPlanHandle = 400,
  kPlanEngineCfg = 401, kPlanWorkspace = 402, kKnobChoiceType = 600, kKnobChoiceValue = 601,
  kOpPwDesc = 750, kOpPwX = 751, kOpPwB = 752, kOpPwY = 753, kOpPwT = 758, kGraphHandle = 800,
  kGraphOps = 801, kTensorAlign = 900, kTensorType = 901, kTensorDims = 902, kTensorStrides = 903,
  kTensorUid = 906, kTensorVirtual = 907, kTensorByValue = 908, kTensorRagged = 913,
  kPackUids = 1000, kPackPtrs = 1001, kPackWorkspace = 1003, kEngineGlobalIndex = 1301,
  kMatmulCompType = 1500, kMatmulPadding = 1503, kOpMmA = 1520, kOpMmB = 1521, kOpMmC = 1522,
  kOpMmDesc = 1523, kOpMmM = 1525, kOpMmN = 1526, kOpMmK = 1527, kRedOp = 1600,
  kRedCompType = 1601, kOpRedX = 1610, kOpRedY = 1611, kOpRedDesc = 1612,
  kOpReshapeX = 2200, kOpReshapeY = 2201,
};
// clang-format on

// The loaded libcudnn.so.9: `error` is non-empty when none could be used.
struct Api {
  void* lib = nullptr;
  std::string path, error;
  size_t version = 0;  // cudnnGetVersion(), e.g. 91400
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

// $SF_CUDNN_LIB when set, else libcudnn.so.9 from the loader's path. Loaded once per process and
// never unloaded (cuDNN keeps kernels and threads alive).
const Api& api();

// A cuDNN call that failed while building a graph or plan: the shape is refused, not fatal.
struct Failure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string status_text(Status s);       // cuDNN's message for s, with its last error string
void check(Status s, const char* what);  // throws Failure naming `what`
bool verbose();                          // SF_CUDNN_VERBOSE set (and not 0)

using Dims = std::array<int64_t, 4>;
inline Dims dense(const Dims& d) { return {d[1] * d[2] * d[3], d[2] * d[3], d[3], 1}; }

// One operation graph and everything made for it; descriptors live as long as the Graph.
// Non-virtual tensors carry the caller's uids (below kFirstLowest); the -FLT_MAX scalars of
// masks get kFirstLowest + i, virtual tensors kFirstVirtual + i.
class Graph {
 public:
  static constexpr int64_t kFirstLowest = 100, kFirstVirtual = 1000;

  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;
  ~Graph();

  Desc make(int type);
  void set(Desc d, int attr, int type, int64_t n, const void* v, const char* what);
  void set_desc(Desc d, int attr, Desc v, const char* what) {
    set(d, attr, kTypeDesc, 1, &v, what);
  }
  void finalize(Desc d, const char* what);

  Desc tensor(int64_t uid, int dtype, const Dims& dims, const Dims& strides, bool is_virtual,
              Desc ragged = nullptr, bool by_value = false);
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

  // y = mode(x[, b][, t]); compute in `prec`; GEN_INDEX takes `axis`.
  void pointwise(int mode, Desc x, Desc b, Desc y, Desc t = nullptr, int prec = kF32,
                 int64_t axis = -1);
  void reduction(int mode, Desc x, Desc y);
  // c = a·b with the GEMM M/N/K extents overridden per batch by the sample-length tensors.
  void matmul(Desc a, Desc b, Desc c, Desc m, Desc n, Desc k, bool zero_padding);
  void reshape(Desc x, Desc y);

  // Finalizes the operation graph and every engine configuration the heuristics offer (mode A,
  // else the fallback list) that finalizes into a plan, in the heuristics' order; at most
  // max_plans. Throws Failure when none does.
  struct Plan {
    Desc desc;
    int64_t workspace;
    std::string label;  // "engine 6 KERNEL_CFG 26", for messages
  };
  const std::vector<Plan>& plan(Handle h, int max_plans = 8);
  const std::vector<Plan>& plans() const { return plans_; }

  // The non-virtual tensors: the variant pack binds exactly these.
  bool uses(int64_t uid) const;
  size_t n_io() const { return io_uids_.size(); }

 private:
  struct Knob {
    int type;
    int64_t value;
  };
  std::vector<Knob> knob_choices(Desc cfg);
  std::string label(Desc cfg);

  std::vector<Desc> all_, ops_;
  std::vector<int64_t> by_value_, io_uids_;
  int64_t next_uid_ = kFirstVirtual;
  int n_lowest_ = 0;
  std::vector<Plan> plans_;
};

}  // namespace sf::cuda::cudnn
