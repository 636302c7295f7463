// Repeated <<<>>> launches of one kernel with the same and with changed arguments (the
// library reuses the last launch's argument list when every value is the same), and the
// call configuration stack beyond its fixed per-thread slots.
#include "check.h"

extern "C" hipError_t __hipPushCallConfiguration(dim3 grid, dim3 block, size_t shared,
                                                 hipStream_t stream);
extern "C" hipError_t __hipPopCallConfiguration(dim3* grid, dim3* block, size_t* shared,
                                                hipStream_t* stream);

struct Pair {
  int a;
  short b;
};

__global__ void add(int* p, int v, Pair q) { p[threadIdx.x] += v + q.a * q.b; }

int main() {
  int *x, *y;
  HIP_CHECK(hipMalloc(&x, 64 * sizeof(int)));
  HIP_CHECK(hipMalloc(&y, 64 * sizeof(int)));
  HIP_CHECK(hipMemset(x, 0, 64 * sizeof(int)));
  HIP_CHECK(hipMemset(y, 0, 64 * sizeof(int)));
  Pair q0{0, 0}, q1{2, 3};
  add<<<1, 64>>>(x, 1, q0);  // x: 1
  add<<<1, 64>>>(x, 1, q0);  // same values: x 2
  add<<<1, 64>>>(y, 1, q0);  // pointer changed: y 1
  add<<<1, 64>>>(y, 10, q0); // int changed: y 11
  add<<<1, 64>>>(y, 10, q1); // struct changed: y 27
  add<<<1, 64>>>(x, 10, q1); // x 18
  add<<<1, 64>>>(x, 10, q1); // same again: x 34
  // Ping-pong between kept argument lists (and a fifth set that replaces one).
  for (int r = 0; r < 3; r++) {
    add<<<1, 64>>>(x, 1, q0);  // x +1
    add<<<1, 64>>>(y, 1, q0);  // y +1
  }
  add<<<1, 64>>>(y, 5, Pair{1, 1});  // y +6
  add<<<1, 64>>>(x, 10, q1);          // x +16
  add<<<1, 64>>>(x, 1, q0);           // x +1
  // x: 34 + 3 + 16 + 1 = 54; y: 27 + 3 + 6 = 36
  HIP_CHECK(hipGetLastError());
  int hx[64], hy[64];
  HIP_CHECK(hipMemcpy(hx, x, sizeof hx, hipMemcpyDeviceToHost));
  HIP_CHECK(hipMemcpy(hy, y, sizeof hy, hipMemcpyDeviceToHost));
  int bad = 0;
  for (int i = 0; i < 64; i++) bad += hx[i] != 54 || hy[i] != 36;
  std::printf("relaunch x=%d y=%d bad=%d\n", hx[0], hy[0], bad);

  // A host address no kernel is registered for, with the launch cache warm:
  // hipErrorInvalidDeviceFunction; the next <<<>>> launch runs.
  int v = 1;
  void* args[] = {&x, &v, &q0};
  hipError_t unknown = hipLaunchKernel((const void*)&bad, dim3(1), dim3(64), args, 0, nullptr);
  hipError_t last = hipGetLastError();
  add<<<1, 64>>>(x, 1, q0);  // x 55
  HIP_CHECK(hipMemcpy(hx, x, sizeof hx, hipMemcpyDeviceToHost));
  std::printf("unknown %s last %s then x=%d\n", hipGetErrorName(unknown), hipGetErrorName(last),
              hx[0]);

  // Six nested configurations: popped last-in first-out, then none is left.
  for (unsigned i = 1; i <= 6; i++)
    HIP_CHECK(__hipPushCallConfiguration(dim3(i), dim3(2 * i), i, nullptr));
  for (unsigned i = 6; i >= 1; i--) {
    dim3 g, b;
    size_t s = 0;
    hipStream_t st = (hipStream_t)1;
    HIP_CHECK(__hipPopCallConfiguration(&g, &b, &s, &st));
    EXPECT(g.x == i && b.x == 2 * i && s == i && st == nullptr);
  }
  dim3 g, b;
  size_t s;
  hipStream_t st;
  hipError_t e = __hipPopCallConfiguration(&g, &b, &s, &st);
  std::printf("empty pop %s last %s\n", hipGetErrorName(e), hipGetErrorName(hipGetLastError()));
  // A null out-pointer: InvalidValue, the configuration is popped all the same.
  HIP_CHECK(__hipPushCallConfiguration(dim3(1), dim3(1), 0, nullptr));
  e = __hipPopCallConfiguration(&g, &b, nullptr, &st);
  hipError_t again = __hipPopCallConfiguration(&g, &b, &s, &st);
  std::printf("null out %s then %s\n", hipGetErrorName(e), hipGetErrorName(again));
  return 0;
}
