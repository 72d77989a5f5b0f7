// defines: sf::make_nccl_collective (cuda_backend.h) — the gradient reduction over distinct GPUs
// through NCCL's ncclReduce, with libnccl.so.2 loaded at run time (dlopen, as cuDNN is): nothing
// links NCCL or needs its headers. One process drives every GPU: ncclCommInitAll makes one
// communicator per device, and each engine's thread calls ncclReduce on its own.
#include <cuda_runtime.h>

#include <cstdlib>
#include <mutex>

#include "backend/collective.h"
#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/dl_library.h"
#include "core/error.h"

namespace sf {
namespace {

// ---- the parts of nccl.h used here (values fixed since NCCL 2.0) ----
using NcclResult = int;  // ncclResult_t: ncclSuccess = 0
using NcclComm = void*;
constexpr int kNcclFloat32 = 7;  // ncclDataType_t
constexpr int kNcclSum = 0;      // ncclRedOp_t

struct NcclApi {
  void* lib = nullptr;
  std::string path, error;
  int version = 0;
  NcclResult (*get_version)(int*) = nullptr;
  NcclResult (*init_all)(NcclComm*, int, const int*) = nullptr;
  NcclResult (*reduce)(const void*, void*, size_t, int, int, int, NcclComm, cudaStream_t) = nullptr;
  NcclResult (*destroy)(NcclComm) = nullptr;
  NcclResult (*abort)(NcclComm) = nullptr;
  const char* (*error_string)(NcclResult) = nullptr;
};

// $SF_NCCL_LIB (e.g. the nvidia-nccl wheel's lib/libnccl.so.2), else the loader's libnccl.so.2
// (Debian's libnccl2). Loaded once, never unloaded.
const NcclApi& nccl() {
  static const NcclApi a = [] {
    NcclApi r;
    cuda::DlLibrary dl("SF_NCCL_LIB", "libnccl.so.2");
    dl.get(r.get_version, "ncclGetVersion");
    dl.get(r.init_all, "ncclCommInitAll");
    dl.get(r.reduce, "ncclReduce");
    dl.get(r.destroy, "ncclCommDestroy");
    dl.get(r.abort, "ncclCommAbort");
    dl.get(r.error_string, "ncclGetErrorString");
    r.lib = dl.lib, r.path = dl.path, r.error = dl.error;
    if (r.error.empty()) r.get_version(&r.version);
    return r;
  }();
  return a;
}

class NcclCollective final : public Collective {
 public:
  NcclCollective(const std::vector<Backend*>& backends, const std::vector<int>& devices)
      : devices_(devices), comms_(devices.size(), nullptr) {
    (void)backends;
    const NcclApi& a = nccl();
    // NVLink multicast (NVLS) can take shared GPUs out of service on some hosts; it is not
    // needed for a reduce. The caller's setting wins.
    setenv("NCCL_NVLS_ENABLE", "0", /*overwrite=*/0);
    const NcclResult r = a.init_all(comms_.data(), int(devices.size()), devices.data());
    SF_CHECK(r == 0, "NCCL: ncclCommInitAll over ", devices.size(), " GPUs failed: ",
             a.error_string(r), " (", a.path, "); NCCL_DEBUG=INFO says more");
  }
  ~NcclCollective() override {
    for (NcclComm c : comms_)
      if (c) (aborted_ ? nccl().abort : nccl().destroy)(c);
  }
  int ranks() const override { return int(devices_.size()); }
  std::string describe() const override {
    const int v = nccl().version;
    return str_cat("gradient reduction: NCCL ", v / 10000, ".", v / 100 % 100, ".", v % 100,
                   " ncclReduce over GPUs", devices_string(), " (", nccl().path, ")");
  }
  void reduce_sum(int rank, Tensor x, int root, Stream& s) override {
    SF_CHECK(x.dtype == DType::kF32, "NCCL collective: reduce_sum takes F32");
    SF_CHECK(!aborted_, "gradient reduction stopped: ", why_);
    const NcclResult r =
        nccl().reduce(x.data, x.data, size_t(x.numel()), kNcclFloat32, kNcclSum, root,
                      comms_[size_t(rank)], static_cast<cudaStream_t>(cuda_stream_handle(s)));
    SF_CHECK(r == 0, "NCCL: ncclReduce of ", x.numel(), " floats on GPU ",
             devices_[size_t(rank)], " failed: ", nccl().error_string(r));
  }
  void abort(const std::string& why) override {
    std::lock_guard<std::mutex> lk(mu_);
    if (aborted_) return;
    why_ = why;
    aborted_ = true;  // the communicators are aborted, not destroyed, at the end
  }

 private:
  std::string devices_string() const {
    std::string s;
    for (int d : devices_) s += " " + std::to_string(d);
    return s;
  }
  std::vector<int> devices_;
  std::vector<NcclComm> comms_;
  std::mutex mu_;
  bool aborted_ = false;
  std::string why_;
};

}  // namespace

std::unique_ptr<Collective> make_nccl_collective(const std::vector<Backend*>& backends,
                                                 const std::vector<int>& devices,
                                                 std::string* why) {
  const NcclApi& a = nccl();
  if (!a.error.empty()) {
    if (why) *why = a.error;
    return nullptr;
  }
  return std::make_unique<NcclCollective>(backends, devices);
}

}  // namespace sf
