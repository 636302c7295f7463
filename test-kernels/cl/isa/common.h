// Work-item functions from the amdgcn builtins (no device library is linked).
#define LID(d) __builtin_amdgcn_workitem_id_##d()
#define GRP(d) __builtin_amdgcn_workgroup_id_##d()
#define WGS(d) __builtin_amdgcn_workgroup_size_##d()
#define GID(d) (GRP(d) * WGS(d) + LID(d))
// A work-group barrier with LDS visibility, as OpenCL's barrier(CLK_LOCAL_MEM_FENCE).
#define BARRIER()                                                                      \
  do {                                                                                 \
    __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");                             \
    __builtin_amdgcn_s_barrier();                                                      \
    __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");                             \
  } while (0)
