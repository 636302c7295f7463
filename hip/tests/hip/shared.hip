// A block reduction in __shared__ memory with __syncthreads, and hipFuncGetAttributes.
#include "check.h"
#include <vector>

#define BLOCK 256

__global__ void block_sum(const unsigned* in, unsigned* out) {
  __shared__ unsigned tile[BLOCK];
  unsigned t = threadIdx.x;
  tile[t] = in[blockIdx.x * BLOCK + t];
  __syncthreads();
  for (unsigned s = BLOCK / 2; s > 0; s >>= 1) {
    if (t < s) tile[t] += tile[t + s];
    __syncthreads();
  }
  if (t == 0) out[blockIdx.x] = tile[0];
}

// Reverses each block through shared memory: wrong without the barrier.
__global__ void block_reverse(const unsigned* in, unsigned* out) {
  __shared__ unsigned tile[BLOCK];
  unsigned t = threadIdx.x;
  tile[t] = in[blockIdx.x * BLOCK + t];
  __syncthreads();
  out[blockIdx.x * BLOCK + t] = tile[BLOCK - 1 - t];
}

int main() {
  const int blocks = 8, n = blocks * BLOCK;
  std::vector<unsigned> in(n), sums(blocks), rev(n);
  for (int i = 0; i < n; i++) in[i] = unsigned(i * 7 % 1000);
  unsigned *din, *dsum, *drev;
  HIP_CHECK(hipMalloc(&din, n * 4));
  HIP_CHECK(hipMalloc(&dsum, blocks * 4));
  HIP_CHECK(hipMalloc(&drev, n * 4));
  HIP_CHECK(hipMemcpy(din, in.data(), n * 4, hipMemcpyHostToDevice));
  block_sum<<<blocks, BLOCK>>>(din, dsum);
  block_reverse<<<blocks, BLOCK>>>(din, drev);
  HIP_CHECK(hipGetLastError());
  HIP_CHECK(hipDeviceSynchronize());
  HIP_CHECK(hipMemcpy(sums.data(), dsum, blocks * 4, hipMemcpyDeviceToHost));
  HIP_CHECK(hipMemcpy(rev.data(), drev, n * 4, hipMemcpyDeviceToHost));
  int bad = 0;
  for (int b = 0; b < blocks; b++) {
    unsigned want = 0;
    for (int t = 0; t < BLOCK; t++) want += in[b * BLOCK + t];
    if (sums[b] != want) bad++;
    for (int t = 0; t < BLOCK; t++)
      if (rev[b * BLOCK + t] != in[b * BLOCK + BLOCK - 1 - t]) bad++;
  }
  std::printf("shared sums %u %u %u bad=%d\n", sums[0], sums[1], sums[blocks - 1], bad);
  hipFuncAttributes attr;
  HIP_CHECK(hipFuncGetAttributes(&attr, reinterpret_cast<const void*>(block_sum)));
  std::printf("attributes sharedSizeBytes=%zu maxThreadsPerBlock=%d\n", attr.sharedSizeBytes,
              attr.maxThreadsPerBlock);
  EXPECT(attr.sharedSizeBytes == BLOCK * 4);
  return bad != 0;
}
