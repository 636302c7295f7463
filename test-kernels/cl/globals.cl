// Program-scope variables: `counter` is a global the host can find by name, and
// `counter_ptr` holds its address, which the loader fills with a relocation.
__global uint counter = 41;
__global uint *__global counter_ptr = &counter;
__kernel void bump(__global uint *out) {
  if (__builtin_amdgcn_workitem_id_x() == 0 && __builtin_amdgcn_workgroup_id_x() == 0) {
    *counter_ptr += 1;
    out[0] = counter;
    out[1] = (uint)((ulong)counter_ptr);
    out[2] = (uint)((ulong)counter_ptr >> 32);
  }
}
