// C = A * B for n x n row-major int matrices (n a multiple of TILE), tiled through LDS.
// 2D launch: workgroup TILE x TILE, grid n x n.
#define TILE 16
static void workgroup_barrier(void) {
  __builtin_amdgcn_fence(__ATOMIC_RELEASE, "workgroup");
  __builtin_amdgcn_s_barrier();
  __builtin_amdgcn_fence(__ATOMIC_ACQUIRE, "workgroup");
}
__kernel __attribute__((reqd_work_group_size(TILE, TILE, 1))) void
matmul(__global const int *a, __global const int *b, __global int *c, uint n) {
  __local int ta[TILE][TILE];
  __local int tb[TILE][TILE];
  uint tx = __builtin_amdgcn_workitem_id_x(), ty = __builtin_amdgcn_workitem_id_y();
  uint col = __builtin_amdgcn_workgroup_id_x() * TILE + tx;
  uint row = __builtin_amdgcn_workgroup_id_y() * TILE + ty;
  int acc = 0;
  for (uint t = 0; t < n; t += TILE) {
    ta[ty][tx] = a[row * n + t + tx];
    tb[ty][tx] = b[(t + ty) * n + col];
    workgroup_barrier();
    for (uint k = 0; k < TILE; k++)
      acc += ta[ty][k] * tb[k][tx];
    workgroup_barrier();
  }
  c[row * n + col] = acc;
}
