// Helpers shared by the test executables.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ll3::test {

// The shared data directory (LL3_SHARED, else ../shared beside the repository), or "" when it
// is absent. Tests that need it call LL3_REQUIRE_SHARED(), which fails under CI and skips
// with a message otherwise.
std::string shared_dir();
bool in_ci();

// The ll3 binary built beside the tests.
std::string ll3_binary();
std::string source_dir();

// A fresh temporary directory, removed at process exit.
std::string temp_dir();

// Runs a shell command; returns its exit status and captures stdout (stderr too if
// merge_stderr). A command still running after timeout_s is killed with everything it started
// (its process group): exit_code 124, timed_out, and a note that names it in the output and on
// stderr. The default sits well inside CTest's 600 s.
inline constexpr double kCommandTimeoutS = 300;
struct CommandResult {
  int exit_code = -1;
  bool timed_out = false;
  std::string output;
};
CommandResult run_command(const std::string& cmd, bool merge_stderr = false, double timeout_s = kCommandTimeoutS);

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& data);

// n draws from N(0, sd^2) with a seeded generator: the random (never zero) test data.
std::vector<float> random_normal(size_t n, uint32_t seed, float sd = 1.0f);

// A .npy file of float32 (shape and data).
struct Npy {
  std::vector<int64_t> shape;
  std::vector<float> data;
};
Npy read_npy(const std::string& path);

}  // namespace ll3::test

#define LL3_REQUIRE_SHARED()                                                        \
  do {                                                                              \
    if (::ll3::test::shared_dir().empty()) {                                        \
      if (::ll3::test::in_ci()) FAIL() << "shared data directory not found (CI)";   \
      GTEST_SKIP() << "shared data directory not found; set LL3_SHARED";            \
    }                                                                               \
  } while (0)
