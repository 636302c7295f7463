// Vector add with <<<>>>, host data in pageable memory (std::vector): hipMemcpy stages it.
#include "check.h"
#include <vector>

__global__ void vadd(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

int main() {
  const int n = 3000;  // not a multiple of the block: the last block is partial
  std::vector<float> a(n), b(n), c(n, -1.0f);
  for (int i = 0; i < n; i++) {
    a[i] = float(i);
    b[i] = float(2 * i) + 0.5f;
  }
  float *da, *db, *dc;
  HIP_CHECK(hipMalloc(&da, n * sizeof(float)));
  HIP_CHECK(hipMalloc(&db, n * sizeof(float)));
  HIP_CHECK(hipMalloc(&dc, n * sizeof(float)));
  HIP_CHECK(hipMemcpy(da, a.data(), n * sizeof(float), hipMemcpyHostToDevice));
  HIP_CHECK(hipMemcpy(db, b.data(), n * sizeof(float), hipMemcpyHostToDevice));
  HIP_CHECK(hipMemset(dc, 0, n * sizeof(float)));
  vadd<<<(n + 255) / 256, 256>>>(da, db, dc, n);
  HIP_CHECK(hipGetLastError());
  HIP_CHECK(hipMemcpy(c.data(), dc, n * sizeof(float), hipMemcpyDeviceToHost));
  int bad = 0;
  double sum = 0;
  for (int i = 0; i < n; i++) {
    if (c[i] != float(3 * i) + 0.5f) bad++;
    sum += c[i];
  }
  std::printf("vadd n=%d bad=%d c[0]=%.1f c[1]=%.1f c[%d]=%.1f sum=%.1f\n", n, bad, c[0], c[1],
              n - 1, c[n - 1], sum);
  // A copy larger than the staging chunks, with an odd length, both ways.
  const size_t big = (5u << 20) + 77;
  std::vector<unsigned char> out(big), back(big, 0);
  for (size_t i = 0; i < big; i++) out[i] = (unsigned char)(i * 131 + (i >> 12));
  unsigned char* dbig;
  HIP_CHECK(hipMalloc(&dbig, big));
  HIP_CHECK(hipMemcpy(dbig, out.data(), big, hipMemcpyHostToDevice));
  HIP_CHECK(hipMemcpy(back.data(), dbig, big, hipMemcpyDeviceToHost));
  std::printf("staged bytes=%zu equal=%d\n", big, out == back);
  HIP_CHECK(hipFree(dbig));
  HIP_CHECK(hipFree(da));
  HIP_CHECK(hipFree(db));
  HIP_CHECK(hipFree(dc));
  return bad != 0;
}
