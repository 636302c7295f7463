//! `kfdrt trace`: run a built-in workload on the emulated device with the engines'
//! trace recorder on, then write the recording as Chrome/Perfetto trace JSON (one track
//! per queue and per engine) and as a packet log in the `kfdrt disasm` line format.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use crate::out::{errln, out, outln};
use kfd_emu::engine::QueueKind;
use kfd_emu::trace::{EngineId, TraceEvent, TraceKind};
use kfdrt::{Device, EventFlags, MemoryKind, StreamFlags, WaitCompare, WriteValueFlags};

/// The built-in workloads: (name, description).
pub const WORKLOADS: &[(&str, &str)] = &[
    (
        "demo",
        "3 streams: small copies (CP DMA) and a 2 MiB copy (SDMA), events across streams, \
         callbacks, and a writeValue/waitValue ping between two streams",
    ),
    (
        "kernels",
        "2 streams: a vector add and an LDS reduction (kernels built in at compile time), \
         each dispatch shown on the CP track with its work-groups, waves and instructions",
    ),
];

/// What a workload did, for the summary line.
#[derive(Debug, Default)]
pub struct Summary {
    /// Streams used.
    pub streams: usize,
    /// Callbacks that ran.
    pub callbacks: u32,
    /// Bytes copied and verified.
    pub copied: u64,
    /// Kernels launched and verified.
    pub kernels: u32,
}

/// Runs workload `name` on `dev`. Errors name the call that failed or the wrong result.
pub fn run_workload(dev: &Device, name: &str) -> Result<Summary, String> {
    match name {
        "demo" => demo(dev).map_err(|e| e.to_string())?,
        "kernels" => kernels(dev).map_err(|e| e.to_string())?,
        other => Err(format!("unknown workload {other:?}")),
    }
}

fn demo(dev: &Device) -> Result<Result<Summary, String>, kfdrt::Error> {
    const SMALL: usize = 64 << 10;
    const BIG: usize = 2 << 20;
    const PINGS: u32 = 4;
    let a = dev.create_stream_with_flags(0, StreamFlags::NON_BLOCKING)?;
    let b = dev.create_stream_with_flags(0, StreamFlags::NON_BLOCKING)?;
    let c = dev.create_stream_with_flags(0, StreamFlags::NON_BLOCKING)?;
    let src = dev.alloc(MemoryKind::Device, 0, BIG)?;
    let dst = dev.alloc(MemoryKind::Device, 0, BIG)?;
    let small = dev.alloc(MemoryKind::Device, 0, SMALL)?;
    let flags = dev.alloc(MemoryKind::Signal, 0, 4096)?;
    let pattern: Vec<u8> = (0..BIG).map(|i| (i * 7 + i / 4096) as u8).collect();
    src.write(0, &pattern)?;
    let (ping, pong, done) = (flags.va(), flags.va() + 64, flags.va() + 128);
    let ran = Arc::new(AtomicU32::new(0));
    let e1 = dev.create_event(EventFlags::DISABLE_TIMING)?;
    let e2 = dev.create_event(EventFlags::DISABLE_TIMING)?;

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
        a.write_value32(ping, i, WriteValueFlags::DEFAULT)?;
        c.wait_value32(ping, i, WaitCompare::Gte, u32::MAX)?;
        c.write_value32(pong, i, WriteValueFlags::DEFAULT)?;
        a.wait_value32(pong, i, WaitCompare::Gte, u32::MAX)?;
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
    c.write_value32(done, 1, WriteValueFlags::DEFAULT)?;
    // A host thread asleep on a completion: a hipEventBlockingSync event sleeps at once
    // (no spin), and a's work behind a host gate cannot complete before the gate opens,
    // 50 ms later, so the CP finds the signal's event mailbox armed and raises an
    // interrupt (without a sleeper, completions raise none).
    let gate = flags.va() + 192;
    let blocking = dev.create_event(EventFlags::BLOCKING_SYNC | EventFlags::DISABLE_TIMING)?;
    a.wait_value32(gate, 1, WaitCompare::Gte, u32::MAX)?;
    blocking.record(&a)?;
    std::thread::scope(|s| {
        let opener = s.spawn(|| {
            std::thread::sleep(std::time::Duration::from_millis(50));
            flags.write(192, &1u32.to_le_bytes())
        });
        let waited = blocking.synchronize();
        let opened = opener.join().expect("the gate thread does not panic");
        opened.and(waited)
    })?;
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
        kernels: 0,
    }))
}

