/* What the ROCr test programs share: result checks that exit 1 with the failing call, and
 * the agents and memory pools they use (the first CPU and GPU agent; the GPU's
 * coarse-grained VRAM pool; the CPU's fine-grained and kernarg pools). */
#ifndef KFDRT_HSA_COMMON_H
#define KFDRT_HSA_COMMON_H
#include <hsa/hsa.h>
#include <hsa/hsa_ext_amd.h>
#include <stdbool.h>
#include <stdint.h>
#include "expect.h"
#include <stdio.h>
#include <stdlib.h>

#define CHECK(x)                                                                   \
    do {                                                                           \
        hsa_status_t s_ = (x);                                                     \
        if (s_ != HSA_STATUS_SUCCESS) {                                            \
            const char *m_ = "?";                                                  \
            hsa_status_string(s_, &m_);                                            \
            fprintf(stderr, "FAIL %s:%d %s: %#x %s\n", __FILE__, __LINE__, #x,     \
                    (unsigned)s_, m_);                                             \
            exit(1);                                                               \
        }                                                                          \
    } while (0)

static hsa_agent_t cpu, gpu, gpu2; /* gpu2: the second GPU, when there is one */
static int n_gpus, n_cpus;
static hsa_amd_memory_pool_t vram_pool, sys_pool, kernarg_pool;
static int have_vram, have_sys, have_kernarg;

static inline hsa_status_t common_agent_cb(hsa_agent_t a, void *d) {
    (void)d;
    hsa_device_type_t t;
    CHECK(hsa_agent_get_info(a, HSA_AGENT_INFO_DEVICE, &t));
    if (t == HSA_DEVICE_TYPE_GPU) {
        if (n_gpus == 0) gpu = a;
        if (n_gpus == 1) gpu2 = a;
        n_gpus++;
    } else if (t == HSA_DEVICE_TYPE_CPU) {
        if (n_cpus++ == 0) cpu = a;
    }
    return HSA_STATUS_SUCCESS;
}

static inline hsa_status_t common_pool_cb(hsa_amd_memory_pool_t p, void *d) {
    int is_gpu = *(int *)d;
    hsa_amd_segment_t seg;
    uint32_t flags = 0;
    bool alloc = false;
    CHECK(hsa_amd_memory_pool_get_info(p, HSA_AMD_MEMORY_POOL_INFO_SEGMENT, &seg));
    if (seg != HSA_AMD_SEGMENT_GLOBAL) return HSA_STATUS_SUCCESS;
    CHECK(hsa_amd_memory_pool_get_info(p, HSA_AMD_MEMORY_POOL_INFO_GLOBAL_FLAGS, &flags));
    CHECK(hsa_amd_memory_pool_get_info(p, HSA_AMD_MEMORY_POOL_INFO_RUNTIME_ALLOC_ALLOWED, &alloc));
    if (!alloc) return HSA_STATUS_SUCCESS;
    if (is_gpu && (flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_COARSE_GRAINED) && !have_vram) {
        vram_pool = p;
        have_vram = 1;
    }
    if (!is_gpu && (flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_FINE_GRAINED) && !have_sys) {
        sys_pool = p;
        have_sys = 1;
    }
    if (!is_gpu && (flags & HSA_AMD_MEMORY_POOL_GLOBAL_FLAG_KERNARG_INIT) && !have_kernarg) {
        kernarg_pool = p;
        have_kernarg = 1;
    }
    return HSA_STATUS_SUCCESS;
}

/* hsa_init, then the agents and pools above; exits 1 when any is missing. */
static inline void find_agents_and_pools(void) {
    CHECK(hsa_init());
    CHECK(hsa_iterate_agents(common_agent_cb, NULL));
    EXPECT(n_cpus == 1 && n_gpus >= 1, "cpus=%d gpus=%d", n_cpus, n_gpus);
    int one = 1, zero = 0;
    CHECK(hsa_amd_agent_iterate_memory_pools(gpu, common_pool_cb, &one));
    CHECK(hsa_amd_agent_iterate_memory_pools(cpu, common_pool_cb, &zero));
    EXPECT(have_vram && have_sys && have_kernarg, "vram=%d sys=%d kernarg=%d", have_vram,
           have_sys, have_kernarg);
}

/* Timestamp ticks in `secs` seconds, for bounded signal waits. */
static inline uint64_t ticks(uint64_t secs) {
    uint64_t freq = 0;
    CHECK(hsa_system_get_info(HSA_SYSTEM_INFO_TIMESTAMP_FREQUENCY, &freq));
    return freq * secs;
}
#endif
