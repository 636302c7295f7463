// The warm <<<>>> launch path (the thread's last launch target and stream, checked
// without a lock): it follows alternating kernels and streams, and still sees a destroyed
// stream, an unregistered fat binary and a device reset. argv[1]: a code object built
// with `hipcc --genco` (axpy_kernel.hip), registered here by hand (in an offload bundle)
// as a program's own registration code would.
#include "check.h"
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" void** __hipRegisterFatBinary(const void* data);
extern "C" void __hipRegisterFunction(void** modules, const void* host_function,
                                      char* device_function, const char* device_name,
                                      unsigned thread_limit, void* tid, void* bid,
                                      dim3* block_dim, dim3* grid_dim, int* wsize);
extern "C" void __hipUnregisterFatBinary(void** modules);

__global__ void add_one(int* p) { p[threadIdx.x] += 1; }
__global__ void add_hundred(int* p) { p[threadIdx.x] += 100; }

// A clang offload bundle (LLVM OffloadBundler.cpp): magic, entry count, then per entry
// offset, size, ID length and ID; the code object after the header. `hipcc --genco`
// may have bundled it already.
static std::vector<char> bundle_of(const std::vector<char>& co) {
  const std::string magic = "__CLANG_OFFLOAD_BUNDLE__";
  if (co.size() > magic.size() && std::memcmp(co.data(), magic.data(), magic.size()) == 0)
    return co;
  const std::string id = "hipv4-amdgcn-amd-amdhsa--gfx90a";
  std::vector<char> b(magic.begin(), magic.end());
  auto put = [&b](uint64_t v) { b.insert(b.end(), (char*)&v, (char*)&v + 8); };
  uint64_t header = magic.size() + 8 + 24 + id.size();
  uint64_t offset = (header + 4095) & ~uint64_t(4095);
  put(1);
  put(offset);
  put(co.size());
  put(id.size());
  b.insert(b.end(), id.begin(), id.end());
  b.resize(offset);
  b.insert(b.end(), co.begin(), co.end());
  return b;
}

static int stub_axpy;  // a host address standing for the hand-registered kernel

static hipError_t axpy(hipStream_t s, int a, int* x, int* y, int n) {
  void* args[] = {&a, &x, &y, &n};
  return hipLaunchKernel(&stub_axpy, dim3(1), dim3(64), args, 0, s);
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  int *p, *x, *y;
  HIP_CHECK(hipHostMalloc(&p, 64 * 4, 0));
  HIP_CHECK(hipHostMalloc(&x, 64 * 4, 0));
  HIP_CHECK(hipHostMalloc(&y, 64 * 4, 0));
  for (int i = 0; i < 64; i++) p[i] = 0, x[i] = i, y[i] = 0;
  hipStream_t s1, s2;
  HIP_CHECK(hipStreamCreate(&s1));
  HIP_CHECK(hipStreamCreate(&s2));

  // Alternating kernels, then alternating streams, then both at once.
  for (int r = 0; r < 3; r++) {
    add_one<<<1, 64, 0, s1>>>(p);
    add_hundred<<<1, 64, 0, s1>>>(p);
  }
  HIP_CHECK(hipStreamSynchronize(s1));
  for (int r = 0; r < 3; r++) {
    add_one<<<1, 64, 0, s1>>>(p);
    HIP_CHECK(hipStreamSynchronize(s1));
    add_one<<<1, 64, 0, s2>>>(p);
    HIP_CHECK(hipStreamSynchronize(s2));
  }
  add_hundred<<<1, 64, 0, s2>>>(p);
  add_one<<<1, 64, 0, nullptr>>>(p);
  HIP_CHECK(hipDeviceSynchronize());
  HIP_CHECK(hipGetLastError());
  std::printf("alternating p[0]=%d p[63]=%d\n", p[0], p[63]);

  // The warm kernel in other shapes: one kfdrt refuses (a block over the device's
  // maximum: InvalidConfiguration), then a smaller block, then the first shape again.
  add_one<<<1, 2048, 0, s1>>>(p);
  hipError_t big = hipGetLastError();
  add_one<<<1, 32, 0, s1>>>(p);
  HIP_CHECK(hipStreamSynchronize(s1));
  std::printf("shapes big %s p[0]=%d p[63]=%d\n", hipGetErrorName(big), p[0], p[63]);
  add_one<<<1, 64, 0, s1>>>(p);

  // The warm stream destroyed: its handle is refused, the last error says so, and the
  // next launch on a live stream runs.
  add_one<<<1, 64, 0, s1>>>(p);
  HIP_CHECK(hipStreamSynchronize(s1));
  HIP_CHECK(hipStreamDestroy(s1));
  void* args[] = {&p};
  hipError_t gone = hipLaunchKernel((const void*)add_one, dim3(1), dim3(64), args, 0, s1);
  hipError_t last = hipGetLastError();
  add_one<<<1, 64, 0, s2>>>(p);
  HIP_CHECK(hipStreamSynchronize(s2));
  std::printf("destroyed %s last %s then p[0]=%d\n", hipGetErrorName(gone),
              hipGetErrorName(last), p[0]);

  // A hand-registered fat binary: warm, then unregistered (the kernel is gone for the
  // warm thread too), while the program's own kernels keep running.
  std::ifstream f(argv[1], std::ios::binary);
  std::vector<char> co((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT(!co.empty());
  std::vector<char> bundle = bundle_of(co);
  struct {
    uint32_t magic, version;
    const void* bin;
    const void* unused;
  } wrapper = {0x48495046, 1, bundle.data(), nullptr};
  void** h = __hipRegisterFatBinary(&wrapper);
  __hipRegisterFunction(h, &stub_axpy, (char*)"axpy", "axpy", ~0u, nullptr, nullptr, nullptr,
                        nullptr, nullptr);
  HIP_CHECK(axpy(s2, 2, x, y, 64));
  HIP_CHECK(axpy(s2, 3, x, y, 64));
  HIP_CHECK(hipStreamSynchronize(s2));
  std::printf("registered y[1]=%d y[63]=%d\n", y[1], y[63]);
  __hipUnregisterFatBinary(h);
  hipError_t unreg = axpy(s2, 1, x, y, 64);
  last = hipGetLastError();
  add_one<<<1, 64, 0, s2>>>(p);
  HIP_CHECK(hipStreamSynchronize(s2));
  std::printf("unregistered %s last %s y[1]=%d then p[0]=%d\n", hipGetErrorName(unreg),
              hipGetErrorName(last), y[1], p[0]);

  // A device reset forgets what is loaded: the warm kernel is loaded again and runs.
  HIP_CHECK(hipStreamDestroy(s2));
  HIP_CHECK(hipHostFree(p));
  HIP_CHECK(hipDeviceReset());
  HIP_CHECK(hipHostMalloc(&p, 64 * 4, 0));
  for (int i = 0; i < 64; i++) p[i] = 5;
  add_one<<<1, 64>>>(p);
  add_hundred<<<1, 64>>>(p);
  HIP_CHECK(hipDeviceSynchronize());
  HIP_CHECK(hipGetLastError());
  std::printf("after reset p[0]=%d p[63]=%d\n", p[0], p[63]);
  return 0;
}
