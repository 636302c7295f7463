// Memory IPC between two processes through the C ABI (g++ against Debian's headers):
// hipIpcGetMemHandle / hipIpcOpenMemHandle / hipIpcCloseMemHandle on hipMalloc memory, and
// pool export/import (hipMemPoolExportToShareableHandle, hipMemPoolImportFromShareableHandle,
// hipMemPoolExportPointer, hipMemPoolImportPointer). The program forks before any HIP call;
// the parent exports and sends the handles through a pipe, the child opens them with its
// own device, checks the bytes, writes with its GPU, and the parent sees the writes.
#include <hip/hip_runtime.h>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

static int checks = 0;
static const char* who = "parent";
#define CHECK(c)                                                        \
  do {                                                                  \
    checks++;                                                           \
    if (!(c)) {                                                         \
      std::printf("FAIL %s %s:%d %s\n", who, __FILE__, __LINE__, #c);   \
      std::fflush(stdout);                                              \
      std::_Exit(1);                                                    \
    }                                                                   \
  } while (0)
#define OK(x) CHECK((x) == hipSuccess)

// What the parent sends: the handles and where to find the pool's fd.
struct Msg {
  hipIpcMemHandle_t base, inner, stale;
  hipIpcEventHandle_t event;
  int pid, pool_fd;
  hipMemPoolPtrExportData live, freed;
};

static void write_all(int fd, const void* p, size_t n) {
  CHECK(write(fd, p, n) == (ssize_t)n);
}
static void read_all(int fd, void* p, size_t n) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = read(fd, (char*)p + got, n - got);
    CHECK(r > 0);
    got += (size_t)r;
  }
}

static const size_t N = 1 << 20;

