#include "core/resource_limits.h"

#include <sched.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <vector>

namespace ll3 {

namespace {

namespace fs = std::filesystem;

std::string env_or(const char* name, const char* fallback) {
  const char* v = std::getenv(name);
  return v != nullptr && *v != '\0' ? v : fallback;
}

// The first line of a file, "" when absent.
std::string first_line(const fs::path& p) {
  std::ifstream f(p);
  std::string line;
  if (f) std::getline(f, line);
  return line;
}

// A non-negative integer, or -1 ("max", absent, malformed).
int64_t read_number(const fs::path& p) {
  const std::string s = first_line(p);
  if (s.empty() || s == "max") return -1;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  return end != s.c_str() && v >= 0 ? v : -1;
}

// The directories from a cgroup's own up to the hierarchy's root. Where the cgroup's path is not
// under the mount (a container whose cgroup is mounted as the root, without a cgroup
// namespace), the mount's root alone.
std::vector<fs::path> path_up(const fs::path& mount, const std::string& cgroup) {
  std::vector<fs::path> dirs;
  fs::path rel = fs::path(cgroup).relative_path();
  std::error_code ec;
  if (!rel.empty() && fs::is_directory(mount / rel, ec)) {
    for (fs::path p = rel; !p.empty(); p = p.parent_path()) dirs.push_back(mount / p);
  }
  dirs.push_back(mount);
  return dirs;
}

// /proc/self/cgroup: "0::/path" for v2, "N:controller,list:/path" for v1. Each path is absent
// when the file has no such line.
struct SelfCgroup {
  std::optional<std::string> v2, v1_cpu, v1_memory;
};

SelfCgroup parse_self(const std::string& file) {
  SelfCgroup s;
  std::ifstream f(file);
  std::string line;
  while (std::getline(f, line)) {
    const size_t a = line.find(':'), b = line.find(':', a + 1);
    if (a == std::string::npos || b == std::string::npos) continue;
    const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
    if (controllers.empty()) s.v2 = path;
    std::stringstream ss(controllers);
    std::string c;
    while (std::getline(ss, c, ',')) {
      if (c == "cpu") s.v1_cpu = path;
      if (c == "memory") s.v1_memory = path;
    }
  }
  return s;
}

// The tightest CPU quota along the path (cpu.max "quota period", or v1's two files).
double cpu_quota(const std::vector<fs::path>& dirs, bool v2) {
  double best = 0;
  for (const fs::path& d : dirs) {
    double q = 0;
    if (v2) {
      std::stringstream ss(first_line(d / "cpu.max"));
      std::string quota;
      long long period = 0;
      if (ss >> quota >> period && quota != "max" && period > 0) q = std::atof(quota.c_str()) / static_cast<double>(period);
    } else {
      const int64_t quota = read_number(d / "cpu.cfs_quota_us"), period = read_number(d / "cpu.cfs_period_us");
      if (quota > 0 && period > 0) q = static_cast<double>(quota) / static_cast<double>(period);
    }
    if (q > 0 && (best == 0 || q < best)) best = q;
  }
  return best;
}

// The tightest memory limit along the path, and the usage of the cgroup that sets it.
void memory_limit(const std::vector<fs::path>& dirs, bool v2, ResourceLimits* out) {
  // v1 reports "no limit" as a huge number (the page-rounded maximum).
  constexpr int64_t kNoLimit = int64_t{1} << 60;
  for (const fs::path& d : dirs) {
    const int64_t limit = read_number(d / (v2 ? "memory.max" : "memory.limit_in_bytes"));
    if (limit <= 0 || limit >= kNoLimit) continue;
    if (out->memory_limit == 0 || limit < out->memory_limit) {
      out->memory_limit = limit;
      out->memory_usage = std::max<int64_t>(0, read_number(d / (v2 ? "memory.current" : "memory.usage_in_bytes")));
    }
  }
}

}  // namespace

ResourceLimits read_resource_limits(const std::string& cgroup_root, const std::string& self_cgroup) {
  const fs::path root = cgroup_root.empty() ? env_or("LL3_CGROUP_ROOT", "/sys/fs/cgroup") : cgroup_root;
  const SelfCgroup self = parse_self(self_cgroup.empty() ? env_or("LL3_PROC_SELF_CGROUP", "/proc/self/cgroup") : self_cgroup);
  ResourceLimits out;
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof set, &set) == 0) out.affinity_cpus = CPU_COUNT(&set);
  std::error_code ec;
  if (self.v2 && fs::exists(root / "cgroup.controllers", ec)) {
    const std::vector<fs::path> dirs = path_up(root, *self.v2);
    out.cpu_quota = cpu_quota(dirs, true);
    memory_limit(dirs, true, &out);
    return out;
  }
  // v1: one hierarchy per controller, mounted as root/cpu (or cpu,cpuacct) and root/memory.
  for (const char* name : {"cpu", "cpu,cpuacct", "cpuacct,cpu"}) {
    if (self.v1_cpu && fs::is_directory(root / name, ec)) {
      out.cpu_quota = cpu_quota(path_up(root / name, *self.v1_cpu), false);
      break;
    }
  }
  if (self.v1_memory && fs::is_directory(root / "memory", ec)) {
    memory_limit(path_up(root / "memory", *self.v1_memory), false, &out);
  }
  return out;
}

int threads_within(const ResourceLimits& limits) {
  int n = limits.affinity_cpus > 0 ? limits.affinity_cpus : 1;
  if (limits.cpu_quota > 0) n = std::min(n, static_cast<int>(std::ceil(limits.cpu_quota - 1e-9)));
  return std::max(n, 1);
}

int64_t memory_within(const ResourceLimits& limits, int64_t meminfo_available) {
  int64_t room = meminfo_available;
  if (limits.memory_limit > 0) {
    const int64_t left = std::max<int64_t>(0, limits.memory_limit - limits.memory_usage);
    room = room > 0 ? std::min(room, left) : left;
  }
  return room;
}

}  // namespace ll3
