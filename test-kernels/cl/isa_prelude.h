// Work-item ids and helpers from compiler builtins only (no device library is linked).
#pragma OPENCL EXTENSION cl_khr_fp16 : enable
#pragma OPENCL EXTENSION cl_khr_fp64 : enable
#define GID() (__builtin_amdgcn_workgroup_id_x() * __builtin_amdgcn_workgroup_size_x() + \
               __builtin_amdgcn_workitem_id_x())
#define LID() (__builtin_amdgcn_workitem_id_x())
#define BARRIER()                                                                      \
  do {                                                                                 \
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");                             \
    __builtin_amdgcn_s_barrier();                                                      \
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");                             \
  } while (0)
