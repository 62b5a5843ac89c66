// Container limits from fake cgroup trees (v2 and v1, nested and mounted as the root), and the
// defaults sized within them: threads from the CPU quota, memory from the limit.
#include "core/resource_limits.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "core/thread_pool.h"
#include "test_support.h"

namespace ll3 {
namespace {

namespace fs = std::filesystem;

void put(const fs::path& p, const std::string& text) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << text << "\n";
}

TEST(ResourceLimits, CgroupV2TakesTheTightestLimitUpThePath) {
  const fs::path root = test::temp_dir() + "/v2";
  put(root / "cgroup.controllers", "cpu memory");
  put(root / "kubepods/cpu.max", "max 100000");
  put(root / "kubepods/memory.max", "8589934592");  // 8 GiB: the parent's
  put(root / "kubepods/memory.current", "6000000000");
  put(root / "kubepods/pod1/cpu.max", "150000 100000");  // 1.5 CPUs
  put(root / "kubepods/pod1/memory.max", "max");
  put(root / "kubepods/pod1/memory.current", "1000");
  const fs::path self = root / "self";
  put(self, "0::/kubepods/pod1");
  const ResourceLimits l = read_resource_limits(root.string(), self.string());
  EXPECT_DOUBLE_EQ(l.cpu_quota, 1.5);
  EXPECT_EQ(l.memory_limit, 8589934592);
  EXPECT_EQ(l.memory_usage, 6000000000);  // of the cgroup that sets the limit
  EXPECT_GT(l.affinity_cpus, 0);
}

TEST(ResourceLimits, CgroupV1ControllersAndAContainerMountedAsTheRoot) {
  const fs::path root = test::temp_dir() + "/v1";
  // The process's path (/docker/abc) is not under the mounts: they are the container's own.
  put(root / "cpu,cpuacct/cpu.cfs_quota_us", "50000");
  put(root / "cpu,cpuacct/cpu.cfs_period_us", "100000");
  put(root / "memory/memory.limit_in_bytes", "2147483648");
  put(root / "memory/memory.usage_in_bytes", "1073741824");
  const fs::path self = root / "self";
  put(self, "12:memory:/docker/abc\n4:cpu,cpuacct:/docker/abc\n1:name=systemd:/docker/abc");
  const ResourceLimits l = read_resource_limits(root.string(), self.string());
  EXPECT_DOUBLE_EQ(l.cpu_quota, 0.5);
  EXPECT_EQ(l.memory_limit, 2147483648);
  EXPECT_EQ(l.memory_usage, 1073741824);
}

TEST(ResourceLimits, NoLimitsReadAsNone) {
  const fs::path root = test::temp_dir() + "/none";
  put(root / "cgroup.controllers", "cpu memory");
  put(root / "cpu.max", "max 100000");
  put(root / "memory.max", "max");
  put(root / "self", "0::/");
  const ResourceLimits l = read_resource_limits(root.string(), (root / "self").string());
  EXPECT_EQ(l.cpu_quota, 0);
  EXPECT_EQ(l.memory_limit, 0);
  // v1's "unlimited" is a huge number, not a limit.
  const fs::path v1 = test::temp_dir() + "/none1";
  put(v1 / "memory/memory.limit_in_bytes", "9223372036854771712");
  put(v1 / "self", "3:memory:/");
  EXPECT_EQ(read_resource_limits(v1.string(), (v1 / "self").string()).memory_limit, 0);
}

TEST(ResourceLimits, ThreadsAndMemoryWithinTheLimits) {
  ResourceLimits l;
  l.affinity_cpus = 8;
  EXPECT_EQ(threads_within(l), 8);
  l.cpu_quota = 1.5;
  EXPECT_EQ(threads_within(l), 2);
  l.cpu_quota = 0.25;
  EXPECT_EQ(threads_within(l), 1);
  l.cpu_quota = 16;
  EXPECT_EQ(threads_within(l), 8);  // the mask binds
  EXPECT_EQ(memory_within(l, 5000), 5000);
  l.memory_limit = 3000;
  l.memory_usage = 1000;
  EXPECT_EQ(memory_within(l, 5000), 2000);
  EXPECT_EQ(memory_within(l, 1500), 1500);
  EXPECT_EQ(memory_within(l, 0), 2000);
}

TEST(ResourceLimits, TheDefaultThreadCountFollowsTheQuotaThroughTheTestHook) {
  const fs::path root = test::temp_dir() + "/hook";
  put(root / "cgroup.controllers", "cpu memory");
  put(root / "cpu.max", "100000 100000");  // one CPU, as `--cpus 1` gives
  put(root / "self", "0::/");
  setenv("LL3_CGROUP_ROOT", root.c_str(), 1);
  setenv("LL3_PROC_SELF_CGROUP", (root / "self").c_str(), 1);
  const int n = default_thread_count();
  ThreadPool pool(0);
  unsetenv("LL3_CGROUP_ROOT");
  unsetenv("LL3_PROC_SELF_CGROUP");
  EXPECT_EQ(n, 1);
  EXPECT_EQ(pool.size(), 1);
}

}  // namespace
}  // namespace ll3
