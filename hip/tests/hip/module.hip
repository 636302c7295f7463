// The module API on a code object built with `hipcc --genco` (path in argv[1]):
// hipModuleLoad, hipModuleLoadData, hipModuleGetFunction, hipModuleLaunchKernel with
// kernelParams and with `extra`, hipModuleUnload (a function of an unloaded module is an error).
#include "check.h"
#include <cstring>
#include <fstream>
#include <iterator>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  hipModule_t m;
  HIP_CHECK(hipModuleLoad(&m, argv[1]));
  hipFunction_t f;
  HIP_CHECK(hipModuleGetFunction(&f, m, "axpy"));
  EXPECT(hipModuleGetFunction(&f, m, "nope") == hipErrorNotFound);
  HIP_CHECK(hipModuleGetFunction(&f, m, "axpy"));
  const int n = 300;
  int *x, *y;
  HIP_CHECK(hipHostMalloc(&x, n * 4, 0));
  HIP_CHECK(hipHostMalloc(&y, n * 4, 0));
  for (int i = 0; i < n; i++) {
    x[i] = i;
    y[i] = 1;
  }
  int a = 3;
  int cnt = n;
  void* params[] = {&a, &x, &y, &cnt};
  HIP_CHECK(hipModuleLaunchKernel(f, (n + 63) / 64, 1, 1, 64, 1, 1, 0, nullptr, params, nullptr));
  HIP_CHECK(hipDeviceSynchronize());
  std::printf("params y[0]=%d y[1]=%d y[%d]=%d\n", y[0], y[1], n - 1, y[n - 1]);

  // The same arguments through `extra`: one buffer laid out as the kernel's kernarg segment.
  struct {
    int a;
    int pad;
    int* x;
    int* y;
    int n;
  } buf = {2, 0, x, y, n};
  size_t size = sizeof(buf);
  void* extra[] = {HIP_LAUNCH_PARAM_BUFFER_POINTER, &buf, HIP_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   HIP_LAUNCH_PARAM_END};
  HIP_CHECK(hipModuleLaunchKernel(f, (n + 63) / 64, 1, 1, 64, 1, 1, 0, nullptr, nullptr, extra));
  HIP_CHECK(hipDeviceSynchronize());
  std::printf("extra y[0]=%d y[1]=%d y[%d]=%d\n", y[0], y[1], n - 1, y[n - 1]);

  // hipModuleLoadData from memory.
  std::ifstream in(argv[1], std::ios::binary);
  std::vector<char> image((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  hipModule_t m2;
  HIP_CHECK(hipModuleLoadData(&m2, image.data()));
  hipFunction_t f2;
  HIP_CHECK(hipModuleGetFunction(&f2, m2, "axpy"));
  a = 1;
  HIP_CHECK(hipModuleLaunchKernel(f2, (n + 63) / 64, 1, 1, 64, 1, 1, 0, nullptr, params, nullptr));
  // No synchronize: the unload waits for the launch still queued on the module's code.
  HIP_CHECK(hipModuleUnload(m2));
  std::printf("loaddata y[1]=%d\n", y[1]);
  // A function of the unloaded module: an error, not a crash; the first module's function
  // still launches.
  hipError_t stale =
      hipModuleLaunchKernel(f2, (n + 63) / 64, 1, 1, 64, 1, 1, 0, nullptr, params, nullptr);
  HIP_CHECK(hipModuleLaunchKernel(f, (n + 63) / 64, 1, 1, 64, 1, 1, 0, nullptr, params, nullptr));
  HIP_CHECK(hipDeviceSynchronize());
  std::printf("stale %s then y[1]=%d\n", hipGetErrorName(stale), y[1]);
  // A block above the device's 1024 work-items: InvalidConfiguration, also the last error.
  hipError_t big =
      hipModuleLaunchKernel(f, 1, 1, 1, 1, 1, 2048, 0, nullptr, params, nullptr);
  std::printf("block 1x1x2048 %s last %s\n", hipGetErrorName(big),
              hipGetErrorName(hipGetLastError()));
  HIP_CHECK(hipModuleUnload(m));
  EXPECT(hipModuleUnload(m) != hipSuccess);
  HIP_CHECK(hipHostFree(x));
  HIP_CHECK(hipHostFree(y));
  return 0;
}