static int child(int in, int out) {
  who = "child";
  Msg m;
  read_all(in, &m, sizeof m);
  // Opening a buffer of the parent: the same bytes.
  unsigned char* p = nullptr;
  OK(hipIpcOpenMemHandle((void**)&p, m.base, hipIpcMemLazyEnablePeerAccess));
  CHECK(p != nullptr);
  unsigned char* h = (unsigned char*)std::malloc(N);
  OK(hipMemcpy(h, p, N, hipMemcpyDeviceToHost));
  int bad = 0;
  for (size_t i = 0; i < N; i++) bad += h[i] != (unsigned char)(i * 7 + 3);
  CHECK(bad == 0);
  // A handle of an address inside the allocation: the same offset here.
  unsigned char* q = nullptr;
  OK(hipIpcOpenMemHandle((void**)&q, m.inner, hipIpcMemLazyEnablePeerAccess));
  CHECK(q == p + 4096);
  // Our GPU writes into the shared memory.
  OK(hipMemset(p + 8192, 0x5a, 4096));
  OK(hipDeviceSynchronize());
  // Closing: each open is closed once; then the address is unknown.
  OK(hipIpcCloseMemHandle(q));
  OK(hipIpcCloseMemHandle(p));
  CHECK(hipIpcCloseMemHandle(p) == hipErrorInvalidHandle);
  CHECK(hipIpcCloseMemHandle(nullptr) == hipErrorInvalidValue);
  // A freed buffer's handle, and forged ones, are errors (never a mapping of something else):
  // CLR's codes (an attach failure is hipErrorInvalidDevicePointer).
  void* x = nullptr;
  CHECK(hipIpcOpenMemHandle(&x, m.stale, hipIpcMemLazyEnablePeerAccess) == hipErrorInvalidDevicePointer);
  hipIpcMemHandle_t forged = m.base;
  forged.reserved[0] ^= 1;  // magic
  CHECK(hipIpcOpenMemHandle(&x, forged, hipIpcMemLazyEnablePeerAccess) == hipErrorInvalidDevicePointer);
  forged = m.base;
  forged.reserved[16] ^= 1;  // the buffer's identity
  CHECK(hipIpcOpenMemHandle(&x, forged, hipIpcMemLazyEnablePeerAccess) == hipErrorInvalidDevicePointer);
  forged = m.base;
  forged.reserved[12] ^= 0x40;  // another fd number
  CHECK(hipIpcOpenMemHandle(&x, forged, hipIpcMemLazyEnablePeerAccess) == hipErrorInvalidDevicePointer);
  hipIpcMemHandle_t zero;
  std::memset(&zero, 0, sizeof zero);
  CHECK(hipIpcOpenMemHandle(&x, zero, hipIpcMemLazyEnablePeerAccess) == hipErrorInvalidValue);
  CHECK(hipIpcOpenMemHandle(&x, m.base, 1) == hipErrorInvalidValue);  // flags

  // The parent's IPC pool, through its fd (reopened from /proc, as a program would
  // receive it over a unix socket).
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/fd/%d", m.pid, m.pool_fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  CHECK(fd >= 0);
  hipMemPool_t pool;
  OK(hipMemPoolImportFromShareableHandle(&pool, (void*)(uintptr_t)fd,
                                         hipMemHandleTypePosixFileDescriptor, 0));
  CHECK(hipMemPoolImportFromShareableHandle(&pool, (void*)(uintptr_t)1000000,
                                            hipMemHandleTypePosixFileDescriptor, 0) ==
        hipErrorInvalidValue);
  close(fd);
  unsigned* a = nullptr;
  CHECK(hipMemPoolImportPointer((void**)&a, pool, &m.freed) == hipErrorInvalidValue);
  OK(hipMemPoolImportPointer((void**)&a, pool, &m.live));
  unsigned v = 0;
  OK(hipMemcpy(&v, a, 4, hipMemcpyDeviceToHost));
  CHECK(v == 0xC0FFEE);
  hipStream_t s;
  OK(hipStreamCreate(&s));
  OK(hipStreamWriteValue32(s, a + 1, 0xBEEF, 0));
  OK(hipStreamSynchronize(s));
  OK(hipFreeAsync(a, s));
  OK(hipStreamSynchronize(s));
  OK(hipStreamDestroy(s));
  OK(hipMemPoolDestroy(pool));

  // The parent's interprocess event, recorded behind a gate the parent holds: not
  // complete, and a stream here waiting for it holds its write back.
  hipEvent_t ev;
  OK(hipIpcOpenEventHandle(&ev, m.event));
  CHECK(hipEventQuery(ev) == hipErrorNotReady);
  OK(hipIpcOpenMemHandle((void**)&p, m.base, hipIpcMemLazyEnablePeerAccess));
  unsigned* word = (unsigned*)(p + 16384);
  hipStream_t cs;
  OK(hipStreamCreate(&cs));
  OK(hipStreamWaitEvent(cs, ev, 0));
  CHECK(hipStreamWaitEvent(cs, ev, 1) == hipErrorInvalidValue);
  unsigned before = __atomic_load_n(word, __ATOMIC_ACQUIRE);
  CHECK(before != 0xE1);
  OK(hipStreamWriteValue32(cs, word, 0xE1, 0));
  CHECK(hipStreamQuery(cs) == hipErrorNotReady);
  CHECK(__atomic_load_n(word, __ATOMIC_ACQUIRE) == before);
  float ms;
  CHECK(hipEventElapsedTime(&ms, ev, ev) == hipErrorInvalidHandle);
  hipIpcEventHandle_t eh;
  CHECK(hipIpcGetEventHandle(&eh, ev) == hipErrorInvalidValue);  // opened, not created here
  hipIpcEventHandle_t bad_event = m.event;
  bad_event.reserved[0] ^= 1;
  hipEvent_t ev2;
  CHECK(hipIpcOpenEventHandle(&ev2, bad_event) == hipErrorInvalidValue);
  char gate = 'g';
  write_all(out, &gate, 1);  // the parent opens its gate now
  OK(hipEventSynchronize(ev));
  OK(hipEventQuery(ev));
  OK(hipStreamSynchronize(cs));
  CHECK(__atomic_load_n(word, __ATOMIC_ACQUIRE) == 0xE1);
  // A record here, seen by the parent.
  OK(hipEventRecord(ev, cs));
  OK(hipStreamSynchronize(cs));
  OK(hipStreamDestroy(cs));
  OK(hipEventDestroy(ev));
  OK(hipIpcCloseMemHandle(p));
  std::printf("child checks passed: %d\n", checks);
  std::fflush(stdout);
  char done = 'y';
  write_all(out, &done, 1);
  return 0;
}

