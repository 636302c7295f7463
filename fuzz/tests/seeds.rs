//! The seeds run through their targets and do real work; the committed seed files are
//! current (`KFDRT_FUZZ_WRITE_SEEDS=1` rewrites them).

use std::path::PathBuf;

fn seeds_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("seeds")
}

#[test]
fn pm4_seeds_execute_and_block_as_written() {
    for (name, bytes) in kfdrt_fuzz::seeds::pm4() {
        let r = kfdrt_fuzz::gen::run_pm4(&bytes);
        assert_eq!(r.fault, None, "{name}: {r:?}");
        if name == "wait-forever" {
            assert!(r.blocked, "{name}: {r:?}");
            assert_eq!(r.packets, 0, "{name}: {r:?}");
        } else {
            assert!(!r.blocked, "{name}: {r:?}");
            assert!(r.packets >= 1, "{name}: {r:?}");
        }
        if name.starts_with("ring-ib-wait") {
            // 3 ring packets, the wait (released by one host write), 1, the IB and its 3
            // packets, a NOP.
            assert_eq!(r.host_writes, 1, "{name}: {r:?}");
            assert_eq!(r.submits, 3, "{name}: {r:?}");
            assert!(r.interrupts >= 1, "{name}: {r:?}");
            assert!(r.packets >= 9, "{name}: {r:?}");
        }
    }
}

#[test]
fn sdma_seeds_execute() {
    for (name, bytes) in kfdrt_fuzz::seeds::sdma() {
        let r = kfdrt_fuzz::gen::run_sdma(&bytes);
        assert_eq!(r.fault, None, "{name}: {r:?}");
        assert!(!r.blocked, "{name}: {r:?}");
        assert_eq!(r.host_writes, 1, "{name}: {r:?}");
        assert!(r.packets >= 9, "{name}: {r:?}");
        assert!(r.interrupts >= 1, "{name}: {r:?}");
    }
}

#[test]
fn aql_seeds_execute() {
    for (name, bytes) in kfdrt_fuzz::seeds::aql() {
        let r = kfdrt_fuzz::gen::run_aql(&bytes);
        assert_eq!(r.fault, None, "{name}: {r:?}");
        assert!(!r.blocked, "{name}: {r:?}");
        assert!(r.host_writes >= 3, "{name}: {r:?}");
        assert_eq!(r.rptr, r.wptr, "{name}: {r:?}");
        assert_eq!(r.wptr, 5, "{name}: {r:?}");
    }
}

#[test]
fn ioctl_and_decode_seeds_run() {
    for (name, bytes) in kfdrt_fuzz::seeds::ioctl() {
        let st = kfdrt_fuzz::ioctl::run(&bytes);
        // ACQUIRE_VM, 3 x (ALLOC + MAP), the event calls, CREATE_QUEUE and DESTROY_QUEUE
        // succeed; FREE of a still-mapped BO is EBUSY as in KFD.
        assert_eq!((st.calls, st.ok), (14, 12), "{name}: {st:?}");
    }
    for (_, bytes) in kfdrt_fuzz::seeds::decode() {
        kfdrt_fuzz::pm4_decode(&bytes);
    }
}

#[test]
fn junk_inputs_end_without_a_panic() {
    // Empty and junk inputs end without a panic or a livelock report.
    let r = kfdrt_fuzz::gen::run_pm4(&[]);
    assert_eq!(r.submits, 0);
    let junk: Vec<u8> = (0..2000u32).map(|i| (i * 37 % 251) as u8).collect();
    let _ = kfdrt_fuzz::gen::run_pm4(&junk);
    let _ = kfdrt_fuzz::gen::run_sdma(&junk);
    let _ = kfdrt_fuzz::gen::run_aql(&junk);
    let _ = kfdrt_fuzz::ioctl::run(&junk);
}

#[test]
fn committed_seed_files_are_current() {
    let write = std::env::var_os("KFDRT_FUZZ_WRITE_SEEDS").is_some();
    for (target, name, bytes) in kfdrt_fuzz::seeds::all() {
        let path = seeds_dir().join(target).join(&name);
        if write {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &bytes).unwrap();
        } else {
            let on_disk = std::fs::read(&path).unwrap_or_else(|e| {
                panic!(
                    "{}: {e}; run KFDRT_FUZZ_WRITE_SEEDS=1 cargo test",
                    path.display()
                )
            });
            // The decoder seeds come from the `pm4` encoders, which may change encodings;
            // any bytes are a fine decoder seed, so only their presence is checked.
            if target != "pm4_decode" {
                assert_eq!(on_disk, bytes, "{} is stale", path.display());
            }
        }
    }
}

#[test]
fn explain() {
    // KFDRT_FUZZ_EXPLAIN=pm4:path prints what a (crashing) input submits.
    let Some(spec) = std::env::var_os("KFDRT_FUZZ_EXPLAIN") else {
        let s =
            kfdrt_fuzz::gen::explain(kfdrt_fuzz::rig::Engine::Pm4, &kfdrt_fuzz::seeds::pm4()[0].1);
        assert!(
            s.contains("WRITE_DATA") && s.contains("INDIRECT_BUFFER"),
            "{s}"
        );
        return;
    };
    let spec = spec.to_string_lossy().into_owned();
    let (engine, path) = spec.split_once(':').expect("ENGINE:FILE");
    let engine = match engine {
        "aql" => kfdrt_fuzz::rig::Engine::Aql,
        "sdma" => kfdrt_fuzz::rig::Engine::Sdma,
        _ => kfdrt_fuzz::rig::Engine::Pm4,
    };
    let data = std::fs::read(path).expect("input file");
    println!("{}", kfdrt_fuzz::gen::explain(engine, &data));
}

#[test]
fn looping_ib_chain_is_a_runaway_not_a_hang() {
    // The input the fuzzer found first: an IB chained back into itself (size 53 covers the
    // chain packet). The CP runs it forever; the rig stops it and removes the queue.
    let data = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("seeds/engine_pm4/ib-chain-loop"),
    )
    .expect("seed");
    let r = kfdrt_fuzz::gen::run_pm4(&data);
    assert!(r.runaway, "{r:?}");
    assert!(r.packets > kfdrt_fuzz::rig::PACKET_BUDGET, "{r:?}");
}

#[test]
fn aql_signal_near_the_top_of_the_address_space() {
    // Found by engine_aql: a dependency signal at 0xffff_ffff_ffff_fff8 overflowed the
    // harness's own `signal + 8` (the engines wrap and fault the queue).
    let data = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("seeds/engine_aql/signal-at-top-of-address-space"),
    )
    .expect("seed");
    let r = kfdrt_fuzz::gen::run_aql(&data);
    // Its first slot is INVALID (never published): the queue waits there, no fault.
    assert!(r.blocked && r.rptr == 0 && r.fault.is_none(), "{r:?}");
    assert_eq!((r.submits, r.wptr), (3, 7), "{r:?}");
}
