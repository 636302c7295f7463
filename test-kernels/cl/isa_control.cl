// Control flow: divergent loops (EXEC masking), a switch lowered to a jump table, device
// function calls (s_swappc_b64) and a private (scratch) array indexed at run time.
#include "isa_prelude.h"
__attribute__((noinline)) int collatz_steps(uint x) {
  int n = 0;
  while (x > 1 && n < 1000) {
    x = (x & 1) ? 3 * x + 1 : x / 2;
    n++;
  }
  return n;
}

__attribute__((noinline)) float poly(float x, __global const float *c, int n) {
  float r = 0.0f;
  for (int k = n - 1; k >= 0; k--)
    r = r * x + c[k];
  return r;
}

__kernel void control(__global const uint *in, __global const float *coef, __global int *out,
                      __global float *fout) {
  uint i = GID();
  uint x = in[i];
  int r;
  switch (x % 9) {
  case 0: r = (int)x * 3; break;
  case 1: r = (int)x ^ 0x55; break;
  case 2: r = (int)(x >> 2) + 17; break;
  case 3: r = -(int)x; break;
  case 4: r = (int)(x * x); break;
  case 5: r = (int)x | 0x100; break;
  case 6: r = (int)x - 1000; break;
  case 7: r = (int)(x / 7u); break;
  default: r = 42; break;
  }
  out[2 * i] = r;
  out[2 * i + 1] = collatz_steps(x);
  fout[i] = poly((float)x * 0.001f, coef, (int)(x & 7) + 1);
}

__kernel void scratch_array(__global const int *in, __global int *out) {
  uint i = GID();
  volatile int a[37];
  for (int k = 0; k < 37; k++)
    a[k] = in[(i + k) % 64] * k;
  int s = 0;
  for (int k = 0; k < 37; k++)
    s += a[(k * 7 + i) % 37];
  out[i] = s;
}
