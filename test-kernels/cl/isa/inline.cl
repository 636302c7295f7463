#include "common.h"
// Loop-free kernels (no backward branch): the emulated CP may run a small dispatch of
// them on its own thread (tests/shader_inline.rs).

// Each work-item takes a ticket: seen[gid] = the counter before its atomic increment.
__kernel void ticket(__global uint *counter, __global uint *seen) {
  seen[GID(x)] = __atomic_fetch_add(counter, 1u, __ATOMIC_RELAXED);
}

// *flag = 1 (work-item 0), released.
__kernel void set_flag(__global uint *flag) {
  if (LID(x) == 0)
    __atomic_store_n(flag, 1u, __ATOMIC_RELEASE);
}
