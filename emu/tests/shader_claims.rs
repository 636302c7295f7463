//! Work-group hand-out: worker threads claim runs of consecutive work-groups (fewer
//! towards the end of the grid). Whatever the number of threads, every work-group of a
//! large grid runs exactly once: saxpy (`y += a * x`, not idempotent) over a grid of
//! many small work-groups gives the CPU's result in every element, and the trace counts
//! every work-group and wave once.

mod shader_common;
use shader_common::*;

/// The DISPATCH trace line's work-group and wave counts.
fn traced(dev: &Dev) -> (u64, u64) {
    let line = dev.take_dispatch_line();
    (
        trace_field(&line, "workgroups="),
        trace_field(&line, "waves="),
    )
}

#[test]
fn every_workgroup_of_a_large_grid_runs_once_on_any_number_of_threads() {
    let dev = Dev::new("gfx942", 90402);
    dev.eng.trace().set_enabled(true);
    let mut q = dev.queue();
    let m = dev.load("cl/isa/saxpy.cl");
    // 3000 work-groups of 64 (one wave each) and a partial last one.
    let n = 3000 * 64 + 17;
    let x: Vec<f32> = rand_u32(n, 7).iter().map(|&v| (v % 1000) as f32).collect();
    let y0: Vec<f32> = rand_u32(n, 8).iter().map(|&v| (v % 77) as f32).collect();
    let wx = dev.upload(&x);
    for threads in [1, 2, 3] {
        dev.eng.set_shader_threads(threads);
        let wy = dev.upload(&y0);
        let alpha = 2.0f32;
        let args = Args::default().f32(alpha).ptr(&wx).ptr(&wy).u32(n as u32);
        dev.run_ok(
            &mut q,
            &m,
            "saxpy",
            [n as u32, 1, 1],
            [64, 1, 1],
            0,
            &args.0,
        );
        assert_eq!(traced(&dev), (3001, 3001), "{threads} threads");
        let y: Vec<f32> = dev.download(&wy, n);
        for i in 0..n {
            // Small integers times 2 plus small integers: exact, fused or not.
            assert_eq!(y[i], alpha * x[i] + y0[i], "{threads} threads: y[{i}]");
        }
    }
    dev.eng.set_shader_threads(0);
}
