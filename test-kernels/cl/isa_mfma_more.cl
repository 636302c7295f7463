// MFMA types beyond dense f32/f16/bf16 and the CBSZ/ABID/BLGP modifiers. Each kernel runs
// one wave: lane l reads its A and B registers from a[l], b[l] (raw), C is zero, and D's
// registers go to d[l * NREGS + r]; the test lays matrices out and reads them back by AMD's
// matrix instruction calculator layouts.
#include "isa_prelude.h"
typedef float floatx4 __attribute__((ext_vector_type(4)));
typedef float floatx16 __attribute__((ext_vector_type(16)));
typedef float floatx32 __attribute__((ext_vector_type(32)));
typedef int intx4 __attribute__((ext_vector_type(4)));
typedef int intx16 __attribute__((ext_vector_type(16)));
typedef int intx32 __attribute__((ext_vector_type(32)));
typedef double doublex4 __attribute__((ext_vector_type(4)));
typedef short shortx2 __attribute__((ext_vector_type(2)));
typedef half halfx4 __attribute__((ext_vector_type(4)));

#define K(name, AT, DT, call)                                                           \
  __kernel void name(__global const AT *a, __global const AT *b, __global DT *d) {      \
    uint l = LID();                                                                     \
    DT acc = 0;                                                                         \
    acc = call;                                                                         \
    d[l] = acc;                                                                         \
  }

// Both targets.
K(f64_16x16x4, double, doublex4, __builtin_amdgcn_mfma_f64_16x16x4f64(a[l], b[l], acc, 0, 0, 0))
K(f64_4x4x4, double, double, __builtin_amdgcn_mfma_f64_4x4x4f64(a[l], b[l], acc, 0, 0, 0))
K(i8_32x32x4_cbsz1_abid1, int, intx32,
  __builtin_amdgcn_mfma_i32_32x32x4i8(a[l], b[l], acc, 1, 1, 0))
K(i8_16x16x4_cbsz2_abid3, int, intx16,
  __builtin_amdgcn_mfma_i32_16x16x4i8(a[l], b[l], acc, 2, 3, 0))
K(i8_4x4x4_cbsz4_abid5_blgp2, int, intx4,
  __builtin_amdgcn_mfma_i32_4x4x4i8(a[l], b[l], acc, 4, 5, 2))
K(f32_32x32x1_blgp3, float, floatx32,
  __builtin_amdgcn_mfma_f32_32x32x1f32(a[l], b[l], acc, 0, 0, 3))
K(f32_16x16x4_blgp1, float, floatx4,
  __builtin_amdgcn_mfma_f32_16x16x4f32(a[l], b[l], acc, 0, 0, 1))
K(f16_4x4x4_cbsz3_abid5_blgp6, halfx4, floatx4,
  __builtin_amdgcn_mfma_f32_4x4x4f16(a[l], b[l], acc, 3, 5, 6))

#if defined(__gfx90a__)
K(i8_32x32x8, int, intx16, __builtin_amdgcn_mfma_i32_32x32x8i8(a[l], b[l], acc, 0, 0, 0))
K(i8_16x16x16_blgp7, int, intx4, __builtin_amdgcn_mfma_i32_16x16x16i8(a[l], b[l], acc, 0, 0, 7))
K(bf16_32x32x2_cbsz1_abid0_blgp4, shortx2, floatx32,
  __builtin_amdgcn_mfma_f32_32x32x2bf16(a[l], b[l], acc, 1, 0, 4))
K(bf16_16x16x8, shortx2, floatx4, __builtin_amdgcn_mfma_f32_16x16x8bf16(a[l], b[l], acc, 0, 0, 0))
#endif

#if defined(__gfx942__)
K(i8_16x16x32, long, intx4, __builtin_amdgcn_mfma_i32_16x16x32_i8(a[l], b[l], acc, 0, 0, 0))
K(i8_32x32x16, long, intx16, __builtin_amdgcn_mfma_i32_32x32x16_i8(a[l], b[l], acc, 0, 0, 0))
K(fp8_fp8_16x16x32, long, floatx4,
  __builtin_amdgcn_mfma_f32_16x16x32_fp8_fp8(a[l], b[l], acc, 0, 0, 0))
