/* IPC memory between two processes through ROCr under `kfdrt emu-run`. The parent fills 2
 * MiB of VRAM, exports it with hsa_amd_ipc_memory_create and starts a child (this program
 * again, exec'd, with the handle in hex); the child attaches the handle, checks the
 * parent's bytes, writes its own and detaches; the parent then reads the child's bytes
 * from its own allocation. Copies go through SDMA (hsa_amd_memory_async_copy). Prints one
 * "ok NAME" line per step (the child's start with "child_"); exits 1 at the first failure.
 */
#include "hsa_common.h"
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define LEN (2u << 20)

static uint64_t ticks_10s;

static void setup(void) {
    find_agents_and_pools();
    ticks_10s = ticks(10);
}

/* A host staging buffer both agents can reach. */
static uint8_t *host_buffer(void) {
    uint8_t *h = NULL;
    CHECK(hsa_amd_memory_pool_allocate(sys_pool, LEN, 0, (void **)&h));
    hsa_agent_t both[2] = {cpu, gpu};
    CHECK(hsa_amd_agents_allow_access(2, both, NULL, h));
    return h;
}

/* One SDMA copy, waited for. */
static void copy(void *dst, hsa_agent_t dst_agent, const void *src, hsa_agent_t src_agent) {
    hsa_signal_t c;
    CHECK(hsa_signal_create(1, 0, NULL, &c));
    CHECK(hsa_amd_memory_async_copy(dst, dst_agent, src, src_agent, LEN, 0, NULL, c));
    EXPECT(hsa_signal_wait_scacquire(c, HSA_SIGNAL_CONDITION_LT, 1, ticks_10s,
                                     HSA_WAIT_STATE_BLOCKED) == 0,
           "copy timed out");
    CHECK(hsa_signal_destroy(c));
}

static void fill(uint8_t *h, uint8_t seed) {
    for (size_t i = 0; i < LEN; i++) h[i] = (uint8_t)(i * 7 + seed);
}

static void expect_pattern(const uint8_t *h, uint8_t seed, const char *who) {
    for (size_t i = 0; i < LEN; i++)
        EXPECT(h[i] == (uint8_t)(i * 7 + seed), "%s: byte %zu = %#x, expected %#x", who, i, h[i],
               (uint8_t)(i * 7 + seed));
}

static int child(const char *hex) {
    setup();
    hsa_amd_ipc_memory_t handle;
    EXPECT(strlen(hex) == 2 * sizeof(handle), "handle %s", hex);
    for (size_t i = 0; i < sizeof(handle); i++) {
        unsigned v = 0;
        EXPECT(sscanf(hex + 2 * i, "%2x", &v) == 1, "hex");
        ((uint8_t *)&handle)[i] = (uint8_t)v;
    }
    void *shared = NULL;
    /* A handle naming nothing the parent exported is refused (the kernel: EINVAL). */
    hsa_amd_ipc_memory_t forged = handle;
    forged.handle[2] ^= 0x5555;
    EXPECT(hsa_amd_ipc_memory_attach(&forged, LEN, 1, &gpu, &shared) ==
               HSA_STATUS_ERROR_INVALID_ARGUMENT,
           "a forged handle was attached");
    CHECK(hsa_amd_ipc_memory_attach(&handle, LEN, 1, &gpu, &shared));
    printf("ok child_attach\n");
    uint8_t *h = host_buffer();
    memset(h, 0, LEN);
    copy(h, cpu, shared, gpu);
    expect_pattern(h, 3, "child reading the parent's bytes");
    printf("ok child_read\n");
    fill(h, 101);
    copy(shared, gpu, h, cpu);
    printf("ok child_write\n");
    CHECK(hsa_amd_ipc_memory_detach(shared));
    CHECK(hsa_amd_memory_pool_free(h));
    CHECK(hsa_shut_down());
    return 0;
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    if (argc == 3 && strcmp(argv[1], "child") == 0) return child(argv[2]);
    setup();
    void *dev = NULL;
    CHECK(hsa_amd_memory_pool_allocate(vram_pool, LEN, 0, &dev));
    uint8_t *h = host_buffer();
    fill(h, 3);
    copy(dev, gpu, h, cpu);
    hsa_amd_ipc_memory_t handle;
    CHECK(hsa_amd_ipc_memory_create(dev, LEN, &handle));
    printf("ok ipc_create\n");

    char hex[2 * sizeof(handle) + 1];
    for (size_t i = 0; i < sizeof(handle); i++)
        snprintf(hex + 2 * i, 3, "%02x", ((uint8_t *)&handle)[i]);
    pid_t pid = fork();
    EXPECT(pid >= 0, "fork");
    if (pid == 0) {
        execl("/proc/self/exe", argv[0], "child", hex, (char *)NULL);
        _exit(127);
    }
    int status = 0;
    EXPECT(waitpid(pid, &status, 0) == pid, "waitpid");
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);

    memset(h, 0, LEN);
    copy(h, cpu, dev, gpu);
    expect_pattern(h, 101, "parent reading the child's bytes");
    printf("ok parent_sees_child_writes\n");
    CHECK(hsa_amd_memory_pool_free(h));
    CHECK(hsa_amd_memory_pool_free(dev));
    CHECK(hsa_shut_down());
    printf("ok shut_down\n");
    return 0;
}
