// Explicit arguments of mixed sizes and alignments (1, 2, 4, 8 bytes, by-value structs with
// padding, a pointer in the middle) for the kernarg copy plans: each work-item 0 writes every
// value it received, and the workgroup size it sees (hidden arguments in code object v5, the
// dispatch packet in v4), into `out`. Builtins rather than get_global_id, which would pull in
// hidden arguments kfdrt refuses (hostcall buffer, default queue...).
struct odd {
  char c;
  double d;
  short s;
};
struct three {
  int v[3];
};
__kernel void mixed(__global int *out, char c, short s, struct odd o, int i, __global int *p,
                    long l, float f, struct three t, uchar last) {
  // 32-bit stores only (64-bit values as two halves): no 64-bit sign extension.
  if (__builtin_amdgcn_workgroup_id_x() == 0 && __builtin_amdgcn_workgroup_id_y() == 0 &&
      __builtin_amdgcn_workitem_id_x() == 0 && __builtin_amdgcn_workitem_id_y() == 0) {
    int2 d = as_int2(o.d), pp = as_int2((ulong)p), ll = as_int2(l);
    out[0] = c;
    out[1] = s;
    out[2] = o.c;
    out[3] = d.x;
    out[4] = d.y;
    out[5] = o.s;
    out[6] = i;
    out[7] = pp.x;
    out[8] = pp.y;
    out[9] = ll.x;
    out[10] = ll.y;
    out[11] = as_int(f);
    out[12] = t.v[0] + 10 * t.v[1] + 100 * t.v[2];
    out[13] = last;
    out[14] = __builtin_amdgcn_workgroup_size_x() * 1000 + __builtin_amdgcn_workgroup_size_y();
  }
}
// A __local pointer argument (dynamic_shared_pointer): not passable as raw bytes.
__kernel void local_arg(__global int *out, __local int *tmp) {
  tmp[__builtin_amdgcn_workitem_id_x()] = 1;
  out[__builtin_amdgcn_workitem_id_x()] = tmp[0];
}
