//! `kfdrt trace`: run a built-in workload on the emulated device with the engines'
//! trace recorder on, then write the recording as Chrome/Perfetto trace JSON (one track
//! per queue and per engine) and as a packet log in the `kfdrt disasm` line format.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::out::{errln, out, outln};
use kfd_emu::engine::QueueKind;
use kfd_emu::trace::{EngineId, TraceEvent, TraceKind};
use kfdrt::cmd::WAIT_VALUE_GTE;
use kfdrt::event::EVENT_DISABLE_TIMING;
use kfdrt::stream::STREAM_NON_BLOCKING;
use kfdrt::{Device, MemoryKind};

/// The built-in workloads: (name, description).
pub const WORKLOADS: &[(&str, &str)] = &[(
    "demo",
    "3 streams: small copies (CP DMA) and a 2 MiB copy (SDMA), events across streams, \
     callbacks, and a writeValue/waitValue ping between two streams",
)];

/// What a workload did, for the summary line.
#[derive(Debug, Default)]
pub struct Summary {
    /// Streams used.
    pub streams: usize,
    /// Callbacks that ran.
    pub callbacks: u32,
    /// Bytes copied and verified.
    pub copied: u64,
}

/// Runs workload `name` on `dev`. Errors name the call that failed or the wrong result.
pub fn run_workload(dev: &Device, name: &str) -> Result<Summary, String> {
    match name {
        "demo" => demo(dev).map_err(|e| e.to_string())?,
        other => Err(format!("unknown workload {other:?}")),
    }
}

fn demo(dev: &Device) -> Result<Result<Summary, String>, kfdrt::Error> {
    const SMALL: usize = 64 << 10;
    const BIG: usize = 2 << 20;
    const PINGS: u32 = 4;
    let a = dev.create_stream_with_flags(0, STREAM_NON_BLOCKING)?;
    let b = dev.create_stream_with_flags(0, STREAM_NON_BLOCKING)?;
    let c = dev.create_stream_with_flags(0, STREAM_NON_BLOCKING)?;
    let src = dev.alloc(MemoryKind::Device, 0, BIG)?;
    let dst = dev.alloc(MemoryKind::Device, 0, BIG)?;
    let small = dev.alloc(MemoryKind::Device, 0, SMALL)?;
    let flags = dev.alloc(MemoryKind::Signal, 0, 4096)?;
    let pattern: Vec<u8> = (0..BIG).map(|i| (i * 7 + i / 4096) as u8).collect();
    src.write(0, &pattern)?;
    let (ping, pong, done) = (flags.va(), flags.va() + 64, flags.va() + 128);
    let ran = Arc::new(AtomicU32::new(0));
    let e1 = dev.create_event(EVENT_DISABLE_TIMING)?;
    let e2 = dev.create_event(EVENT_DISABLE_TIMING)?;

    // Stream a: a small copy (CP DMA), then record e1.
    a.memcpy(small.va(), src.va(), SMALL as u64)?;
    e1.record(&a)?;
    // Stream b: waits for e1, copies 2 MiB (SDMA), runs a callback, records e2.
    b.wait_event(&e1, 0)?;
    b.memcpy(dst.va(), src.va(), BIG as u64)?;
    let r = ran.clone();
    b.add_callback(
        move |_| {
            r.fetch_add(1, Ordering::AcqRel);
        },
        0,
    )?;
    e2.record(&b)?;
    // a <-> c ping: a writes ping=i, c waits for it and answers pong=i, a waits for that.
    for i in 1..=PINGS {
        a.write_value32(ping, i, 0)?;
        c.wait_value32(ping, i, WAIT_VALUE_GTE, u32::MAX)?;
        c.write_value32(pong, i, 0)?;
        a.wait_value32(pong, i, WAIT_VALUE_GTE, u32::MAX)?;
    }
    // c joins b's work, then a final small copy back and a callback on c.
    c.wait_event(&e2, 0)?;
    c.memcpy(small.va(), dst.va() + 4096, 4096)?;
    let r = ran.clone();
    c.add_callback(
        move |_| {
            r.fetch_add(1, Ordering::AcqRel);
        },
        0,
    )?;
    c.write_value32(done, 1, 0)?;
    for s in [&a, &b, &c] {
        s.synchronize()?;
    }

    let mut out = vec![0u8; BIG];
    dst.read(0, &mut out)?;
    if out != pattern {
        return Ok(Err("the 2 MiB copy (SDMA) produced wrong bytes".into()));
    }
    let mut head = vec![0u8; 4096];
    small.read(0, &mut head)?;
    if head[..] != pattern[4096..8192] {
        return Ok(Err("the last 4 KiB copy produced wrong bytes".into()));
    }
    small.read(4096, &mut head)?;
    if head[..] != pattern[4096..8192] {
        return Ok(Err(
            "the first 64 KiB copy (CP DMA) produced wrong bytes".into()
        ));
    }
    let rd = |off: usize| -> Result<u32, kfdrt::Error> {
        let mut w = [0u8; 4];
        flags.read(off, &mut w)?;
        Ok(u32::from_le_bytes(w))
    };
    if (rd(0)?, rd(64)?, rd(128)?) != (PINGS, PINGS, 1) {
        return Ok(Err("stream memory operations wrote wrong values".into()));
    }
    let callbacks = ran.load(Ordering::Acquire);
    if callbacks != 2 {
        return Ok(Err(format!("{callbacks} of 2 callbacks ran")));
    }
    Ok(Ok(Summary {
        streams: 3,
        callbacks,
        copied: (BIG + SMALL + 4096) as u64,
    }))
}

