#include "engine/nvme_checkpoints.h"

#include <chrono>
#include <functional>
#include <tuple>
#include <utility>

#include "backend/cuda/cuda_backend.h"
#include "core/error.h"
#include "engine/nvme_settle.h"

namespace sf {

namespace {

constexpr uint64_t kAlign = NvmeStore::kAlignment;
uint64_t round_up(uint64_t n) { return (n + kAlign - 1) / kAlign * kAlign; }

}  // namespace

struct NvmeCheckpoints::Slot {
  char* buf = nullptr;
  int layer = -1;        // whose checkpoint it holds, is filling, reading or writing
  bool valid = false;    // the buffer holds that layer's checkpoint
  bool filling = false;  // a D2H offload into it has not reported yet
  bool io = false;       // a read or write of it is in flight
  bool writing = false;  // that I/O is the offload's write
  bool waiting = false;  // a thread is in NvmeStore::wait for it
  FileStore::Ticket ticket = 0;
  int pins = 0;  // restores copying from it
};

uint64_t NvmeCheckpoints::staging_bytes(uint64_t bytes, int slots) {
  return uint64_t(slots) * round_up(bytes) + kAlign;
}

uint64_t NvmeCheckpoints::disk_bytes(int layers, uint64_t bytes) {
  return uint64_t(layers) * round_up(bytes);
}

NvmeCheckpoints::NvmeCheckpoints(Backend& be, const std::filesystem::path& dir, int layers,
                                 uint64_t bytes, int slots, bool gpu_direct)
    : slot_bytes_(round_up(bytes)) {
  SF_CHECK(layers >= 1 && slots >= 2 && bytes > 0, "NVMe checkpoints: ", layers, " layers, ",
           slots, " slots of ", bytes, " bytes");
  staging_ = be.alloc(gpu_direct ? MemoryKind::kDevice : MemoryKind::kPinnedHost,
                      staging_bytes(bytes, slots), "NVMe checkpoint staging");
  char* p = reinterpret_cast<char*>(round_up(reinterpret_cast<uintptr_t>(staging_.data())));
  slots_.resize(size_t(slots));
  for (Slot& s : slots_) {
    s.buf = p;
    p += slot_bytes_;
  }
  if (gpu_direct)
    store_ = make_gds_store(dir);
  else
    store_ = std::make_unique<NvmeStore>(dir);
  for (int l = 0; l < layers; ++l) regions_.push_back(store_->alloc(slot_bytes_));
}

NvmeCheckpoints::~NvmeCheckpoints() {
  std::unique_lock lk(mu_);
  for (Slot& s : slots_) {
    try {
      settle(lk, s);
    } catch (...) {  // reported where it happened
    }
  }
}

void NvmeCheckpoints::throw_if_broken() const {
  if (!error_.empty()) throw Error(error_);
}

void NvmeCheckpoints::settle(std::unique_lock<std::mutex>& lk, Slot& s) {
  // A read has filled the slot, or a write has left it as it was.
  if (settle_nvme_slot(*store_, lk, cv_, s, error_)) s.valid = true;
}

void NvmeCheckpoints::make_free(std::unique_lock<std::mutex>& lk, Slot& s) {
  for (;;) {
    throw_if_broken();
    if (s.filling || s.pins > 0) {
      cv_.wait(lk);
      continue;
    }
    settle(lk, s);
    if (!s.filling && s.pins == 0 && !s.io) break;
  }
  s.layer = -1;
  s.valid = false;
}

void NvmeCheckpoints::issue_read(Slot& s, int layer, uint64_t bytes) {
  s.layer = layer;
  s.valid = false;
  s.io = true;
  s.writing = false;
  s.ticket = store_->read(regions_[size_t(layer)], 0, s.buf, round_up(bytes));
}

void* NvmeCheckpoints::slot_for_offload(int layer) {
  std::unique_lock lk(mu_);
  Slot& s = slots_[size_t(layer) % slots_.size()];
  make_free(lk, s);
  s.layer = layer;
  s.filling = true;
  return s.buf;
}

void NvmeCheckpoints::offloaded(int layer, uint64_t bytes) {
  {
    std::lock_guard lk(mu_);
    Slot& s = slots_[size_t(layer) % slots_.size()];
    s.filling = false;
    s.valid = true;
    try {
      s.ticket = store_->write(regions_[size_t(layer)], 0, s.buf, round_up(bytes));
      s.io = true;
      s.writing = true;
    } catch (const Error& e) {
      if (error_.empty()) error_ = e.what();
    }
  }
  cv_.notify_all();
}

void NvmeCheckpoints::prefetch(int layer, uint64_t bytes) {
  if (layer < 0) return;
  std::unique_lock lk(mu_);
  if (!error_.empty()) return;
  Slot& s = slots_[size_t(layer) % slots_.size()];
  if (s.layer == layer) return;  // already there, or on its way
  if (s.filling || s.pins > 0 || s.waiting || (s.io && !store_->done(s.ticket))) return;
  try {
    settle(lk, s);  // done: returns at once
    issue_read(s, layer, bytes);
  } catch (const Error&) {  // kept in error_ where it is the store's; thrown by restore_source
  }
}

const void* NvmeCheckpoints::restore_source(int layer, uint64_t bytes) {
  std::unique_lock lk(mu_);
  throw_if_broken();
  Slot& s = slots_[size_t(layer) % slots_.size()];
  if (s.layer != layer) {  // neither still here from the forward nor read ahead
    make_free(lk, s);
    issue_read(s, layer, bytes);
  }
  cv_.wait(lk, [&] { return !s.filling || !error_.empty(); });  // the forward's offload
  throw_if_broken();
  if (s.io && !s.writing) settle(lk, s);  // a write in flight leaves the buffer as it is
  SF_CHECK(s.valid && !s.filling, "internal: checkpoint of layer ", layer, " not in its slot");
  s.pins++;
  return s.buf;
}

void NvmeCheckpoints::restored(int layer) {
  {
    std::lock_guard lk(mu_);
    Slot& s = slots_[size_t(layer) % slots_.size()];
    if (s.pins > 0) --s.pins;
  }
  cv_.notify_all();
}

bool CheckpointPathRates::gds_faster() const {
  if (gds_write_gbps <= 0 || gds_read_gbps <= 0) return false;
  return 1 / gds_write_gbps + 1 / gds_read_gbps < 1 / uring_write_gbps + 1 / uring_read_gbps;
}

std::string CheckpointPathRates::describe() const {
  std::string s = str_cat("checkpoint paths, ", bytes >> 20, " MiB device to disk and back: ",
                          "pinned slot + io_uring ", uring_write_gbps, " / ", uring_read_gbps,
                          " GB/s (write / read, with the copies)");
  if (gds_write_gbps > 0)
    s += str_cat(", GPUDirect Storage ", gds_write_gbps, " / ", gds_read_gbps, " GB/s (",
                 gds_store, ")");
  else
    s += str_cat(", GPUDirect Storage not run: ", gds_error);
  return s;
}

CheckpointPathRates NvmeCheckpoints::measure_paths(Backend& be, const std::filesystem::path& dir,
                                                   uint64_t bytes, int rounds) {
  CheckpointPathRates r;
  r.bytes = bytes = round_up(bytes);
  Buffer dev = be.alloc(MemoryKind::kDevice, bytes, "checkpoint path probe");
  Buffer pinned = be.alloc(MemoryKind::kPinnedHost, bytes + kAlign, "checkpoint path probe");
  void* host = reinterpret_cast<void*>(round_up(reinterpret_cast<uintptr_t>(pinned.data())));
  std::unique_ptr<Stream> s = be.create_stream("checkpoint probe");
  be.fill_zero(Tensor(dev.data(), DType::kF32, {int64_t(bytes / 4)}), *s);
  be.synchronize(*s);
  // `rounds` trips of `buf` to the store and back: seconds writing and reading, each with the
  // copies `out` and `in` (the pinned path's D2H before its write, H2D after its read).
  auto trips = [&](FileStore& store, void* buf, const std::function<void()>& out,
                   const std::function<void()>& in) {
    using clock = std::chrono::steady_clock;
    const NvmeRegion region = store.alloc(bytes);
    double tw = 0, tr = 0;
    for (int k = 0; k < rounds; ++k) {
      const auto t0 = clock::now();
      out();
      store.wait(store.write(region, 0, buf, bytes));
      const auto t1 = clock::now();
      store.wait(store.read(region, 0, buf, bytes));
      in();
      const auto t2 = clock::now();
      tw += std::chrono::duration<double>(t1 - t0).count();
      tr += std::chrono::duration<double>(t2 - t1).count();
    }
    const double gb = double(bytes) * rounds * 1e-9;
    return std::pair<double, double>(gb / tw, gb / tr);
  };
  {
    NvmeStore store(dir);
    std::tie(r.uring_write_gbps, r.uring_read_gbps) = trips(
        store, host,
        [&] {
          be.copy(host, dev.data(), bytes, *s);
          be.synchronize(*s);
        },
        [&] {
          be.copy(dev.data(), host, bytes, *s);
          be.synchronize(*s);
        });
  }
  if (!gds_available(&r.gds_error)) return r;
  try {
    std::unique_ptr<FileStore> store = make_gds_store(dir);
    r.gds_store = store->describe();
    std::tie(r.gds_write_gbps, r.gds_read_gbps) = trips(*store, dev.data(), [] {}, [] {});
  } catch (const Error& e) {
    r.gds_error = e.what();
  }
  return r;
}

}  // namespace sf
