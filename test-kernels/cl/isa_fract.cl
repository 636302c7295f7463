// v_fract_f32 / v_fract_f64 (LLVM `llvm.amdgcn.fract`): fract(x) = min(x - floor(x), the
// largest value below 1.0), so tiny negative inputs give a result below 1.0.
__kernel void fract(__global const float *f, __global const double *d, __global float *fo,
                    __global double *dout) {
  uint t = __builtin_amdgcn_workgroup_id_x() * 64 + __builtin_amdgcn_workitem_id_x();
  fo[t] = __builtin_amdgcn_fractf(f[t]);
  dout[t] = __builtin_amdgcn_fract(d[t]);
}
