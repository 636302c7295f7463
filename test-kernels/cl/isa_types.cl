// Number formats: f16 and bf16 conversions, f64 arithmetic, 32/64-bit integer division.
#include "isa_prelude.h"

__kernel void f16_convert(__global const float *in, __global half *h, __global float *back,
                          __global ushort *bf) {
  uint i = GID();
  float x = in[i];
  half y = (half)x;
  h[i] = y * (half)1.5f + (half)0.25f;
  back[i] = (float)y;
  // bf16 by rounding to nearest even on the bit pattern
  uint u = as_uint(x);
  u += 0x7FFFu + ((u >> 16) & 1u);
  bf[i] = (ushort)(u >> 16);
}

__kernel void f64_math(__global const double *a, __global const double *b, __global double *c) {
  uint i = GID();
  double x = a[i], y = b[i];
  c[i] = __builtin_fma(x, y, 1.0) / (y + 2.0) + __builtin_sqrt(__builtin_fabs(x)) - __builtin_floor(x * 0.5) + (double)(int)y;
}

__kernel void int_div(__global const int *a, __global const int *b, __global const long *la,
                      __global const long *lb, __global int *q, __global long *lq) {
  uint i = GID();
  int x = a[i], y = b[i] | 1;
  q[2 * i] = x / y;
  q[2 * i + 1] = x % y;
  long lx = la[i], ly = lb[i] | 1;
  lq[2 * i] = lx / ly;
  lq[2 * i + 1] = (long)((ulong)lx % (ulong)ly);
}
