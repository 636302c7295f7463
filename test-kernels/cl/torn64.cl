// Polls a 64-bit cell another agent keeps rewriting with whole 64-bit stores, and counts the
// values that are neither of the two it writes (a load split into two 32-bit halves).
__kernel void torn64(__global ulong *cell, __global uint *out, ulong a, ulong b, uint iters) {
  uint torn = 0;
  for (uint i = 0; i < iters; i++) {
    ulong v = __atomic_load_n(cell, __ATOMIC_RELAXED);
    torn += (v != a && v != b);
  }
  out[__builtin_amdgcn_workitem_id_x()] = torn;
}
