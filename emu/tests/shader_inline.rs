//! Small loop-free kernel dispatches run on the emulated CP's own thread (no hand-off to a
//! dispatch thread); everything else runs on the dispatch threads. Both paths must give
//! the same results and the same faults, a small dispatch's atomics stay atomic against
//! the host, and a looping kernel never runs on the CP thread (it could wait for work
//! the CP has yet to start on another queue).

// Lane-indexed comparisons against CPU references.
#![allow(clippy::needless_range_loop)]

mod shader_common;
use std::sync::atomic::Ordering;

use shader_common::*;

/// `f` with the CP running small dispatches itself (`inline`) or not; the number of
/// dispatches it ran on its own thread meanwhile.
fn counted<T>(dev: &Dev, inline: bool, f: impl FnOnce() -> T) -> (T, u64) {
    dev.eng.set_inline_dispatch(inline);
    let before = dev.eng.inline_dispatches();
    let r = f();
    let n = dev.eng.inline_dispatches() - before;
    dev.eng.set_inline_dispatch(true);
    (r, n)
}

#[test]
fn inline_and_dispatch_thread_runs_give_the_same_results_and_faults() {
    for dev in devices() {
        let n = 256usize;
        let a: Vec<f32> = (0..n).map(|i| i as f32 * 0.5).collect();
        let b: Vec<f32> = (0..n).map(|i| (n - i) as f32 * 0.25).collect();
        let (wa, wb) = (dev.upload(&a), dev.upload(&b));
        let m = dev.load("cl/vadd.cl");
        let mut outs = Vec::new();
        // Off first: the first dispatch of a kernel runs on a dispatch thread anyway (which
        // decodes its code, off the CP).
        for inline in [false, true] {
            let wc = dev.alloc(n * 4);
            let mut q = dev.queue();
            // 4 work-groups of one wave: a few dozen instructions in all.
            let ((), ran) = counted(&dev, inline, || {
                dev.run_vadd(&mut q, &m, [&wa, &wb, &wc], n, 64)
            });
            assert_eq!(ran, u64::from(inline), "{} inline={inline}", dev.target);
            let c: Vec<f32> = dev.download(&wc, n);
            for i in 0..n {
                assert_eq!(
                    c[i].to_bits(),
                    (a[i] + b[i]).to_bits(),
                    "{} [{i}]",
                    dev.target
                );
            }
            outs.push(c);
        }
        assert_eq!(outs[0], outs[1]);

        // A store to an unmapped address: the same VM fault, instruction and message (one
        // work-group: which of several faults first is up to the threads).
        let bad = 0x7f00_0000_0000u64;
        let mut faults = Vec::new();
        for inline in [false, true] {
            let mut q = dev.queue();
            let args = Args::default()
                .ptr(&wa)
                .ptr(&wb)
                .put(&bad.to_le_bytes())
                .u32(64);
            let (r, ran) = counted(&dev, inline, || {
                dev.run(&mut q, &m, "vadd", [64, 1, 1], [64, 1, 1], 0, &args.0)
            });
            assert_eq!(ran, u64::from(inline), "{} inline={inline}", dev.target);
            let f = r.expect_err("the store must fault");
            let vm = f.fault.expect("a memory fault");
            assert!(vm.write && vm.va == bad, "{}: {}", dev.target, f.reason);
            assert!(f.reason.contains("global_store_dword"), "{}", f.reason);
            faults.push((f.reason, vm.va, vm.len, f.packet_offset));
        }
        assert_eq!(faults[0], faults[1], "{}", dev.target);

        // An instruction the core does not model: the same message naming it.
        let m = dev.load("cl/isa/sendmsg.cl");
        let wc = dev.alloc(n * 4);
        let mut reasons = Vec::new();
        for inline in [false, true] {
            let mut q = dev.queue();
            let args = Args::default().ptr(&wa).ptr(&wb).ptr(&wc);
            let (r, ran) = counted(&dev, inline, || {
                dev.run(&mut q, &m, "sendmsg", [64, 1, 1], [64, 1, 1], 0, &args.0)
            });
            assert_eq!(ran, u64::from(inline), "{} inline={inline}", dev.target);
            let f = r.expect_err("sendmsg must fault");
            assert!(f.reason.contains("not implemented"), "{}", f.reason);
            reasons.push(f.reason);
        }
        assert_eq!(reasons[0], reasons[1], "{}", dev.target);
    }
}

#[test]
fn loops_and_large_grids_run_on_dispatch_threads() {
    for dev in devices() {
        // spin_until polls in a loop: never on the CP thread.
        let m = dev.load("cl/spin.cl");
        let flag = dev.upload(&[1u32]);
        let out = dev.alloc(4);
        let mut q = dev.queue();
        let args = Args::default().ptr(&flag).ptr(&out).u32(1000);
        let ((), ran) = counted(&dev, true, || {
            dev.run_ok(&mut q, &m, "spin_until", [64, 1, 1], [64, 1, 1], 0, &args.0)
        });
        assert_eq!(
            ran, 0,
            "{}: a looping kernel ran on the CP thread",
            dev.target
        );
        assert_eq!(dev.download::<u32>(&out, 1), vec![1]);

        // vadd over 40 work-groups of 4 waves: loop-free but more than the CP runs itself.
        let n = 10_000usize;
        let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let (wa, wc) = (dev.upload(&a), dev.alloc(n * 4));
        let m = dev.load("cl/vadd.cl");
        let ((), ran) = counted(&dev, true, || {
            dev.run_vadd(&mut q, &m, [&wa, &wa, &wc], n, 256)
        });
        assert_eq!(ran, 0, "{}: a large grid ran on the CP thread", dev.target);
        let c: Vec<f32> = dev.download(&wc, n);
        assert!((0..n).all(|i| c[i] == 2.0 * i as f32), "{}", dev.target);
    }
}

