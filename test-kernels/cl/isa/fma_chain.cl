#include "common.h"
// ALU-bound: each work-item runs a chain of `iters` x 16 x 4 dependent FMAs (the inner
// loop unrolled; each FMA feeds the next, so clang cannot pack them into v_pk_fma_f32),
// then one store. Bench workload for the interpreter's ALU throughput.
__kernel void fma_chain(__global float *out, float a, float b, uint iters) {
  uint i = GID(x);
  float x0 = (float)i * 0x1p-24f;
  float x1 = x0 + 0.25f, x2 = x0 + 0.5f, x3 = x0 + 0.75f;
  for (uint k = 0; k < iters; k++) {
#pragma unroll
    for (int j = 0; j < 16; j++) {
      x0 = __builtin_fmaf(x0, a, b);
      x1 = __builtin_fmaf(x1, a, x0);
      x2 = __builtin_fmaf(x2, a, x1);
      x3 = __builtin_fmaf(x3, a, x2);
    }
  }
  out[i] = x0 + x1 + x2 + x3;
}
