#include "common.h"
// Sends an interrupt message (s_sendmsg MSG_INTERRUPT) to the host, which the emulated
// shader core does not model: the dispatch must fault, naming the instruction.
__kernel void sendmsg(__global const float *a, __global const float *b, __global float *c) {
  uint i = GID(x);
  c[i] = a[i] + b[i];
  __builtin_amdgcn_s_sendmsg(1, 0);
}
