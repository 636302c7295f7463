// The floor of hipbench's idle query/synchronize loop: the same loop shape (one call per
// iteration through the PLT into a shared library, the result checked, a steady_clock
// read around each batch of 2016 calls, the median of 11 batches) calling an empty
// function and one that only stores a thread's last error (initial-exec TLS, as
// kfdrt's HIP_RETURN). Built and run by tools/hipbench/floor.sh.
static __thread int last_error __attribute__((tls_model("initial-exec")));
int floor_empty(void *s) { (void)s; return 0; }
int floor_last_error(void *s) { (void)s; last_error = 0; return 0; }
