// defines: sf::make_gds_store, sf::gds_available (cuda_backend.h) — a FileStore whose buffers are
// device memory, moved by cuFile (GPUDirect Storage) with libcufile.so.0 loaded at run time
// (dlopen, as cuDNN and NCCL are): nothing links it or needs its headers. cuFile's calls block, so
// a few threads (each on the store's device) take the requests; tickets and errors as NvmeStore's.
// Without the nvidia-fs kernel module cuFile runs in its compatibility mode: POSIX reads and
// writes of the O_DIRECT file through cuFile's own pinned bounce buffers.
#include <cuda_runtime.h>
#include <sys/types.h>

#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <map>
#include <mutex>
#include <thread>

#include "backend/cuda/cuda_backend.h"
#include "backend/cuda/dl_library.h"
#include "core/error.h"
#include "io/extent_allocator.h"
#include "io/scratch_file.h"

namespace sf {
namespace {

// ---- the parts of cufile.h used here (stable since GDS 1.0) ----
using CuFileHandle = void*;
struct CuFileError {
  int err;     // CUfileOpError: 0 = CU_FILE_SUCCESS
  int cu_err;  // CUresult
};
struct CuFileDescr {
  int type;  // CU_FILE_HANDLE_TYPE_OPAQUE_FD = 1
  union {
    int fd;
    void* handle;
  } handle;
  const void* fs_ops;
};
constexpr int kHandleTypeFd = 1;

struct CuFileApi {
  void* lib = nullptr;
  std::string path, error;
  CuFileError (*driver_open)() = nullptr;
  CuFileError (*handle_register)(CuFileHandle*, CuFileDescr*) = nullptr;
  void (*handle_deregister)(CuFileHandle) = nullptr;
  ssize_t (*read)(CuFileHandle, void*, size_t, off_t, off_t) = nullptr;
  ssize_t (*write)(CuFileHandle, const void*, size_t, off_t, off_t) = nullptr;
};

// $SF_CUFILE_LIB (e.g. the nvidia-cufile wheel's libcufile.so.0), else the loader's; the driver
// opened once per process (cuFileDriverOpen), never closed (cuFile keeps threads alive).
const CuFileApi& cufile() {
  static const CuFileApi a = [] {
    CuFileApi r;
    cuda::DlLibrary dl("SF_CUFILE_LIB", "libcufile.so.0");
    dl.get(r.driver_open, "cuFileDriverOpen");
    dl.get(r.handle_register, "cuFileHandleRegister");
    dl.get(r.handle_deregister, "cuFileHandleDeregister");
    dl.get(r.read, "cuFileRead");
    dl.get(r.write, "cuFileWrite");
    r.lib = dl.lib, r.path = dl.path, r.error = dl.error;
    if (!r.error.empty()) return r;
    const CuFileError e = r.driver_open();
    if (e.err != 0)
      r.error = str_cat(r.path, ": cuFileDriverOpen failed (cuFile error ", e.err, ", CUDA ",
                        e.cu_err, "); without nvidia-fs cuFile needs allow_compat_mode in its ",
                        "cufile.json (CUFILE_ENV_PATH_JSON)");
    return r;
  }();
  return a;
}

bool nvidia_fs_loaded() { return std::filesystem::exists("/proc/driver/nvidia-fs"); }

class GdsStore final : public FileStore {
 public:
  GdsStore(const std::filesystem::path& dir, int device, int threads, uint64_t request_bytes)
      : dir_(dir), device_(device), request_(request_bytes), file_(dir, /*keep_name=*/true) {
    CuFileDescr d{};
    d.type = kHandleTypeFd;
    d.handle.fd = file_.fd();
    // Registered while the file still has its name: in compatibility mode cuFile opens it again
    // by that name (its log says "open call failed for file … (deleted)" otherwise).
    const CuFileError e = cufile().handle_register(&handle_, &d);
    try {
      file_.unlink_name();
    } catch (...) {
      if (e.err == 0) cufile().handle_deregister(handle_);
      throw;
    }
    SF_CHECK(e.err == 0, "--nvme-dir ", dir.string(), ": cuFileHandleRegister of ",
             file_.path().string(), " failed (cuFile error ", e.err, ", CUDA ", e.cu_err,
             "); cuFile cannot use this file system (", file_.fs_type(), ") here, not even in ",
             "its compatibility mode: its cufile.log says why (in a container often the disk's ",
             "missing udev properties); use nvme_gds: off (io_uring)");
    for (int k = 0; k < threads; ++k) workers_.emplace_back([this] { work(); });
  }
  ~GdsStore() override {
    {
      std::unique_lock lk(mu_);
      cv_done_.wait(lk, [&] { return pending_.empty() && in_flight_ == 0; });
      stop_ = true;
    }
    cv_work_.notify_all();
    for (std::thread& t : workers_) t.join();
    cufile().handle_deregister(handle_);
  }

