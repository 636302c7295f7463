// Data formats and 16-bit forms (inline asm: clang-19 has no builtins for
// them): DS D16 reads and `_d16_hi` writes, `buffer_{load,store}_format_d16_hi_x`, the
// packed MTBUF formats 11_11_10 / 10_11_11 with float and integer numeric formats, the
// transcendentals under every MODE round mode, and gfx942's xf32 MFMA. The tests compute
// every expected value on the CPU (emu/tests/shader_formats.rs).
#include "isa_prelude.h"
typedef float floatx2 __attribute__((ext_vector_type(2)));
typedef float floatx4 __attribute__((ext_vector_type(4)));
typedef float floatx16 __attribute__((ext_vector_type(16)));

#define SRSRC(w3)                                                                       \
  "v_readfirstlane_b32 s20, %[lo]\n v_readfirstlane_b32 s21, %[hi]\n"                  \
  " v_readfirstlane_b32 s22, %[nr]\n s_mov_b32 s23, " w3 "\n s_nop 4\n "
#define RIN(p, bytes)                                                                   \
  [lo] "v"((uint)(ulong)(p)), [hi] "v"((uint)((ulong)(p) >> 32) & 0xFFFF),             \
      [nr] "v"((uint)(bytes))
#define SREGS "s20", "s21", "s22", "s23", "memory"
#define DSW "\n s_waitcnt lgkmcnt(0)"

// One wave. Lane i, slots out[8 * i + k]: 0-5 `ds_read_{u8,u8_hi,i8,i8_hi,u16,u16_hi}_d16`
// of lds[i] (bytes: its low byte) into a VGPR holding old + k, the u16 forms with
// offset:128 (lds[i + 64]); 6 the word at w[i] after `ds_write_b16_d16_hi` of old + 6 at
// byte 0 and `ds_write_b8_d16_hi` of old + 7 at byte 3 over 0xFFFFFFFF.
__kernel void ds_d16(__global const ushort *src, __global uint *out, uint seed) {
  __local ushort lds[128];
  __local uint w[64];
  uint i = LID();
  uint old = seed ^ (i * 0x9E3779B9u);
  lds[i] = src[i];
  lds[i + 64] = src[i + 64];
  w[i] = 0xFFFFFFFFu;
  BARRIER();
  uint a = (uint)(ulong)&lds[i];
#define DR(insn, k, off)                                                                \
  do {                                                                                 \
    uint v = old + (k);                                                                \
    __asm__ volatile(insn " %0, %1" off DSW : "+v"(v) : "v"(a) : "memory");           \
    out[8 * i + (k)] = v;                                                              \
  } while (0)
  DR("ds_read_u8_d16", 0, "");
  DR("ds_read_u8_d16_hi", 1, "");
  DR("ds_read_i8_d16", 2, "");
  DR("ds_read_i8_d16_hi", 3, "");
  DR("ds_read_u16_d16", 4, " offset:128");
  DR("ds_read_u16_d16_hi", 5, " offset:128");
  uint wa = (uint)(ulong)&w[i];
  __asm__ volatile("ds_write_b16_d16_hi %0, %1\n ds_write_b8_d16_hi %0, %2 offset:3" DSW
                   ::"v"(wa), "v"(old + 6), "v"(old + 7) : "memory");
  out[8 * i + 6] = w[i];
  out[8 * i + 7] = 0;
}

// Lane i: out[4 * i + 0..2] = `buffer_load_format_d16_hi_x` of element i into a VGPR
// holding old + k: 0 format 16 UINT (src16[i]), 1 format 8 SSCALED (src8[i] -> f16),
// 2 format 16 FLOAT (raw); `buffer_store_format_d16_hi_x` of old (16 UINT) to dst[i];
// out[4 * i + 3] = old.
#define W3_16_UINT "0x14fac"
#define W3_8_SSCALED "0xbfac"
#define W3_16_FLOAT "0x17fac"
__kernel void buf_d16_hi(__global const ushort *src16, __global const uchar *src8,
                         __global ushort *dst, __global uint *out, uint n, uint seed) {
  uint i = GID();
  uint old = seed ^ (i * 0x9E3779B9u);
#define BL(w3, p, esz, k)                                                               \
  do {                                                                                 \
    uint v = old + (k);                                                                \
    __asm__ volatile(SRSRC(w3) "buffer_load_format_d16_hi_x %[d], %[o], s[20:23], 0 "  \
                     "offen\n s_waitcnt vmcnt(0)"                                      \
                     : [d] "+v"(v) : [o] "v"((esz) * i), RIN(p, (esz) * n) : SREGS);   \
    out[4 * i + (k)] = v;                                                              \
  } while (0)
  BL(W3_16_UINT, src16, 2, 0);
  BL(W3_8_SSCALED, src8, 1, 1);
  BL(W3_16_FLOAT, src16, 2, 2);
  __asm__ volatile(SRSRC(W3_16_UINT) "buffer_store_format_d16_hi_x %[d], %[o], s[20:23], 0 "
                   "offen\n s_waitcnt vmcnt(0)"
                   :: [d] "v"(old), [o] "v"(2 * i), RIN(dst, 2 * n) : SREGS);
  out[4 * i + 3] = old;
}