K(bf8_fp8_16x16x32, long, floatx4,
  __builtin_amdgcn_mfma_f32_16x16x32_bf8_fp8(a[l], b[l], acc, 0, 0, 0))
K(fp8_bf8_32x32x16, long, floatx16,
  __builtin_amdgcn_mfma_f32_32x32x16_fp8_bf8(a[l], b[l], acc, 0, 0, 0))
K(bf8_bf8_32x32x16, long, floatx16,
  __builtin_amdgcn_mfma_f32_32x32x16_bf8_bf8(a[l], b[l], acc, 0, 0, 0))
K(f64_16x16x4_neg5, double, doublex4,
  __builtin_amdgcn_mfma_f64_16x16x4f64(a[l], b[l], acc, 0, 0, 5))

// SMFMAC: A compressed (a[l]), B dense (b[l]), the compression index per lane (ix[l]).
typedef half halfx8 __attribute__((ext_vector_type(8)));
typedef short shortx4 __attribute__((ext_vector_type(4)));
typedef short shortx8 __attribute__((ext_vector_type(8)));
typedef int intx2 __attribute__((ext_vector_type(2)));
#define S(name, AT, BT, DT, call)                                                      \
  __kernel void name(__global const AT *a, __global const BT *b, __global const int *ix,  \
                     __global DT *d) {                                                 \
    uint l = LID();                                                                    \
    DT acc = 0;                                                                        \
    acc = call;                                                                        \
    d[l] = acc;                                                                        \
  }
S(sp_f16_16x16x32, halfx4, halfx8, floatx4,
  __builtin_amdgcn_smfmac_f32_16x16x32_f16(a[l], b[l], acc, ix[l], 0, 0))
S(sp_f16_32x32x16, halfx4, halfx8, floatx16,
  __builtin_amdgcn_smfmac_f32_32x32x16_f16(a[l], b[l], acc, ix[l], 0, 0))
S(sp_bf16_16x16x32, shortx4, shortx8, floatx4,
  __builtin_amdgcn_smfmac_f32_16x16x32_bf16(a[l], b[l], acc, ix[l], 0, 0))
S(sp_i8_16x16x64, intx2, intx4, intx4,
  __builtin_amdgcn_smfmac_i32_16x16x64_i8(a[l], b[l], acc, ix[l], 0, 0))
S(sp_i8_32x32x32, intx2, intx4, intx16,
  __builtin_amdgcn_smfmac_i32_32x32x32_i8(a[l], b[l], acc, ix[l], 0, 0))
S(sp_fp8_bf8_16x16x64, intx2, intx4, floatx4,
  __builtin_amdgcn_smfmac_f32_16x16x64_fp8_bf8(a[l], b[l], acc, ix[l], 0, 0))
S(sp_bf8_fp8_32x32x32, intx2, intx4, floatx16,
  __builtin_amdgcn_smfmac_f32_32x32x32_bf8_fp8(a[l], b[l], acc, ix[l], 0, 0))
// CBSZ 0: ABID picks the compression index set (8-bit sets for 16-bit inputs, 16-bit sets
// for 8-bit inputs); CBSZ != 0: ABID is ignored, the lowest set is used.
S(sp_f16_16x16x32_abid3, halfx4, halfx8, floatx4,
  __builtin_amdgcn_smfmac_f32_16x16x32_f16(a[l], b[l], acc, ix[l], 0, 3))
S(sp_bf16_16x16x32_abid2, shortx4, shortx8, floatx4,
  __builtin_amdgcn_smfmac_f32_16x16x32_bf16(a[l], b[l], acc, ix[l], 0, 2))
S(sp_f16_32x32x16_cbsz1, halfx4, halfx8, floatx16,
  __builtin_amdgcn_smfmac_f32_32x32x16_f16(a[l], b[l], acc, ix[l], 1, 3))
S(sp_i8_16x16x64_abid1, intx2, intx4, intx4,
  __builtin_amdgcn_smfmac_i32_16x16x64_i8(a[l], b[l], acc, ix[l], 0, 1))
S(sp_fp8_bf8_16x16x64_abid1, intx2, intx4, floatx4,
  __builtin_amdgcn_smfmac_f32_16x16x64_fp8_bf8(a[l], b[l], acc, ix[l], 0, 1))
#endif
