#include "common.h"
// y[i] = a * x[i] + y[i] over a 1-D grid (global size = n exactly).
__kernel void saxpy(float a, __global const float *x, __global float *y, uint n) {
  uint i = GID(x);
  if (i < n)
    y[i] = a * x[i] + y[i];
}
