// Matrix cores: MFMA builtins available on both gfx90a and gfx94x, plus AGPR traffic.
#include "isa_prelude.h"
typedef float float16_ __attribute__((ext_vector_type(16)));
typedef float float4_ __attribute__((ext_vector_type(4)));
typedef half half4_ __attribute__((ext_vector_type(4)));
typedef short short4_ __attribute__((ext_vector_type(4)));
typedef double double4_ __attribute__((ext_vector_type(4)));

// One 32x32x8 f16 MFMA per wave: A, B are 32x8 / 8x32 f16, D is 32x32 f32.
__kernel void mfma_f32_32x32x8f16(__global const half *a, __global const half *b,
                                  __global float *d) {
  uint lane = LID();
  half4_ av = ((__global const half4_ *)a)[lane];
  half4_ bv = ((__global const half4_ *)b)[lane];
  float16_ acc = 0;
  acc = __builtin_amdgcn_mfma_f32_32x32x8f16(av, bv, acc, 0, 0, 0);
  for (int k = 0; k < 16; k++)
    d[lane * 16 + k] = acc[k];
}

__kernel void mfma_f32_16x16x4f32(__global const float *a, __global const float *b,
                                  __global float *d) {
  uint lane = LID();
  float4_ acc = 0;
  acc = __builtin_amdgcn_mfma_f32_16x16x4f32(a[lane], b[lane], acc, 0, 0, 0);
  acc = __builtin_amdgcn_mfma_f32_16x16x4f32(a[lane + 64], b[lane + 64], acc, 0, 0, 0);
  ((__global float4_ *)d)[lane] = acc;
}

__kernel void mfma_f32_16x16x16bf16(__global const short *a, __global const short *b,
                                    __global float *d) {
  uint lane = LID();
  short4_ av = ((__global const short4_ *)a)[lane];
  short4_ bv = ((__global const short4_ *)b)[lane];
  float4_ acc = 0;
  acc = __builtin_amdgcn_mfma_f32_16x16x16bf16_1k(av, bv, acc, 0, 0, 0);
  ((__global float4_ *)d)[lane] = acc;
}

__kernel void mfma_f64_16x16x4f64(__global const double *a, __global const double *b,
                                  __global double *d) {
  uint lane = LID();
  double4_ acc = 0;
  acc = __builtin_amdgcn_mfma_f64_16x16x4f64(a[lane], b[lane], acc, 0, 0, 0);
  ((__global double4_ *)d)[lane] = acc;
}
