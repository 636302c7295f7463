// Two streams, events and callbacks around kernels. s1 is gated on a host flag; s2 waits
// for an event recorded on s1 after its kernel, then runs a kernel reading that output;
// callbacks on both streams log the order and the values they see.
#include "check.h"
#include <atomic>
#include <unistd.h>

#define N 512

__global__ void fill(int* x, int base) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  x[i] = base + i;
}
__global__ void scale(const int* x, int* y, int k) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  y[i] = x[i] * k;
}

struct Log {
  std::atomic<int> n{0};
  int order[8];
  int seen[8];
};
struct Ticket {
  Log* log;
  int id;
  const int* watch;
};

static void cb(hipStream_t, hipError_t status, void* p) {
  Ticket* t = static_cast<Ticket*>(p);
  int k = t->log->n.load();
  t->log->order[k] = status == hipSuccess ? t->id : -t->id;
  t->log->seen[k] = t->watch[N - 1];
  t->log->n.store(k + 1);
}

int main() {
  int *x, *y;  // pinned host memory: callbacks read what the kernels wrote
  HIP_CHECK(hipHostMalloc(&x, N * 4, 0));
  HIP_CHECK(hipHostMalloc(&y, N * 4, 0));
  for (int i = 0; i < N; i++) x[i] = y[i] = -1;
  unsigned* flag;
  HIP_CHECK(hipExtMallocWithFlags((void**)&flag, 8, hipMallocSignalMemory));
  *flag = 0;
  hipStream_t s1, s2;
  HIP_CHECK(hipStreamCreateWithFlags(&s1, hipStreamNonBlocking));
  HIP_CHECK(hipStreamCreateWithFlags(&s2, hipStreamNonBlocking));
  hipEvent_t start, done1, stop;
  HIP_CHECK(hipEventCreate(&start));
  HIP_CHECK(hipEventCreate(&done1));
  HIP_CHECK(hipEventCreate(&stop));
  Log log;
  Ticket t1{&log, 1, x}, t2{&log, 2, y}, t3{&log, 3, y};

  HIP_CHECK(hipStreamWaitValue32(s1, flag, 1, hipStreamWaitValueEq, 0xffffffff));
  HIP_CHECK(hipEventRecord(start, s1));
  fill<<<N / 128, 128, 0, s1>>>(x, 100);
  HIP_CHECK(hipGetLastError());
  HIP_CHECK(hipStreamAddCallback(s1, cb, &t1, 0));
  HIP_CHECK(hipEventRecord(done1, s1));
  HIP_CHECK(hipStreamWaitEvent(s2, done1, 0));
  hipLaunchKernelGGL(scale, dim3(N / 64), dim3(64), 0, s2, x, y, 3);
  HIP_CHECK(hipGetLastError());
  HIP_CHECK(hipStreamAddCallback(s2, cb, &t2, 0));
  fill<<<N / 256, 256, 0, s2>>>(y, 7);
  HIP_CHECK(hipStreamAddCallback(s2, cb, &t3, 0));
  HIP_CHECK(hipEventRecord(stop, s2));

  usleep(20000);
  // Everything is held behind the gate.
  EXPECT(hipStreamQuery(s1) == hipErrorNotReady);
  EXPECT(hipStreamQuery(s2) == hipErrorNotReady);
  EXPECT(hipEventQuery(stop) == hipErrorNotReady);
  EXPECT(log.n.load() == 0 && x[0] == -1 && y[0] == -1);
  std::printf("gated: callbacks=%d x0=%d y0=%d\n", log.n.load(), x[0], y[0]);

  __atomic_store_n(flag, 1, __ATOMIC_RELEASE);
  HIP_CHECK(hipEventSynchronize(stop));
  HIP_CHECK(hipStreamSynchronize(s1));
  HIP_CHECK(hipStreamSynchronize(s2));
  EXPECT(hipStreamQuery(s1) == hipSuccess && hipStreamQuery(s2) == hipSuccess);
  float ms = -1;
  HIP_CHECK(hipEventElapsedTime(&ms, start, stop));
  EXPECT(ms >= 0);
  std::printf("callbacks=%d order=%d,%d,%d seen=%d,%d,%d\n", log.n.load(), log.order[0],
              log.order[1], log.order[2], log.seen[0], log.seen[1], log.seen[2]);
  std::printf("x[0]=%d x[%d]=%d y[%d]=%d elapsed_ok=%d\n", x[0], N - 1, x[N - 1], N - 1,
              y[N - 1], ms >= 0);
  HIP_CHECK(hipEventDestroy(start));
  HIP_CHECK(hipEventDestroy(done1));
  HIP_CHECK(hipEventDestroy(stop));
  HIP_CHECK(hipStreamDestroy(s1));
  HIP_CHECK(hipStreamDestroy(s2));
  HIP_CHECK(hipHostFree(x));
  HIP_CHECK(hipHostFree(y));
  HIP_CHECK(hipFree(flag));
  return 0;
}
