// Invariant checks: a failed LL3_CHECK is a bug in ll3, never bad input (that gets a Status).
#pragma once

#include <cstdio>
#include <cstdlib>

#define LL3_CHECK(cond)                                                              \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      std::fprintf(stderr, "ll3: internal check failed at %s:%d: %s\n", __FILE__,    \
                   __LINE__, #cond);                                                 \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)