// Lane i: out[12 * i + 3 * f + c] = component c of `tbuffer_load_format_xyz` of src[i]
// with format f: 0 11_11_10 FLOAT, 1 11_11_10 UINT, 2 11_11_10 SSCALED, 3 10_11_11 SINT.
__kernel void packed_fmt(__global const uint *src, __global uint *out, uint n) {
  uint i = GID();
#define TL(fmt, f)                                                                      \
  do {                                                                                 \
    uint x, y, z;                                                                      \
    __asm__ volatile(SRSRC("0") "tbuffer_load_format_xyz v[40:42], %[o], s[20:23], 0 " \
                     "format:[" fmt "] offen\n s_waitcnt vmcnt(0)\n"                   \
                     " v_mov_b32 %[x], v40\n v_mov_b32 %[y], v41\n v_mov_b32 %[z], v42"  \
                     : [x] "=v"(x), [y] "=v"(y), [z] "=v"(z)                           \
                     : [o] "v"(4 * i), RIN(src, 4 * n)                                 \
                     : SREGS, "v40", "v41", "v42");                                    \
    out[12 * i + 3 * (f)] = x;                                                         \
    out[12 * i + 3 * (f) + 1] = y;                                                     \
    out[12 * i + 3 * (f) + 2] = z;                                                     \
  } while (0)
  TL("BUF_DATA_FORMAT_11_11_10,BUF_NUM_FORMAT_FLOAT", 0);
  TL("BUF_DATA_FORMAT_11_11_10,BUF_NUM_FORMAT_UINT", 1);
  TL("BUF_DATA_FORMAT_11_11_10,BUF_NUM_FORMAT_SSCALED", 2);
  TL("BUF_DATA_FORMAT_10_11_11,BUF_NUM_FORMAT_SINT", 3);
}

// v_rcp_f16 with the VOP3 output modifier mul:2, which the emulator does not model: the
// queue must fault naming it.
__kernel void rcp_f16_omod(__global const ushort *xh, __global uint *o) {
  uint i = GID();
  uint h = xh[i];
  uint r;
  __asm__ volatile("v_rcp_f16_e64 %0, %1 mul:2" : "=v"(r) : "v"(h));
  o[i] = r;
}

#define SET_MODE(m)                                                                    \
  __asm__ volatile("v_readfirstlane_b32 s31, %0\n s_nop 4\n"                          \
                   " s_setreg_b32 hwreg(HW_REG_MODE, 0, 8), s31" ::"v"(m)              \
                   : "s31")

