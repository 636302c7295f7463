// A private array indexed at run time lives in scratch (private segment):
// out[i] = p[idx[i] % 256] where p[k] = i * k + 7.
__kernel void private_array(__global const uint *idx, __global uint *out, uint n) {
  uint i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
           __builtin_amdgcn_workitem_id_x();
  volatile uint p[256];
  for (uint k = 0; k < 256; k++)
    p[k] = i * k + 7;
  if (i < n)
    out[i] = p[idx[i] % 256];
}
