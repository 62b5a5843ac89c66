// Skips a CUDA test, saying why, where no CUDA device is usable (the tests still compile in CI).
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "backend/backend.h"

#define REQUIRE_GPU()                                                                                  \
  do {                                                                                                 \
    std::string why;                                                                                   \
    if (::ll3::cuda_devices(&why).empty()) GTEST_SKIP() << "no CUDA device (" << why << "): not run on this machine"; \
  } while (0)
