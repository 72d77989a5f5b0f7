#include "core/cpu_topology.h"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <sstream>

namespace sf {
namespace {

std::string read_line(const std::filesystem::path& p) {
  std::ifstream f(p);
  std::string s;
  std::getline(f, s);
  return s;
}

std::string lower(std::string s) {
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string range_text(const std::vector<int>& cpus) {
  std::ostringstream o;
  for (size_t i = 0; i < cpus.size();) {
    size_t j = i;
    while (j + 1 < cpus.size() && cpus[j + 1] == cpus[j] + 1) ++j;
    o << (i ? "," : "") << cpus[i];
    if (j > i) o << "-" << cpus[j];
    i = j + 1;
  }
  return o.str();
}

}  // namespace

std::vector<int> parse_cpu_list(const std::string& text) {
  std::vector<int> out;
  std::istringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    if (part.empty()) return {};
    int a = -1, b = -1;
    char dash = 0;
    std::istringstream p(part);
    if (!(p >> a) || a < 0 || a > 1 << 20) return {};
    b = a;
    if (p >> dash) {
      if (dash != '-' || !(p >> b) || b < a || b > 1 << 20) return {};
    }
    std::string rest;
    if (p >> rest) return {};
    for (int c = a; c <= b; ++c) out.push_back(c);
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

CpuChoice choose_update_cpus(const std::string& pci_bus_id, const std::vector<int>& allowed,
                             const std::filesystem::path& sys) {
  CpuChoice c;
  std::vector<int> pool = allowed;
  std::sort(pool.begin(), pool.end());
  if (!pci_bus_id.empty()) {
    const std::string node = read_line(sys / "bus/pci/devices" / lower(pci_bus_id) / "numa_node");
    std::istringstream in(node);
    int n = -1;
    if (in >> n && n >= 0) {
      const std::vector<int> on_node = parse_cpu_list(
          read_line(sys / "devices/system/node" / ("node" + std::to_string(n)) / "cpulist"));
      std::vector<int> both;
      std::set_intersection(pool.begin(), pool.end(), on_node.begin(), on_node.end(),
                            std::back_inserter(both));
      if (!both.empty()) {
        c.numa_node = n;
        pool = both;
      }
    }
  }
  // Physical cores first: a CPU whose lowest allowed sibling is itself leads its core.
  std::vector<int> first, siblings;
  const std::set<int> in_pool(pool.begin(), pool.end());
  for (int cpu : pool) {
    const std::vector<int> sib = parse_cpu_list(read_line(
        sys / "devices/system/cpu" / ("cpu" + std::to_string(cpu)) / "topology/thread_siblings_list"));
    int lead = cpu;
    for (int s : sib)
      if (in_pool.count(s)) lead = std::min(lead, s);
    (lead == cpu ? first : siblings).push_back(cpu);
  }
  c.cpus = first;
  c.cpus.insert(c.cpus.end(), siblings.begin(), siblings.end());
  return c;
}

std::string CpuChoice::describe() const {
  std::vector<int> sorted = cpus;
  std::sort(sorted.begin(), sorted.end());
  std::ostringstream o;
  o << "CPUs " << range_text(sorted);
  if (numa_node >= 0)
    o << " of NUMA node " << numa_node << " (the GPU's)";
  else
    o << " (the GPU's NUMA node unknown: every CPU this process may use)";
  return o.str();
}

std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

bool pin_thread(unsigned long thread, const std::vector<int>& cpus) {
  cpu_set_t set;
  CPU_ZERO(&set);
  for (int cpu : cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) return false;
    CPU_SET(cpu, &set);
  }
  return !cpus.empty() && pthread_setaffinity_np(pthread_t(thread), sizeof(set), &set) == 0;
}

bool pin_this_thread(const std::vector<int>& cpus) { return pin_thread(pthread_self(), cpus); }

}  // namespace sf