fn kind_name(k: QueueKind) -> &'static str {
    match k {
        QueueKind::Aql => "AQL",
        QueueKind::Pm4 => "PM4",
        QueueKind::Sdma { .. } => "SDMA",
    }
}

/// Chrome thread id of an engine's own track (queues get 1000 + queue id).
fn engine_tid(e: EngineId) -> u64 {
    match e {
        EngineId::Cp => 1,
        EngineId::Sdma(n) => 2 + n as u64,
    }
}

/// The track an event goes on: its queue's, else its engine's.
fn track(ev: &TraceEvent) -> u64 {
    match ev.queue {
        Some((q, _)) => 1000 + q as u64,
        None => engine_tid(ev.engine),
    }
}

fn us(ns: u64) -> f64 {
    ns as f64 / 1000.0
}

/// `events` as Chrome trace JSON: pid = GPU index + 1 (named after the GPU), one named
/// thread track per queue (`CP queue 3 (AQL)`) with its packets as complete ("X") events
/// and its blocks, faults and interrupts as instants, and one per engine (`CP`, `SDMA0`)
/// with the engine's active spans (wake to park) and park/wake instants.
/// `gpus` lists (gpu_id, description) in node order.
pub fn chrome_json(events: &[TraceEvent], gpus: &[(u32, String)]) -> serde_json::Value {
    use serde_json::json;
    let pid_of = |gpu: u32| -> u64 {
        gpus.iter()
            .position(|(g, _)| *g == gpu)
            .map_or(gpus.len() as u64 + 1, |i| i as u64 + 1)
    };
    let mut out = Vec::new();
    let mut tracks: BTreeMap<(u64, u64), String> = BTreeMap::new();
    let mut active: BTreeMap<(u64, u64), u64> = BTreeMap::new();
    for ev in events {
        let pid = pid_of(ev.gpu_id);
        let tid = track(ev);
        tracks
            .entry((pid, engine_tid(ev.engine)))
            .or_insert_with(|| ev.engine.to_string());
        if let Some((q, k)) = ev.queue {
            tracks
                .entry((pid, tid))
                .or_insert_with(|| format!("{} queue {q} ({})", ev.engine, kind_name(k)));
        }
        let mut args = json!({
            "gpu_clock_start": ev.start_gpu,
            "gpu_clock_end": ev.end_gpu,
        });
        if let Some((q, _)) = ev.queue {
            args["queue"] = json!(q);
        }
        let instant = |name: String, args: serde_json::Value| json!({"name": name, "ph": "i", "s": "t", "ts": us(ev.start_ns), "pid": pid, "tid": tid, "cat": "engine", "args": args});
        match &ev.kind {
            TraceKind::Packet {
                offset,
                ib_depth,
                ib_va,
                name,
                disasm,
            } => {
                args["offset"] = json!(format!("{offset:#x}"));
                args["ib_depth"] = json!(ib_depth);
                if *ib_depth > 0 {
                    args["ib_va"] = json!(format!("{ib_va:#x}"));
                }
                args["disasm"] = json!(disasm);
                out.push(json!({
                    "name": name, "ph": "X", "cat": "packet",
                    "ts": us(ev.start_ns), "dur": us(ev.end_ns.saturating_sub(ev.start_ns)),
                    "pid": pid, "tid": tid, "args": args,
                }));
            }
            TraceKind::Wake => {
                active.insert((pid, tid), ev.start_ns);
                out.push(instant("wake".into(), args));
            }
            TraceKind::Park { timed } => {
                if let Some(t0) = active.remove(&(pid, tid)) {
                    out.push(json!({
                        "name": "active", "ph": "X", "cat": "engine", "ts": us(t0),
                        "dur": us(ev.start_ns.saturating_sub(t0)), "pid": pid, "tid": tid,
                    }));
                }
                args["timed"] = json!(timed);
                out.push(instant("park".into(), args));
            }
            TraceKind::Block => out.push(instant("block".into(), args)),
            TraceKind::Unblock => out.push(instant("unblock".into(), args)),
            TraceKind::Fault { reason } => {
                args["reason"] = json!(reason);
                out.push(instant("fault".into(), args));
            }
            TraceKind::Interrupt { context_id } => {
                args["context_id"] = json!(context_id);
                out.push(instant("interrupt".into(), args));
            }
        }
    }
    let mut meta = Vec::new();
    for (i, (gpu, desc)) in gpus.iter().enumerate() {
        meta.push(
            json!({"name": "process_name", "ph": "M", "pid": i + 1, "tid": 0,
            "args": {"name": format!("GPU {i} {desc} (gpu_id {gpu:#x})")}}),
        );
    }
    for ((pid, tid), name) in &tracks {
        meta.push(json!({"name": "thread_name", "ph": "M", "pid": pid, "tid": tid, "args": {"name": name}}));
        meta.push(json!({"name": "thread_sort_index", "ph": "M", "pid": pid, "tid": tid, "args": {"sort_index": tid}}));
    }
    meta.extend(out);
    json!({"traceEvents": meta, "displayTimeUnit": "ns"})
}

