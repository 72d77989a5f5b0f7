// bench_upload [N_MILLION] [CONVERT_THREADS] [ADAM_THREADS]: the two ways a master weight held in
// fp32 on the host reaches the GPU in bf16 (issue 12, item 2), each alone and beside the CPU
// AdamW, on N million parameters (default 2048) in pinned memory:
//   fp32:  the engine's way. DMA 4 B/param in 64 MiB tiles into a device fp32 tile, cast to bf16
//          on the device, on the same stream. Host memory: the DMA's 4 B read.
//   host:  CONVERT_THREADS threads (default 4) convert each 16 Mi-element tile to bf16 into a ring
//          of 4 pinned tiles, each DMA'd (2 B/param) while the next is converted. Host memory:
//          4 B read + 2 B written by the CPU, then the DMA's 2 B read.
// "Beside the AdamW" starts, with the upload, one AdamW step over N/4 parameters (bf16
// gradients, in 16 Mi pieces, on ADAM_THREADS threads, default the hardware's) — an 8k-token
// forward of 8B as the plan runs it: every host unit's master uploaded while the held quarter is
// updated — and reports when each finished. Both arms' device bytes are checked against
// f32_to_bf16 on the host. Median of 5 after one untimed run; needs a CUDA GPU.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "backend/cuda/cuda_backend.h"
#include "core/error.h"
#include "core/thread_pool.h"
#include "engine/pinned_alloc.h"
#include "optim/adamw.h"
#include "optim/convert.h"

