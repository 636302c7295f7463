// Host-only driver for instruction counts (callgrind): N idle hipStreamQuery and
// hipStreamSynchronize calls on a created stream and on the null stream, through
// whichever libamdhip64.so.5 the loader picks. Built by tools/hipbench/callgrind.sh.
#include <hip/hip_runtime_api.h>
#include <cstdio>
#include <cstdlib>

#define OK(x)                                                              \
  do {                                                                     \
    hipError_t e_ = (x);                                                   \
    if (e_ != hipSuccess) {                                                \
      std::fprintf(stderr, "%s:%d %s -> %d\n", __FILE__, __LINE__, #x, e_); \
      std::exit(1);                                                        \
    }                                                                      \
  } while (0)

// One function per loop, not inlined, so that callgrind frames each one.
__attribute__((noinline)) void query_created(hipStream_t s, int n) {
  for (int i = 0; i < n; i++) OK(hipStreamQuery(s));
}
__attribute__((noinline)) void sync_created(hipStream_t s, int n) {
  for (int i = 0; i < n; i++) OK(hipStreamSynchronize(s));
}
__attribute__((noinline)) void query_null(int n) {
  for (int i = 0; i < n; i++) OK(hipStreamQuery(nullptr));
}
__attribute__((noinline)) void sync_null(int n) {
  for (int i = 0; i < n; i++) OK(hipStreamSynchronize(nullptr));
}

int main(int argc, char** argv) {
  int n = argc > 1 ? std::atoi(argv[1]) : 1000;
  hipStream_t s;
  OK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
  // Warm: first lookups fill the per-thread caches.
  OK(hipStreamQuery(s));
  OK(hipStreamSynchronize(s));
  OK(hipStreamQuery(nullptr));
  OK(hipStreamSynchronize(nullptr));
  query_created(s, n);
  sync_created(s, n);
  query_null(n);
  sync_null(n);
  std::printf("done %d\n", n);
  return 0;
}
