// What the HIP test programs share: result checks that exit 1 naming the failing call.
#ifndef KFDRT_HIP_COMMON_H
#define KFDRT_HIP_COMMON_H
#include <hip/hip_runtime_api.h>
#include "expect.h"
#include <stdio.h>
#include <stdlib.h>

#define CHECK(x)                                                                     \
    do {                                                                             \
        hipError_t e_ = (x);                                                         \
        if (e_ != hipSuccess) {                                                      \
            fprintf(stderr, "FAIL %s:%d %s: %d %s\n", __FILE__, __LINE__, #x, (int)e_, \
                    hipGetErrorString(e_));                                          \
            exit(1);                                                                 \
        }                                                                            \
    } while (0)
#endif
