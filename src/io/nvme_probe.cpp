#include "io/nvme_probe.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>

#include "core/error.h"

namespace sf {
namespace {

struct FreeAligned {
  void operator()(char* p) const { std::free(p); }
};

// Streams `n` requests through `store`, at most `depth` in flight, request k using buffer slot
// k mod depth once the request that used the slot before it is complete. Returns seconds.
template <typename Submit>
double stream(NvmeStore& store, uint64_t n, int depth, Submit submit) {
  std::deque<NvmeStore::Ticket> in_flight;
  const auto t0 = std::chrono::steady_clock::now();
  for (uint64_t k = 0; k < n; ++k) {
    if (in_flight.size() == size_t(depth)) {
      store.wait(in_flight.front());
      in_flight.pop_front();
    }
    in_flight.push_back(submit(k, k % uint64_t(depth)));
  }
  while (!in_flight.empty()) {
    store.wait(in_flight.front());
    in_flight.pop_front();
  }
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

NvmeBandwidth measure_nvme(const std::filesystem::path& dir, uint64_t bytes, int queue_depth,
                           uint64_t request_bytes) {
  NvmeStoreOptions opt;
  opt.queue_depth = queue_depth;
  opt.max_request_bytes = request_bytes;
  SF_CHECK(bytes > 0, "measure_nvme: probe size 0; measure at least a few hundred MiB");
  NvmeStore store(dir, opt);  // checks the options and the directory
  const NvmeRegion region = store.alloc(bytes);
  const uint64_t n = (region.bytes + request_bytes - 1) / request_bytes;

  const size_t slot_bytes = size_t(request_bytes);
  std::unique_ptr<char, FreeAligned> host(static_cast<char*>(
      std::aligned_alloc(NvmeStore::kAlignment, slot_bytes * size_t(queue_depth))));
  SF_CHECK(host != nullptr, "measure_nvme: cannot allocate ", slot_bytes * size_t(queue_depth),
           " bytes of host buffers; lower the queue depth or the request size");
  // Data that no layer below can compress or deduplicate: a 64-bit LCG per 8 bytes.
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i + 8 <= slot_bytes * size_t(queue_depth); i += 8) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    std::memcpy(host.get() + i, &x, 8);
  }
  auto len = [&](uint64_t k) { return std::min(request_bytes, region.bytes - k * request_bytes); };

  NvmeBandwidth out;
  const double tw = stream(store, n, queue_depth, [&](uint64_t k, uint64_t slot) {
    return store.write(region, k * request_bytes, host.get() + slot * slot_bytes, len(k));
  });
  // The read-back of the last `queue_depth` requests lands in the buffers they were written
  // from; a copy of those bytes checks it.
  const std::string expected(host.get(), slot_bytes * size_t(queue_depth));
  std::memset(host.get(), 0, slot_bytes * size_t(queue_depth));
  const double tr = stream(store, n, queue_depth, [&](uint64_t k, uint64_t slot) {
    return store.read(region, k * request_bytes, host.get() + slot * slot_bytes, len(k));
  });
  const uint64_t last = n >= uint64_t(queue_depth) ? n - uint64_t(queue_depth) : 0;
  for (uint64_t k = last; k < n; ++k) {
    const size_t slot = size_t(k % uint64_t(queue_depth)) * slot_bytes;
    SF_CHECK(std::memcmp(host.get() + slot, expected.data() + slot, size_t(len(k))) == 0,
             "measure_nvme: ", store.file().path().string(), " read back other bytes than were ",
             "written at offset ", k * request_bytes, "; the disk or its filesystem is faulty");
  }
  // Both at once, as a step of the NVMe tier runs them (update reads ahead, write-backs behind):
  // even requests read, odd ones write.
  const double tm = stream(store, n, queue_depth, [&](uint64_t k, uint64_t slot) {
    char* buf = host.get() + slot * slot_bytes;
    return k % 2 ? store.write(region, k * request_bytes, buf, len(k))
                 : store.read(region, k * request_bytes, buf, len(k));
  });
  out.mixed_gbps = double(region.bytes) / tm / 1e9;
  out.write_gbps = double(region.bytes) / tw / 1e9;
  out.read_gbps = double(region.bytes) / tr / 1e9;
  out.bytes = region.bytes;
  out.queue_depth = queue_depth;
  out.request_bytes = request_bytes;
  out.fs_type = store.file().fs_type();
  out.memory_backed = store.file().memory_backed();
  return out;
}

double disk_seconds(double read_bytes, double write_bytes, double read_gbps, double write_gbps,
                    double mixed_gbps) {
  const double apart = read_bytes / (read_gbps * 1e9) + write_bytes / (write_gbps * 1e9);
  return mixed_gbps > 0 ? std::min(apart, (read_bytes + write_bytes) / (mixed_gbps * 1e9)) : apart;
}

std::string describe(const NvmeBandwidth& b, const std::filesystem::path& dir) {
  return str_cat("write ", b.write_gbps, " GB/s, read ", b.read_gbps, " GB/s, both at once ",
                 b.mixed_gbps, " GB/s (", b.bytes >> 20,
                 " MiB through io_uring at queue depth ", b.queue_depth, " in requests of ",
                 b.request_bytes >> 10, " KiB, O_DIRECT, in ", dir.string(), ", ", b.fs_type,
                 b.memory_backed ? "; tmpfs: memory, not a disk" : "", ")");
}

}  // namespace sf
