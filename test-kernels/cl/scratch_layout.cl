// Each work-item fills a private (scratch) array with values naming it and the element:
// a[k] = id * 16 + k + 0x1000. Volatile keeps the array in scratch memory, so the test can
// find every lane's elements in the queue's scratch backing memory where the hardware's
// swizzle puts them.
__kernel void scratch_layout(__global uint *out, uint sel) {
  volatile uint a[16];
  uint id = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
            __builtin_amdgcn_workitem_id_x();
  for (int k = 0; k < 16; k++)
    a[k] = id * 16 + k + 0x1000;
  out[id] = a[(id + sel) & 15];
}
