// The check macros of the C API tests: CHECK counts every check and stops the program at the
// first failure, naming file, line and condition; OK checks a call returned hipSuccess. The
// counter is atomic because some programs check from several threads.
#pragma once
#include <hip/hip_runtime_api.h>
#include <stdio.h>
#include <stdlib.h>
#include <atomic>

static std::atomic<int> checks{0};
#define CHECK(c)                                                                  \
    do {                                                                          \
        checks++;                                                                 \
        if (!(c)) {                                                               \
            fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #c); \
            exit(1);                                                              \
        }                                                                         \
    } while (0)
#define OK(x) CHECK((x) == hipSuccess)
