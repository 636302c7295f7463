// Device-level calls through the C ABI (g++ against Debian's headers), on two emulated
// GPUs: peer access, hipMemGetInfo, hipDeviceReset, and an IPC handle.
#include <hip/hip_runtime.h>
#include <cstdio>
#include <cstdlib>

static int checks = 0;
#define CHECK(c)                                                      \
  do {                                                                \
    checks++;                                                         \
    if (!(c)) {                                                       \
      std::printf("FAIL %s:%d %s\n", __FILE__, __LINE__, #c);         \
      std::exit(1);                                                   \
    }                                                                 \
  } while (0)
#define OK(x) CHECK((x) == hipSuccess)

int main() {
  int n = 0;
  OK(hipGetDeviceCount(&n));
  CHECK(n == 2);

  // Peer access.
  int can = -1;
  OK(hipDeviceCanAccessPeer(&can, 0, 1));
  CHECK(can == 1);
  OK(hipDeviceCanAccessPeer(&can, 0, 0));
  CHECK(can == 0);
  CHECK(hipDeviceCanAccessPeer(&can, 0, 7) == hipErrorInvalidDevice);
  OK(hipSetDevice(0));
  CHECK(hipDeviceDisablePeerAccess(1) == hipErrorPeerAccessNotEnabled);
  CHECK(hipDeviceEnablePeerAccess(1, 1) == hipErrorInvalidValue);
  OK(hipDeviceEnablePeerAccess(1, 0));
  CHECK(hipDeviceEnablePeerAccess(1, 0) == hipErrorPeerAccessAlreadyEnabled);
  CHECK(hipDeviceEnablePeerAccess(0, 0) == hipErrorInvalidDevice);
  // A copy from GPU 1's memory to GPU 0's, on GPU 0, with access enabled.
  unsigned *a1, *a0, h[4] = {0, 0, 0, 0};
  OK(hipSetDevice(1));
  OK(hipMalloc(&a1, 4096));
  OK(hipMemset(a1, 0x11, 4096));
  OK(hipSetDevice(0));
  OK(hipMalloc(&a0, 4096));
  OK(hipMemcpy(a0, a1, 16, hipMemcpyDeviceToDevice));
  OK(hipMemcpy(h, a0, 16, hipMemcpyDeviceToHost));
  CHECK(h[0] == 0x11111111u && h[3] == 0x11111111u);
  OK(hipDeviceDisablePeerAccess(1));
  CHECK(hipDeviceDisablePeerAccess(1) == hipErrorPeerAccessNotEnabled);

  // Memory info: allocating VRAM lowers what is free by at least its size.
  size_t free0 = 0, total = 0, free1 = 0, free2 = 0;
  hipDeviceProp_t prop;
  OK(hipGetDeviceProperties(&prop, 0));
  OK(hipMemGetInfo(&free0, &total));
  CHECK(total == prop.totalGlobalMem && free0 <= total && free0 > 0);
  void* big;
  OK(hipMalloc(&big, 64 << 20));
  OK(hipMemGetInfo(&free1, &total));
  CHECK(free1 + (64 << 20) <= free0);
  OK(hipFree(big));
  OK(hipMemGetInfo(&free2, &total));
  CHECK(free2 == free0);
  CHECK(hipMemGetInfo(nullptr, &total) == hipErrorInvalidValue);
  std::printf("meminfo total=%zu allocated_64MiB_drop=%d\n", total, free0 - free1 >= (64u << 20));

  // Reset: the current GPU's streams and allocations are gone; GPU 1's stay.
  hipStream_t s;
  OK(hipStreamCreate(&s));
  void* p;
  OK(hipMalloc(&p, 4096));
  OK(hipDeviceReset());
  CHECK(hipStreamQuery(s) == hipErrorInvalidHandle);
  CHECK(hipFree(p) == hipErrorInvalidValue);
  CHECK(hipFree(a0) == hipErrorInvalidValue);
  OK(hipSetDevice(1));
  OK(hipFree(a1));
  OK(hipSetDevice(0));
  OK(hipStreamCreate(&s));
  OK(hipStreamDestroy(s));

  // An IPC handle of hipMalloc memory (opened in another process by tests/c/ipc.cpp).
  hipIpcMemHandle_t ih;
  OK(hipMalloc(&p, 4096));
  OK(hipIpcGetMemHandle(&ih, p));
  OK(hipFree(p));
  std::printf("device checks passed: %d\n", checks);
  return 0;
}
