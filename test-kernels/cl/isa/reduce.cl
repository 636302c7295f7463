#include "common.h"
// Work-group sum of 256 uints through LDS with barriers; one partial per group.
__kernel void reduce(__global const uint *in, __global uint *out) {
  __local uint s[256];
  uint l = LID(x);
  s[l] = in[GID(x)];
  BARRIER();
  for (uint w = 128; w > 0; w >>= 1) {
    if (l < w)
      s[l] += s[l + w];
    BARRIER();
  }
  if (l == 0)
    out[GRP(x)] = s[0];
}
