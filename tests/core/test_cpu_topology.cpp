// The optimizer's CPUs (issue 12 item 3): the GPU's NUMA node from sysfs, physical cores first,
// on a fake /sys of two nodes with hyperthreads; and the restriction itself on this machine.
#include <gtest/gtest.h>

#include <sched.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "core/cpu_topology.h"
#include "core/thread_pool.h"

namespace sf {
namespace {

namespace fs = std::filesystem;

void put(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text << "\n";
}

// Two nodes of 4 CPUs: node 0 = cores {0,4} {1,5}, node 1 = cores {2,6} {3,7}; the GPU on node 1.
fs::path fake_sys() {
  const fs::path s = fs::temp_directory_path() / ("sf_fake_sys_" + std::to_string(getpid()));
  fs::remove_all(s);
  put(s / "bus/pci/devices/0000:1b:00.0/numa_node", "1");
  put(s / "bus/pci/devices/0000:3d:00.0/numa_node", "-1");
  put(s / "devices/system/node/node0/cpulist", "0-1,4-5");
  put(s / "devices/system/node/node1/cpulist", "2-3,6-7");
  for (int c = 0; c < 8; ++c) {
    const int a = c % 4, b = a + 4;
    put(s / "devices/system/cpu" / ("cpu" + std::to_string(c)) / "topology/thread_siblings_list",
        std::to_string(a) + "," + std::to_string(b));
  }
  return s;
}

TEST(CpuTopology, ParsesTheKernelsCpuLists) {
  EXPECT_EQ(parse_cpu_list("0-3,8,10-11"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse_cpu_list("5"), std::vector<int>{5});
  EXPECT_EQ(parse_cpu_list("3,1-2,2"), (std::vector<int>{1, 2, 3}));
  for (const char* bad : {"", "a", "3-1", "1,,2", "1-", "-1", "1 2", "99999999"})
    EXPECT_TRUE(parse_cpu_list(bad).empty()) << bad;
}

TEST(CpuTopology, TheGpusNodePhysicalCoresFirst) {
  const fs::path sys = fake_sys();
  const std::vector<int> all{0, 1, 2, 3, 4, 5, 6, 7};
  CpuChoice c = choose_update_cpus("0000:1B:00.0", all, sys);  // the bus id in upper case
  EXPECT_EQ(c.numa_node, 1);
  EXPECT_EQ(c.cpus, (std::vector<int>{2, 3, 6, 7}));
  EXPECT_NE(c.describe().find("CPUs 2-3,6-7 of NUMA node 1 (the GPU's)"), std::string::npos)
      << c.describe();
  // taskset gave the process only 3, 6 and 7: 3 and 6 lead their cores (6's sibling 2 is not
  // allowed), 7 is 3's sibling.
  c = choose_update_cpus("0000:1b:00.0", {0, 3, 6, 7}, sys);
  EXPECT_EQ(c.cpus, (std::vector<int>{3, 6, 7}));
  // No node (-1), an unknown device, no sysfs at all: every allowed CPU, cores first.
  c = choose_update_cpus("0000:3d:00.0", all, sys);
  EXPECT_EQ(c.numa_node, -1);
  EXPECT_EQ(c.cpus, (std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_NE(c.describe().find("NUMA node unknown"), std::string::npos);
  EXPECT_EQ(choose_update_cpus("0000:99:00.0", {4, 1}, sys).cpus, (std::vector<int>{1, 4}));
  EXPECT_EQ(choose_update_cpus("0000:1b:00.0", {1, 0}, sys / "absent").cpus,
            (std::vector<int>{0, 1}));
  // The node's CPUs all forbidden by the affinity mask: the allowed ones, node unknown.
  c = choose_update_cpus("0000:1b:00.0", {0, 1}, sys);
  EXPECT_EQ(c.numa_node, -1);
  EXPECT_EQ(c.cpus, (std::vector<int>{0, 1}));
  fs::remove_all(sys);
}

TEST(CpuTopology, PinsThreadsToTheChosenCpus) {
  const std::vector<int> allowed = allowed_cpus();
  ASSERT_FALSE(allowed.empty());
  const int cpu = allowed.back();
  int seen = -1;
  std::thread t([&] {
    ASSERT_TRUE(pin_this_thread({cpu}));
    seen = sched_getcpu();
  });
  t.join();
  EXPECT_EQ(seen, cpu);
  EXPECT_FALSE(pin_this_thread({}));
  EXPECT_FALSE(pin_this_thread({-1}));
  // A pool restricted to one CPU runs every worker's chunks there; to two, each on one of them.
  // The caller is not pinned by the pool: what it runs is not checked.
  ThreadPool pool(3);
  EXPECT_EQ(pool.pin({cpu}), 2);  // the two workers
  const std::thread::id caller = std::this_thread::get_id();
  std::mutex mu;
  std::vector<int> where;  // the CPU of every element a worker ran
  auto record = [&](int64_t b, int64_t e) {
    if (std::this_thread::get_id() == caller) return;
    std::lock_guard<std::mutex> lk(mu);
    for (int64_t i = b; i < e; ++i) where.push_back(sched_getcpu());
  };
  pool.parallel_for(3000, 1, record);
  for (int w : where) EXPECT_EQ(w, cpu);
  const std::vector<int> two(allowed.begin(), allowed.begin() + std::min<size_t>(2, allowed.size()));
  EXPECT_EQ(pool.pin(two), 2);
  where.clear();
  pool.parallel_for(3000, 1, record);
  for (int w : where) EXPECT_NE(std::find(two.begin(), two.end(), w), two.end()) << w;
  EXPECT_EQ(pool.pin(allowed), 2);
}

}  // namespace
}  // namespace sf
