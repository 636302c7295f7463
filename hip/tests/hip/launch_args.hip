// <<<>>> launches of a kernel whose arguments have mixed sizes and alignments (1, 2, 4, 8
// bytes, by-value structs with padding, a pointer in the middle): the library copies each
// argument's bytes from the stub's argument array into the kernarg segment by a plan made
// from the metadata. Two launches with different values, each checked value by value, with
// the block size the kernel sees (hipcc 5.2: code object v4, from the dispatch packet); then a null entry in hipLaunchKernel's argument array (hipErrorInvalidValue, nothing
// launched) and a launch after it; blocks above the device's 1024 work-items
// (hipErrorInvalidConfiguration).
#include "check.h"

#include <cstring>

struct Odd {
  char c;
  double d;
  short s;
};
struct Three {
  int v[3];
};

// 32-bit stores only (64-bit values as two halves, doubles and floats as their bits): no
// 64-bit sign extension or conversion.
__global__ void mixed(int* out, char c, short s, Odd o, int i, int* p, long long l, float f,
                      Three t, unsigned char last) {
  if (threadIdx.x == 0 && threadIdx.y == 0 && blockIdx.x == 0 && blockIdx.y == 0) {
    unsigned long long d = __double_as_longlong(o.d), pp = (unsigned long long)p;
    out[0] = c;
    out[1] = s;
    out[2] = o.c;
    out[3] = (int)d;
    out[4] = (int)(d >> 32);
    out[5] = o.s;
    out[6] = i;
    out[7] = (int)pp;
    out[8] = (int)(pp >> 32);
    out[9] = (int)l;
    out[10] = (int)((unsigned long long)l >> 32);
    out[11] = __float_as_int(f);
    out[12] = t.v[0] + 10 * t.v[1] + 100 * t.v[2];
    out[13] = last;
    out[14] = blockDim.x * 1000 + blockDim.y;
  }
}

static int check(const int* h, int v, int bx, int by, int* p) {
  double d = 2.5 + v;
  float f = 1.75f + v;
  unsigned long long db, pp = (unsigned long long)p, l = (unsigned long long)(-(1LL << 40) - v);
  int fb;
  std::memcpy(&db, &d, 8);
  std::memcpy(&fb, &f, 4);
  int want[15] = {-5 - v, -300 - v, 3 + v, (int)db, (int)(db >> 32), -7 - v, 123456 + v,
                  (int)pp, (int)(pp >> 32), (int)l, (int)(l >> 32), fb, (1 + v) + 20 + 300,
                  200 + v, bx * 1000 + by};
  int bad = 0;
  for (int k = 0; k < 15; k++)
    if (h[k] != want[k]) {
      std::printf("out[%d] = %d, want %d\n", k, h[k], want[k]);
      bad++;
    }
  return bad;
}

int main() {
  int* out;
  int* p;
  HIP_CHECK(hipMalloc(&out, 16 * sizeof(int)));
  HIP_CHECK(hipMalloc(&p, 64));
  int h[16];
  int bad = 0;
  for (int v : {0, 9}) {
    HIP_CHECK(hipMemset(out, 0, 16 * sizeof(int)));
    int bx = v ? 64 : 8, by = v ? 1 : 4;
    Odd o{(char)(3 + v), 2.5 + v, (short)(-7 - v)};
    Three t{{(int)(1 + v), 2, 3}};
    mixed<<<dim3(2, 3), dim3(bx, by)>>>(out, (char)(-5 - v), (short)(-300 - v), o,
                                        (int)(123456 + v), p, -(1LL << 40) - v, 1.75f + v, t,
                                        (unsigned char)(200 + v));
    HIP_CHECK(hipGetLastError());
    HIP_CHECK(hipMemcpy(h, out, sizeof h, hipMemcpyDeviceToHost));
    bad += check(h, v, bx, by, p);
  }
  std::printf("mixed bad=%d\n", bad);

  // A null argument pointer: InvalidValue (also the last error); the next launch runs.
  char c = -5;
  short s = -300;
  Odd o{3, 2.5, -7};
  int i = 123456;
  long long l = -(1LL << 40);
  float f = 1.75f;
  Three t{{1, 2, 3}};
  unsigned char last = 200;
  void* args[] = {&out, &c, &s, &o, &i, nullptr, &l, &f, &t, &last};
  hipError_t e = hipLaunchKernel((const void*)mixed, dim3(1), dim3(8, 4), args, 0, nullptr);
  hipError_t le = hipGetLastError();
  args[5] = &p;
  HIP_CHECK(hipMemset(out, 0, 16 * sizeof(int)));
  HIP_CHECK(hipLaunchKernel((const void*)mixed, dim3(1), dim3(8, 4), args, 0, nullptr));
  HIP_CHECK(hipMemcpy(h, out, sizeof h, hipMemcpyDeviceToHost));
  std::printf("null arg %s last %s then bad=%d\n", hipGetErrorName(e), hipGetErrorName(le),
              check(h, 0, 8, 4, p));

  // A block of more work-items than the device's 1024: InvalidConfiguration, returned and
  // the last error, through <<<>>> and hipLaunchKernel; nothing runs, the next launch does.
  // A zero block stays InvalidValue.
  args[5] = &p;
  const dim3 blocks[] = {dim3(2048), dim3(1025), dim3(1, 1, 2048), dim3(64, 32)};
  for (const dim3& b : blocks) {
    HIP_CHECK(hipMemset(out, 0, 16 * sizeof(int)));
    mixed<<<dim3(1), b>>>(out, c, s, o, i, p, l, f, t, last);
    hipError_t chevron = hipGetLastError();
    e = hipLaunchKernel((const void*)mixed, dim3(1), b, args, 0, nullptr);
    le = hipGetLastError();
    HIP_CHECK(hipMemcpy(h, out, sizeof h, hipMemcpyDeviceToHost));
    std::printf("block %ux%ux%u <<<>>> %s launch %s last %s out[0]=%d\n", b.x, b.y, b.z,
                hipGetErrorName(chevron), hipGetErrorName(e), hipGetErrorName(le), h[0]);
  }
  e = hipLaunchKernel((const void*)mixed, dim3(1), dim3(0), args, 0, nullptr);
  std::printf("block 0 %s\n", hipGetErrorName(e));
  mixed<<<dim3(1), dim3(8, 4)>>>(out, c, s, o, i, p, l, f, t, last);
  HIP_CHECK(hipGetLastError());
  HIP_CHECK(hipMemcpy(h, out, sizeof h, hipMemcpyDeviceToHost));
  std::printf("after bad=%d\n", check(h, 0, 8, 4, p));
  return 0;
}
