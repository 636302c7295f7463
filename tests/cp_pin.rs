//! `KFDRT_EMU_CP_CPU=auto`: the emulated engine threads pin themselves to the last CPU
//! they may run on (when they may run on two or more), and streams still work. Its own
//! test binary: the variable is process-wide and must not reach other tests.

mod common;

use std::collections::HashSet;
use std::sync::atomic::Ordering;

use common::{emu, signal_mem};
use kfdrt::WriteValueFlags;
use rustix::thread::{sched_getaffinity, sched_setaffinity, CpuSet};

/// A `Cpus_allowed_list` value ("0-3,6") as CPU numbers.
fn parse_list(s: &str) -> Vec<usize> {
    let mut v = Vec::new();
    for part in s.trim().split(',').filter(|p| !p.is_empty()) {
        match part.split_once('-') {
            Some((a, b)) => v.extend(a.parse::<usize>().unwrap()..=b.parse::<usize>().unwrap()),
            None => v.push(part.parse().unwrap()),
        }
    }
    v
}

/// Every thread of this process: (tid, name, allowed CPUs).
fn tasks() -> Vec<(u32, String, Vec<usize>)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc/self/task").unwrap() {
        let e = e.unwrap();
        let Ok(tid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        // A thread that exited between read_dir and here has no status any more.
        let Ok(status) = std::fs::read_to_string(e.path().join("status")) else {
            continue;
        };
        let field = |k: &str| {
            status
                .lines()
                .find_map(|l| l.strip_prefix(k))
                .map(|r| r.trim().to_string())
                .unwrap_or_default()
        };
        out.push((
            tid,
            field("Name:"),
            parse_list(&field("Cpus_allowed_list:")),
        ));
    }
    out
}

fn allowed_now() -> Vec<usize> {
    let set = sched_getaffinity(None).unwrap();
    (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect()
}

fn is_engine(name: &str) -> bool {
    name.starts_with("kfd-emu-cp") || name.starts_with("kfd-emu-sdma")
}

fn is_worker(name: &str) -> bool {
    name.starts_with("kfd-emu-dispatc") || name.starts_with("kfd-emu-shader")
}

/// Opens a device, runs a write + synchronize round trip and a kernel on a stream, and
/// returns the name and allowed CPUs of every emulator thread that appeared meanwhile.
fn round_trip_thread_cpus() -> Vec<(String, Vec<usize>)> {
    let before: HashSet<u32> = tasks().into_iter().map(|t| t.0).collect();
    let dev = emu("emu:mi300x");
    let mem = signal_mem(&dev, 4096);
    let s = dev.create_stream(0).unwrap();
    s.write_value32(mem.va(), 0x5eed, WriteValueFlags::DEFAULT)
        .unwrap();
    s.synchronize().unwrap();
    assert_eq!(mem.atomic_u32(0).unwrap().load(Ordering::Acquire), 0x5eed);
    // A kernel: the CP hands it to the dispatch pool, whose threads it starts.
    let elf = test_kernels::build("cl/empty.cl", "gfx942").unwrap();
    let module = dev.load_module(0, &elf).unwrap();
    let k = module.kernel("empty").unwrap();
    s.launch(&k, 256, 64, 0, &k.args()).unwrap();
    s.synchronize().unwrap();
    let threads: Vec<(String, Vec<usize>)> = tasks()
        .into_iter()
        .filter(|(tid, name, _)| !before.contains(tid) && name.starts_with("kfd-emu-"))
        .map(|(_, n, c)| (n, c))
        .collect();
    drop(s);
    drop(dev);
    threads
}

#[test]
fn auto_pins_engine_threads_to_the_last_allowed_cpu_and_not_with_one_cpu() {
    // Set before any device opens in this binary (its only test).
    std::env::set_var("KFDRT_EMU_CP_CPU", "auto");

    // One allowed CPU (inherited by the threads this thread starts): no pin.
    let one = std::thread::spawn(|| {
        let first = allowed_now()[0];
        let mut set = CpuSet::new();
        set.set(first);
        sched_setaffinity(None, &set).unwrap();
        (first, round_trip_thread_cpus())
    })
    .join()
    .unwrap();
    let (first, threads) = one;
    assert!(
        threads.iter().any(|t| is_engine(&t.0)),
        "no engine thread: {threads:?}"
    );
    for (name, cpus) in &threads {
        assert_eq!(
            cpus,
            &vec![first],
            "{name}: one allowed CPU stays as it was"
        );
    }

    let allowed = allowed_now();
    let threads = round_trip_thread_cpus();
    assert!(
        threads.iter().any(|t| is_engine(&t.0)),
        "no engine thread: {threads:?}"
    );
    assert!(
        threads.iter().any(|t| is_worker(&t.0)),
        "no dispatch thread: {threads:?}"
    );
    for (name, cpus) in &threads {
        if is_worker(name) {
            assert_eq!(cpus, &allowed, "{name}: only the engine threads are pinned");
        } else if allowed.len() >= 2 {
            assert_eq!(
                cpus,
                &vec![*allowed.last().unwrap()],
                "{name}: pinned to the last allowed CPU of {allowed:?}"
            );
        } else {
            assert_eq!(cpus, &allowed, "{name}: a 1-CPU process is not pinned");
        }
    }
}
