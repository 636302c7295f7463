// Shared by the hipcc-compiled test programs: every HIP call is checked, and the program
// exits non-zero naming the call that failed.
#pragma once
#include <hip/hip_runtime.h>
#include <cstdio>
#include <cstdlib>

#define HIP_CHECK(x)                                                                \
  do {                                                                              \
    hipError_t e_ = (x);                                                            \
    if (e_ != hipSuccess) {                                                         \
      std::printf("FAIL %s:%d %s -> %s\n", __FILE__, __LINE__, #x, hipGetErrorName(e_)); \
      std::exit(1);                                                                 \
    }                                                                               \
  } while (0)

#define EXPECT(c)                                                        \
  do {                                                                   \
    if (!(c)) {                                                          \
      std::printf("FAIL %s:%d expected %s\n", __FILE__, __LINE__, #c);   \
      std::exit(1);                                                      \
    }                                                                    \
  } while (0)
