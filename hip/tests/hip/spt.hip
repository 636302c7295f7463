// Per-thread default streams with kernels: built with `hipcc -fgpu-default-stream=per-thread`
// (then `<<<>>>` without a stream calls hipLaunchKernel_spt and the header maps
// hipMemcpyToSymbol/FromSymbol/StreamSynchronize to their `_spt` forms). Thread A holds its
// per-thread stream behind a host gate with a kernel queued; thread B's kernels and symbol
// copies on its own per-thread stream complete meanwhile; then the gate opens.
#include <atomic>
#include <thread>
#include "check.h"

__device__ int table[4];

__global__ void add_table(int* out, int k) {
  int i = threadIdx.x;
  if (i < 4) out[i] = table[i] + k;
}

__global__ void mark(int* out, int v) {
  if (threadIdx.x == 0) out[0] = v;
}

int main() {
  unsigned* gate;
  int *a_out, *b_out;
  HIP_CHECK(hipHostMalloc((void**)&gate, 4096, 0));
  HIP_CHECK(hipHostMalloc((void**)&a_out, 4096, 0));
  HIP_CHECK(hipHostMalloc((void**)&b_out, 4096, 0));
  *gate = 0;
  a_out[0] = 0;
  for (int i = 0; i < 4; i++) b_out[i] = 0;
  std::atomic<int> a_queued{0};

  std::thread a([&] {
    HIP_CHECK(hipStreamWaitValue32(hipStreamPerThread, gate, 1, hipStreamWaitValueEq, ~0u));
    mark<<<1, 64>>>(a_out, 42);
    HIP_CHECK(hipGetLastError());
    EXPECT(hipStreamQuery(0) == hipErrorNotReady);
    a_queued.store(1);
    HIP_CHECK(hipStreamSynchronize(0));  // returns once the gate opens
    std::printf("a mark=%d\n", __atomic_load_n(&a_out[0], __ATOMIC_ACQUIRE));
  });
  while (a_queued.load() == 0) std::this_thread::yield();

  std::thread b([&] {
    int init[4] = {1, 2, 3, 4};
    HIP_CHECK(hipMemcpyToSymbol(HIP_SYMBOL(table), init, sizeof init, 0, hipMemcpyHostToDevice));
    add_table<<<1, 64>>>(b_out, 10);
    HIP_CHECK(hipGetLastError());
    HIP_CHECK(hipStreamSynchronize(0));
    int back[2] = {0, 0};
    HIP_CHECK(hipMemcpyFromSymbol(back, HIP_SYMBOL(table), sizeof back, 2 * sizeof(int),
                                  hipMemcpyDeviceToHost));
    std::printf("b out=%d,%d,%d,%d back=%d,%d a_mark_meanwhile=%d\n", b_out[0], b_out[1],
                b_out[2], b_out[3], back[0], back[1], __atomic_load_n(&a_out[0], __ATOMIC_ACQUIRE));
  });
  b.join();
  __atomic_store_n(gate, 1, __ATOMIC_RELEASE);
  a.join();
  HIP_CHECK(hipHostFree(gate));
  HIP_CHECK(hipHostFree(a_out));
  HIP_CHECK(hipHostFree(b_out));
  return 0;
}
