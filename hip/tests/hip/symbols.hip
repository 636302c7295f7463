// The symbol API on __device__ / __constant__ variables registered by __hipRegisterVar
// (hipMemcpyToSymbol, hipMemcpyFromSymbol, their Async forms, hipGetSymbolAddress,
// hipGetSymbolSize), and by-value kernel arguments larger than 512 bytes.
#include "check.h"

__device__ int counter;
__device__ float table[256];
__constant__ int coeffs[4];

__global__ void use_symbols(int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    table[i] = table[i] * coeffs[0] + coeffs[1];
    atomicAdd(&counter, coeffs[2]);
  }
}

// 1200 and 3000 bytes by value: above the 512 bytes the library used to support.
struct Big {
  int v[300];
};
struct Huge {
  unsigned char b[3000];
};

__global__ void sum_big(Big big, int* out) {
  int s = 0;
  for (int i = 0; i < 300; i++) s += big.v[i];
  out[0] = s;
}

__global__ void sum_huge(int scale, Huge h, int* out) {
  int s = 0;
  for (int i = 0; i < 3000; i++) s += h.b[i];
  out[1] = s * scale;
}

int main() {
  size_t size = 0;
  HIP_CHECK(hipGetSymbolSize(&size, HIP_SYMBOL(table)));
  EXPECT(size == sizeof(float) * 256);
  HIP_CHECK(hipGetSymbolSize(&size, HIP_SYMBOL(counter)));
  EXPECT(size == sizeof(int));
  void* addr = nullptr;
  HIP_CHECK(hipGetSymbolAddress(&addr, HIP_SYMBOL(table)));
  EXPECT(addr != nullptr);
  // Not a registered variable.
  int local = 0;
  EXPECT(hipGetSymbolAddress(&addr, &local) == hipErrorInvalidSymbol);
  EXPECT(hipGetLastError() == hipErrorInvalidSymbol);

  float h[256];
  for (int i = 0; i < 256; i++) h[i] = (float)i;
  HIP_CHECK(hipMemcpyToSymbol(HIP_SYMBOL(table), h, sizeof h));
  int c[4] = {3, 1, 2, 0};
  HIP_CHECK(hipMemcpyToSymbol(HIP_SYMBOL(coeffs), c, sizeof c));
  int zero = 0;
  HIP_CHECK(hipMemcpyToSymbol(HIP_SYMBOL(counter), &zero, sizeof zero));
  // Past the end of the variable.
  EXPECT(hipMemcpyToSymbol(HIP_SYMBOL(coeffs), c, sizeof c, 4) == hipErrorInvalidValue);
  use_symbols<<<2, 128>>>(200);
  HIP_CHECK(hipGetLastError());
  HIP_CHECK(hipDeviceSynchronize());
  float out[256];
  HIP_CHECK(hipMemcpyFromSymbol(out, HIP_SYMBOL(table), sizeof out));
  int bad = 0;
  for (int i = 0; i < 256; i++) bad += out[i] != (i < 200 ? 3.0f * i + 1 : (float)i);
  int count = 0;
  HIP_CHECK(hipMemcpyFromSymbol(&count, HIP_SYMBOL(counter), sizeof count));
  // The same memory through the address: the last 4 entries, at an offset.
  float tail[4];
  HIP_CHECK(hipMemcpy(tail, (float*)addr + 252, sizeof tail, hipMemcpyDeviceToHost));
  float tail2[4];
  hipStream_t s;
  HIP_CHECK(hipStreamCreate(&s));
  HIP_CHECK(hipMemcpyFromSymbolAsync(tail2, HIP_SYMBOL(table), sizeof tail2, 252 * sizeof(float),
                                     hipMemcpyDeviceToHost, s));
  HIP_CHECK(hipStreamSynchronize(s));
  for (int i = 0; i < 4; i++) bad += tail[i] != 252.0f + i || tail2[i] != tail[i];
  int c2[2] = {7, 9};
  HIP_CHECK(hipMemcpyToSymbolAsync(HIP_SYMBOL(coeffs), c2, sizeof c2, 2 * sizeof(int),
                                   hipMemcpyHostToDevice, s));
  int back[4];
  HIP_CHECK(hipMemcpyFromSymbolAsync(back, HIP_SYMBOL(coeffs), sizeof back, 0,
                                     hipMemcpyDeviceToHost, s));
  HIP_CHECK(hipStreamSynchronize(s));
  std::printf("symbols table[0]=%.1f table[199]=%.1f table[200]=%.1f counter=%d coeffs=%d,%d,%d,%d bad=%d\n",
              out[0], out[199], out[200], count, back[0], back[1], back[2], back[3], bad);

  Big big;
  int want = 0;
  for (int i = 0; i < 300; i++) {
    big.v[i] = i * 3 - 100;
    want += big.v[i];
  }
  Huge hu;
  int want2 = 0;
  for (int i = 0; i < 3000; i++) {
    hu.b[i] = (unsigned char)(i * 13);
    want2 += hu.b[i];
  }
  int* d;
  HIP_CHECK(hipMalloc(&d, 2 * sizeof(int)));
  sum_big<<<1, 1, 0, s>>>(big, d);
  sum_huge<<<1, 1, 0, s>>>(2, hu, d);
  HIP_CHECK(hipGetLastError());
  HIP_CHECK(hipStreamSynchronize(s));
  int got[2];
  HIP_CHECK(hipMemcpy(got, d, sizeof got, hipMemcpyDeviceToHost));
  std::printf("by-value sizes %zu %zu sums %d %d expected %d %d\n", sizeof(Big), sizeof(Huge),
              got[0], got[1], want, want2 * 2);
  HIP_CHECK(hipFree(d));
  HIP_CHECK(hipStreamDestroy(s));
  return 0;
}
