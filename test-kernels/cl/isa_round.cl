// Directed rounding: MODE.FP_ROUND set by s_setreg from a kernel argument (with all
// denormals allowed, FP_DENORM = 0xF), then the rounding instructions themselves as inline
// asm so the compiler can neither fold nor move them across the mode change.
#include "isa_prelude.h"

// hwreg(HW_REG_MODE, 0, 8): FP_ROUND [3:0] and FP_DENORM [7:4]. As volatile asm too, so it
// stays ordered with the asm below (the builtin is not ordered against inline asm).
// The value goes through a VGPR and v_readfirstlane so the asm also builds at -O0 (where
// kernel arguments live in VGPRs).
#define SET_MODE(m)                                                                    \
  __asm__ volatile("v_readfirstlane_b32 s31, %0\n s_nop 4\n"                          \
                   " s_setreg_b32 hwreg(HW_REG_MODE, 0, 8), s31" ::"v"(m)              \
                   : "s31")

__kernel void round_f32(__global const float *x, __global const float *y,
                        __global const float *z, __global uint *o, uint mode) {
  uint i = GID();
  float a = x[i], b = y[i], c = z[i];
  int ia = as_int(a);
  int e = (int)(as_uint(c) % 64) - 32;
  float r[8];
  SET_MODE(mode);
  __asm__ volatile("v_add_f32 %0, %1, %2" : "=v"(r[0]) : "v"(a), "v"(b));
  __asm__ volatile("v_sub_f32 %0, %1, %2" : "=v"(r[1]) : "v"(a), "v"(b));
  __asm__ volatile("v_mul_f32 %0, %1, %2" : "=v"(r[2]) : "v"(a), "v"(b));
  __asm__ volatile("v_fma_f32 %0, %1, %2, %3" : "=v"(r[3]) : "v"(a), "v"(b), "v"(c));
  __asm__ volatile("v_fmac_f32 %0, %1, %2" : "=v"(r[4]) : "v"(a), "v"(b), "0"(c));
  __asm__ volatile("v_cvt_f32_i32 %0, %1" : "=v"(r[5]) : "v"(ia));
  __asm__ volatile("v_cvt_f32_u32 %0, %1" : "=v"(r[6]) : "v"(ia));
  __asm__ volatile("v_ldexp_f32 %0, %1, %2" : "=v"(r[7]) : "v"(a), "v"(e));
  for (int k = 0; k < 8; k++)
    o[8 * i + k] = as_uint(r[k]);
}

__kernel void round_f64(__global const double *x, __global const double *y,
                        __global const double *z, __global ulong *o, uint mode) {
  uint i = GID();
  double a = x[i], b = y[i], c = z[i];
  int e = (int)(as_ulong(c) % 128) - 64;
  double r[4];
  float f;
  SET_MODE(mode);
  __asm__ volatile("v_add_f64 %0, %1, %2" : "=v"(r[0]) : "v"(a), "v"(b));
  __asm__ volatile("v_mul_f64 %0, %1, %2" : "=v"(r[1]) : "v"(a), "v"(b));
  __asm__ volatile("v_fma_f64 %0, %1, %2, %3" : "=v"(r[2]) : "v"(a), "v"(b), "v"(c));
  __asm__ volatile("v_ldexp_f64 %0, %1, %2" : "=v"(r[3]) : "v"(a), "v"(e));
  __asm__ volatile("v_cvt_f32_f64 %0, %1" : "=v"(f) : "v"(a));
  for (int k = 0; k < 4; k++)
    o[5 * i + k] = as_ulong(r[k]);
  o[5 * i + 4] = as_uint(f);
}

__kernel void round_f16(__global const ushort *x, __global const ushort *y,
                        __global const ushort *z, __global const float *w,
                        __global ushort *o, uint mode) {
  uint i = GID();
  uint a = x[i], b = y[i], c = z[i];
  float fw = w[i];
  uint r[5];
  SET_MODE(mode);
  __asm__ volatile("v_add_f16 %0, %1, %2" : "=v"(r[0]) : "v"(a), "v"(b));
  __asm__ volatile("v_sub_f16 %0, %1, %2" : "=v"(r[1]) : "v"(a), "v"(b));
  __asm__ volatile("v_mul_f16 %0, %1, %2" : "=v"(r[2]) : "v"(a), "v"(b));
  __asm__ volatile("v_fma_f16 %0, %1, %2, %3" : "=v"(r[3]) : "v"(a), "v"(b), "v"(c));
  __asm__ volatile("v_cvt_f16_f32 %0, %1" : "=v"(r[4]) : "v"(fw));
  for (int k = 0; k < 5; k++)
    o[5 * i + k] = (ushort)r[k];
}

// Packed f32 (VOP3P): r0 = a * b + c per half, r1 = a * b, r2 = (a.hi + b.lo, a.lo + b.hi)
// through op_sel / op_sel_hi.
__kernel void round_pk_f32(__global const float2 *x, __global const float2 *y,
                           __global const float2 *z, __global float2 *o, uint mode) {
  uint i = GID();
  float2 a = x[i], b = y[i], c = z[i], r0, r1, r2;
  SET_MODE(mode);
  __asm__ volatile("v_pk_fma_f32 %0, %1, %2, %3" : "=v"(r0) : "v"(a), "v"(b), "v"(c));
  __asm__ volatile("v_pk_mul_f32 %0, %1, %2" : "=v"(r1) : "v"(a), "v"(b));
  __asm__ volatile("v_pk_add_f32 %0, %1, %2 op_sel:[1,0] op_sel_hi:[0,1]"
                   : "=v"(r2) : "v"(a), "v"(b));
  o[3 * i] = r0;
  o[3 * i + 1] = r1;
  o[3 * i + 2] = r2;
}

