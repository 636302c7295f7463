/* Raw KFD and DRM calls with bad arguments under `kfdrt emu-run`: each must get the
 * kernel's errno, never crash the process. Also fd semantics: dup, fstat, close, and a
 * forked child using the parent's /dev/kfd fd (EBADF) before opening its own.
 * Prints one "ok NAME" line per check; exits 1 at the first failure. */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#define EXPECT(c, ...)                                                          \
    do {                                                                        \
        if (!(c)) {                                                             \
            fprintf(stderr, "FAIL %s:%d %s: ", __FILE__, __LINE__, #c);         \
            fprintf(stderr, __VA_ARGS__);                                       \
            fprintf(stderr, " (errno %d %s)\n", errno, strerror(errno));        \
            exit(1);                                                            \
        }                                                                       \
    } while (0)

/* The few KFD ABI structs used here (layouts of include/uapi/linux/kfd_ioctl.h; the
 * header itself needs drm/drm.h, which Debian ships in libdrm-dev). */
struct kfd_ioctl_get_version_args { uint32_t major_version, minor_version; };
struct kfd_ioctl_create_queue_args {
    uint64_t ring_base_address, write_pointer_address, read_pointer_address, doorbell_offset;
    uint32_t ring_size, gpu_id, queue_type, queue_percentage, queue_priority, queue_id;
    uint64_t eop_buffer_address, eop_buffer_size, ctx_save_restore_address;
    uint32_t ctx_save_restore_size, ctl_stack_size;
};
struct kfd_ioctl_wait_events_args {
    uint64_t events_ptr;
    uint32_t num_events, wait_for_all, timeout, wait_result;
};
struct kfd_ioctl_set_cu_mask_args { uint32_t queue_id, num_cu_mask; uint64_t cu_mask_ptr; };
struct kfd_ioctl_svm_attribute { uint32_t type, value; };
struct kfd_ioctl_svm_args { uint64_t start_addr, size; uint32_t op, nattr; };
/* kfd_ioctl_dbg_trap_args: pid, op, then a 24-byte union of the per-op structs. */
struct kfd_ioctl_dbg_trap_args { uint32_t pid, op; uint64_t u[3]; };
#define AMDKFD_IOC_DBG_TRAP _IOWR('K', 0x26, struct kfd_ioctl_dbg_trap_args)
#define AMDKFD_IOC_GET_VERSION _IOR('K', 0x01, struct kfd_ioctl_get_version_args)
#define AMDKFD_IOC_CREATE_QUEUE _IOWR('K', 0x02, struct kfd_ioctl_create_queue_args)
#define AMDKFD_IOC_WAIT_EVENTS _IOWR('K', 0x0C, struct kfd_ioctl_wait_events_args)
#define AMDKFD_IOC_SET_CU_MASK _IOW('K', 0x1A, struct kfd_ioctl_set_cu_mask_args)
#define AMDKFD_IOC_SVM _IOWR('K', 0x20, struct kfd_ioctl_svm_args)

static int fails_with(int r, int e) { return r == -1 && errno == e; }

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    int kfd = open("/dev/kfd", O_RDWR | O_CLOEXEC);
    EXPECT(kfd >= 0, "open /dev/kfd");
    struct stat st;
    EXPECT(fstat(kfd, &st) == 0 && S_ISCHR(st.st_mode), "fstat kfd");
    struct kfd_ioctl_get_version_args v = {0};
    EXPECT(ioctl(kfd, AMDKFD_IOC_GET_VERSION, &v) == 0 && v.major_version == 1, "version");
    printf("ok open version=%u.%u\n", v.major_version, v.minor_version);

    /* Bad pointers: EFAULT, the process survives. */
    EXPECT(fails_with(ioctl(kfd, AMDKFD_IOC_GET_VERSION, NULL), EFAULT), "NULL arg");
    EXPECT(fails_with(ioctl(kfd, AMDKFD_IOC_GET_VERSION, (void *)8), EFAULT), "bad arg");
    struct kfd_ioctl_wait_events_args w = {0};
    w.events_ptr = 16;
    w.num_events = 4;
    w.timeout = 0;
    EXPECT(fails_with(ioctl(kfd, AMDKFD_IOC_WAIT_EVENTS, &w), EFAULT), "bad events_ptr");
    printf("ok efault\n");

    /* Unknown ioctl numbers: EINVAL. */
    uint64_t junk[8] = {0};
    EXPECT(fails_with(ioctl(kfd, _IOWR('K', 0x7f, uint64_t[8]), junk), EINVAL), "nr 0x7f");
    /* A CU mask of 0 bits: EINVAL (kfd_ioctl_set_cu_mask). */
    struct kfd_ioctl_set_cu_mask_args cm = {0};
    uint32_t mask[2] = {~0u, ~0u};
    cm.cu_mask_ptr = (uintptr_t)mask;
    cm.num_cu_mask = 0;
    EXPECT(fails_with(ioctl(kfd, AMDKFD_IOC_SET_CU_MASK, &cm), EINVAL), "cu mask 0");
    /* SVM with more attributes than the request size carries: EINVAL. */
    struct { struct kfd_ioctl_svm_args a; struct kfd_ioctl_svm_attribute at[1]; } svm;
    memset(&svm, 0, sizeof svm);
    svm.a.nattr = 1000;
    EXPECT(fails_with(ioctl(kfd, AMDKFD_IOC_SVM + (sizeof(svm.at) << _IOC_SIZESHIFT), &svm),
                      EINVAL), "svm nattr");
    /* A queue on a GPU that does not exist. */
    struct kfd_ioctl_create_queue_args q = {0};
    q.gpu_id = 0xdead;
    EXPECT(ioctl(kfd, AMDKFD_IOC_CREATE_QUEUE, &q) == -1, "queue on gpu 0xdead");
    printf("ok einval\n");

    /* The debugger ioctl, as the kernel answers a process nobody debugs
     * (kfd_ioctl_set_debug_trap): another pid has no KFD process (ESRCH), any op but
     * ENABLE on ours is "not debug enabled" (EINVAL), ENABLE on a device without debug
     * support is ENODEV. */
    struct kfd_ioctl_dbg_trap_args dt = {0};
    dt.pid = (uint32_t)getpid() + 100000;
    dt.op = 0;
    EXPECT(fails_with(ioctl(kfd, AMDKFD_IOC_DBG_TRAP, &dt), ESRCH), "dbg_trap other pid");
    dt.pid = (uint32_t)getpid();
    dt.op = 1; /* DISABLE */
    EXPECT(fails_with(ioctl(kfd, AMDKFD_IOC_DBG_TRAP, &dt), EINVAL), "dbg_trap disable");
    dt.op = 0; /* ENABLE */
    EXPECT(fails_with(ioctl(kfd, AMDKFD_IOC_DBG_TRAP, &dt), ENODEV), "dbg_trap enable");
    printf("ok dbg_trap\n");

    /* A garbage mmap offset fails; the process survives. */
    void *m = mmap(NULL, 4096, PROT_READ, MAP_SHARED, kfd, 0x1234000);
    EXPECT(m == MAP_FAILED, "garbage mmap offset");
    printf("ok mmap\n");

    /* dup keeps the device; closing the original leaves the copy working. */
    int d = dup(kfd);
    int d2 = fcntl(kfd, F_DUPFD_CLOEXEC, 100);
    EXPECT(d >= 0 && d2 >= 100, "dup");
    close(kfd);
    memset(&v, 0, sizeof v);
    EXPECT(ioctl(d, AMDKFD_IOC_GET_VERSION, &v) == 0 && v.major_version == 1, "ioctl on dup");
    EXPECT(ioctl(d2, AMDKFD_IOC_GET_VERSION, &v) == 0, "ioctl on F_DUPFD copy");
    EXPECT(fails_with(ioctl(kfd, AMDKFD_IOC_GET_VERSION, &v), EBADF) ||
               fails_with(ioctl(kfd, AMDKFD_IOC_GET_VERSION, &v), ENOTTY),
           "closed fd");
    printf("ok dup close\n");

    /* Render node: a DRM character device answering DRM_IOCTL_VERSION as amdgpu. */
    int r = open("/dev/dri/renderD128", O_RDWR | O_CLOEXEC);
    EXPECT(r >= 0 && fstat(r, &st) == 0 && S_ISCHR(st.st_mode) && major(st.st_rdev) == 226 &&
               minor(st.st_rdev) == 128, "render node");
    EXPECT(fails_with(open("/dev/dri/renderD200", O_RDWR), ENOENT), "missing render node");
    printf("ok render\n");

    /* Sysfs from memory: the topology lists node 0 (CPU) and node 1 (GPU). */
    FILE *f = fopen("/sys/devices/virtual/kfd/kfd/topology/nodes/1/gpu_id", "r");
    unsigned gpu_id = 0;
    EXPECT(f && fscanf(f, "%u", &gpu_id) == 1 && gpu_id != 0, "gpu_id");
    fclose(f);
    EXPECT(access("/sys/devices/virtual/kfd/kfd/topology/nodes/1/properties", R_OK) == 0, "access");
    EXPECT(fails_with(access("/sys/devices/virtual/kfd/kfd/topology/nodes/9", R_OK), ENOENT), "no node 9");
    printf("ok sysfs gpu_id=%u\n", gpu_id);

    /* fork: the child may not use the parent's KFD fd (EBADF), but may open its own. */
    pid_t pid = fork();
    EXPECT(pid >= 0, "fork");
    if (pid == 0) {
        struct kfd_ioctl_get_version_args cv = {0};
        if (!fails_with(ioctl(d, AMDKFD_IOC_GET_VERSION, &cv), EBADF)) _exit(2);
        int own = open("/dev/kfd", O_RDWR | O_CLOEXEC);
        if (own < 0 || ioctl(own, AMDKFD_IOC_GET_VERSION, &cv) != 0 || cv.major_version != 1) _exit(3);
        _exit(0);
    }
    int status = 0;
    EXPECT(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0,
           "child status %#x", status);
    memset(&v, 0, sizeof v);
    EXPECT(ioctl(d, AMDKFD_IOC_GET_VERSION, &v) == 0, "parent fd after fork");
    printf("ok fork\n");
    return 0;
}
