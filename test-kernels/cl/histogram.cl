// bins[in[i] % nbins] += 1 with global atomics, for i < n.
__kernel void histogram(__global const uint *in, __global uint *bins, uint n, uint nbins) {
  uint i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
           __builtin_amdgcn_workitem_id_x();
  if (i < n)
    __atomic_fetch_add(&bins[in[i] % nbins], 1u, __ATOMIC_RELAXED);
}
