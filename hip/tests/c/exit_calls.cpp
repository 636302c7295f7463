// HIP calls made after the calling thread's thread-local state is destroyed: by a global
// object's destructor (glibc runs thread-local destructors before static destructors and
// atexit handlers) and by a worker thread's C++ thread_local object whose destructor runs
// after the library's own (destructors run in reverse order of registration, and the
// library registers its own at the thread's first call, after the object's). Each call's
// result is printed; tests/c_abi.rs compares them with what CLR 5.2 printed (on two
// emulated MI250X), and the program must exit 0.
#include <hip/hip_runtime_api.h>
#include <stdio.h>
#include <thread>

struct Calls {
  const char* who;
  hipStream_t s = nullptr;
  void* d = nullptr;
  hipEvent_t e = nullptr;
  void make() {
    printf("%s make %d %d %d %d\n", who, hipStreamCreate(&s), hipMalloc(&d, 64),
           hipEventCreate(&e), hipStreamSynchronize(s));
  }
  ~Calls() {
    char h[64] = {0};
    // stderr: unbuffered, still open after stdout's buffer went out at exit.
    fprintf(stderr, "%s record %d\n", who, hipEventRecord(e, s));
    fprintf(stderr, "%s sync %d\n", who, hipEventSynchronize(e));
    fprintf(stderr, "%s memcpy %d\n", who, hipMemcpy(h, d, 64, hipMemcpyDeviceToHost));
    fprintf(stderr, "%s evdestroy %d\n", who, hipEventDestroy(e));
    fprintf(stderr, "%s devsync %d\n", who, hipDeviceSynchronize());
    fprintf(stderr, "%s sdestroy %d\n", who, hipStreamDestroy(s));
    fprintf(stderr, "%s free %d\n", who, hipFree(d));
    fprintf(stderr, "%s lasterror %d\n", who, hipGetLastError());
    fprintf(stderr, "%s done\n", who);
  }
};

static Calls global{"global"};

// After hipSetDevice(1): calls in the destructor still run on GPU 1.
struct OnDevice1 {
  ~OnDevice1() {
    int d = -1;
    hipError_t g = hipGetDevice(&d);
    void* p = nullptr;
    hipError_t m = hipMalloc(&p, 64);
    hipPointerAttribute_t a;
    hipError_t pa = hipPointerGetAttributes(&a, p);
    fprintf(stderr, "device1 getDevice %d %d malloc %d attributes %d device %d free %d\n", g, d, m, pa,
            a.device, hipFree(p));
  }
};

int main() {
  std::thread([] {
    // Constructed (and its destructor registered) before the thread's first HIP call.
    thread_local Calls local{"thread"};
    local.make();
  }).join();
  std::thread([] {
    thread_local OnDevice1 d;
    (void)d;
    printf("setDevice %d\n", hipSetDevice(1));
  }).join();
  global.make();
  fflush(stdout);
  return 0;
}
