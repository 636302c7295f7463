// HIP device code for issue 16's "must show" list, each kernel one feature family:
// divergent loops with data-dependent trip counts, a dense switch (jump table) and a
// noinline device function (s_swappc_b64); 32/64-bit signed and unsigned division and
// modulo; f16/bf16 conversions and f64 arithmetic; a wave64 prefix sum from DPP; float
// and 64-bit global atomics; an MFMA 16x16x16 product; a private array indexed at run
// time (scratch). Built with -nogpuinc: the few HIP spellings needed are defined here.
#define __global__ __attribute__((global))
#define __device__ __attribute__((device))
typedef unsigned int uint;
typedef unsigned long long u64;
typedef long long i64;
typedef float float4_ __attribute__((ext_vector_type(4)));

static __device__ inline uint gid() {
  return __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
         __builtin_amdgcn_workitem_id_x();
}

__attribute__((noinline)) __device__ uint mix(uint a, uint b) {
  return (a * 2654435761u) ^ (b >> 3);
}

extern "C" __global__ void branchy(const uint *in, uint *out) {
  uint i = gid();
  uint x = in[i];
  uint acc = 1;
  for (uint k = 0; k < (x & 63); k++) {
    acc = acc * 5 + k;
    if (acc & 0x100)
      acc ^= x;
  }
  uint r;
  switch (x % 10) {
  case 0: r = acc + 11; break;
  case 1: r = acc * 3; break;
  case 2: r = acc >> 2; break;
  case 3: r = ~acc; break;
  case 4: r = acc ^ 0xdead; break;
  case 5: r = acc - x; break;
  case 6: r = acc | 7; break;
  case 7: r = acc & 0xffff; break;
  case 8: r = acc << 3; break;
  default: r = mix(acc, x); break;
  }
  out[2 * i] = r;
  out[2 * i + 1] = mix(x, acc);
}

extern "C" __global__ void divmod(const int *a, const int *b, const i64 *la, const i64 *lb,
                                  int *q32, i64 *q64) {
  uint i = gid();
  int x = a[i], y = b[i];
  q32[4 * i] = x / y;
  q32[4 * i + 1] = x % y;
  q32[4 * i + 2] = (int)((uint)x / (uint)y);
  q32[4 * i + 3] = (int)((uint)x % (uint)y);
  i64 lx = la[i], ly = lb[i];
  q64[4 * i] = lx / ly;
  q64[4 * i + 1] = lx % ly;
  q64[4 * i + 2] = (i64)((u64)lx / (u64)ly);
  q64[4 * i + 3] = (i64)((u64)lx % (u64)ly);
}

extern "C" __global__ void floats(const float *f, const double *d, unsigned short *h,
                                  unsigned short *bf, float *back, double *dout) {
  uint i = gid();
  _Float16 hv = (_Float16)f[i];
  __bf16 bv = (__bf16)f[i];
  h[i] = __builtin_bit_cast(unsigned short, hv);
  bf[i] = __builtin_bit_cast(unsigned short, bv);
  back[2 * i] = (float)hv;
  back[2 * i + 1] = (float)bv;
  double x = d[i];
  dout[2 * i] = x * 3.25 + 1.0 / x;
  dout[2 * i + 1] = __builtin_fma(x, x, -2.5) / (x + 7.0);
}

// Inclusive prefix sum over each wave of 64 lanes: row_shr 1/2/4/8 inside rows of 16,
// then row_bcast:15 and row_bcast:31 across rows (the gfx9 DPP scan).
extern "C" __global__ void scan(const int *in, int *out) {
  uint i = gid();
  int x = in[i];
  x += __builtin_amdgcn_update_dpp(0, x, 0x111, 0xf, 0xf, false);
  x += __builtin_amdgcn_update_dpp(0, x, 0x112, 0xf, 0xf, false);
  x += __builtin_amdgcn_update_dpp(0, x, 0x114, 0xf, 0xf, false);
  x += __builtin_amdgcn_update_dpp(0, x, 0x118, 0xf, 0xf, false);
  x += __builtin_amdgcn_update_dpp(0, x, 0x142, 0xa, 0xf, false);
  x += __builtin_amdgcn_update_dpp(0, x, 0x143, 0xc, 0xf, false);
  out[i] = x;
}

extern "C" __global__ void atomics(const float *in, float *fsum, double *dsum, u64 *u) {
  uint i = gid();
  float v = in[i];
  __atomic_fetch_add(fsum, v, __ATOMIC_RELAXED);
  __atomic_fetch_add(dsum, (double)v * 0.5, __ATOMIC_RELAXED);
  __atomic_fetch_add(&u[0], (u64)i << 20, __ATOMIC_RELAXED);
  __atomic_fetch_max(&u[1], (u64)i * 0x100000001ull, __ATOMIC_RELAXED);
  __atomic_fetch_or(&u[2], 1ull << (i % 64), __ATOMIC_RELAXED);
  u64 old = __atomic_load_n(&u[3], __ATOMIC_RELAXED);
  while (!__atomic_compare_exchange_n(&u[3], &old, old + 3, false, __ATOMIC_RELAXED,
                                      __ATOMIC_RELAXED))
    ;
}

// D (16x16) = A (16x16) * B (16x16), one wave, four v_mfma_f32_16x16x4f32 steps over K.
// Operand layout (AMD matrix instruction calculator): A[i][k] in lane i + 16 k, B[k][j]
// in lane j + 16 k, D[i][j] in lane j + 16 (i / 4), element i % 4.
extern "C" __global__ void mfma(const float *a, const float *b, float *d) {
  uint lane = __builtin_amdgcn_workitem_id_x();
  uint r = lane % 16, q = lane / 16;
  float4_ acc = {0, 0, 0, 0};
  for (int k0 = 0; k0 < 16; k0 += 4) {
    float av = a[r * 16 + k0 + q];
    float bv = b[(k0 + q) * 16 + r];
    acc = __builtin_amdgcn_mfma_f32_16x16x4f32(av, bv, acc, 0, 0, 0);
  }
  for (int e = 0; e < 4; e++)
    d[(4 * q + e) * 16 + r] = acc[e];
}

extern "C" __global__ void private_array(const int *in, int *out, uint n) {
  uint i = gid();
  volatile int a[40];
  for (uint k = 0; k < 40; k++)
    a[k] = in[(i + k) % n] ^ (int)k;
  int s = 0;
  for (uint k = 0; k < 40; k++)
    s = s * 3 + a[(k * 7 + in[i]) % 40];
  out[i] = s;
}
