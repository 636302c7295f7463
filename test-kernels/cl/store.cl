// out[i] = v: one work-item stores its own launch's arguments (kernarg ring tests).
__kernel void store(__global uint *out, uint i, uint v) {
  if (__builtin_amdgcn_workitem_id_x() == 0)
    out[i] = v;
}
