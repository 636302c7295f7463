// Does nothing: the launch-overhead kernel.
__kernel void empty(void) {}
