#include "common.h"
// C = A * B, n x n floats (n a multiple of 16), 16x16 tiles staged in LDS.
#define T 16
__kernel void matmul(__global const float *a, __global const float *b, __global float *c,
                     uint n) {
  __local float ta[T][T];
  __local float tb[T][T];
  uint tx = LID(x), ty = LID(y);
  uint col = GRP(x) * T + tx, row = GRP(y) * T + ty;
  float acc = 0.0f;
  for (uint k0 = 0; k0 < n; k0 += T) {
    ta[ty][tx] = a[row * n + k0 + tx];
    tb[ty][tx] = b[(k0 + ty) * n + col];
    BARRIER();
    for (uint k = 0; k < T; k++)
      acc = fma(ta[ty][k], tb[k][tx], acc);
    BARRIER();
  }
  c[row * n + col] = acc;
}
