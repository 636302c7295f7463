// Managed memory initialised by the host, prefetched to the GPU, incremented by a kernel,
// prefetched back and read by the host.
#include "check.h"

__global__ void bump(int* p, int n, int by) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = p[i] * 2 + by;
}

int main() {
  const int n = 4096;
  int* p;
  HIP_CHECK(hipMallocManaged(&p, n * sizeof(int), hipMemAttachGlobal));
  for (int i = 0; i < n; i++) p[i] = i;
  hipStream_t s;
  HIP_CHECK(hipStreamCreate(&s));
  HIP_CHECK(hipMemPrefetchAsync(p, n * sizeof(int), 0, s));
  bump<<<n / 256, 256, 0, s>>>(p, n, 1);
  HIP_CHECK(hipGetLastError());
  HIP_CHECK(hipMemPrefetchAsync(p, n * sizeof(int), hipCpuDeviceId, s));
  HIP_CHECK(hipStreamSynchronize(s));
  int bad = 0;
  long long sum = 0;
  for (int i = 0; i < n; i++) {
    if (p[i] != 2 * i + 1) bad++;
    sum += p[i];
  }
  std::printf("managed p[0]=%d p[1]=%d p[%d]=%d sum=%lld bad=%d\n", p[0], p[1], n - 1, p[n - 1],
              sum, bad);
  // Without a prefetch: the kernel reaches the pages where they are.
  bump<<<n / 256, 256, 0, s>>>(p, n, 0);
  HIP_CHECK(hipStreamSynchronize(s));
  std::printf("again p[3]=%d\n", p[3]);
  HIP_CHECK(hipStreamDestroy(s));
  HIP_CHECK(hipFree(p));
  return bad != 0;
}
