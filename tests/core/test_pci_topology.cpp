// Where a run's GPUs sit on the PCIe tree, read from a sysfs tree made here: two behind one
// switch, one on another root port of the same root complex, one on another root complex, one
// unknown; each pair named with what joins it, and the NUMA nodes.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "core/pci_topology.h"

namespace sf {
namespace {

namespace fs = std::filesystem;

TEST(PciTopology, NamesWhatJoinsEachPairOfGpus) {
  const fs::path sys = fs::temp_directory_path() / "sf_pci_sys";
  fs::remove_all(sys);
  auto device = [&](const std::string& id, const fs::path& tree, int node) {
    const fs::path real = sys / "devices" / tree / id;
    fs::create_directories(real);
    std::ofstream(real / "numa_node") << node << "\n";
    fs::create_directories(sys / "bus" / "pci" / "devices");
    fs::create_directory_symlink(real, sys / "bus" / "pci" / "devices" / id);
  };
  device("0000:1b:00.0", "pci0000:16/0000:16:00.0/0000:17:00.0/0000:18:08.0", 0);
  device("0000:1c:00.0", "pci0000:16/0000:16:00.0/0000:17:00.0/0000:18:10.0", 0);
  device("0000:2a:00.0", "pci0000:16/0000:16:02.0", 0);
  device("0000:9b:00.0", "pci0000:97/0000:97:00.0", 1);
  std::vector<PciPlace> p;
  for (const char* id : {"0000:1B:00.0", "0000:1c:00.0", "0000:2a:00.0", "0000:9b:00.0",
                         "0000:ff:00.0"})
    p.push_back(pci_place(id, sys));
  EXPECT_EQ(p[0].bus_id, "0000:1b:00.0");
  EXPECT_EQ(p[0].numa_node, 0);
  EXPECT_EQ(p[3].numa_node, 1);
  EXPECT_TRUE(p[4].path.empty());
  EXPECT_EQ(p[4].numa_node, -1);
  const std::string d = describe_pci_links(p);
  EXPECT_NE(d.find("GPUs 0 and 1 share the PCIe switch at 0000:17:00.0"), std::string::npos) << d;
  EXPECT_NE(d.find("GPUs 0 and 2 share root complex pci0000:16 (no PCIe switch between them)"),
            std::string::npos)
      << d;
  EXPECT_NE(d.find("GPUs 2 and 3 are on different root complexes"), std::string::npos) << d;
  EXPECT_NE(d.find("GPUs 3 and 4: PCIe place unknown"), std::string::npos) << d;
  EXPECT_NE(d.find("NUMA nodes 0 0 0 1 ?"), std::string::npos) << d;
  EXPECT_EQ(describe_pci_links({p[0]}), "");
  fs::remove_all(sys);
}

}  // namespace
}  // namespace sf
