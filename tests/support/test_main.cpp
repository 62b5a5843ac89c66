// main() of every test_<module> executable.
//
// The ISA matrix's copies of a module (tests/CMakeLists.txt: the same tests under LL3_CPU=X)
// exist to run kernels that the uncapped run does not. Where the cap leaves this CPU's
// features as they are (LL3_CPU=avx512 on a CPU without AVX-512, LL3_CPU=avx2 on one without
// AVX-512 either), such a copy would run the very kernels of the tests without the prefix
// again, which was a third of the suite's time on an AVX2 machine: it exits 77 instead, which
// CTest reports as skipped (SKIP_RETURN_CODE), and says why (scripts/dev/skipped-tests.sh).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/cpu_features.h"

namespace {

bool listing_tests(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--gtest_list_tests", 18) == 0) return true;
  }
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  const char* cap = std::getenv("LL3_CPU");
  if (cap != nullptr && *cap != '\0' && !listing_tests(argc, argv) &&
      ll3::detect_cpu_features(cap) == ll3::detect_cpu_features(nullptr)) {
    std::printf("[isa_copy] SKIP: LL3_CPU=%s leaves this CPU's kernels as they are, so the same tests "
                "without the '%s.' prefix run them\n", cap, cap);
    return 77;
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
