// For PM4 DISPATCH_DIRECT (no AQL packet, no hidden arguments): the work-group size is
// the constant 64 the test programs into COMPUTE_NUM_THREAD_X.
__kernel void pm4_scale(__global const uint *in, __global uint *out, uint mul) {
  uint g = __builtin_amdgcn_workgroup_id_x();
  uint i = (__builtin_amdgcn_workgroup_id_y() * 16 + g) * 64 + __builtin_amdgcn_workitem_id_x();
  out[i] = in[i] * mul + __builtin_amdgcn_workgroup_id_y();
}

// Counts its work-items (one atomic add each): a dispatch that ran twice shows.
__kernel void pm4_count(__global uint *count) {
  __atomic_fetch_add(count, 1u, __ATOMIC_RELAXED);
}
