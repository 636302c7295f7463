#include "common.h"
// Data-dependent loop trip counts and divergent branches (EXEC masking), plus
// 32-bit unsigned and signed division and modulo.
__kernel void divergent(__global const uint *in, __global uint *out, __global int *q) {
  uint i = GID(x);
  uint v = in[i];
  uint acc = 0;
  for (uint k = 0; k < (v & 31); k++)
    acc = acc * 3 + k;
  if (v & 1)
    acc ^= 0x5555;
  else
    acc += v / 7 + v % 13;
  out[i] = acc;
  int s = (int)v - 1000000;
  q[i] = s / ((int)(i % 5) - 2 == 0 ? 3 : (int)(i % 5) - 2) + s % 17;
}
