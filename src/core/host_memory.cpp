// defines: sf::host_memory_available, sf::gib (host_memory.h).
#include "core/host_memory.h"

#include <cstdio>
#include <fstream>
#include <string>

namespace sf {
namespace {

// The first unsigned integer in `path` ("max" and unreadable files give nullopt).
std::optional<uint64_t> read_number(const char* path) {
  std::ifstream f(path);
  uint64_t v = 0;
  if (f >> v) return v;
  return std::nullopt;
}

std::optional<uint64_t> mem_available() {
  std::ifstream f("/proc/meminfo");
  std::string key, unit;
  uint64_t kib = 0;
  while (f >> key >> kib) {
    std::getline(f, unit);
    if (key == "MemAvailable:") return kib * 1024;
  }
  return std::nullopt;
}

}  // namespace

std::optional<HostMemory> host_memory_available() {
  std::optional<HostMemory> r;
  if (const auto m = mem_available()) r = HostMemory{*m, "MemAvailable in /proc/meminfo"};
  const auto limit = read_number("/sys/fs/cgroup/memory.max");
  const auto used = read_number("/sys/fs/cgroup/memory.current");
  if (limit && used) {
    const uint64_t left = *limit > *used ? *limit - *used : 0;
    if (!r || left < r->bytes) r = HostMemory{left, "the cgroup's memory.max less memory.current"};
  }
  return r;
}

std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", double(bytes) / double(uint64_t(1) << 30));
  return buf;
}

ProcessMemory process_memory() {
  ProcessMemory m;
  std::ifstream f("/proc/self/status");
  for (std::string line; std::getline(f, line);) {
    if (line.rfind("VmRSS:", 0) == 0) m.rss = std::stoull(line.substr(6)) * 1024;
    if (line.rfind("VmHWM:", 0) == 0) m.peak_rss = std::stoull(line.substr(6)) * 1024;
  }
  return m;
}

bool reset_peak_rss() {
  std::ofstream f("/proc/self/clear_refs");
  f << "5";  // resets VmHWM to the current VmRSS (Linux >= 4.0)
  f.flush();
  return bool(f);
}

}  // namespace sf
