// y[i] = a * x[i] + y[i] for i < n.
__kernel void saxpy(float a, __global const float *x, __global float *y, uint n) {
  uint i = __builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() +
           __builtin_amdgcn_workitem_id_x();
  if (i < n)
    y[i] = a * x[i] + y[i];
}