// Packed f16 (VOP3P): fma, mul, and add with swapped halves of b (op_sel).
__kernel void round_pk_f16(__global const uint *x, __global const uint *y,
                           __global const uint *z, __global uint *o, uint mode) {
  uint i = GID();
  uint a = x[i], b = y[i], c = z[i], r0, r1, r2;
  SET_MODE(mode);
  __asm__ volatile("v_pk_fma_f16 %0, %1, %2, %3" : "=v"(r0) : "v"(a), "v"(b), "v"(c));
  __asm__ volatile("v_pk_mul_f16 %0, %1, %2" : "=v"(r1) : "v"(a), "v"(b));
  __asm__ volatile("v_pk_add_f16 %0, %1, %2 op_sel:[0,1] op_sel_hi:[1,0]"
                   : "=v"(r2) : "v"(a), "v"(b));
  o[3 * i] = r0;
  o[3 * i + 1] = r1;
  o[3 * i + 2] = r2;
}

// DPP and SDWA forms: r0 = a[lane - 1] + b (row_shr:1, bound_ctrl: lane 0 of a row reads
// 0), r1 = high half of a + low half of b as f16 into the high half of r1 (low half kept
// from c).
__kernel void round_dpp_sdwa(__global const uint *x, __global const uint *y,
                             __global const uint *z, __global uint *o, uint mode) {
  uint i = GID();
  uint a = x[i], b = y[i], r0, r1 = z[i];
  SET_MODE(mode);
  __asm__ volatile("v_add_f32_dpp %0, %1, %2 row_shr:1 row_mask:0xf bank_mask:0xf bound_ctrl:1"
                   : "=v"(r0) : "v"(a), "v"(b));
  __asm__ volatile("v_add_f16_sdwa %0, %1, %2 dst_sel:WORD_1 dst_unused:UNUSED_PRESERVE "
                   "src0_sel:WORD_1 src1_sel:WORD_0"
                   : "+v"(r1) : "v"(a), "v"(b));
  o[2 * i] = r0;
  o[2 * i + 1] = r1;
}

// No s_setreg: MODE comes from the kernel descriptor's RSRC1 (the test patches it); the
// kernel reports MODE [7:0] and f32 add/mul, f64 add results.
__kernel void round_kd(__global const float *x, __global const float *y,
                       __global const double *dx, __global const double *dy,
                       __global uint *o, __global double *od) {
  uint i = GID();
  float a = x[i], b = y[i], r0, r1;
  double c = dx[i], d = dy[i], r2;
  uint mode;
  __asm__ volatile("s_getreg_b32 s31, hwreg(HW_REG_MODE, 0, 8)\n v_mov_b32 %0, s31"
                   : "=v"(mode) :: "s31");
  __asm__ volatile("v_add_f32 %0, %1, %2" : "=v"(r0) : "v"(a), "v"(b));
  __asm__ volatile("v_mul_f32 %0, %1, %2" : "=v"(r1) : "v"(a), "v"(b));
  __asm__ volatile("v_add_f64 %0, %1, %2" : "=v"(r2) : "v"(c), "v"(d));
  o[3 * i] = mode;
  o[3 * i + 1] = as_uint(r0);
  o[3 * i + 2] = as_uint(r1);
  od[i] = r2;
}

// v_sqrt_f32 (a transcendental: the same value in every round mode) and v_fract_f32 (a
// rounding op this model does not round in a directed mode: it must fault).
__kernel void round_sqrt(__global const float *x, __global float *o, uint mode) {
  uint i = GID();
  float a = x[i], r;
  SET_MODE(mode);
  __asm__ volatile("v_sqrt_f32 %0, %1" : "=v"(r) : "v"(a));
  o[i] = r;
}

__kernel void round_fract(__global const float *x, __global float *o, uint mode) {
  uint i = GID();
  float a = x[i], r;
  SET_MODE(mode);
  __asm__ volatile("v_fract_f32 %0, %1" : "=v"(r) : "v"(a));
  o[i] = r;
}

// f32 -> integer conversions and v_frexp_exp under a MODE that flushes f32 denormals: the
// integer results are not flushed.
__kernel void cvt_int_flush(__global const float *x, __global uint *o, uint mode) {
  uint i = GID();
  float a = x[i];
  uint r, u, e;
  SET_MODE(mode);
  __asm__ volatile("v_cvt_i32_f32 %0, %1" : "=v"(r) : "v"(a));
  __asm__ volatile("v_cvt_u32_f32 %0, %1" : "=v"(u) : "v"(a));
  __asm__ volatile("v_frexp_exp_i32_f32 %0, %1" : "=v"(e) : "v"(a));
  o[3 * i] = r;
  o[3 * i + 1] = u;
  o[3 * i + 2] = e;
}
