#include "common.h"
// v40 across dispatches of different emulated processes (tests/shader_vgpr_owner.rs):
// both kernels name v40 as clobbered, so they get the same VGPR count and the shader
// core's kept waves fit either.

// v40 = secret in every lane; out[gid] = v40.
__kernel void plant(__global uint *out, uint secret) {
  uint v;
  __asm__ volatile("v_mov_b32 v40, %1\n v_mov_b32 %0, v40" : "=v"(v) : "s"(secret) : "v40");
  out[GID(x)] = v;
}

// out[gid] = v40, never written by this kernel: whatever the wave started with.
__kernel void peek(__global uint *out) {
  uint v;
  __asm__ volatile("v_mov_b32 %0, v40" : "=v"(v) : : "v40");
  out[GID(x)] = v;
}
