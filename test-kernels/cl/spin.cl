// Spins until the host sets *flag (or max_iters polls pass), then reports which: a long
// kernel whose end the test controls (other queues must progress meanwhile).
__kernel void spin_until(__global uint *flag, __global uint *out, uint max_iters) {
  uint n = 0;
  while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) == 0 && n < max_iters)
    n++;
  if (__builtin_amdgcn_workitem_id_x() == 0)
    out[__builtin_amdgcn_workgroup_id_x()] = n < max_iters ? 1u : 2u;
}
