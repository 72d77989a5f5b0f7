// bench_adamw N_MILLION [threads] [spinners] [bf16] [PIECE_MILLION]: one AdamW step over N million
// fp32 params (fp32 grads, as torch's CPU AdamW takes them; `bf16`: bf16 grads, as the engine's),
// median of 5, printing G params/s and GB/s: first a ring piece's update without clipping, Σ g²
// in a pass of its own then the step, against the sum formed in the step; then the whole step and
// its two halves (AdamWWrite: the weights alone, the moments alone), which the clipped update
// runs apart. The peer,
// torch's CPU AdamW on the same N and threads, is timed by bench/optim/peer_adamw.py in the same
// run. `spinners` threads busy-wait beside the steps, as a host thread spinning in a CUDA
// synchronize does beside the engine's update pool: what one CPU wanted twice costs the step.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "core/thread_pool.h"
#include "optim/adamw.h"

int main(int argc, char** argv) {
  const int64_t n = int64_t(argc > 1 ? std::atof(argv[1]) : 64) * 1000000;
  const int threads = argc > 2 ? std::atoi(argv[2]) : sf::ThreadPool::global().size();
  const int spinners = argc > 3 ? std::atoi(argv[3]) : 0;
  sf::ThreadPool pool(threads);
  std::atomic<bool> stop{false};
  std::vector<std::thread> spin;
  for (int i = 0; i < spinners; ++i)
    spin.emplace_back([&] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  const bool bf16 = argc > 4 && std::string(argv[4]) == "bf16";
  const sf::DType gd = bf16 ? sf::DType::kBF16 : sf::DType::kF32;
  std::vector<float> p(size_t(n), 0.01f), m(size_t(n), 0.0f), v(size_t(n), 0.0f),
      g(size_t(n), 0.001f);
  sf::AdamWParams hp{1e-4f, 0.9f, 0.999f, 1e-8f, 0.01f};
  const sf::OptimIsa isa = sf::optim_best_isa();
  volatile double sink = 0;
  // bytes per param: read p, m, v, g; write p, m, v (all) / p (weights) / m, v (moments)
  const double gb = bf16 ? 2 : 4;
  const struct {
    sf::AdamWWrite what;
    const char* name;
    double bytes;
  } modes[] = {{sf::AdamWWrite::kAll, "all", sf::adamw_bytes_per_param(sf::AdamWWrite::kAll, gb)},
               {sf::AdamWWrite::kWeights, "weights",
                sf::adamw_bytes_per_param(sf::AdamWWrite::kWeights, gb)},
               {sf::AdamWWrite::kMoments, "moments",
                sf::adamw_bytes_per_param(sf::AdamWWrite::kMoments, gb)}};
  // A ring piece's update without clipping as the worker did it before (Σ g² for the norm in its
  // own pass, then the step) and as it does now (the sum from the step's own reads), piece by
  // piece over the same n: PIECE_MILLION (default 16.78, the plan's 16 Mi-element piece).
  const int64_t piece = argc > 5 ? int64_t(std::atof(argv[5]) * 1e6) : int64_t(16) << 20;
  for (int fused = 0; fused < 2; ++fused) {
    std::vector<double> t;
    for (int r = 0; r < 6; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      for (int64_t off = 0; off < n; off += piece) {
        const int64_t k = std::min(piece, n - off);
        const char* gp = reinterpret_cast<const char*>(g.data()) + size_t(off) * size_t(gb);
        double ss = 0;
        if (!fused) ss = sf::sum_squares(isa, pool, gp, gd, k);
        sf::adamw_step(isa, pool, p.data() + off, m.data() + off, v.data() + off, gp, gd, k, r + 1,
                       hp, 1.0f, nullptr, sf::AdamWWrite::kAll, fused ? &ss : nullptr);
        sink = sink + ss;
      }
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    t.erase(t.begin());
    std::sort(t.begin(), t.end());
    const double s = t[t.size() / 2];
    std::printf(
        "slideformer adamw ring piece, %s (%s, %s grads, %d threads, %d spinning beside): n=%lld "
        "in pieces of %lld  %.3f s  %.2f G params/s  %.1f GB/s\n",
        fused ? "sum in the step" : "sum then step", std::string(sf::optim_isa_name(isa)).c_str(),
        bf16 ? "bf16" : "fp32", threads, spinners, (long long)n, (long long)piece, s,
        double(n) / s / 1e9,
        (sf::adamw_bytes_per_param(sf::AdamWWrite::kAll, gb) + (fused ? 0 : gb)) * double(n) / s /
            1e9);
  }
  for (const auto& mode : modes) {
    std::vector<double> t;
    for (int r = 0; r < 6; ++r) {
      auto t0 = std::chrono::steady_clock::now();
      sf::adamw_step(isa, pool, p.data(), m.data(), v.data(), g.data(), gd, n, r + 1, hp, 1.0f,
                     nullptr, mode.what);
      t.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    t.erase(t.begin());  // warm-up
    std::sort(t.begin(), t.end());
    const double s = t[t.size() / 2];
    std::printf(
        "slideformer adamw %s (%s, %s grads, %d threads, %d spinning beside): n=%lld  "
        "%.3f s  %.2f G params/s  %.1f GB/s\n",
        mode.name, std::string(sf::optim_isa_name(isa)).c_str(), bf16 ? "bf16" : "fp32", threads,
        spinners, (long long)n, s, double(n) / s / 1e9, mode.bytes * double(n) / s / 1e9);
  }
  stop = true;
  for (auto& s : spin) s.join();
  return 0;
}
