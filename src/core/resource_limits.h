// What this process may use when a container (or any cgroup) limits it: the CPU quota, the CPUs
// of its affinity mask, and the memory limit, from cgroup v2 (cpu.max, memory.max) or v1
// (cpu.cfs_quota_us / cpu.cfs_period_us, memory.limit_in_bytes), the tightest along the path
// from the process's cgroup up to the root. Defaults (threads, weights in huge pages, the KV
// pool) are sized within them, so that `ll3 serve` in a one-CPU, 2 GiB container starts one
// thread and is not killed for memory.
//
// Test hook: LL3_CGROUP_ROOT (the cgroup filesystem, default /sys/fs/cgroup) and
// LL3_PROC_SELF_CGROUP (default /proc/self/cgroup) point at a fake tree.
#pragma once

#include <cstdint>
#include <string>

namespace ll3 {

struct ResourceLimits {
  double cpu_quota = 0;      // CPUs the cgroup may use (quota / period); 0: no quota
  int affinity_cpus = 0;     // CPUs in the affinity mask (0: unknown)
  int64_t memory_limit = 0;  // bytes; 0: no limit
  int64_t memory_usage = 0;  // bytes the cgroup uses now (with the limit's cgroup)
};

// Reads the limits of this process; the paths default to the test hook's variables, else the
// real ones.
ResourceLimits read_resource_limits(const std::string& cgroup_root = "", const std::string& self_cgroup = "");

// Threads to run by default: the affinity mask's CPUs, at most the quota rounded up, at least 1.
int threads_within(const ResourceLimits& limits);

// Bytes this process may still take: MemAvailable (meminfo_available, 0: unknown), at most what
// the memory limit leaves over the cgroup's usage. 0 when neither is known.
int64_t memory_within(const ResourceLimits& limits, int64_t meminfo_available);

}  // namespace ll3
