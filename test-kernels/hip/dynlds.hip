// Dynamic LDS (extern __shared__): each workgroup reverses its slice of `in` through a
// buffer of blockDim.x floats allocated at launch time.
#define __global__ __attribute__((global))
#define __shared__ __attribute__((shared))
extern __shared__ float buf[];
extern "C" __global__ void dynlds(const float *in, float *out) {
  unsigned t = __builtin_amdgcn_workitem_id_x();
  unsigned n = __builtin_amdgcn_workgroup_size_x();
  unsigned base = __builtin_amdgcn_workgroup_id_x() * n;
  buf[t] = in[base + t];
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
  out[base + t] = buf[n - 1 - t];
}