// Lane i under MODE = mode: o[20 * i + ..]: 0-6 v_exp/log/rcp/rsq/sqrt/sin/cos_f32 of x[i],
// 7-12 v_rcp/rsq/sqrt_f64 of xd[i] (low, high dwords), 13-19 v_rcp/sqrt/rsq/log/exp/sin/
// cos_f16 of the f16 xh[i].
__kernel void transcendentals(__global const float *x, __global const double *xd,
                              __global const ushort *xh, __global uint *o, uint mode) {
  uint i = GID();
  float a = x[i];
  double d = xd[i];
  uint h = xh[i];
  float r[7];
  double rd[3];
  uint rh[7];
  SET_MODE(mode);
  __asm__ volatile("v_exp_f32 %0, %1" : "=v"(r[0]) : "v"(a));
  __asm__ volatile("v_log_f32 %0, %1" : "=v"(r[1]) : "v"(a));
  __asm__ volatile("v_rcp_f32 %0, %1" : "=v"(r[2]) : "v"(a));
  __asm__ volatile("v_rsq_f32 %0, %1" : "=v"(r[3]) : "v"(a));
  __asm__ volatile("v_sqrt_f32 %0, %1" : "=v"(r[4]) : "v"(a));
  __asm__ volatile("v_sin_f32 %0, %1" : "=v"(r[5]) : "v"(a));
  __asm__ volatile("v_cos_f32 %0, %1" : "=v"(r[6]) : "v"(a));
  __asm__ volatile("v_rcp_f64 %0, %1" : "=v"(rd[0]) : "v"(d));
  __asm__ volatile("v_rsq_f64 %0, %1" : "=v"(rd[1]) : "v"(d));
  __asm__ volatile("v_sqrt_f64 %0, %1" : "=v"(rd[2]) : "v"(d));
  __asm__ volatile("v_rcp_f16 %0, %1" : "=v"(rh[0]) : "v"(h));
  __asm__ volatile("v_sqrt_f16 %0, %1" : "=v"(rh[1]) : "v"(h));
  __asm__ volatile("v_rsq_f16 %0, %1" : "=v"(rh[2]) : "v"(h));
  __asm__ volatile("v_log_f16 %0, %1" : "=v"(rh[3]) : "v"(h));
  __asm__ volatile("v_exp_f16 %0, %1" : "=v"(rh[4]) : "v"(h));
  __asm__ volatile("v_sin_f16 %0, %1" : "=v"(rh[5]) : "v"(h));
  __asm__ volatile("v_cos_f16 %0, %1" : "=v"(rh[6]) : "v"(h));
  SET_MODE(0xF0u);
  for (int k = 0; k < 7; k++)
    o[20 * i + k] = as_uint(r[k]);
  for (int k = 0; k < 3; k++) {
    o[20 * i + 7 + 2 * k] = (uint)as_ulong(rd[k]);
    o[20 * i + 8 + 2 * k] = (uint)(as_ulong(rd[k]) >> 32);
  }
  for (int k = 0; k < 7; k++)
    o[20 * i + 13 + k] = rh[k];
}

typedef half halfx4 __attribute__((ext_vector_type(4)));
typedef short shortx4 __attribute__((ext_vector_type(4)));
typedef short shortx2 __attribute__((ext_vector_type(2)));
// MFMA kernels: one wave, lane l's A/B registers from a[l], b[l], C from c[l], D to d[l].
__kernel void f16_16x16x16(__global const halfx4 *a, __global const halfx4 *b,
                           __global const floatx4 *c, __global floatx4 *d) {
  uint l = LID();
  d[l] = __builtin_amdgcn_mfma_f32_16x16x16f16(a[l], b[l], c[l], 0, 0, 0);
}
__kernel void f16_4x4x4(__global const halfx4 *a, __global const halfx4 *b,
                        __global const floatx4 *c, __global floatx4 *d) {
  uint l = LID();
  d[l] = __builtin_amdgcn_mfma_f32_4x4x4f16(a[l], b[l], c[l], 0, 0, 0);
}
__kernel void bf16_32x32x8(__global const shortx4 *a, __global const shortx4 *b,
                           __global const floatx16 *c, __global floatx16 *d) {
  uint l = LID();
  d[l] = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(a[l], b[l], c[l], 0, 0, 0);
}
#if defined(__gfx90a__)
__kernel void bf16_32x32x4(__global const shortx2 *a, __global const shortx2 *b,
                           __global const floatx16 *c, __global floatx16 *d) {
  uint l = LID();
  d[l] = __builtin_amdgcn_mfma_f32_32x32x4bf16(a[l], b[l], c[l], 0, 0, 0);
}
#endif

#if defined(__gfx942__)
__kernel void xf32_16x16x8(__global const floatx2 *a, __global const floatx2 *b,
                           __global const floatx4 *c, __global floatx4 *d) {
  uint l = LID();
  d[l] = __builtin_amdgcn_mfma_f32_16x16x8_xf32(a[l], b[l], c[l], 0, 0, 0);
}
__kernel void fp8_fp8_16x16x32(__global const long *a, __global const long *b,
                               __global const floatx4 *c, __global floatx4 *d) {
  uint l = LID();
  d[l] = __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(a[l], b[l], c[l], 0, 0, 0);
}
__kernel void bf8_fp8_32x32x16(__global const long *a, __global const long *b,
                               __global const floatx16 *c, __global floatx16 *d) {
  uint l = LID();
  d[l] = __builtin_amdgcn_mfma_f32_32x32x16_bf8_fp8(a[l], b[l], c[l], 0, 0, 0);
}
__kernel void xf32_32x32x4(__global const floatx2 *a, __global const floatx2 *b,
                           __global const floatx16 *c, __global floatx16 *d) {
  uint l = LID();
  d[l] = __builtin_amdgcn_mfma_f32_32x32x4_xf32(a[l], b[l], c[l], 0, 0, 0);
}
#endif
