//! Work-group hand-out: worker threads claim runs of consecutive work-groups (fewer
//! towards the end of the grid). Whatever the number of threads, every work-group of a
//! large grid runs exactly once: saxpy (`y += a * x`, not idempotent) over a grid of
//! many small work-groups gives the CPU's result in every element, and the trace counts
//! every work-group and wave once.

mod shader_common;
use kfd_emu::gpumem::MemWindow;
use shader_common::*;

/// The DISPATCH trace line's work-group and wave counts.
fn traced(dev: &Dev) -> (u64, u64) {
    let line = dev.take_dispatch_line();
    (
        trace_field(&line, "workgroups="),
        trace_field(&line, "waves="),
    )
}

/// saxpy (`y = alpha * x + y`) over `n` elements, 64 lanes a work-group.
fn run_saxpy(
    dev: &Dev,
    q: &mut Queue,
    m: &Module,
    n: usize,
    alpha: f32,
    wx: &MemWindow,
    wy: &MemWindow,
) {
    let args = Args::default().f32(alpha).ptr(wx).ptr(wy).u32(n as u32);
    dev.run_ok(q, m, "saxpy", [n as u32, 1, 1], [64, 1, 1], 0, &args.0);
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
        run_saxpy(&dev, &mut q, &m, n, alpha, &wx, &wy);
        assert_eq!(traced(&dev), (3001, 3001), "{threads} threads");
        let y: Vec<f32> = dev.download(&wy, n);
        for i in 0..n {
            // Small integers times 2 plus small integers: exact, fused or not.
            assert_eq!(y[i], alpha * x[i] + y0[i], "{threads} threads: y[{i}]");
        }
    }
    dev.eng.set_shader_threads(0);
}

/// The per-thread profile `kfdrt bench` reads: for 1, 2 and 3 workers, one profile per
/// dispatch whose threads together ran every work-group once, each on a host CPU that
/// exists, within the dispatch's time.
#[test]
fn the_dispatch_profile_accounts_for_every_work_group_and_names_real_cpus() {
    let dev = Dev::new("gfx942", 90402);
    let mut q = dev.queue();
    let m = dev.load("cl/isa/saxpy.cl");
    let n = 2999 * 64;
    let x: Vec<f32> = (0..n).map(|i| (i % 1000) as f32).collect();
    let wx = dev.upload(&x);
    let wy = dev.upload(&vec![0f32; n]);
    kfd_emu::shader_profile::set_profiling(true);
    for threads in [1, 2, 3] {
        dev.eng.set_shader_threads(threads);
        kfd_emu::shader_profile::take_profiles();
        run_saxpy(&dev, &mut q, &m, n, 1.0, &wx, &wy);
        // Only this test dispatches 2999 work-groups (the other tests of this binary may
        // run meanwhile).
        let profs: Vec<_> = kfd_emu::shader_profile::take_profiles()
            .into_iter()
            .filter(|p| p.workgroups == 2999)
            .collect();
        assert_eq!(profs.len(), 1, "{threads} threads: {profs:?}");
        let p = &profs[0];
        assert_eq!(p.threads_wanted, threads, "{p:?}");
        assert!(
            (1..=threads).contains(&p.threads.len()),
            "{threads} threads: {p:?}"
        );
        let ran: u64 = p.threads.iter().map(|t| t.workgroups).sum();
        assert_eq!(ran, 2999, "{threads} threads: {p:?}");
        for t in &p.threads {
            for cpu in [t.cpus.0, t.cpus.1] {
                assert!(
                    // A CPU number (not bounded by the count of allowed CPUs: a cpuset
                    // may allow CPUs 4-5), or -1 where sched_getcpu failed.
                    (-1..1024).contains(&cpu),
                    "{threads} threads: CPU {cpu}: {p:?}"
                );
            }
            assert!(
                t.joined_ns <= t.left_ns && t.left_ns <= p.wall_ns,
                "{threads} threads: {p:?}"
            );
            // A thread that joined after the last claim ran none.
            assert!(
                t.claims <= t.workgroups && (t.claims == 0) == (t.workgroups == 0),
                "{p:?}"
            );
        }
    }
    kfd_emu::shader_profile::set_profiling(false);
    dev.eng.set_shader_threads(0);
}

/// While a long dispatch runs on the shader core, the CP does not poll its queue (the
/// dispatch's end kicks it): polling at the blocked-queue backoff (1 ms) woke the CP
/// ~1000 times a second, each wake-up taking a core from the shader's workers.
#[test]
fn the_cp_sleeps_while_a_long_dispatch_runs() {
    let dev = Dev::new("gfx942", 90402);
    let m = dev.load("cl/spin.cl");
    let flag = dev.upload(&[0u32]);
    let out = dev.upload(&[0u32; 4]);
    let mut q = dev.queue();
    dev.eng.trace().set_enabled(true);
    // Bounded (~2^24 polls), so a failing test cannot leave a kernel spinning.
    let args = Args::default().ptr(&flag).ptr(&out).u32(1 << 24);
    let t0 = std::time::Instant::now();
    std::thread::scope(|s| {
        let run = s.spawn(|| dev.run(&mut q, &m, "spin_until", [64, 1, 1], [64, 1, 1], 0, &args.0));
        // The kernel spins until the flag is set: hold it 300 ms (the CP's spin window
        // is 50 us, its backoff polls every 1 ms after that).
        std::thread::sleep(std::time::Duration::from_millis(300));
        flag.store_u32(flag.va(), 1).unwrap();
        run.join().unwrap().unwrap();
    });
    // The dispatch's own length: a loaded machine may stretch the 300 ms, and the
    // fallback re-poll is per 100 ms of it, so the bound scales with it.
    let held_ms = t0.elapsed().as_millis() as usize;
    assert_eq!(
        dev.download::<u32>(&out, 1),
        vec![1],
        "the kernel saw the flag"
    );
    let parks = dev
        .eng
        .take_trace()
        .iter()
        .filter(|e| {
            e.engine == kfd_emu::trace::EngineId::Cp
                && matches!(e.kind, kfd_emu::trace::TraceKind::Park { timed: true })
        })
        .count();
    // One timed park per 100 ms re-poll at most (plus a few around the dispatch's start
    // and end): never one per millisecond, as the 1 ms backoff gave (~225 in 300 ms).
    let bound = held_ms / 100 + 9;
    assert!(
        parks <= bound,
        "{parks} timed CP parks during a {held_ms} ms dispatch (at most {bound})"
    );
}
