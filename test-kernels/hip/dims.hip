// Reads blockDim/gridDim the way HIP's headers do on code object v5: from the hidden
// (implicit) kernel arguments. Each thread writes, at its global linear id:
// blockDim.x | blockDim.y << 8 | gridDim.x << 16 | gridDim.y << 24, and thread 0 also
// writes the remainder and grid dims to info[0..4].
#define __global__ __attribute__((global))
struct implicit_args {
  unsigned block_count[3];
  unsigned short group_size[3];
  unsigned short remainder[3];
  unsigned char reserved[40];
  unsigned short grid_dims;
};
extern "C" __global__ void dims(unsigned *out, unsigned *info) {
  const implicit_args *ia = (const implicit_args *)__builtin_amdgcn_implicitarg_ptr();
  unsigned bx = ia->group_size[0], by = ia->group_size[1];
  unsigned gx = ia->block_count[0], gy = ia->block_count[1];
  unsigned tx = __builtin_amdgcn_workitem_id_x(), ty = __builtin_amdgcn_workitem_id_y();
  unsigned x = __builtin_amdgcn_workgroup_id_x() * bx + tx;
  unsigned y = __builtin_amdgcn_workgroup_id_y() * by + ty;
  out[y * gx * bx + x] = bx | by << 8 | gx << 16 | gy << 24;
  if (x == 0 && y == 0) {
    info[0] = ia->remainder[0];
    info[1] = ia->remainder[1];
    info[2] = ia->grid_dims;
    info[3] = ia->block_count[2];
  }
}
