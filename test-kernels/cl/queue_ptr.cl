// Writes the queue pointer (code object v5: the hidden_queue_ptr argument) to out[0].
__kernel void queue_ptr(__global ulong *out) {
  if (__builtin_amdgcn_workitem_id_x() == 0)
    out[0] = (ulong)__builtin_amdgcn_queue_ptr();
}
