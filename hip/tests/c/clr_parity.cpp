// Answers of calls whose semantics this library takes from CLR 5.2, printed one per line.
// Run on Debian's CLR (`kfdrt emu-run --device emu:mi250x`) it printed the lines that
// tests/c_abi.rs `answers_match_clr_5_2_measured` expects from this library, except where
// that test names a deliberate difference.
#include <hip/hip_runtime_api.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <atomic>
#define P(x) printf("%-70s %s\n", #x, hipGetErrorName(x))
int main() {
  void* p = nullptr; unsigned f = 0; void* dp = nullptr; int stack = 0; hipModule_t mod;
  P(hipHostMalloc(&p, 4096, 0x8));
  if (p) { P(hipHostGetFlags(&f, p)); printf("flags 0x%x\n", f); (void)hipHostFree(p); p = nullptr; }
  P(hipHostMalloc(&p, 4096, hipHostMallocNumaUser));
  if (p) { (void)hipHostFree(p); p = nullptr; }
  P(hipHostMalloc(&p, 4096, hipHostMallocCoherent | hipHostMallocNonCoherent));
  unsigned fl[] = {0, 1, 2, 4, 0x40000000u, 0x80000000u, 7};
  for (unsigned x : fl) {
    p = nullptr; f = 12345;
    hipError_t e = hipHostMalloc(&p, 4096, x);
    hipError_t g = p ? hipHostGetFlags(&f, p) : hipErrorUnknown;
    printf("hostMalloc 0x%x -> %s, getFlags %s 0x%x\n", x, hipGetErrorName(e), hipGetErrorName(g), f);
    if (p) {
      hipError_t h = hipHostGetDevicePointer(&dp, (char*)p + 8, 0);
      hipError_t h1 = hipHostGetDevicePointer(&dp, (char*)p + 8, 1);
      printf("  devptr %s same=%d flags1 %s\n", hipGetErrorName(h), dp == (char*)p + 8, hipGetErrorName(h1));
      (void)hipHostFree(p);
    }
  }
  P(hipHostGetFlags(&f, &stack));
  P(hipHostGetDevicePointer(&dp, &stack, 0));
  P(hipExtMallocWithFlags(&p, 64, hipMallocSignalMemory));
  P(hipExtMallocWithFlags(&p, 8, hipMallocSignalMemory));
  P(hipExtMallocWithFlags(&p, 4096, 7));
  P(hipExtMallocWithFlags(&p, 4096, hipDeviceMallocFinegrained));
  int prio = 99; unsigned sf = 99;
  P(hipStreamGetPriority(hipStreamPerThread, &prio)); printf("prio %d\n", prio);
  P(hipStreamGetFlags(hipStreamPerThread, &sf)); printf("flags %u\n", sf);
  P(hipStreamQuery(hipStreamPerThread));
  P(hipStreamSynchronize(hipStreamPerThread));
  P(hipStreamDestroy(hipStreamPerThread));
  int fd = -1;
  P(hipMemExportToShareableHandle(&fd, nullptr, hipMemHandleTypePosixFileDescriptor, 0));
  hipMemGenericAllocationHandle_t h;
  P(hipMemImportFromShareableHandle(&h, (void*)(uintptr_t)0, hipMemHandleTypePosixFileDescriptor));
  hipMemAllocationProp pr;
  P(hipMemGetAllocationPropertiesFromHandle(&pr, nullptr));
  P(hipMemRetainAllocationHandle(&h, &stack));
  hipEvent_t ev = nullptr, ev2 = nullptr;
  P(hipEventCreateWithFlags(&ev, hipEventReleaseToDevice));
  if (ev) { (void)hipEventDestroy(ev); ev = nullptr; }
  P(hipEventCreateWithFlags(&ev, hipEventReleaseToSystem));
  if (ev) { (void)hipEventDestroy(ev); ev = nullptr; }
  P(hipEventCreateWithFlags(&ev, hipEventReleaseToDevice | hipEventReleaseToSystem));
  P(hipEventCreateWithFlags(&ev, hipEventReleaseToSystem | hipEventDisableTiming | hipEventBlockingSync));
  P(hipEventRecord(ev, 0));
  if (ev) { (void)hipEventSynchronize(ev); (void)hipEventDestroy(ev); }
  // A recorded start, pending (behind a callback that waits for `gate`) and then complete,
  // with a stop never recorded.
  P(hipEventCreate(&ev)); P(hipEventCreate(&ev2));
  static std::atomic<int> gate{0};
  hipStream_t gs = nullptr;
  P(hipStreamCreate(&gs));
  P(hipStreamAddCallback(gs, [](hipStream_t, hipError_t, void*) { while (!gate.load()) usleep(100); }, nullptr, 0));
  float ms = 0;
  P(hipEventRecord(ev, gs)); P(hipEventElapsedTime(&ms, ev, ev2));
  gate = 1;
  P(hipEventSynchronize(ev)); P(hipEventElapsedTime(&ms, ev, ev2));
  P(hipStreamDestroy(gs));
  P(hipModuleLoad(&mod, "/etc/passwd"));
  char junk[64] = "hello world";
  P(hipModuleLoadData(&mod, junk));
  P(hipDeviceDisablePeerAccess(0));
  hipDeviceProp_t prop;
  P(hipGetDeviceProperties(&prop, 0));
  printf("gcnArchName %s gcnArch %d regsPerBlock %d maxGridSize %d %d %d\n", prop.gcnArchName,
         prop.gcnArch, prop.regsPerBlock, prop.maxGridSize[0], prop.maxGridSize[1], prop.maxGridSize[2]);
  printf("memoryClockRate %d memoryBusWidth %d maxSharedMemoryPerMultiProcessor %zu\n",
         prop.memoryClockRate, prop.memoryBusWidth, prop.maxSharedMemoryPerMultiProcessor);
  printf("computeMode %d integrated %d ECCEnabled %d isMultiGpuBoard %d concurrentManagedAccess %d "
         "directManagedMemAccessFromHost %d pageableMemoryAccess %d\n",
         prop.computeMode, prop.integrated, prop.ECCEnabled, prop.isMultiGpuBoard,
         prop.concurrentManagedAccess, prop.directManagedMemAccessFromHost, prop.pageableMemoryAccess);
  const hipDeviceArch_t& a = prop.arch;
  printf("arch %d%d%d%d%d %d%d %d %d%d%d%d %d%d %d%d%d\n", a.hasGlobalInt32Atomics,
         a.hasGlobalFloatAtomicExch, a.hasSharedInt32Atomics, a.hasSharedFloatAtomicExch,
         a.hasFloatAtomicAdd, a.hasGlobalInt64Atomics, a.hasSharedInt64Atomics, a.hasDoubles,
         a.hasWarpVote, a.hasWarpBallot, a.hasWarpShuffle, a.hasFunnelShift,
         a.hasThreadFenceSystem, a.hasSyncThreadsExt, a.hasSurfaceFuncs, a.has3dGrid,
         a.hasDynamicParallelism);
  // hipDeviceGetAttribute over every value of the header's range and a few outside it.
  for (int at = -1; at < 90; at++) {
    int v = -7;
    hipError_t e = hipDeviceGetAttribute(&v, (hipDeviceAttribute_t)at, 0);
    printf("attribute %d %s %d\n", at, hipGetErrorName(e), e == hipSuccess ? v : -7);
  }
  for (int at = 9999; at < 10018; at++) {
    // The HDP register attributes write a pointer (8 bytes) through the int pointer.
    if (at == hipDeviceAttributeHdpMemFlushCntl || at == hipDeviceAttributeHdpRegFlushCntl) continue;
    int v = -7;
    hipError_t e = hipDeviceGetAttribute(&v, (hipDeviceAttribute_t)at, 0);
    printf("attribute %d %s %d\n", at, hipGetErrorName(e), e == hipSuccess ? v : -7);
  }
  printf("probe end\n");
  return 0;
}
