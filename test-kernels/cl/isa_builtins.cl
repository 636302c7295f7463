// Disassembler coverage: transcendental, bit-field, dot-product, lane and clock builtins.
#include "isa_prelude.h"
typedef half half2_ __attribute__((ext_vector_type(2)));
typedef short short2_ __attribute__((ext_vector_type(2)));
__kernel void misc(__global float *f, __global double *d, __global int *i, __global half *h, __global uint *u) {
  uint t = __builtin_amdgcn_workitem_id_x();
  float x = f[t];
  double y = d[t];
  f[t] = __builtin_amdgcn_sinf(x) + __builtin_amdgcn_cosf(x) + __builtin_amdgcn_rcpf(x) + __builtin_amdgcn_rsqf(x)
       + __builtin_amdgcn_fmed3f(x, 1.0f, 2.0f) + __builtin_amdgcn_frexp_mantf(x) + (float)__builtin_amdgcn_frexp_expf(x)
       + __builtin_amdgcn_ldexpf(x, 3) + __builtin_amdgcn_fractf(x) + (float)__builtin_amdgcn_classf(x, 0x3) + __builtin_amdgcn_cubeid(x, x, x)
       + __builtin_amdgcn_exp2f(x) + __builtin_amdgcn_logf(x) + __builtin_amdgcn_sqrtf(x);
  d[t] = __builtin_amdgcn_rcp(y) + __builtin_amdgcn_rsq(y) + __builtin_amdgcn_trig_preop(y, 2) + __builtin_amdgcn_frexp_mant(y) + __builtin_amdgcn_ldexp(y, 5)
       + __builtin_amdgcn_div_fixup(y, y, 2.0) + __builtin_amdgcn_sqrt(y) + __builtin_amdgcn_fract(y);
  i[t] = __builtin_amdgcn_ubfe(t, 3, 5) + __builtin_amdgcn_sbfe((int)t, 2, 7) + __builtin_amdgcn_alignbit(t, t*3, 7) + __builtin_amdgcn_alignbyte(t, 9, 2)
       + __builtin_amdgcn_lerp(t, 5u, 7u) + __builtin_amdgcn_sad_u8(t, 4u, 1u) + __builtin_amdgcn_msad_u8(t, 3u, 2u) + __builtin_amdgcn_mbcnt_hi(~0u, __builtin_amdgcn_mbcnt_lo(~0u, 0u))
       + __builtin_amdgcn_sdot2((short2_)(1, 2), (short2_)(3, (short)t), 4, false) + __builtin_amdgcn_sdot4((int)t, 0x01020304, 7, false) + __builtin_amdgcn_udot8(t, 0x11111111u, 2u, true)
       + __builtin_amdgcn_readlane((int)t, 5) + __builtin_amdgcn_ds_bpermute(4, (int)t) + __builtin_amdgcn_ds_permute(8, (int)t)
       + (int)__builtin_amdgcn_s_memtime() + (int)__builtin_amdgcn_s_memrealtime() + __builtin_amdgcn_s_getreg(0x1801) ;
  half2_ hv = __builtin_amdgcn_cvt_pkrtz(x, x + 1.0f);
  h[t] = hv.x * hv.y + __builtin_amdgcn_rcph(hv.x) + __builtin_amdgcn_fdot2(hv, hv, 1.0f, false);
  u[t] = __builtin_amdgcn_ballot_w64(t & 1) >> 3;
  __builtin_amdgcn_s_sleep(2);
  __builtin_amdgcn_s_setprio(1);
  __builtin_amdgcn_s_sendmsg(1, 0);
  __builtin_amdgcn_wave_barrier();
  __builtin_amdgcn_s_dcache_wb();
}
