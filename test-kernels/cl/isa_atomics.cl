// Float and 64-bit atomics on global memory, and LDS atomics.
#include "isa_prelude.h"

__kernel void atomics(__global float *fsum, __global double *dsum, __global ulong *u64,
                      __global long *s64, __global int *i32, __global const float *in) {
  uint i = GID();
  float x = in[i];
  __builtin_amdgcn_global_atomic_fadd_f32(fsum, x);
  __builtin_amdgcn_global_atomic_fadd_f64(dsum, (double)x);
  __atomic_fetch_add(u64, (ulong)i, __ATOMIC_RELAXED);
  __atomic_fetch_max(s64, (long)i * 3 - 100, __ATOMIC_RELAXED);
  __atomic_fetch_min(s64 + 1, (long)i * 3 - 100, __ATOMIC_RELAXED);
  __atomic_fetch_xor(u64 + 1, (ulong)i << 33, __ATOMIC_RELAXED);
  ulong expected = i;
  __atomic_compare_exchange_n(u64 + 2, &expected, (ulong)i + 1, false, __ATOMIC_RELAXED,
                              __ATOMIC_RELAXED);
  __atomic_fetch_add(i32, 1, __ATOMIC_RELAXED);
  int old = __atomic_fetch_add(i32 + 1, (int)i, __ATOMIC_SEQ_CST);
  i32[2 + i] = old;
}

__kernel void lds_atomics(__global int *out) {
  __local int l[4];
  uint i = LID();
  if (i < 4)
    l[i] = 0;
  BARRIER();
  __atomic_fetch_add(&l[0], (int)i, __ATOMIC_RELAXED);
  __atomic_fetch_max(&l[1], (int)i, __ATOMIC_RELAXED);
  __atomic_fetch_or(&l[2], 1 << (i & 31), __ATOMIC_RELAXED);
  int o = __atomic_exchange_n(&l[3], (int)i, __ATOMIC_RELAXED);
  BARRIER();
  out[GID()] = o + l[0] + l[1] + l[2];
}
