// main() of every test_<module> executable.
//
// The ISA matrix's copies of a module (tests/CMakeLists.txt: the same tests under LL3_CPU=X)
// exist to run kernels that the uncapped run does not; CTest marks them with LL3_ISA_COPY.
// Where the cap leaves this CPU's features as they are (LL3_CPU=avx512 on a CPU without
// AVX-512, LL3_CPU=avx2 on one without AVX-512 either), such a copy would run the very kernels
// of the tests without the prefix again, which was a third of the suite's time on an AVX2
// machine: it exits 77 instead, which CTest reports as skipped (SKIP_RETURN_CODE), and says why
// (scripts/dev/skipped-tests.sh). A run by hand under LL3_CPU runs whatever the CPU.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>

#include "core/cpu_features.h"

int main(int argc, char** argv) {
  const char* cap = std::getenv("LL3_CPU");
  if (std::getenv("LL3_ISA_COPY") != nullptr && cap != nullptr && *cap != '\0' &&
      ll3::detect_cpu_features(cap) == ll3::detect_cpu_features(nullptr)) {
    std::printf("[isa_copy] SKIP: LL3_CPU=%s leaves this CPU's kernels as they are, so the same tests "
                "without the '%s.' prefix run them\n", cap, cap);
    return 77;
  }
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
