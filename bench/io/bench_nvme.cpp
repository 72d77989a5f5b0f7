// bench_nvme DIR [GiB] [queue depths...] [--request-kib N]: the NVMe store's sequential write and
// read rates in DIR (measure_nvme: O_DIRECT, io_uring), one line per queue depth; defaults
// 1 GiB, depths 1 4 32, 1024 KiB requests.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "io/nvme_probe.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: bench_nvme DIR [GiB] [queue depths...] [--request-kib N]\n");
    return 2;
  }
  double gib = 1.0;
  uint64_t request = 1ull << 20;
  std::vector<int> depths;
  for (int i = 2; i < argc; ++i) {
    if (std::strcmp(argv[i], "--request-kib") == 0 && i + 1 < argc) {
      request = uint64_t(std::atoll(argv[++i])) << 10;
    } else if (i == 2) {
      gib = std::atof(argv[i]);
    } else {
      depths.push_back(std::atoi(argv[i]));
    }
  }
  if (depths.empty()) depths = {1, 4, 32};
  const uint64_t bytes = uint64_t(gib * double(1ull << 30));
  try {
    for (int qd : depths) {
      const sf::NvmeBandwidth b = sf::measure_nvme(argv[1], bytes, qd, request);
      std::printf(
          "nvme %s (%s%s): %.2f GiB, qd %d, %llu KiB requests: write %.2f GB/s  read %.2f "
          "GB/s\n",
          argv[1], b.fs_type.c_str(), b.memory_backed ? ", memory" : "",
          double(b.bytes) / double(1ull << 30), b.queue_depth,
          (unsigned long long)(b.request_bytes >> 10), b.write_gbps, b.read_gbps);
      std::fflush(stdout);
    }
  } catch (const sf::Error& e) {
    std::fprintf(stderr, "bench_nvme: %s\n", e.what());
    return 1;
  }
  return 0;
}
