// defines: sf::HostMemory, sf::host_memory_available, sf::gib — how much host memory a new
// allocation can take without swapping or the OOM killer, so that a run that cannot fit says so
// before it allocates anything.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace sf {

struct HostMemory {
  uint64_t bytes = 0;
  std::string source;  // where the figure comes from, for messages
};

// The smaller of the kernel's MemAvailable (/proc/meminfo) and, inside a cgroup v2 with a memory
// limit, that limit less what the cgroup already uses. nullopt where neither can be read.
std::optional<HostMemory> host_memory_available();

// "12.3 GiB"
std::string gib(uint64_t bytes);

// This process's resident memory, now and at its peak (VmRSS, VmHWM of /proc/self/status); 0
// where they cannot be read.
struct ProcessMemory {
  uint64_t rss = 0, peak_rss = 0;
};
ProcessMemory process_memory();
// Starts a new peak from now (VmHWM := VmRSS, /proc/self/clear_refs); false where the kernel
// refuses, and the peak then still counts from the process's start.
bool reset_peak_rss();

}  // namespace sf
