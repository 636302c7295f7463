// out[i] = b.v[i % 1000]: a ~4 KB by-value argument, so a few hundred launches fill a
// queue's kernarg ring (ring wrap / wait-for-the-oldest-segment tests).
struct big {
  uint v[1000];
};
__kernel void big_args(__global uint *out, uint i, struct big b) {
  if (__builtin_amdgcn_workitem_id_x() == 0)
    out[i] = b.v[i % 1000];
}