  NvmeRegion alloc(uint64_t bytes) override {
    std::lock_guard lk(mu_);
    const Extent e = extents_.peek(bytes);
    file_.grow_to(e.offset + e.bytes);
    return extents_.alloc(bytes);
  }
  Ticket write(const NvmeRegion& r, uint64_t offset, const void* src, uint64_t bytes) override {
    return submit(true, r, offset, static_cast<char*>(const_cast<void*>(src)), bytes);
  }
  Ticket read(const NvmeRegion& r, uint64_t offset, void* dst, uint64_t bytes) override {
    return submit(false, r, offset, static_cast<char*>(dst), bytes);
  }
  void wait(Ticket t) override {
    std::unique_lock lk(mu_);
    auto it = tickets_.find(t);
    SF_CHECK(it != tickets_.end(), "GPUDirect store: ticket ", t,
             " is unknown (each ticket is waited once)");
    cv_done_.wait(lk, [&] { return it->second.remaining == 0; });
    const std::string error = it->second.error;
    tickets_.erase(it);
    if (!error.empty()) throw Error(error);
  }
  bool done(Ticket t) const override {
    std::lock_guard lk(mu_);
    auto it = tickets_.find(t);
    SF_CHECK(it != tickets_.end(), "GPUDirect store: ticket ", t, " is unknown");
    return it->second.remaining == 0;
  }
  Stats stats() const override {
    std::lock_guard lk(mu_);
    return stats_;
  }
  std::string describe() const override {
    return str_cat("GPUDirect Storage store in ", dir_.string(), " (", file_.fs_type(),
                   "): cuFile (", cufile().path, ", ",
                   nvidia_fs_loaded() ? "nvidia-fs loaded: disk to device memory"
                                      : "compatibility mode: no nvidia-fs, cuFile bounces through "
                                        "its own host buffers",
                   ") on GPU ", device_, ", ", workers_.size(), " threads, requests of ",
                   request_ >> 20, " MiB");
  }

 private:
  struct Request {
    Ticket ticket;
    bool write;
    char* buf;  // device memory
    uint64_t offset, len;
  };
  struct TicketState {
    int remaining = 0;
    std::string error;
  };

  Ticket submit(bool write, const NvmeRegion& r, uint64_t offset, char* buf, uint64_t bytes) {
    const char* op = write ? "GPUDirect write" : "GPUDirect read";
    SF_CHECK(bytes > 0 && bytes % kAlignment == 0 && offset % kAlignment == 0, op, ": ", bytes,
             " bytes at offset ", offset, ": both must be multiples of ", kAlignment);
    SF_CHECK(offset <= r.bytes && bytes <= r.bytes - offset, op, ": ", bytes, " bytes at offset ",
             offset, " do not fit the region of ", r.bytes, " bytes at ", r.offset);
    std::lock_guard lk(mu_);
    const Ticket t = next_++;
    TicketState& st = tickets_[t];
    for (uint64_t at = 0; at < bytes; at += request_) {
      pending_.push_back(
          Request{t, write, buf + at, r.offset + offset + at, std::min(request_, bytes - at)});
      ++st.remaining;
      ++stats_.requests;
    }
    cv_work_.notify_all();
    return t;
  }

  void work() {
    const cudaError_t set = cudaSetDevice(device_);
    for (;;) {
      Request q;
      {
        std::unique_lock lk(mu_);
        cv_work_.wait(lk, [&] { return stop_ || !pending_.empty(); });
        if (pending_.empty()) return;
        q = pending_.front();
        pending_.pop_front();
        ++in_flight_;
        stats_.max_in_flight = std::max(stats_.max_in_flight, in_flight_);
      }
      std::string error;
      if (set != cudaSuccess) {
        error = str_cat("GPUDirect store: cudaSetDevice(", device_, "): ", cudaGetErrorString(set));
      } else {
        uint64_t done = 0;
        while (done < q.len && error.empty()) {  // cuFile may move fewer bytes than asked
          const ssize_t n =
              q.write
                  ? cufile().write(handle_, q.buf + done, q.len - done, off_t(q.offset + done), 0)
                  : cufile().read(handle_, q.buf + done, q.len - done, off_t(q.offset + done), 0);
          if (n > 0) {
            done += uint64_t(n);
            continue;
          }
          const int err = n < 0 ? int(-n) : 0;
          error = str_cat(file_.path().string(), " (the unlinked scratch file of --nvme-dir ",
                          dir_.string(), "): cuFile ", q.write ? "write" : "read", " of ",
                          q.len - done, " bytes at offset ", q.offset + done, " failed (",
                          n == 0       ? std::string("no bytes moved")
                          : err < 5000 ? std::string(std::strerror(err))
                                       : str_cat("cuFile error ", err),
                          "); the run stops here: free the disk or use nvme_gds: off, and "
                          "resume from the last checkpoint");
        }
      }
      {
        std::lock_guard lk(mu_);
        --in_flight_;
        TicketState& st = tickets_[q.ticket];
        if (!error.empty() && st.error.empty()) st.error = error;
        --st.remaining;
        if (error.empty()) (q.write ? stats_.bytes_written : stats_.bytes_read) += q.len;
      }
      cv_done_.notify_all();
    }
  }

  std::filesystem::path dir_;
  int device_;
  uint64_t request_;
  ScratchFile file_;
  CuFileHandle handle_ = nullptr;
  ExtentAllocator extents_{kAlignment};
  mutable std::mutex mu_;
  std::condition_variable cv_work_, cv_done_;
  std::deque<Request> pending_;
  std::map<Ticket, TicketState> tickets_;
  Ticket next_ = 1;
  int in_flight_ = 0;
  bool stop_ = false;
  Stats stats_;
  std::vector<std::thread> workers_;
};

}  // namespace

bool gds_available(std::string* why) {
  const CuFileApi& a = cufile();
  if (a.error.empty()) return true;
  if (why) *why = a.error;
  return false;
}

std::unique_ptr<FileStore> make_gds_store(const std::filesystem::path& dir) {
  std::string why;
  SF_CHECK(gds_available(&why), "GPUDirect Storage is not available: ", why,
           "; use nvme_gds: off (io_uring through host memory)");
  int device = 0;
  SF_CHECK(cudaGetDevice(&device) == cudaSuccess, "GPUDirect store: no current CUDA device");
  return std::make_unique<GdsStore>(dir, device, /*threads=*/4, /*request_bytes=*/16ull << 20);
}

}  // namespace sf