#[test]
fn a_looping_kernel_is_not_starved_by_small_dispatches_on_another_queue() {
    for dev in devices() {
        let spin = dev.load("cl/spin.cl");
        let set = dev.load("cl/isa/inline.cl");
        let flag = dev.upload(&[0u32]);
        let out = dev.alloc(4);
        let mut qa = dev.queue();
        let mut qb = dev.queue();
        // Decoded (by a first dispatch, which runs off the CP) before the one that counts.
        let warm = dev.alloc(4);
        let wa = Args::default().ptr(&warm);
        dev.run_ok(&mut qb, &set, "set_flag", [64, 1, 1], [64, 1, 1], 0, &wa.0);
        // Polls up to 2M times (seconds of emulation): 2 means the flag never came.
        let args = Args::default().ptr(&flag).ptr(&out).u32(2_000_000);
        let before = dev.eng.inline_dispatches();
        std::thread::scope(|s| {
            let dev = &dev;
            let spinner = s.spawn(move || {
                dev.run_ok(
                    &mut qa,
                    &spin,
                    "spin_until",
                    [64, 1, 1],
                    [64, 1, 1],
                    0,
                    &args.0,
                )
            });
            // Usually after the spinner started (either order must give 1).
            std::thread::sleep(std::time::Duration::from_millis(20));
            let fa = Args::default().ptr(&flag);
            dev.run_ok(&mut qb, &set, "set_flag", [64, 1, 1], [64, 1, 1], 0, &fa.0);
            spinner.join().expect("spinner thread");
        });
        assert_eq!(dev.download::<u32>(&out, 1), vec![1], "{}", dev.target);
        // set_flag ran on the CP thread, spin_until did not.
        assert_eq!(dev.eng.inline_dispatches() - before, 1, "{}", dev.target);
    }
}

#[test]
fn small_dispatch_atomics_are_atomic_against_the_host() {
    for dev in devices() {
        let m = dev.load("cl/isa/inline.cl");
        let counter = dev.upload(&[0u32]);
        let dispatches = 40usize;
        let host_adds = 100_000u32;
        let seen: Vec<_> = (0..dispatches).map(|_| dev.alloc(64 * 4)).collect();
        let mut q = dev.queue();
        // Decoded (by a first dispatch, which runs off the CP) before the ones that count.
        let warm = dev.alloc(64 * 4);
        let wa = Args::default().ptr(&warm).ptr(&warm);
        dev.run_ok(&mut q, &m, "ticket", [64, 1, 1], [64, 1, 1], 0, &wa.0);
        let before = dev.eng.inline_dispatches();
        std::thread::scope(|s| {
            let c = counter.atomic_u32(counter.va()).expect("counter");
            let host = s.spawn(move || {
                for _ in 0..host_adds {
                    c.fetch_add(1, Ordering::SeqCst);
                }
            });
            for w in &seen {
                let args = Args::default().ptr(&counter).ptr(w);
                dev.run_ok(&mut q, &m, "ticket", [64, 1, 1], [64, 1, 1], 0, &args.0);
            }
            host.join().expect("host thread");
        });
        assert_eq!(
            dev.eng.inline_dispatches() - before,
            dispatches as u64,
            "{}",
            dev.target
        );
        let total = counter.load_u32(counter.va()).unwrap();
        assert_eq!(total, host_adds + 64 * dispatches as u32, "{}", dev.target);
        // Every lane got its own value of the counter: no increment was lost or doubled.
        let mut tickets: Vec<u32> = seen
            .iter()
            .flat_map(|w| dev.download::<u32>(w, 64))
            .collect();
        tickets.sort_unstable();
        tickets.dedup();
        assert_eq!(tickets.len(), 64 * dispatches, "{}", dev.target);
        assert!(tickets.iter().all(|&t| t < total), "{}", dev.target);
    }
}

#[test]
fn the_cp_drops_its_kept_translations_when_the_mappings_change() {
    for dev in devices() {
        let n = 64usize;
        let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let (wa, wc) = (dev.upload(&a), dev.alloc(n * 4));
        let m = dev.load("cl/vadd.cl");
        let args = Args::default().ptr(&wa).ptr(&wa).ptr(&wc).u32(n as u32);
        let mut q = dev.queue();
        // The first dispatch decodes (off the CP); the second runs on the CP thread and
        // leaves `wc`'s translation in the port it keeps.
        for _ in 0..2 {
            dev.run_vadd(&mut q, &m, [&wa, &wa, &wc], n, 64);
        }
        let c: Vec<f32> = dev.download(&wc, n);
        assert!((0..n).all(|i| c[i] == 2.0 * i as f32), "{}", dev.target);
        // Unmap the output and flush: a dispatch on the CP thread must fault on it, not
        // write through the kept translation. (The flush also drops the decoded programs:
        // a first dispatch to another output decodes vadd again, off the CP.)
        assert!(dev.mem.remove_region(wc.va()));
        dev.eng.flush_tlb();
        // Released without a dispatch: the CP let go of the port it kept.
        dev.eng.release_windows();
        assert_eq!(wc.holders(), 1, "{}", dev.target);
        let wd = dev.alloc(n * 4);
        dev.run_vadd(&mut q, &m, [&wa, &wa, &wd], n, 64);
        let (r, ran) = counted(&dev, true, || {
            dev.run(&mut q, &m, "vadd", [64, 1, 1], [64, 1, 1], 0, &args.0)
        });
        assert_eq!(ran, 1, "{}", dev.target);
        let f = r.expect_err("the store to the unmapped output must fault");
        let vm = f.fault.expect("a memory fault");
        assert!(vm.write && vm.va == wc.va(), "{}: {}", dev.target, f.reason);
    }
}
