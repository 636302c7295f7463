// Workgroup sum of n uints with a tree reduction in LDS and barriers:
// out[group] = sum of in[group * 256 .. group * 256 + 255] (missing elements count 0).
// The workgroup size must be 256.
#define WG 256
static void workgroup_barrier(void) {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
__kernel __attribute__((reqd_work_group_size(WG, 1, 1))) void
reduce(__global const uint *in, __global uint *out, uint n) {
  __local uint part[WG];
  uint lid = __builtin_amdgcn_workitem_id_x();
  uint g = __builtin_amdgcn_workgroup_id_x();
  uint i = g * WG + lid;
  part[lid] = i < n ? in[i] : 0;
  workgroup_barrier();
  for (uint s = WG / 2; s > 0; s >>= 1) {
    if (lid < s)
      part[lid] += part[lid + s];
    workgroup_barrier();
  }
  if (lid == 0)
    out[g] = part[0];
}
