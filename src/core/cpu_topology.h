// defines: sf::parse_cpu_list, sf::CpuChoice, sf::choose_update_cpus — which CPUs the optimizer's
// threads run on: those of the GPU's NUMA node (its memory is the one the pinned buffers are
// closest to), one per physical core first and their hyperthread siblings after, read from sysfs.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace sf {

// "0-3,8,10-11" (the kernel's cpulist format) → {0,1,2,3,8,10,11}; empty or malformed → empty.
std::vector<int> parse_cpu_list(const std::string& text);

struct CpuChoice {
  int numa_node = -1;     // the GPU's node; -1: unknown (no sysfs entry, or not a NUMA machine)
  std::vector<int> cpus;  // physical cores first (the lowest CPU of each), then their siblings
  std::string describe() const;  // one line for the run's log
};

// `pci_bus_id`: the GPU's (e.g. "0000:1B:00.0"; any case). `allowed`: the CPUs this process may
// use (sched_getaffinity). Where the node or the topology cannot be read, every allowed CPU, in
// order. `sys` is /sys (tests give a folder of their own).
CpuChoice choose_update_cpus(const std::string& pci_bus_id, const std::vector<int>& allowed,
                             const std::filesystem::path& sys = "/sys");

// The CPUs this process may run on.
std::vector<int> allowed_cpus();

// Pins `thread` (a pthread_t) or the calling thread to these CPUs; false where the system refuses.
bool pin_thread(unsigned long thread, const std::vector<int>& cpus);
bool pin_this_thread(const std::vector<int>& cpus);

}  // namespace sf
