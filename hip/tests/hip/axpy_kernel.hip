// Device code for module.hip, built with `hipcc --genco`.
#include <hip/hip_runtime.h>

extern "C" __global__ void axpy(int a, const int* x, int* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] += a * x[i];
}
