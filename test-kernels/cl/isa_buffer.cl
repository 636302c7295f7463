// Buffer resources (V#) built in the kernel, packed f16 math and byte/word operand selects
// (SDWA on gfx9).
#include "isa_prelude.h"

// dst[i] = src[i] + 1 through raw buffers of `n_bytes`; lanes past the end read 0 and their
// stores are dropped (range checking), so dst past n_bytes keeps its old contents.
__kernel void buf_copy(__global uint *src, __global uint *dst, uint n_bytes) {
  uint i = GID();
  __amdgpu_buffer_rsrc_t r = __builtin_amdgcn_make_buffer_rsrc(src, 0, n_bytes, 0x00027000);
  uint v = __builtin_amdgcn_raw_buffer_load_b32(r, i * 4, 0, 0);
  __amdgpu_buffer_rsrc_t w = __builtin_amdgcn_make_buffer_rsrc(dst, 0, n_bytes, 0x00027000);
  __builtin_amdgcn_raw_buffer_store_b32(v + 1, w, i * 4, 0, 0);
  // A second store, unchecked by the range (a plain global store), of what was read.
  dst[i + 1024] = v;
}

// Packed halves: d = a * b + c, e = (a + b) * a, f = max(a, c) - min(b, c).
__kernel void pk_f16(__global const half2 *a, __global const half2 *b, __global const half2 *c,
                     __global half2 *d, __global half2 *e, __global half2 *f) {
  uint i = GID();
  half2 x = a[i], y = b[i], z = c[i];
  d[i] = x * y + z;
  e[i] = (x + y) * x;
  f[i] = __builtin_elementwise_max(x, z) - __builtin_elementwise_min(y, z);
}

// Byte and word lanes: sums of unsigned/signed bytes and halves.
__kernel void bytes(__global const uint *a, __global const uint *b, __global uint *out) {
  uint i = GID();
  uint x = a[i], y = b[i];
  uchar4 p = as_uchar4(x), q = as_uchar4(y);
  char4 sp = as_char4(x);
  ushort2 h = as_ushort2(y);
  uint s = (uint)p.s1 * (uint)q.s2 + (uint)(int)sp.s3 + ((uint)h.s1 << 3);
  uchar4 r = (uchar4)(p.s0 + q.s1, p.s2 ^ q.s3, p.s3 - q.s0, p.s1 | q.s2);
  out[2 * i] = s;
  out[2 * i + 1] = as_uint(r);
}

// Wave 0 polls a flag that wave 1 of the same work-group sets, sleeping between polls
// (s_sleep must let the other wave run).
__kernel void sleep_handoff(__global volatile uint *flag, __global uint *out) {
  uint lid = LID();
  if (lid < 64) {
    uint n = 0;
    while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) == 0) {
      __builtin_amdgcn_s_sleep(1);
      n++;
    }
    out[lid] = 1 + (n > 0);
  } else {
    __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
    out[lid] = 3;
  }
}