fn kernels(dev: &Device) -> Result<Result<Summary, String>, kfdrt::Error> {
    let gfx = dev.gpu(0)?.gfx_name();
    let code = |src: &str| crate::check::kernels::embedded(src, &gfx);
    let (vadd, reduce) = match (code("cl/vadd.cl"), code("cl/reduce.cl")) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(e), _) | (_, Err(e)) => return Ok(Err(e)),
    };
    let (mv, mr) = (dev.load_module(0, vadd)?, dev.load_module(0, reduce)?);
    let (kv, kr) = (mv.kernel("vadd")?, mr.kernel("reduce")?);
    let n = 4096u32;
    let input: Vec<u32> = (0..n).map(|i| i % 1000).collect();
    let floats: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let bytes = |v: &[u8]| -> Result<kfdrt::Buffer, kfdrt::Error> {
        let b = dev.alloc(MemoryKind::HostPinned, 0, v.len())?;
        b.write(0, v)?;
        Ok(b)
    };
    let bi = bytes(zerocopy::IntoBytes::as_bytes(&input[..]))?;
    let bf = bytes(zerocopy::IntoBytes::as_bytes(&floats[..]))?;
    let bc = dev.alloc(MemoryKind::HostPinned, 0, 4 * n as usize)?;
    let bs = dev.alloc(MemoryKind::HostPinned, 0, 4 * (n / 256) as usize)?;
    let a = dev.create_stream_with_flags(0, kfdrt::StreamFlags::NON_BLOCKING)?;
    let b = dev.create_stream_with_flags(0, kfdrt::StreamFlags::NON_BLOCKING)?;
    let mut args = kv.args();
    args.buffer(&bf)?.buffer(&bf)?.buffer(&bc)?.arg(&n)?;
    a.launch(&kv, n / 256, 256, 0, &args)?;
    let mut args = kr.args();
    args.buffer(&bi)?.buffer(&bs)?.arg(&n)?;
    b.launch(&kr, n / 256, 256, 0, &args)?;
    a.synchronize()?;
    b.synchronize()?;
    let mut out = vec![0u8; 4 * n as usize];
    bc.read(0, &mut out)?;
    let ok = out
        .chunks(4)
        .enumerate()
        .all(|(i, c)| f32::from_le_bytes([c[0], c[1], c[2], c[3]]) == 2.0 * i as f32);
    if !ok {
        return Ok(Err("the vector add produced wrong sums".into()));
    }
    let mut sums = vec![0u8; 4 * (n / 256) as usize];
    bs.read(0, &mut sums)?;
    for (g, c) in sums.chunks(4).enumerate() {
        let want: u32 = input[g * 256..(g + 1) * 256].iter().sum();
        if u32::from_le_bytes([c[0], c[1], c[2], c[3]]) != want {
            return Ok(Err(format!("the reduction of work-group {g} is wrong")));
        }
    }
    Ok(Ok(Summary {
        streams: 2,
        callbacks: 0,
        copied: 0,
        kernels: 2,
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
                ..
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
            TraceKind::Dispatch {
                queue_id,
                packet,
                entry,
                workgroups,
                waves,
                instructions,
                lane_instructions,
                fault,
            } => {
                args["queue"] = json!(queue_id);
                args["packet"] = json!(packet);
                args["entry"] = json!(format!("{entry:#x}"));
                args["workgroups"] = json!(workgroups);
                args["waves"] = json!(waves);
                args["instructions"] = json!(instructions);
                args["lane_instructions"] = json!(lane_instructions);
                if let Some(f) = fault {
                    args["fault"] = json!(f);
                }
                out.push(json!({
                    "name": format!("dispatch q{queue_id}"), "ph": "X", "cat": "dispatch",
                    "ts": us(ev.start_ns), "dur": us(ev.end_ns.saturating_sub(ev.start_ns)),
                    "pid": pid, "tid": tid, "args": args,
                }));
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

/// One file written by [`dump_rings`].
#[derive(Debug)]
pub struct DumpFile {
    /// File name in the dump directory.
    pub name: String,
    /// `kfdrt disasm --engine` value.
    pub engine: &'static str,
    /// `kfdrt disasm --gfx` value.
    pub gfx: String,
    /// The GPU's gpu_id.
    pub gpu_id: u32,
    /// The queue id.
    pub queue: u32,
    /// 0 for a ring, 1.. for (nested) indirect buffers.
    pub ib_depth: u8,
    /// Packets placed in the file.
    pub packets: usize,
}

/// Bytes of one ring lap or one indirect-buffer execution being assembled.
struct Image {
    /// Creation order (execution order within a queue).
    order: usize,
    file: DumpFile,
    words: Vec<u32>,
    last_off: Option<u64>,
}

impl Image {
    /// An empty image of file `name` (`gpu`: its gpu_id and target).
    fn new(name: String, engine: &'static str, gpu: (u32, &str), queue: u32, ib_depth: u8) -> Self {
        Image {
            file: DumpFile {
                name,
                engine,
                gfx: gpu.1.to_string(),
                gpu_id: gpu.0,
                queue,
                ib_depth,
                packets: 0,
            },
            words: Vec::new(),
            last_off: None,
            order: 0,
        }
    }

    /// [`Image::place`]; the image takes its place in the dump order (`next`) with its
    /// first packet.
    fn add(&mut self, offset: u64, words: &[u32], next: &mut usize) {
        if self.file.packets == 0 {
            self.order = *next;
            *next += 1;
        }
        self.place(offset, words);
    }

    /// Place a packet's dwords at byte `offset` (gaps stay zero).
    fn place(&mut self, offset: u64, words: &[u32]) {
        let at = (offset / 4) as usize;
        if self.words.len() < at + words.len() {
            self.words.resize(at + words.len(), 0);
        }
        self.words[at..at + words.len()].copy_from_slice(words);
        self.last_off = Some(offset);
        self.file.packets += 1;
    }
}

/// Write the executed packets of every queue back as bytes, for `kfdrt disasm`: one file
/// per ring lap (`gpu0-gfx942-q1-aql-ring.bin`, `...-ring-lap1.bin` after a wrap) with
/// each packet at its ring offset, and one per execution of an indirect buffer
/// (`gpu0-gfx942-q1-ib0003-pm4-0x7f0000001000.bin`, packets at their IB offsets),
/// plus `index.txt` naming each file's engine, target and the command that decodes it.
/// The bytes are the dwords the engines read when they executed each packet (AQL
/// headers as they were before the engine reset them to INVALID).
pub fn dump_rings(
    events: &[TraceEvent],
    gpus: &[(u32, String, String)],
    dir: &std::path::Path,
) -> std::io::Result<Vec<DumpFile>> {
    std::fs::create_dir_all(dir)?;
    let gpu_of = |id: u32| -> (usize, String) {
        gpus.iter()
            .position(|(g, _, _)| *g == id)
            .map_or((gpus.len(), "gfx942".to_string()), |i| {
                (i, gpus[i].2.clone())
            })
    };
    let mut done: Vec<Image> = Vec::new();
    // Open images: rings by (gpu, queue), IBs by (gpu, queue, depth, va).
    let mut rings: BTreeMap<(u32, u32), Image> = BTreeMap::new();
    let mut ibs: BTreeMap<(u32, u32, u8, u64), Image> = BTreeMap::new();
    let mut laps: BTreeMap<(u32, u32), u32> = BTreeMap::new();
    let mut ib_seq: BTreeMap<(u32, u32), u32> = BTreeMap::new();
    let mut next_order = 0usize;
    for ev in events {
        let TraceKind::Packet {
            offset,
            ib_depth,
            ib_va,
            words,
            ..
        } = &ev.kind
        else {
            continue;
        };
        let Some((q, kind)) = ev.queue else { continue };
        let (idx, gfx) = gpu_of(ev.gpu_id);
        let ring_engine = match kind {
            QueueKind::Aql => "aql",
            QueueKind::Pm4 => "pm4",
            QueueKind::Sdma { .. } => "sdma",
        };
        if *ib_depth == 0 {
            // The ring moved on: the queue's indirect buffers so far are complete.
            let keys: Vec<_> = ibs
                .keys()
                .filter(|k| (k.0, k.1) == (ev.gpu_id, q))
                .copied()
                .collect();
            for k in keys {
                done.extend(ibs.remove(&k));
            }
            let key = (ev.gpu_id, q);
            if rings
                .get(&key)
                .is_some_and(|r| r.last_off.is_some_and(|l| *offset <= l))
            {
                done.extend(rings.remove(&key));
                *laps.entry(key).or_insert(0) += 1;
            }
            let lap = laps.get(&key).copied().unwrap_or(0);
            let img = rings.entry(key).or_insert_with(|| {
                let name = if lap == 0 {
                    format!("gpu{idx}-{gfx}-q{q}-{ring_engine}-ring.bin")
                } else {
                    format!("gpu{idx}-{gfx}-q{q}-{ring_engine}-ring-lap{lap}.bin")
                };
                Image::new(name, ring_engine, (ev.gpu_id, &gfx), q, 0)
            });
            img.add(*offset, words, &mut next_order);
        } else {
            let engine = if ring_engine == "sdma" { "sdma" } else { "pm4" };
            let key = (ev.gpu_id, q, *ib_depth, *ib_va);
            if ibs
                .get(&key)
                .is_some_and(|r| r.last_off.is_some_and(|l| *offset <= l))
            {
                done.extend(ibs.remove(&key));
            }
            let img = ibs.entry(key).or_insert_with(|| {
                let seq = ib_seq.entry((ev.gpu_id, q)).or_insert(0);
                *seq += 1;
                let name = format!(
                    "gpu{idx}-{gfx}-q{q}-ib{:04}-{engine}-{ib_va:#x}{}.bin",
                    *seq - 1,
                    if *ib_depth > 1 {
                        format!("-depth{ib_depth}")
                    } else {
                        String::new()
                    }
                );
                Image::new(name, engine, (ev.gpu_id, &gfx), q, *ib_depth)
            });
            img.add(*offset, words, &mut next_order);
        }
    }
    done.extend(rings.into_values());
    done.extend(ibs.into_values());
    done.sort_by_key(|i| (i.file.gpu_id, i.file.queue, i.file.ib_depth, i.order));
    let mut index = String::from(
        "# kfdrt trace --dump-rings: one file per ring lap and per indirect-buffer execution,\n\
         # each packet's dwords at its offset (zeros where nothing executed: the emulator\n\
         # does not record NOP padding inside an IB). In execution order per queue.\n\
         # FILE ENGINE GFX GPU_ID QUEUE IB_DEPTH PACKETS | decode with\n",
    );
    let mut files = Vec::new();
    for img in done {
        let bytes: Vec<u8> = img.words.iter().flat_map(|w| w.to_le_bytes()).collect();
        std::fs::write(dir.join(&img.file.name), bytes)?;
        let f = img.file;
        index.push_str(&format!(
            "{} {} {} {:#x} {} {} {} | kfdrt disasm --engine {} --gfx {} {}\n",
            f.name,
            f.engine,
            f.gfx,
            f.gpu_id,
            f.queue,
            f.ib_depth,
            f.packets,
            f.engine,
            f.gfx,
            f.name
        ));
        files.push(f);
    }
    std::fs::write(dir.join("index.txt"), index)?;
    Ok(files)
}

/// `kfdrt trace --help`.
pub const HELP: &str = "\
kfdrt trace — run a built-in workload on the emulated device, record every packet the
CP and SDMA engines execute and every engine event (wake, park, block/unblock on a wait,
fault, interrupt, kernel dispatch) with host and GPU-clock timestamps, and write a Chrome/Perfetto trace
(open it in ui.perfetto.dev or chrome://tracing: one process per GPU, one track per
queue and per engine) plus a packet log in the `kfdrt disasm` line format.

USAGE:
    kfdrt trace [--device SPEC] [--out FILE] [--log FILE] [--dump-rings DIR] [-- WORKLOAD]

OPTIONS:
    --device SPEC   emu[:PRESET[*N][,PRESET...]] (default: $KFDRT_DEVICE, else emu);
                    auto means the emulator here; hw is refused (exit 3): tracing
                    records inside the emulated engines
    --out FILE      Chrome trace JSON (default kfdrt-trace.json)
    --log FILE      packet log, one line per packet:
                    `START_US DUR_US gpu=ID ENGINE q=QUEUE ib=DEPTH | OFFSET NAME field=value ...`
                    (default: not written)
    --dump-rings DIR
                    write the bytes of every packet executed, back in place: one file
                    per queue ring (per lap when it wrapped) and per indirect-buffer
                    execution, named GPU-GFX-QUEUE-ENGINE (gpu0-gfx942-q1-aql-ring.bin,
                    gpu0-gfx942-q1-ib0000-pm4-0x....bin), plus DIR/index.txt with the
                    `kfdrt disasm` command for each file

WORKLOADS:
    demo            (default) 3 streams: small copies (CP DMA) and a 2 MiB copy (SDMA),
                    events across streams, callbacks, and a writeValue/waitValue ping
                    between two streams
    kernels         2 streams: a vector add and an LDS reduction; each dispatch is a
                    `dispatch qN` slice on the CP track (args: packet, entry,
                    workgroups, waves, instructions, lane_instructions)

EXIT CODES:
    0 trace written; 1 the workload failed or produced wrong results; 2 usage error, a
    bad device spec or an output file could not be written; 3 the device is not the
    emulator (hw) or could not be opened

EXAMPLES:
    kfdrt trace
    kfdrt trace --device emu:mi300x --out demo.json --log demo.log -- demo
    kfdrt trace --device emu:rx7900xtx --out rdna3.json
    kfdrt trace --dump-rings rings && kfdrt disasm --engine aql rings/gpu0-gfx942-q1-aql-ring.bin
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
    let args = match crate::args::Args::parse(argv, &["device", "out", "log", "dump-rings"], &[]) {
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
    let spec = match crate::device_spec(&args) {
        Ok(kfdrt::DeviceSpec::Emulated(s)) => s,
        Ok(kfdrt::DeviceSpec::Auto) => "emu".to_string(),
        Ok(kfdrt::DeviceSpec::Hardware) => {
            errln!(
                "kfdrt trace: trace needs the emulated device (--device emu[:PRESET]): \
                 packets are recorded inside the emulator's engines, not on hardware"
            );
            return ExitCode::from(3);
        }
        Err(m) => {
            errln!("kfdrt trace: {m}");
            return ExitCode::from(2);
        }
    };
    let emu = match kfd_emu::EmuBackend::from_spec(&spec) {
        Ok(b) => Arc::new(b),
        Err(e) => {
            errln!("kfdrt trace: opening {}: {e}", crate::spec_origin(&args));
            return ExitCode::from(2);
        }
    };
    let gpus_gfx: Vec<(u32, String, String)> = emu
        .gpu_ids()
        .into_iter()
        .map(|g| {
            let name = emu.preset(g).map_or("?", |p| p.name);
            let gfx = emu
                .preset(g)
                .and_then(|p| kfd::topology::GfxVersion::from_target_version(p.gfx_target_version))
                .and_then(|v| v.name())
                .unwrap_or_else(|| "gfx942".into());
            (g, name.to_string(), gfx)
        })
        .collect();
    let gpus: Vec<(u32, String)> = gpus_gfx.iter().map(|(g, n, _)| (*g, n.clone())).collect();
    let dev = match Device::with_backend(emu.clone()) {
        Ok(d) => d,
        Err(e) => {
            errln!(
                "kfdrt trace: opening the emulated device: {}",
                crate::user_msg(&e)
            );
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
    if let Some(dir) = args.value("dump-rings") {
        match dump_rings(&events, &gpus_gfx, std::path::Path::new(dir)) {
            Ok(files) => errln!(
                "kfdrt trace: {} ring and IB files -> {dir} (see {dir}/index.txt)",
                files.len()
            ),
            Err(e) => {
                errln!("kfdrt trace: --dump-rings {dir:?}: cannot write it: {e}");
                return ExitCode::from(2);
            }
        }
    }
    let packets = events
        .iter()
        .filter(|e| matches!(e.kind, TraceKind::Packet { .. }))
        .count();
    let dispatches = events
        .iter()
        .filter(|e| matches!(e.kind, TraceKind::Dispatch { .. }))
        .count();
    match result {
        Ok(s) => {
            outln!(
                "kfdrt trace: workload {workload}: {} streams, {} callbacks, {} bytes copied, \
                 {} kernels; {packets} packets, {dispatches} dispatches, {} events -> {out}",
                s.streams,
                s.callbacks,
                s.copied,
                s.kernels,
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

#[cfg(test)]
mod tests {
    use super::*;

    fn packet(q: u32, kind: QueueKind, offset: u64, ib: (u8, u64), words: &[u32]) -> TraceEvent {
        TraceEvent {
            gpu_id: 0x1234,
            engine: EngineId::Cp,
            queue: Some((q, kind)),
            start_ns: 0,
            end_ns: 0,
            start_gpu: 0,
            end_gpu: 0,
            kind: TraceKind::Packet {
                offset,
                ib_depth: ib.0,
                ib_va: ib.1,
                name: "X",
                disasm: String::new(),
                words: words.into(),
            },
        }
    }

    fn words_of(dir: &std::path::Path, name: &str) -> Vec<u32> {
        std::fs::read(dir.join(name))
            .unwrap()
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect()
    }

    /// A ring that wraps gets one file per lap; an IB run twice (the same VA reused
    /// after the ring moved on) gets one file per execution; packets sit at their
    /// offsets.
    #[test]
    fn dump_splits_ring_laps_and_ib_executions() {
        let dir = std::env::temp_dir().join(format!("kfdrt-dump-unit-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let pm4 = QueueKind::Pm4;
        let ib = (1, 0x7000);
        let events = [
            packet(2, pm4, 0, (0, 0), &[1, 1]),
            packet(2, pm4, 0, ib, &[10]),
            packet(2, pm4, 8, ib, &[11, 11]),
            packet(2, pm4, 8, (0, 0), &[2]),
            packet(2, pm4, 0, ib, &[12]),
            // The ring wrapped: offset 0 again.
            packet(2, pm4, 0, (0, 0), &[3]),
            packet(7, QueueKind::Sdma { engine: 0 }, 0, (0, 0), &[4, 4, 4]),
        ];
        let gpus = [(0x1234, "mi300x".to_string(), "gfx942".to_string())];
        let files = dump_rings(&events, &gpus, &dir).unwrap();
        let names: Vec<&str> = files.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(
            names,
            [
                "gpu0-gfx942-q2-pm4-ring.bin",
                "gpu0-gfx942-q2-pm4-ring-lap1.bin",
                "gpu0-gfx942-q2-ib0000-pm4-0x7000.bin",
                "gpu0-gfx942-q2-ib0001-pm4-0x7000.bin",
                "gpu0-gfx942-q7-sdma-ring.bin",
            ]
        );
        assert_eq!(words_of(&dir, names[0]), [1, 1, 2]);
        assert_eq!(words_of(&dir, names[1]), [3]);
        assert_eq!(words_of(&dir, names[2]), [10, 0, 11, 11]);
        assert_eq!(words_of(&dir, names[3]), [12]);
        assert_eq!(words_of(&dir, names[4]), [4, 4, 4]);
        assert_eq!(files[4].engine, "sdma");
        let index = std::fs::read_to_string(dir.join("index.txt")).unwrap();
        assert!(index.contains(
            "gpu0-gfx942-q2-ib0000-pm4-0x7000.bin pm4 gfx942 0x1234 2 1 2 | \
             kfdrt disasm --engine pm4 --gfx gfx942 gpu0-gfx942-q2-ib0000-pm4-0x7000.bin"
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
