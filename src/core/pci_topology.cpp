// defines: sf::pci_place, sf::describe_pci_links (pci_topology.h).
#include "core/pci_topology.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <sstream>

namespace sf {

PciPlace pci_place(const std::string& bus_id, const std::filesystem::path& sys) {
  PciPlace p;
  p.bus_id = bus_id;
  std::transform(p.bus_id.begin(), p.bus_id.end(), p.bus_id.begin(),
                 [](unsigned char c) { return char(std::tolower(c)); });
  const std::filesystem::path dev = sys / "bus" / "pci" / "devices" / p.bus_id;
  std::error_code ec;
  // …/devices/pci0000:16/0000:16:00.0/0000:17:00.0/0000:18:08.0/0000:1b:00.0
  const std::filesystem::path real = std::filesystem::canonical(dev, ec);
  if (ec) return p;
  bool in_tree = false;
  for (const auto& part : real) {
    const std::string s = part.string();
    if (s.rfind("pci", 0) == 0) in_tree = true;
    if (in_tree) p.path.push_back(s);
  }
  std::ifstream node(dev / "numa_node");
  if (!(node >> p.numa_node) || p.numa_node < 0) p.numa_node = -1;
  return p;
}

std::string describe_pci_links(const std::vector<PciPlace>& places) {
  if (places.size() < 2) return "";
  std::ostringstream o;
  const char* sep = "";
  for (size_t a = 0; a < places.size(); ++a)
    for (size_t b = a + 1; b < places.size(); ++b) {
      const auto& x = places[a].path;
      const auto& y = places[b].path;
      o << sep << "GPUs " << a << " and " << b;
      sep = "; ";
      if (x.empty() || y.empty()) {
        o << ": PCIe place unknown";
        continue;
      }
      // Common ancestors, the devices themselves excluded.
      size_t common = 0;
      while (common + 1 < x.size() && common + 1 < y.size() && x[common] == y[common]) ++common;
      if (common == 0)
        o << " are on different root complexes (their traffic crosses the CPUs' interconnect)";
      else if (common <= 2)
        o << " share root complex " << x[0] << " (no PCIe switch between them)";
      else
        o << " share the PCIe switch at " << x[common - 1];
    }
  o << "; NUMA nodes";
  for (const PciPlace& p : places) o << " " << (p.numa_node < 0 ? std::string("?") : std::to_string(p.numa_node));
  return o.str();
}

}  // namespace sf
