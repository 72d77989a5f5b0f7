// defines: sf::PciPlace, sf::pci_place, sf::describe_pci_links — where a run's GPUs sit on the
// PCIe tree (sysfs): their NUMA node and which pairs share a PCIe switch, one root complex, or
// only the CPUs' interconnect — what a data-parallel run's copies and reductions go through.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace sf {

struct PciPlace {
  std::string bus_id;             // "0000:1b:00.0" (lower case)
  int numa_node = -1;             // -1: unknown
  std::vector<std::string> path;  // root complex ("pci0000:16"), bridges …, the device itself
};

// The device's place from `sys` (/sys; tests give a folder of their own). An unknown device
// (no sysfs entry) has an empty path and node -1.
PciPlace pci_place(const std::string& bus_id, const std::filesystem::path& sys = "/sys");

// One clause per pair of devices: "GPUs 0 and 1 share the PCIe switch at 0000:18:00.0",
// "… share root complex pci0000:16 (no switch between them)", "… are on different root
// complexes (their traffic crosses the CPUs' interconnect)", or "… unknown"; and each one's
// NUMA node. Empty for fewer than two devices.
std::string describe_pci_links(const std::vector<PciPlace>& places);

}  // namespace sf
