// VMM shareable handles through HIP's C API (g++, Debian's HIP 5.2 headers and -lamdhip64,
// run on kfdrt's library): hipMemExportToShareableHandle gives a POSIX fd (written to the
// `int*`), hipMemImportFromShareableHandle takes it by value in the `void*` (as CUDA and
// CLR), in this process and in a forked child that gets the fd over a Unix socket;
// hipMemGetAllocationPropertiesFromHandle and hipMemRetainAllocationHandle.
#include <hip/hip_runtime_api.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

static int checks = 0;
static const char *who = "parent";
#define CHECK(c)                                                                            \
    do {                                                                                    \
        checks++;                                                                           \
        if (!(c)) {                                                                         \
            fprintf(stderr, "%s: %s:%d: CHECK failed: %s\n", who, __FILE__, __LINE__, #c); \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)
#define OK(x) CHECK((x) == hipSuccess)

static hipMemAllocationProp device_prop(hipMemAllocationHandleType t) {
    hipMemAllocationProp p;
    memset(&p, 0, sizeof p);
    p.type = hipMemAllocationTypePinned;
    p.requestedHandleType = t;
    p.location.type = hipMemLocationTypeDevice;
    p.location.id = 0;
    return p;
}

// Reserve, map `h` and give GPU 0 read-write access; the address.
static void *map_rw(hipMemGenericAllocationHandle_t h, size_t size) {
    void *va = NULL;
    OK(hipMemAddressReserve(&va, size, 0, NULL, 0));
    OK(hipMemMap(va, size, 0, h, 0));
    hipMemAccessDesc d;
    d.location.type = hipMemLocationTypeDevice;
    d.location.id = 0;
    d.flags = hipMemAccessFlagsProtReadWrite;
    OK(hipMemSetAccess(va, size, &d, 1));
    return va;
}

static void unmap(void *va, size_t size) {
    OK(hipMemUnmap(va, size));
    OK(hipMemAddressFree(va, size));
}

static void send_fd(int sock, int fd) {
    char byte = 'f';
    struct iovec iov = {&byte, 1};
    char ctl[CMSG_SPACE(sizeof(int))];
    memset(ctl, 0, sizeof ctl);
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    CHECK(sendmsg(sock, &m, 0) == 1);
}

static int recv_fd(int sock) {
    char byte = 0;
    struct iovec iov = {&byte, 1};
    char ctl[CMSG_SPACE(sizeof(int))];
    struct msghdr m;
    memset(&m, 0, sizeof m);
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    m.msg_control = ctl;
    m.msg_controllen = sizeof ctl;
    CHECK(recvmsg(sock, &m, 0) == 1);
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    CHECK(c != NULL && c->cmsg_type == SCM_RIGHTS);
    int fd = -1;
    memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
}

// The child: import the parent's allocation, check its bytes, write its own, report.
static int child(int sock) {
    who = "child";
    int fd = recv_fd(sock);
    size_t size = 0;
    CHECK(read(sock, &size, sizeof size) == (ssize_t)sizeof size);
    hipMemGenericAllocationHandle_t h;
    OK(hipMemImportFromShareableHandle(&h, (void *)(uintptr_t)fd,
                                       hipMemHandleTypePosixFileDescriptor));
    close(fd);  // the import keeps its own reference
    hipMemAllocationProp p;
    OK(hipMemGetAllocationPropertiesFromHandle(&p, h));
    CHECK(p.location.type == hipMemLocationTypeDevice && p.location.id == 0);
    CHECK(p.requestedHandleType == hipMemHandleTypePosixFileDescriptor);
    unsigned *va = (unsigned *)map_rw(h, size);
    unsigned host[4] = {0, 0, 0, 0};
    OK(hipMemcpy(host, va, sizeof host, hipMemcpyDeviceToHost));
    CHECK(host[0] == 0xabcd0001u && host[3] == 0xabcd0004u);
    OK(hipMemset(va + 4, 0x77, 4));  // the GPU writes through the child's mapping
    OK(hipDeviceSynchronize());
    unmap(va, size);
    OK(hipMemRelease(h));
    char done = 'd';
    CHECK(write(sock, &done, 1) == 1);
    printf("child checks passed: %d\n", checks);
    fflush(stdout);
    return 0;
}

int main() {
    // Fork before any HIP call: the child opens its own device.
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        close(sv[0]);
        _exit(child(sv[1]));
    }
    close(sv[1]);

    hipMemAllocationProp prop = device_prop(hipMemHandleTypePosixFileDescriptor);
    size_t g = 0;
    OK(hipMemGetAllocationGranularity(&g, &prop, hipMemAllocationGranularityRecommended));
    hipMemGenericAllocationHandle_t h;
    OK(hipMemCreate(&h, g, &prop, 0));
    hipMemAllocationProp got;
    memset(&got, 0x5a, sizeof got);
    OK(hipMemGetAllocationPropertiesFromHandle(&got, h));
    CHECK(got.type == hipMemAllocationTypePinned);
    CHECK(got.requestedHandleType == hipMemHandleTypePosixFileDescriptor);
    CHECK(got.location.type == hipMemLocationTypeDevice && got.location.id == 0);
    CHECK(hipMemGetAllocationPropertiesFromHandle(NULL, h) == hipErrorInvalidValue);

    // Export: a new fd each time, written to the int the pointer names.
    int fd = -1, fd2 = -1;
    OK(hipMemExportToShareableHandle(&fd, h, hipMemHandleTypePosixFileDescriptor, 0));
    OK(hipMemExportToShareableHandle(&fd2, h, hipMemHandleTypePosixFileDescriptor, 0));
    CHECK(fd >= 0 && fd2 >= 0 && fd != fd2);
    CHECK(fcntl(fd, F_GETFD) >= 0);
    close(fd2);
    CHECK(hipMemExportToShareableHandle(NULL, h, hipMemHandleTypePosixFileDescriptor, 0) ==
          hipErrorInvalidValue);
    CHECK(hipMemExportToShareableHandle(&fd2, h, hipMemHandleTypePosixFileDescriptor, 1) ==
          hipErrorInvalidValue);
    CHECK(hipMemExportToShareableHandle(&fd2, h, hipMemHandleTypeWin32, 0) ==
          hipErrorNotSupported);
    CHECK(hipMemExportToShareableHandle(&fd2, (hipMemGenericAllocationHandle_t)(uintptr_t)0xdead0,
                                        hipMemHandleTypePosixFileDescriptor, 0) ==
          hipErrorInvalidValue);
    // An allocation not created for export cannot be exported.
    hipMemAllocationProp plain = device_prop(hipMemHandleTypeNone);
    hipMemGenericAllocationHandle_t hp;
    OK(hipMemCreate(&hp, g, &plain, 0));
    CHECK(hipMemExportToShareableHandle(&fd2, hp, hipMemHandleTypePosixFileDescriptor, 0) ==
          hipErrorInvalidValue);
    OK(hipMemRelease(hp));

    // Import in this process: a second handle on the same memory; two mappings alias.
    hipMemGenericAllocationHandle_t hi;
    OK(hipMemImportFromShareableHandle(&hi, (void *)(uintptr_t)fd,
                                       hipMemHandleTypePosixFileDescriptor));
    CHECK(hi != h);
    unsigned *a = (unsigned *)map_rw(h, g);
    unsigned *b = (unsigned *)map_rw(hi, g);
    CHECK(a != b);
    unsigned vals[4] = {0xabcd0001u, 0xabcd0002u, 0xabcd0003u, 0xabcd0004u};
    OK(hipMemcpy(a, vals, sizeof vals, hipMemcpyHostToDevice));
    unsigned back[4] = {0, 0, 0, 0};
    OK(hipMemcpy(back, b, sizeof back, hipMemcpyDeviceToHost));
    CHECK(memcmp(back, vals, sizeof vals) == 0);
    // hipMemRetainAllocationHandle: the handle mapped at an address (a new reference).
    hipMemGenericAllocationHandle_t hr;
    OK(hipMemRetainAllocationHandle(&hr, b + 1));
    CHECK(hr == hi);
    OK(hipMemRelease(hr));
    int local = 0;
    CHECK(hipMemRetainAllocationHandle(&hr, &local) == hipErrorInvalidValue);
    unmap(b, g);
    OK(hipMemRelease(hi));

    // Import errors: a null handle out-pointer or fd 0 (null), a non-GPU fd, Win32 types.
    CHECK(hipMemImportFromShareableHandle(NULL, (void *)(uintptr_t)fd,
                                          hipMemHandleTypePosixFileDescriptor) ==
          hipErrorInvalidValue);
    CHECK(hipMemImportFromShareableHandle(&hi, NULL, hipMemHandleTypePosixFileDescriptor) ==
          hipErrorInvalidValue);
    int devnull = open("/dev/null", O_RDWR);
    CHECK(devnull > 0);
    CHECK(hipMemImportFromShareableHandle(&hi, (void *)(uintptr_t)devnull,
                                          hipMemHandleTypePosixFileDescriptor) ==
          hipErrorInvalidValue);
    close(devnull);
    CHECK(hipMemImportFromShareableHandle(&hi, (void *)(uintptr_t)fd, hipMemHandleTypeWin32) ==
          hipErrorNotSupported);

    // Another process: the fd over the socket; the child sees our bytes and writes back.
    send_fd(sv[0], fd);
    CHECK(write(sv[0], &g, sizeof g) == (ssize_t)sizeof g);
    char done = 0;
    CHECK(read(sv[0], &done, 1) == 1 && done == 'd');
    int status = 0;
    CHECK(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    unsigned fifth = 0;
    OK(hipMemcpy(&fifth, a + 4, 4, hipMemcpyDeviceToHost));
    CHECK(fifth == 0x77777777u);

    close(fd);
    unmap(a, g);
    OK(hipMemRelease(h));
    printf("parent checks passed: %d\n", checks);
    return 0;
}