namespace sf {
namespace {

using Clock = std::chrono::steady_clock;
double since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

constexpr int64_t kTile = int64_t(16) << 20;  // elements: the engine's 64 MiB fp32 upload tile
constexpr int kRing = 4;                      // the host arm's pinned bf16 tiles

struct Rig {
  Backend& be;
  int64_t n;
  const float* master;                       // pinned, n
  void* dev_bf16;                            // n bf16
  void* dev_f32;                             // one fp32 tile
  uint16_t* ring;                            // pinned, kRing bf16 tiles
  std::vector<std::unique_ptr<Event>> done;  // a ring tile's DMA has read it
  Stream& h2d;
  ThreadPool& convert_pool;
};

// The engine's upload: fp32 tile by tile over PCIe, cast into place on the same stream.
void upload_fp32(Rig& r) {
  char* dst = static_cast<char*>(r.dev_bf16);
  for (int64_t off = 0; off < r.n; off += kTile) {
    const int64_t k = std::min(kTile, r.n - off);
    r.be.copy(r.dev_f32, r.master + off, size_t(k) * 4, r.h2d);
    r.be.convert(Tensor(dst + off * 2, DType::kBF16, {k}), Tensor(r.dev_f32, DType::kF32, {k}),
                 r.h2d);
  }
  r.be.synchronize(r.h2d);
}

// Converted on the host into the ring, bf16 over PCIe: tile i+1 is converted while tile i moves.
void upload_host(Rig& r) {
  char* dst = static_cast<char*>(r.dev_bf16);
  int64_t tile = 0;
  for (int64_t off = 0; off < r.n; off += kTile, ++tile) {
    const int64_t k = std::min(kTile, r.n - off);
    const int slot = int(tile % kRing);
    if (tile >= kRing) r.be.synchronize(*r.done[size_t(slot)]);
    uint16_t* out = r.ring + size_t(slot) * kTile;
    r.convert_pool.parallel_for(k, int64_t(1) << 16, [&](int64_t lo, int64_t hi) {
      f32_to_bf16_n(r.master + off + lo, out + lo, hi - lo);
    });
    r.be.copy(dst + off * 2, out, size_t(k) * 2, r.h2d);
    r.be.record(*r.done[size_t(slot)], r.h2d);
  }
  r.be.synchronize(r.h2d);
}

// Every device element against the host's rounding.
void check_device(Rig& r, const char* arm) {
  std::vector<uint16_t> got(size_t(r.n));
  r.be.copy(got.data(), r.dev_bf16, got.size() * 2, r.h2d);
  r.be.synchronize(r.h2d);
  for (int64_t i = 0; i < r.n; ++i)
    SF_CHECK(got[size_t(i)] == f32_to_bf16(r.master[i]), "bench_upload: the ", arm,
             " arm's element ", i, " is ", got[size_t(i)], ", the host rounds it to ",
             f32_to_bf16(r.master[i]));
  r.be.fill_zero(Tensor(r.dev_bf16, DType::kBF16, {r.n}), r.h2d);  // the next arm writes it anew
  r.be.synchronize(r.h2d);
}

struct Adam {
  ThreadPool& pool;
  float *p, *m, *v;
  const uint16_t* g;
  int64_t n;
  int64_t step = 0;
  void run() {
    const AdamWParams hp{1e-5f, 0.9f, 0.999f, 1e-8f, 0.0f};
    ++step;
    for (int64_t off = 0; off < n; off += kTile) {
      const int64_t k = std::min(kTile, n - off);
      double ss = 0;
      adamw_step(optim_best_isa(), pool, p + off, m + off, v + off, g + off, DType::kBF16, k, step,
                 hp, 1.0f, nullptr, AdamWWrite::kAll, &ss);
    }
  }
};

double median(std::vector<double> t) {
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

constexpr int kReps = 5;

template <typename F>
double time_alone(F&& fn) {
  fn();
  std::vector<double> t;
  for (int i = 0; i < kReps; ++i) {
    const auto t0 = Clock::now();
    fn();
    t.push_back(since(t0));
  }
  return median(t);
}

// The upload and the AdamW started together: the median of when each finished.
template <typename F>
std::pair<double, double> time_beside(F&& upload, Adam& adam) {
  std::vector<double> tu, ta;
  for (int i = 0; i <= kReps; ++i) {
    const auto t0 = Clock::now();
    double a = 0;
    std::thread th([&] {
      adam.run();
      a = since(t0);
    });
    upload();
    const double u = since(t0);
    th.join();
    if (i == 0) continue;  // untimed
    tu.push_back(u);
    ta.push_back(a);
  }
  return {median(tu), median(ta)};
}

void run(int64_t n, int convert_threads, int adam_threads) {
  CudaBackendOptions o;
  o.max_tokens = 16;
  o.hidden = 16;
  o.vocab = 16;
  auto be = make_cuda_backend(o);
  const int64_t na = n / 4;
  // The master (one registration, addressed as one array), the AdamW's state, the ring.
  std::vector<Buffer> pinned =
      alloc_pinned(*be, {size_t(n) * 4, size_t(na) * 14, size_t(kRing) * kTile * 2}, "bench");
  float* master = static_cast<float*>(pinned[0].data());
  for (int64_t i = 0; i < n; ++i)  // values of every magnitude, ties included
    master[i] = float(int32_t(uint32_t(i) * 2654435761u)) * 1e-9f;
  float* p = static_cast<float*>(pinned[1].data());
  float *m = p + na, *v = m + na;
  uint16_t* g = reinterpret_cast<uint16_t*>(v + na);
  std::fill(p, p + na, 0.01f);
  std::fill(m, m + 2 * na, 0.0f);
  std::fill(g, g + na, uint16_t(0x3a83));
  Buffer dev_bf16 = be->alloc(MemoryKind::kDevice, size_t(n) * 2, "bench bf16"),
         dev_f32 = be->alloc(MemoryKind::kDevice, size_t(kTile) * 4, "bench fp32 tile");
  auto h2d = be->create_stream("bench H2D");
  ThreadPool convert_pool(convert_threads), adam_pool(adam_threads);
  Rig r{*be,
        n,
        master,
        dev_bf16.data(),
        dev_f32.data(),
        static_cast<uint16_t*>(pinned[2].data()),
        {},
        *h2d,
        convert_pool};
  for (int i = 0; i < kRing; ++i) r.done.push_back(be->create_event());
  Adam adam{adam_pool, p, m, v, g, na};

  upload_fp32(r);
  check_device(r, "fp32");
  upload_host(r);
  check_device(r, "host");

  const double gp = double(n) * 1e-9, ga = double(na) * 1e-9;
  const double adam_bytes = adamw_bytes_per_param(AdamWWrite::kAll, 2);
  std::printf(
      "upload of %.0f M params fp32 -> bf16 on the GPU; AdamW beside: %.0f M params, "
      "%d threads; host conversion on %d threads\n",
      double(n) * 1e-6, double(na) * 1e-6, adam_threads, convert_threads);
  const double a0 = time_alone([&] { adam.run(); });
  std::printf("AdamW alone: %.3f s, %.2f G params/s (%.0f GB/s of host memory)\n", a0, ga / a0,
              ga * adam_bytes / a0);
  const struct {
    const char* name;
    void (*fn)(Rig&);
    double host_bytes, pcie_bytes;  // per parameter
  } arms[] = {{"fp32 DMA, cast on the GPU", &upload_fp32, 4, 4},
              {"bf16 converted on the host", &upload_host, 8, 2}};
  for (const auto& arm : arms) {
    const double t = time_alone([&] { arm.fn(r); });
    std::printf(
        "%-27s alone:        upload %.3f s, %.2f G params/s, PCIe %.1f GB/s, host %.0f GB/s\n",
        arm.name, t, gp / t, gp * arm.pcie_bytes / t, gp * arm.host_bytes / t);
  }
  for (const auto& arm : arms) {
    const auto [tu, ta] = time_beside([&] { arm.fn(r); }, adam);
    const double both = std::max(tu, ta);
    std::printf(
        "%-27s beside AdamW: upload %.3f s (%.2f G params/s, PCIe %.1f GB/s), AdamW %.3f s "
        "(%.2f G params/s); both done %.3f s, host %.0f GB/s over it\n",
        arm.name, tu, gp / tu, gp * arm.pcie_bytes / tu, ta, ga / ta, both,
        (gp * arm.host_bytes + ga * adam_bytes) / both);
  }
}

}  // namespace
}  // namespace sf

int main(int argc, char** argv) {
  const int64_t n = int64_t((argc > 1 ? std::atof(argv[1]) : 2048) * 1e6);
  const int convert_threads = argc > 2 ? std::atoi(argv[2]) : 4;
  const int adam_threads =
      argc > 3 ? std::atoi(argv[3]) : int(std::max(1u, std::thread::hardware_concurrency()));
  if (n < 1 || convert_threads < 1 || adam_threads < 1) {
    std::fprintf(stderr,
                 "usage: bench_upload [N_MILLION ≥ 1e-6] [CONVERT_THREADS ≥ 1] "
                 "[ADAM_THREADS ≥ 1]\n");
    return 2;
  }
  try {
    sf::run(n, convert_threads, adam_threads);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_upload: %s\n", e.what());
    return 1;
  }
  return 0;
}
