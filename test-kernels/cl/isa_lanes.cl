// Cross-lane operations: DPP (update_dpp/mov_dpp), ds_swizzle, ds_bpermute, readfirstlane,
// and a wave-level inclusive prefix sum built from DPP row shifts and ds_swizzle.
#include "isa_prelude.h"
__kernel void dpp_ops(__global const int *in, __global int *out) {
  uint i = GID();
  int x = in[i];
  // row_shr:1, row_mask 0xf, bank_mask 0xf, bound_ctrl
  int a = __builtin_amdgcn_update_dpp(0, x, 0x111, 0xf, 0xf, true);
  // quad_perm [1,0,3,2]
  int b = __builtin_amdgcn_mov_dpp(x, 0xB1, 0xf, 0xf, false);
  // row_mirror, row_bcast:15 (gfx9), wave_shr:1
  int c = __builtin_amdgcn_update_dpp(x, x, 0x140, 0xa, 0x5, false);
  int d = __builtin_amdgcn_update_dpp(0, x, 0x142, 0xf, 0xf, false);
  int e = __builtin_amdgcn_update_dpp(0, x, 0x138, 0xf, 0xf, true);
  out[i] = a + 3 * b + 5 * c + 7 * d + 11 * e;
}

__kernel void swizzle_ops(__global const int *in, __global int *out) {
  uint i = GID();
  int x = in[i];
  int s0 = __builtin_amdgcn_ds_swizzle(x, 0x041F);  // swap lanes 1 apart (xor 1)
  int s1 = __builtin_amdgcn_ds_swizzle(x, 0x801B);  // quad permute [3,2,1,0]
  int s2 = __builtin_amdgcn_ds_swizzle(x, 0x00E0);  // broadcast within groups
  int p = __builtin_amdgcn_ds_bpermute((int)((i ^ 5u) & 63u) * 4, x);
  int f = __builtin_amdgcn_readfirstlane(x);
  out[i] = s0 + 2 * s1 + 4 * s2 + 8 * p + 16 * f;
}

__kernel void wave_scan(__global const int *in, __global int *out) {
  uint i = GID();
  int x = in[i];
  x += __builtin_amdgcn_update_dpp(0, x, 0x111, 0xf, 0xf, false);  // row_shr:1
  x += __builtin_amdgcn_update_dpp(0, x, 0x112, 0xf, 0xf, false);  // row_shr:2
  x += __builtin_amdgcn_update_dpp(0, x, 0x114, 0xf, 0xe, false);  // row_shr:4
  x += __builtin_amdgcn_update_dpp(0, x, 0x118, 0xf, 0xc, false);  // row_shr:8
  x += __builtin_amdgcn_update_dpp(0, x, 0x142, 0xa, 0xf, false);  // row_bcast:15
  x += __builtin_amdgcn_update_dpp(0, x, 0x143, 0xc, 0xf, false);  // row_bcast:31
  out[i] = x;
}
