/* EXPECT(condition, printf-style message): exit 1 naming the failed condition. Shared by
 * the C and C++ test programs. */
#ifndef KFDRT_EXPECT_H
#define KFDRT_EXPECT_H
#include <stdio.h>
#include <stdlib.h>

#define EXPECT(c, ...)                                                             \
    do {                                                                           \
        if (!(c)) {                                                                \
            fprintf(stderr, "FAIL %s:%d %s: ", __FILE__, __LINE__, #c);            \
            fprintf(stderr, __VA_ARGS__);                                          \
            fprintf(stderr, "\n");                                                 \
            exit(1);                                                               \
        }                                                                          \
    } while (0)
#endif
