// hipFree / hipHostFree of memory that queued kernels still use: the free waits for the
// device first (CLR's ihipFree synchronizes the streams; cudaFree is documented to), so
// the kernels finish, nothing faults, and their results are visible when the free returns.
#include "check.h"

// Every thread rewrites its word `rounds` times, then thread 0 publishes `tag` to host
// memory: `*done == tag` proves this launch ran to its end.
__global__ void busy(int* p, int rounds, int* done, int tag) {
  for (int r = 0; r < rounds; r++) p[threadIdx.x] = r;
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence_system();
    *(volatile int*)done = tag;
  }
}

int main() {
  int* done;
  HIP_CHECK(hipHostMalloc(&done, sizeof(int)));
  *done = 0;
  hipStream_t s;
  HIP_CHECK(hipStreamCreate(&s));

  // Device memory, work on the null stream and on a created stream.
  int* d;
  HIP_CHECK(hipMalloc(&d, 64 * sizeof(int)));
  for (int k = 1; k <= 4; k++) busy<<<1, 64>>>(d, 200, done, k);
  for (int k = 5; k <= 8; k++) busy<<<1, 64, 0, s>>>(d, 200, done, k);
  HIP_CHECK(hipFree(d));
  std::printf("device done=%d\n", *(volatile int*)done);

  // Pinned host memory.
  int* h;
  HIP_CHECK(hipHostMalloc(&h, 64 * sizeof(int)));
  for (int k = 9; k <= 12; k++) busy<<<1, 64, 0, s>>>(h, 200, done, k);
  HIP_CHECK(hipHostFree(h));
  std::printf("host done=%d\n", *(volatile int*)done);

  // Managed memory.
  int* m;
  HIP_CHECK(hipMallocManaged(&m, 64 * sizeof(int)));
  for (int k = 13; k <= 16; k++) busy<<<1, 64, 0, s>>>(m, 200, done, k);
  HIP_CHECK(hipFree(m));
  std::printf("managed done=%d\n", *(volatile int*)done);

  // No stream saw a fault.
  HIP_CHECK(hipStreamSynchronize(s));
  HIP_CHECK(hipDeviceSynchronize());
  HIP_CHECK(hipGetLastError());
  HIP_CHECK(hipStreamDestroy(s));
  HIP_CHECK(hipHostFree(done));
  std::printf("ok\n");
  return 0;
}
