// hipMallocAsync memory written by a kernel, copied out, freed on the stream, and the
// pool's memory reused by the next allocation.
#include "check.h"
#include <vector>

__global__ void iota(unsigned long long* p, unsigned long long base, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) p[i] = base + (unsigned long long)i * i;
}
__global__ void add(const unsigned long long* a, unsigned long long* b, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) b[i] += a[i];
}

int main() {
  const int n = 1000;
  hipStream_t s;
  HIP_CHECK(hipStreamCreate(&s));
  unsigned long long *a, *b;
  HIP_CHECK(hipMallocAsync((void**)&a, n * 8, s));
  HIP_CHECK(hipMallocAsync((void**)&b, n * 8, s));
  iota<<<(n + 127) / 128, 128, 0, s>>>(a, 1000, n);
  iota<<<(n + 127) / 128, 128, 0, s>>>(b, 5, n);
  add<<<(n + 127) / 128, 128, 0, s>>>(a, b, n);
  std::vector<unsigned long long> h(n);
  HIP_CHECK(hipMemcpyAsync(h.data(), b, n * 8, hipMemcpyDeviceToHost, s));
  HIP_CHECK(hipFreeAsync(a, s));
  HIP_CHECK(hipFreeAsync(b, s));
  HIP_CHECK(hipStreamSynchronize(s));
  int bad = 0;
  for (int i = 0; i < n; i++)
    if (h[i] != 1005ull + 2ull * i * i) bad++;
  std::printf("mallocasync h[0]=%llu h[1]=%llu h[%d]=%llu bad=%d\n", h[0], h[1], n - 1,
              h[n - 1], bad);
  // Stream-ordered reuse: the next allocation on the same stream may take the freed block.
  unsigned long long* c;
  HIP_CHECK(hipMallocAsync((void**)&c, n * 8, s));
  iota<<<(n + 127) / 128, 128, 0, s>>>(c, 1, n);
  HIP_CHECK(hipMemcpyAsync(h.data(), c, n * 8, hipMemcpyDeviceToHost, s));
  HIP_CHECK(hipFreeAsync(c, s));
  HIP_CHECK(hipStreamSynchronize(s));
  std::printf("reuse c[2]=%llu\n", h[2]);
  HIP_CHECK(hipStreamDestroy(s));
  return bad != 0 || h[2] != 5;
}
