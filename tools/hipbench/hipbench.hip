// The same HIP calls, timed on whichever libamdhip64.so.5 the loader picks: kfdrt's
// (LD_LIBRARY_PATH) or Debian's CLR (under `kfdrt emu-run`). Prints one line per
// operation: `op <name> <median ns> <iterations>`. Build with
// `hipcc --offload-arch=gfx90a`; run.sh runs both and prints the ratios.
#include <hip/hip_runtime.h>
#include <dirent.h>
#include <dlfcn.h>
#include <sched.h>
#include <sys/resource.h>
#include <cstring>
#include <string>
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdint>
#include <cstdlib>
#include <vector>

#define OK(x)                                                                        \
  do {                                                                               \
    hipError_t e_ = (x);                                                             \
    if (e_ != hipSuccess) {                                                          \
      std::fprintf(stderr, "%s:%d %s -> %s\n", __FILE__, __LINE__, #x, hipGetErrorName(e_)); \
      std::exit(1);                                                                  \
    }                                                                                \
  } while (0)

__global__ void empty_kernel(int* p) {
  if (p && threadIdx.x == 0 && blockIdx.x == 0) p[0] += 1;
}

static double now_ns() {
  return (double)std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

static void report(const char* name, std::vector<double> v) {
  std::sort(v.begin(), v.end());
  std::printf("op %s %.1f %zu\n", name, v[v.size() / 2], v.size());
  std::fflush(stdout);
}

// HIPBENCH_DETAIL=1: for the plain launch row, every batch's figure and each thread's
// scheduler figures (/proc/self/task: run and run-queue wait ns, voluntary / involuntary
// context switches, last CPU) before and after the row, on stderr. For diagnosing how
// the enqueuing thread shares the cores with the emulator's threads.
static bool detail = std::getenv("HIPBENCH_DETAIL") != nullptr;

static std::string slurp(const std::string& path) {
  std::string out;
  if (FILE* f = std::fopen(path.c_str(), "r")) {
    char buf[4096];
    size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    std::fclose(f);
  }
  return out;
}

static long status_field(const std::string& status, const char* key) {
  size_t at = status.find(key);
  return at == std::string::npos ? -1 : std::atol(status.c_str() + at + std::strlen(key));
}

static void dump_threads(const char* when) {
  DIR* d = opendir("/proc/self/task");
  if (!d) return;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    std::string base = std::string("/proc/self/task/") + e->d_name;
    std::string stat = slurp(base + "/stat"), st = slurp(base + "/status");
    std::string comm = slurp(base + "/comm");
    if (!comm.empty() && comm.back() == '\n') comm.pop_back();
    // Field 39 (processor) counts from after the ")" closing comm.
    size_t close = stat.rfind(')');
    int field = 2, cpu = -1;
    for (size_t i = close + 1; i < stat.size(); i++)
      if (stat[i] == ' ' && ++field == 39) cpu = std::atoi(stat.c_str() + i + 1);
    unsigned long long run = 0, wait = 0, slices = 0;
    std::sscanf(slurp(base + "/schedstat").c_str(), "%llu %llu %llu", &run, &wait, &slices);
    std::fprintf(stderr, "thread %s %s %s run_ns %llu wait_ns %llu vol %ld invol %ld cpu %d\n", when,
                 e->d_name, comm.c_str(), run, wait, status_field(st, "voluntary_ctxt_switches:"),
                 status_field(st, "nonvoluntary_ctxt_switches:"), cpu);
  }
  closedir(d);
}

static std::atomic<int> cb_runs{0};
static double cb_ran_at = 0;
static void cb(hipStream_t, hipError_t, void*) {
  cb_ran_at = now_ns();
  cb_runs.fetch_add(1, std::memory_order_release);
}

int main(int argc, char** argv) {
  int iters = argc > 1 ? std::atoi(argv[1]) : 200;
  const int batch = 32;
  Dl_info info;
  if (dladdr((void*)&hipStreamQuery, &info) && info.dli_fname) std::printf("library %s\n", info.dli_fname);
  hipStream_t s;
  OK(hipStreamCreateWithFlags(&s, hipStreamNonBlocking));
  unsigned* sig;
  // CLR 5.2 accepts only 8-byte signal allocations.
  OK(hipExtMallocWithFlags((void**)&sig, 8, hipMallocSignalMemory));
  // The kernels count their runs in pinned host memory, read without a copy (a
  // device-to-host copy after the launches stalls CLR on the emulator).
  int* counter;
  OK(hipHostMalloc((void**)&counter, 4096, 0));
  *counter = 0;
  hipEvent_t ev;
  OK(hipEventCreateWithFlags(&ev, hipEventDisableTiming));
  // Warm up every path once (first launch loads the code object, first mallocAsync makes
  // the pool, first callback starts the callback thread).
  OK(hipStreamWriteValue32(s, sig, 1, 0));
  OK(hipEventRecord(ev, s));
  empty_kernel<<<1, 64, 0, s>>>(counter);
  void* p;
  OK(hipMallocAsync(&p, 1 << 20, s));
  OK(hipFreeAsync(p, s));
  OK(hipStreamAddCallback(s, cb, nullptr, 0));
  OK(hipStreamSynchronize(s));

  // Each sample is the mean of a batch of `batch` calls (two clock reads cost more than
  // the fastest calls); the median is over `iters / batch` batches.
  const int rounds = iters / batch + 1;
  std::vector<double> v;
  for (int r = 0; r < rounds; r++) {
    double t = now_ns();
    for (int i = 0; i < batch; i++) OK(hipStreamWriteValue32(s, sig, (unsigned)i, 0));
    v.push_back((now_ns() - t) / batch);
    OK(hipStreamSynchronize(s));
  }
  report("writeValue32_enqueue", v);

  v.clear();
  for (int r = 0; r < rounds; r++) {
    double t = now_ns();
    for (int i = 0; i < batch; i++) OK(hipEventRecord(ev, s));
    v.push_back((now_ns() - t) / batch);
    OK(hipStreamSynchronize(s));
  }
  report("eventRecord_enqueue", v);

  // The idle query and synchronize take a few ns in one library: a batch of 32 lasts
  // ~100 ns, the order of one clock read's own cost (20-70 ns, in 10 ns steps, on a
  // 2-vCPU KVM guest), which a batch's figure includes. These calls change nothing, so
  // their batches are 1024 calls long.
  const int idle_batch = 1024;
  v.clear();
  for (int r = 0; r < rounds; r++) {
    double t = now_ns();
    for (int i = 0; i < idle_batch; i++) OK(hipStreamQuery(s));
    v.push_back((now_ns() - t) / idle_batch);
  }
  report("streamQuery_idle", v);

  v.clear();
  for (int r = 0; r < rounds; r++) {
    double t = now_ns();
    for (int i = 0; i < idle_batch; i++) OK(hipStreamSynchronize(s));
    v.push_back((now_ns() - t) / idle_batch);
  }
  report("streamSynchronize_idle", v);

  // A round trip through the emulated GPU: one write, then wait for it. Both libraries
  // share the device, so this is bounded by the emulator's latency, not by either library.
  v.clear();
  for (int i = 0; i < iters; i++) {
    double t = now_ns();
    OK(hipStreamWriteValue32(s, sig, (unsigned)i, 0));
    OK(hipStreamSynchronize(s));
    v.push_back(now_ns() - t);
  }
  report("writeValue32+sync_roundtrip", v);

  v.clear();
  for (int i = 0; i < iters; i++) {
    int before = cb_runs.load(std::memory_order_acquire);
    double t = now_ns();
    OK(hipStreamAddCallback(s, cb, nullptr, 0));
    double spin_start = now_ns();
    while (cb_runs.load(std::memory_order_acquire) == before) {
      if (now_ns() - spin_start > 10e9) {
        std::fprintf(stderr, "callback did not run within 10 s\n");
        return 1;
      }
    }
    v.push_back(cb_ran_at - t);
  }
  OK(hipStreamSynchronize(s));
  report("callback_enqueue_to_run", v);

  v.clear();
  for (int r = 0; r < rounds; r++) {
    double t = now_ns();
    for (int i = 0; i < batch; i++) {
      OK(hipMallocAsync(&p, 1 << 20, s));
      OK(hipFreeAsync(p, s));
    }
    v.push_back((now_ns() - t) / batch);
    OK(hipStreamSynchronize(s));
  }
  report("mallocAsync+freeAsync_1MiB", v);

  // The same pairs with the default pool keeping its memory over synchronizes (release
  // threshold UINT64_MAX, on both libraries). Above, every synchronize gives the pool's
  // freed memory back to the device (threshold 0: CUDA's default, CLR's
  // ReleaseFreedMemory at hipStreamSynchronize, kfdrt's on_synchronize), so the first
  // allocation of each batch grows the pool again: a device allocation (~20 us on the
  // emulator) shared by the batch's 32 pairs, most of that figure. Skipped (with a note)
  // where the pool attribute is not supported.
  hipMemPool_t pool;
  uint64_t keep = UINT64_MAX;
  if (hipDeviceGetDefaultMemPool(&pool, 0) == hipSuccess &&
      hipMemPoolSetAttribute(pool, hipMemPoolAttrReleaseThreshold, &keep) == hipSuccess) {
    v.clear();
    OK(hipMallocAsync(&p, 1 << 20, s));
    OK(hipFreeAsync(p, s));
    OK(hipStreamSynchronize(s));
    for (int r = 0; r < rounds; r++) {
      double t = now_ns();
      for (int i = 0; i < batch; i++) {
        OK(hipMallocAsync(&p, 1 << 20, s));
        OK(hipFreeAsync(p, s));
      }
      v.push_back((now_ns() - t) / batch);
      OK(hipStreamSynchronize(s));
    }
    report("mallocAsync+freeAsync_1MiB_kept", v);
    uint64_t zero = 0;
    OK(hipMemPoolSetAttribute(pool, hipMemPoolAttrReleaseThreshold, &zero));
    OK(hipStreamSynchronize(s));
  } else {
    std::printf("note: release threshold not settable, mallocAsync+freeAsync_1MiB_kept skipped\n");
  }

  v.clear();
  if (detail) dump_threads("before");
  for (int r = 0; r < rounds; r++) {
    int cpu0 = sched_getcpu();
    rusage ru0, ru1;
    if (detail) getrusage(RUSAGE_THREAD, &ru0);
    double t = now_ns();
    double at[64];
    for (int i = 0; i < batch; i++) {
      empty_kernel<<<1, 64, 0, s>>>(counter);
      if (detail) at[i] = now_ns();
    }
    v.push_back((now_ns() - t) / batch);
    if (detail) {
      // The launches that took > 1 us (index:ns), where a batch's time went.
      std::string gaps;
      for (int i = 0; i < batch; i++) {
        double d = at[i] - (i ? at[i - 1] : t);
        if (d > 1000) gaps += " " + std::to_string(i) + ":" + std::to_string((int)d);
      }
      getrusage(RUSAGE_THREAD, &ru1);
      std::fprintf(stderr, "batch %d %.1f cpu %d %d t %.0f%s flt %ld invol %ld vol %ld\n", r, v.back(), cpu0, sched_getcpu(), t, gaps.c_str(),
                   ru1.ru_minflt - ru0.ru_minflt, ru1.ru_nivcsw - ru0.ru_nivcsw, ru1.ru_nvcsw - ru0.ru_nvcsw);
    }
    OK(hipStreamSynchronize(s));
  }
  if (detail) dump_threads("after");
  OK(hipGetLastError());
  report("kernelLaunch_enqueue", v);

  // The same two batches with the stream held behind a host gate while they are enqueued:
  // the emulated CP and shader (threads sharing the machine's cores with the enqueuing
  // thread) have nothing to run during the timed loop, so these rows are the libraries'
  // enqueue alone; the rows above also carry the emulator's concurrent execution of the
  // batch. Neither batch fills a ring (32 packets of kfdrt's 1024-slot AQL ring, 32 small
  // kernarg segments of its 1 MiB ring): no enqueue waits for the device in either form.
  volatile unsigned* gate = (volatile unsigned*)(counter + 64);
  *gate = 0;
  unsigned g = 0;
  v.clear();
  for (int r = 0; r < rounds; r++) {
    OK(hipStreamWaitValue32(s, (void*)gate, ++g, hipStreamWaitValueEq, ~0u));
    double t = now_ns();
    for (int i = 0; i < batch; i++) OK(hipStreamWriteValue32(s, sig, (unsigned)i, 0));
    v.push_back((now_ns() - t) / batch);
    __atomic_store_n(gate, g, __ATOMIC_RELEASE);
    OK(hipStreamSynchronize(s));
  }
  report("writeValue32_enqueue_gated", v);

  v.clear();
  for (int r = 0; r < rounds; r++) {
    OK(hipStreamWaitValue32(s, (void*)gate, ++g, hipStreamWaitValueEq, ~0u));
    double t = now_ns();
    for (int i = 0; i < batch; i++) empty_kernel<<<1, 64, 0, s>>>(counter);
    v.push_back((now_ns() - t) / batch);
    __atomic_store_n(gate, g, __ATOMIC_RELEASE);
    OK(hipStreamSynchronize(s));
  }
  OK(hipGetLastError());
  report("kernelLaunch_enqueue_gated", v);

  int h = __atomic_load_n(counter, __ATOMIC_ACQUIRE);
  int launches = 1 + 2 * rounds * batch;
  std::printf("kernel_count %d expected %d\n", h, launches);
  std::fflush(stdout);
  OK(hipEventDestroy(ev));
  // The stream is left to process exit: CLR 5.2's hipStreamDestroy here does not return
  // on the emulated device (reported to the lead), and it is not a timed operation.
  return h == launches ? 0 : 1;
}