int main() {
  int down[2], up[2];
  CHECK(pipe(down) == 0 && pipe(up) == 0);
  std::fflush(stdout);
  pid_t pid = fork();
  CHECK(pid >= 0);
  if (pid == 0) {
    close(down[1]);
    close(up[0]);
    std::_Exit(child(down[0], up[1]));
  }
  close(down[0]);
  close(up[1]);

  Msg m;
  std::memset(&m, 0, sizeof m);
  m.pid = getpid();
  unsigned char* p;
  OK(hipMalloc(&p, N));
  unsigned char* h = (unsigned char*)std::malloc(N);
  for (size_t i = 0; i < N; i++) h[i] = (unsigned char)(i * 7 + 3);
  OK(hipMemcpy(p, h, N, hipMemcpyHostToDevice));
  OK(hipIpcGetMemHandle(&m.base, p));
  hipIpcMemHandle_t again;
  OK(hipIpcGetMemHandle(&again, p));
  CHECK(std::memcmp(&again, &m.base, sizeof again) == 0);
  OK(hipIpcGetMemHandle(&m.inner, p + 4096));
  CHECK(std::memcmp(&m.inner, &m.base, sizeof again) != 0);
  CHECK(hipIpcGetMemHandle(&again, h) == hipErrorInvalidDevicePointer);  // not HIP memory
  CHECK(hipIpcGetMemHandle(nullptr, p) == hipErrorInvalidValue);
  void* gone;
  OK(hipMalloc(&gone, 4096));
  OK(hipIpcGetMemHandle(&m.stale, gone));
  OK(hipFree(gone));

  // An IPC pool: its fd stays open here; the child reopens it.
  hipMemPoolProps props;
  std::memset(&props, 0, sizeof props);
  props.allocType = hipMemAllocationTypePinned;
  props.handleTypes = hipMemHandleTypePosixFileDescriptor;
  props.location.type = hipMemLocationTypeDevice;
  props.location.id = 0;
  hipMemPool_t pool;
  OK(hipMemPoolCreate(&pool, &props));
  hipStream_t s;
  OK(hipStreamCreate(&s));
  unsigned *a, *b;
  OK(hipMallocFromPoolAsync((void**)&a, 4096, pool, s));
  OK(hipMallocFromPoolAsync((void**)&b, 4096, pool, s));
  OK(hipStreamWriteValue32(s, a, 0xC0FFEE, 0));
  OK(hipStreamSynchronize(s));
  OK(hipMemPoolExportPointer(&m.live, a));
  OK(hipMemPoolExportPointer(&m.freed, b));
  OK(hipFreeAsync(b, s));
  OK(hipStreamSynchronize(s));
  int fd = -1;
  OK(hipMemPoolExportToShareableHandle(&fd, pool, hipMemHandleTypePosixFileDescriptor, 0));
  CHECK(fd >= 0);
  m.pool_fd = fd;
  // A pool without a handle type cannot be exported.
  hipMemPool_t plain;
  props.handleTypes = hipMemHandleTypeNone;
  OK(hipMemPoolCreate(&plain, &props));
  int fd2 = -1;
  CHECK(hipMemPoolExportToShareableHandle(&fd2, plain, hipMemHandleTypePosixFileDescriptor,
                                          0) == hipErrorInvalidValue);
  OK(hipMemPoolDestroy(plain));

  // An interprocess event recorded behind a host gate.
  hipEvent_t ev, plain_ev;
  CHECK(hipEventCreateWithFlags(&ev, hipEventInterprocess) == hipErrorInvalidValue);
  OK(hipEventCreateWithFlags(&ev, hipEventInterprocess | hipEventDisableTiming));
  OK(hipEventCreateWithFlags(&plain_ev, hipEventDisableTiming));
  CHECK(hipIpcGetEventHandle(&m.event, plain_ev) == hipErrorInvalidValue);
  OK(hipEventDestroy(plain_ev));
  OK(hipEventQuery(ev));  // never recorded
  OK(hipIpcGetEventHandle(&m.event, ev));
  unsigned* gate;
  OK(hipHostMalloc((void**)&gate, 4096, 0));
  *gate = 0;
  hipStream_t gs;
  OK(hipStreamCreate(&gs));
  OK(hipStreamWaitValue32(gs, gate, 1, hipStreamWaitValueGte, 0xffffffff));
  OK(hipEventRecord(ev, gs));
  CHECK(hipEventQuery(ev) == hipErrorNotReady);

  write_all(down[1], &m, sizeof m);
  char done = 0;
  CHECK(read(up[0], &done, 1) == 1 && done == 'g');
  __atomic_store_n(gate, 1, __ATOMIC_RELEASE);
  OK(hipStreamSynchronize(gs));
  CHECK(read(up[0], &done, 1) == 1 && done == 'y');
  // The child's record of our event (on its stream) has completed.
  OK(hipEventQuery(ev));
  OK(hipEventSynchronize(ev));
  OK(hipEventDestroy(ev));
  OK(hipStreamDestroy(gs));
  OK(hipHostFree(gate));
  int status = 0;
  CHECK(waitpid(pid, &status, 0) == pid);
  CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);

  // The child's GPU writes, seen here.
  OK(hipMemcpy(h, p, N, hipMemcpyDeviceToHost));
  int bad = 0;
  for (size_t i = 8192; i < 8192 + 4096; i++) bad += h[i] != 0x5a;
  CHECK(bad == 0 && h[8191] == (unsigned char)(8191 * 7 + 3));
  unsigned v = 0;
  OK(hipMemcpy(&v, a + 1, 4, hipMemcpyDeviceToHost));
  CHECK(v == 0xBEEF);
  close(fd);
  OK(hipFreeAsync(a, s));
  OK(hipStreamSynchronize(s));
  OK(hipStreamDestroy(s));
  OK(hipMemPoolDestroy(pool));
  OK(hipFree(p));
  std::printf("parent checks passed: %d\n", checks);
  return 0;
}