/// The packet log: one line per executed packet, in start order:
/// `START_US DUR_US gpu=GPU_ID ENGINE q=QUEUE ib=DEPTH | OFFSET NAME field=value ...`
/// (the part after ` | ` is the `kfdrt disasm` line; IB packets' offsets are in the IB).
pub fn packet_log(events: &[TraceEvent]) -> String {
    let mut s = String::new();
    for ev in events {
        let TraceKind::Packet {
            ib_depth, disasm, ..
        } = &ev.kind
        else {
            continue;
        };
        let q = ev.queue.map_or(-1, |(q, _)| q as i64);
        s.push_str(&format!(
            "{:.3} {:.3} gpu={:#x} {} q={q} ib={ib_depth} | {disasm}\n",
            us(ev.start_ns),
            us(ev.end_ns.saturating_sub(ev.start_ns)),
            ev.gpu_id,
            ev.engine,
        ));
    }
    s
}

/// `kfdrt trace --help`.
pub const HELP: &str = "\
kfdrt trace — run a built-in workload on the emulated device, record every packet the
CP and SDMA engines execute and every engine event (wake, park, block/unblock on a wait,
fault, interrupt) with host and GPU-clock timestamps, and write a Chrome/Perfetto trace
(open it in ui.perfetto.dev or chrome://tracing: one process per GPU, one track per
queue and per engine) plus a packet log in the `kfdrt disasm` line format.

USAGE:
    kfdrt trace [--device SPEC] [--out FILE] [--log FILE] [-- WORKLOAD]

OPTIONS:
    --device SPEC   emu[:PRESET[*N][,PRESET...]] (default: $KFDRT_DEVICE, else emu);
                    auto means the emulator here; hw is refused (exit 3): tracing
                    records inside the emulated engines
    --out FILE      Chrome trace JSON (default kfdrt-trace.json)
    --log FILE      packet log, one line per packet:
                    `START_US DUR_US gpu=ID ENGINE q=QUEUE ib=DEPTH | OFFSET NAME field=value ...`
                    (default: not written)

WORKLOADS:
    demo            (default) 3 streams: small copies (CP DMA) and a 2 MiB copy (SDMA),
                    events across streams, callbacks, and a writeValue/waitValue ping
                    between two streams

