#include "common.h"
// 64-bin histogram with global atomics (every work-group hits the same bins).
__kernel void histogram(__global const uint *in, __global uint *bins, uint n) {
  uint i = GID(x);
  if (i < n)
    __atomic_fetch_add(&bins[in[i] & 63], 1u, __ATOMIC_RELAXED);
}
