/* A kernel dispatched through ROCr under `kfdrt emu-run`: the code object named by argv[1]
 * (vadd for gfx90a, built by clang-19) is loaded with hsa_code_object_reader and
 * hsa_executable, dispatched with an AQL KERNEL_DISPATCH packet on an HSA queue, and its
 * output checked element by element. Prints one "ok NAME" line per step; exits 1 at the
 * first failure. */
#include "hsa_common.h"
#include <string.h>

static void *read_file(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    EXPECT(f != NULL, "open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    EXPECT(n > 0, "empty %s", path);
    void *buf = malloc((size_t)n);
    EXPECT(fread(buf, 1, (size_t)n, f) == (size_t)n, "read %s", path);
    fclose(f);
    *len = (size_t)n;
    return buf;
}

int main(int argc, char **argv) {
    EXPECT(argc == 2, "usage: hsa_dispatch CODE_OBJECT");
    setvbuf(stdout, NULL, _IONBF, 0);
    find_agents_and_pools();

    /* Load the code object. */
    size_t len = 0;
    void *elf = read_file(argv[1], &len);
    hsa_code_object_reader_t reader;
    CHECK(hsa_code_object_reader_create_from_memory(elf, len, &reader));
    hsa_executable_t exe;
    CHECK(hsa_executable_create_alt(HSA_PROFILE_FULL, HSA_DEFAULT_FLOAT_ROUNDING_MODE_DEFAULT,
                                    NULL, &exe));
    CHECK(hsa_executable_load_agent_code_object(exe, gpu, reader, NULL, NULL));
    CHECK(hsa_executable_freeze(exe, NULL));
    uint32_t valid = 1;
    CHECK(hsa_executable_validate(exe, &valid));
    EXPECT(valid == 0, "executable invalid: %u", valid);
    hsa_executable_symbol_t sym;
    CHECK(hsa_executable_get_symbol_by_name(exe, "vadd.kd", &gpu, &sym));
    uint64_t kobj = 0;
    uint32_t kernarg_size = 0, group = 0, priv = 0;
    CHECK(hsa_executable_symbol_get_info(sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_OBJECT, &kobj));
    CHECK(hsa_executable_symbol_get_info(
        sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_KERNARG_SEGMENT_SIZE, &kernarg_size));
    CHECK(hsa_executable_symbol_get_info(
        sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_GROUP_SEGMENT_SIZE, &group));
    CHECK(hsa_executable_symbol_get_info(
        sym, HSA_EXECUTABLE_SYMBOL_INFO_KERNEL_PRIVATE_SEGMENT_SIZE, &priv));
    EXPECT(kobj != 0 && kernarg_size >= 28, "kernel object %#llx kernarg %u",
           (unsigned long long)kobj, kernarg_size);
    printf("ok load kernarg_size=%u\n", kernarg_size);

    /* Buffers in fine-grained system memory, visible to both agents. */
    const uint32_t n = 1000; /* not a multiple of the work-group size: the tail is masked */
    float *a = NULL, *b = NULL, *c = NULL;
    CHECK(hsa_amd_memory_pool_allocate(sys_pool, n * sizeof(float), 0, (void **)&a));
    CHECK(hsa_amd_memory_pool_allocate(sys_pool, n * sizeof(float), 0, (void **)&b));
    CHECK(hsa_amd_memory_pool_allocate(sys_pool, (n + 64) * sizeof(float), 0, (void **)&c));
    hsa_agent_t both[2] = {cpu, gpu};
    CHECK(hsa_amd_agents_allow_access(2, both, NULL, a));
    CHECK(hsa_amd_agents_allow_access(2, both, NULL, b));
    CHECK(hsa_amd_agents_allow_access(2, both, NULL, c));
    for (uint32_t i = 0; i < n; i++) {
        a[i] = (float)i;
        b[i] = 0.5f * (float)i + 1.0f;
    }
    for (uint32_t i = 0; i < n + 64; i++) c[i] = -1.0f;

    /* Kernel arguments: a, b, c, n; hidden arguments zero. */
    uint8_t *args = NULL;
    CHECK(hsa_amd_memory_pool_allocate(kernarg_pool, kernarg_size, 0, (void **)&args));
    CHECK(hsa_amd_agents_allow_access(1, &gpu, NULL, args));
    memset(args, 0, kernarg_size);
    memcpy(args + 0, &a, 8);
    memcpy(args + 8, &b, 8);
    memcpy(args + 16, &c, 8);
    memcpy(args + 24, &n, 4);
    if (kernarg_size >= 56) {
        /* Code object v5: the work-group size lives in the hidden arguments that the
         * dispatcher fills (LLVM AMDGPUUsage, "Code Object V5 Metadata": block counts at
         * 32, group sizes at 44, remainders at 50 after this kernel's 28 bytes). ROCr 5.2
         * leaves them to the caller. */
        uint32_t blocks[3] = {(n + 63) / 64, 1, 1};
        uint16_t sizes[3] = {64, 1, 1}, rem[3] = {(uint16_t)(n % 64), 0, 0};
        memcpy(args + 32, blocks, sizeof(blocks));
        memcpy(args + 44, sizes, sizeof(sizes));
        memcpy(args + 50, rem, sizeof(rem));
    }

    hsa_queue_t *q = NULL;
    CHECK(hsa_queue_create(gpu, 256, HSA_QUEUE_TYPE_SINGLE, NULL, NULL, UINT32_MAX, UINT32_MAX,
                           &q));
    hsa_signal_t done;
    CHECK(hsa_signal_create(1, 0, NULL, &done));

    uint64_t idx = hsa_queue_add_write_index_relaxed(q, 1);
    hsa_kernel_dispatch_packet_t *p =
        (hsa_kernel_dispatch_packet_t *)q->base_address + (idx & (q->size - 1));
    memset((uint8_t *)p + 4, 0, sizeof(*p) - 4);
    p->workgroup_size_x = 64;
    p->workgroup_size_y = 1;
    p->workgroup_size_z = 1;
    p->grid_size_x = n;
    p->grid_size_y = 1;
    p->grid_size_z = 1;
    p->private_segment_size = priv;
    p->group_segment_size = group;
    p->kernel_object = kobj;
    p->kernarg_address = args;
    p->completion_signal = done;
    uint16_t header = (uint16_t)((HSA_PACKET_TYPE_KERNEL_DISPATCH << HSA_PACKET_HEADER_TYPE) |
                                 (1 << HSA_PACKET_HEADER_BARRIER) |
                                 (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCACQUIRE_FENCE_SCOPE) |
                                 (HSA_FENCE_SCOPE_SYSTEM << HSA_PACKET_HEADER_SCRELEASE_FENCE_SCOPE));
    uint16_t setup = 1 << HSA_KERNEL_DISPATCH_PACKET_SETUP_DIMENSIONS;
    __atomic_store_n((uint32_t *)p, header | ((uint32_t)setup << 16), __ATOMIC_RELEASE);
    hsa_signal_store_screlease(q->doorbell_signal, (hsa_signal_value_t)idx);
    hsa_signal_value_t v = hsa_signal_wait_scacquire(done, HSA_SIGNAL_CONDITION_LT, 1, ticks(60),
                                                     HSA_WAIT_STATE_BLOCKED);
    EXPECT(v == 0, "dispatch did not complete (signal %ld)", (long)v);
    printf("ok dispatch grid=%u wg=64\n", n);

    for (uint32_t i = 0; i < n; i++) {
        float want = a[i] + b[i];
        EXPECT(c[i] == want, "c[%u] = %f, expected %f", i, c[i], want);
    }
    for (uint32_t i = n; i < n + 64; i++) EXPECT(c[i] == -1.0f, "c[%u] written past n", i);
    printf("ok result n=%u\n", n);

    CHECK(hsa_signal_destroy(done));
    CHECK(hsa_queue_destroy(q));
    CHECK(hsa_amd_memory_pool_free(args));
    CHECK(hsa_amd_memory_pool_free(a));
    CHECK(hsa_amd_memory_pool_free(b));
    CHECK(hsa_amd_memory_pool_free(c));
    CHECK(hsa_executable_destroy(exe));
    CHECK(hsa_code_object_reader_destroy(reader));
    free(elf);
    CHECK(hsa_shut_down());
    printf("ok shut_down\n");
    return 0;
}