EXIT CODES:
    0 trace written; 1 the workload failed or produced wrong results; 2 usage error or
    an output file could not be written; 3 the device is not the emulator or could not
    be opened

EXAMPLES:
    kfdrt trace
    kfdrt trace --device emu:mi300x --out demo.json --log demo.log -- demo
    kfdrt trace --device emu:rx7900xtx --out rdna3.json
";

fn usage(msg: &str) -> std::process::ExitCode {
    errln!("kfdrt trace: {msg}\n\n{HELP}");
    std::process::ExitCode::from(2)
}

/// `kfdrt trace`.
pub fn cmd(argv: &[String]) -> std::process::ExitCode {
    use std::process::ExitCode;
    if argv.iter().any(|a| a == "--help" || a == "-h") {
        out!("{HELP}");
        return ExitCode::SUCCESS;
    }
    let args = match crate::args::Args::parse(argv, &["device", "out", "log"], &[]) {
        Ok(a) => a,
        Err(e) => return usage(&e),
    };
    let mut names: Vec<&String> = args.positional.iter().chain(args.rest.iter()).collect();
    if names.len() > 1 {
        return usage("give one WORKLOAD");
    }
    let workload = names.pop().map_or("demo", String::as_str);
    if !WORKLOADS.iter().any(|(n, _)| *n == workload) {
        let known: Vec<&str> = WORKLOADS.iter().map(|(n, _)| *n).collect();
        return usage(&format!(
            "unknown workload {workload:?} (built-in: {})",
            known.join(", ")
        ));
    }
    let spec = match args.value("device") {
        Some(s) => kfdrt::DeviceSpec::parse(s),
        None => kfdrt::DeviceSpec::from_env(),
    };
    let spec = match spec {
        Ok(kfdrt::DeviceSpec::Emulated(s)) => s,
        Ok(kfdrt::DeviceSpec::Auto) => "emu".to_string(),
        Ok(kfdrt::DeviceSpec::Hardware) => {
            errln!(
                "kfdrt trace: trace needs the emulated device (--device emu[:PRESET]): \
                 packets are recorded inside the emulator's engines, not on hardware"
            );
            return ExitCode::from(3);
        }
        Err(e) => {
            errln!("kfdrt trace: {e}");
            return ExitCode::from(3);
        }
    };
    let emu = match kfd_emu::EmuBackend::from_spec(&spec) {
        Ok(b) => Arc::new(b),
        Err(e) => {
            errln!("kfdrt trace: {e}");
            return ExitCode::from(3);
        }
    };
    let gpus: Vec<(u32, String)> = emu
        .gpu_ids()
        .into_iter()
        .map(|g| {
            let name = emu.preset(g).map_or("?", |p| p.name);
            (g, name.to_string())
        })
        .collect();
    let dev = match Device::with_backend(emu.clone()) {
        Ok(d) => d,
        Err(e) => {
            errln!("kfdrt trace: {e}");
            return ExitCode::from(3);
        }
    };
    emu.enable_trace();
    let result = run_workload(&dev, workload);
    emu.disable_trace();
    let events = emu.take_trace();
    let out = args.value("out").unwrap_or("kfdrt-trace.json");
    let json = chrome_json(&events, &gpus);
    if let Err(e) = std::fs::write(out, json.to_string()) {
        errln!("kfdrt trace: writing {out}: {e}");
        return ExitCode::from(2);
    }
    if let Some(log) = args.value("log") {
        if let Err(e) = std::fs::write(log, packet_log(&events)) {
            errln!("kfdrt trace: writing {log}: {e}");
            return ExitCode::from(2);
        }
    }
    let packets = events
        .iter()
        .filter(|e| matches!(e.kind, TraceKind::Packet { .. }))
        .count();
    match result {
        Ok(s) => {
            outln!(
                "kfdrt trace: workload {workload}: {} streams, {} callbacks, {} bytes copied; \
                 {packets} packets, {} events -> {out}",
                s.streams,
                s.callbacks,
                s.copied,
                events.len()
            );
            drop(dev);
            ExitCode::SUCCESS
        }
        Err(e) => {
            errln!("kfdrt trace: workload {workload} failed: {e} (trace written to {out})");
            ExitCode::from(1)
        }
    }
}
