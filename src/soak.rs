//! The soak workload shared by the stress test (`tests/soak.rs`) and `kfdrt soak`:
//! N threads x M streams mixing every stream command (write/wait value, events,
//! callbacks, copies, fills, the stream-ordered allocator, busy-stream destruction),
//! checking at every checkpoint that each write landed, each callback ran exactly once and
//! every allocation's bytes are intact. Not a stable API.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::{
    Buffer, Device, Event, EventFlags, MemoryKind, Stream, StreamFlags, WaitCompare,
    WriteValueFlags,
};

/// What to run.
#[derive(Debug, Clone)]
pub struct Config {
    /// Host threads, each with its own streams.
    pub threads: usize,
    /// Streams per thread.
    pub streams: usize,
    /// How long to run.
    pub duration: Duration,
    /// GPU index.
    pub gpu: usize,
    /// RNG seed (each thread derives its own).
    pub seed: u64,
}

/// Operation counts of a run.
#[derive(Debug, Default)]
pub struct Counts {
    /// writeValue32.
    pub writes: AtomicU64,
    /// waitValue32/64 (each released by the host right after).
    pub waits: AtomicU64,
    /// Event records followed by a wait on another stream.
    pub event_waits: AtomicU64,
    /// Callbacks run (checked against those added).
    pub callbacks: AtomicU64,
    /// mallocAsync / freeAsync pairs.
    pub allocs: AtomicU64,
    /// memsetAsync / memsetD32Async.
    pub memsets: AtomicU64,
    /// memcpyAsync.
    pub copies: AtomicU64,
    /// Streams destroyed while busy (and replaced).
    pub destroys: AtomicU64,
    /// Checkpoints (every stream synchronized, everything verified).
    pub checkpoints: AtomicU64,
}

impl Counts {
    /// Total stream operations.
    pub fn total(&self) -> u64 {
        [
            &self.writes,
            &self.waits,
            &self.event_waits,
            &self.callbacks,
            &self.allocs,
            &self.memsets,
            &self.copies,
            &self.destroys,
        ]
        .iter()
        .map(|c| c.load(Ordering::Relaxed))
        .sum()
    }
}

impl std::fmt::Display for Counts {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let g = |c: &AtomicU64| c.load(Ordering::Relaxed);
        write!(
            f,
            "writes {} waits {} event-waits {} callbacks {} alloc/free {} memsets {} copies {} \
             destroys {} checkpoints {} (total {})",
            g(&self.writes),
            g(&self.waits),
            g(&self.event_waits),
            g(&self.callbacks),
            g(&self.allocs),
            g(&self.memsets),
            g(&self.copies),
            g(&self.destroys),
            g(&self.checkpoints),
            self.total()
        )
    }
}

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Write slots per thread between checkpoints.
const SLOTS: usize = 1024;
/// Staging bytes per thread for copied-back allocations.
const STAGING: usize = 256 << 10;
/// Checkpoint after this many operations.
const OPS_PER_CHECKPOINT: u64 = 400;
/// Bound of every host wait of the workload.
const WAIT: Duration = Duration::from_secs(120);

/// Run the workload; `Err` names the first mismatch or failure.
pub fn run(dev: &Device, cfg: &Config, counts: &Arc<Counts>) -> Result<(), String> {
    let deadline = Instant::now() + cfg.duration;
    let handles: Vec<_> = (0..cfg.threads)
        .map(|t| {
            let dev = dev.clone();
            let cfg = cfg.clone();
            let counts = counts.clone();
            std::thread::Builder::new()
                .name(format!("soak-{t}"))
                .spawn(move || worker(&dev, &cfg, t, deadline, &counts))
                .map_err(|e| format!("spawn: {e}"))
        })
        .collect::<Result<_, _>>()?;
    let mut first = Ok(());
    for h in handles {
        let r = h
            .join()
            .unwrap_or_else(|_| Err("a soak thread panicked".into()));
        if first.is_ok() {
            first = r;
        }
    }
    first
}

struct Pending {
    /// (slot, value) writes to check.
    writes: Vec<(usize, u32)>,
    /// (staging offset, byte, len) copies to check.
    copies: Vec<(usize, u8, usize)>,
    staging_used: usize,
    callbacks_added: u64,
    /// Events recorded on streams destroyed while busy.
    graves: Vec<Event>,
}

fn worker(
    dev: &Device,
    cfg: &Config,
    t: usize,
    deadline: Instant,
    counts: &Counts,
) -> Result<(), String> {
    let e = |what: &str, err: crate::Error| format!("thread {t}: {what}: {err}");
    let mut rng = Rng(cfg.seed ^ (0x9e37_79b9_7f4a_7c15u64.wrapping_mul(t as u64 + 1)) | 1);
    let gpu = cfg.gpu;
    let slots = dev
        .alloc(MemoryKind::Signal, gpu, SLOTS * 4)
        .map_err(|x| e("alloc slots", x))?;
    let flags = dev
        .alloc(MemoryKind::Signal, gpu, 4096)
        .map_err(|x| e("alloc flags", x))?;
    let staging: Buffer = dev
        .alloc(MemoryKind::HostPinned, gpu, STAGING)
        .map_err(|x| e("alloc staging", x))?;
    let new_stream = |rng: &mut Rng| -> Result<Stream, String> {
        let f = if rng.below(2) == 0 {
            StreamFlags::NON_BLOCKING
        } else {
            StreamFlags::DEFAULT
        };
        dev.create_stream_with_flags(gpu, f)
            .map_err(|x| e("create stream", x))
    };
    let mut streams: Vec<Stream> = (0..cfg.streams.max(2))
        .map(|_| new_stream(&mut rng))
        .collect::<Result<_, _>>()?;
    let called = Arc::new(AtomicU64::new(0));
    let mut flag_value = 0u32;
    let mut serial = 0u32;
    let mut p = Pending {
        writes: Vec::new(),
        copies: Vec::new(),
        staging_used: 0,
        callbacks_added: 0,
        graves: Vec::new(),
    };
    let mut ops = 0u64;
    while Instant::now() < deadline {
        let i = rng.below(streams.len() as u64) as usize;
        let s = &streams[i];
        match rng.below(8) {
            0 | 1 if p.writes.len() < SLOTS => {
                let slot = p.writes.len();
                serial = serial.wrapping_add(1).max(1);
                s.write_value32(
                    slots.va() + 4 * slot as u64,
                    serial,
                    WriteValueFlags::DEFAULT,
                )
                .map_err(|x| e("write_value32", x))?;
                p.writes.push((slot, serial));
                counts.writes.fetch_add(1, Ordering::Relaxed);
            }
            2 => {
                // Wait for a host value, released right away by this thread.
                flag_value += 1;
                if flag_value % 2 == 0 {
                    s.wait_value32(flags.va(), flag_value, WaitCompare::Gte, u32::MAX)
                        .map_err(|x| e("wait_value32", x))?;
                    flags
                        .atomic_u32(0)
                        .map_err(|x| e("flag", x))?
                        .store(flag_value, Ordering::Release);
                } else {
                    let v = u64::from(flag_value) << 32;
                    // Bit 63 stays out of the mask: on gfx9 an unsigned 64-bit GEQ over
                    // bit 63 has no exact CP packet (NotSupported, see
                    // firmware-notes/firmware-rules.md); these values never reach it.
                    s.wait_value64(flags.va() + 8, v, WaitCompare::Gte, u64::MAX >> 1)
                        .map_err(|x| e("wait_value64", x))?;
                    flags
                        .atomic_u64(8)
                        .map_err(|x| e("flag", x))?
                        .store(v, Ordering::Release);
                }
                counts.waits.fetch_add(1, Ordering::Relaxed);
            }
            3 => {
                let j = (i + 1 + rng.below(streams.len() as u64 - 1) as usize) % streams.len();
                let ev = dev
                    .create_event(EventFlags::DISABLE_TIMING)
                    .map_err(|x| e("create_event", x))?;
                ev.record(s).map_err(|x| e("event record", x))?;
                streams[j]
                    .wait_event(&ev, 0)
                    .map_err(|x| e("wait_event", x))?;
                counts.event_waits.fetch_add(1, Ordering::Relaxed);
            }
            4 => {
                let c = called.clone();
                s.add_callback(
                    move |_| {
                        c.fetch_add(1, Ordering::AcqRel);
                    },
                    0,
                )
                .map_err(|x| e("add_callback", x))?;
                p.callbacks_added += 1;
            }
            5 | 6 => {
                // mallocAsync a, b; memset a; copy a -> b; copy b -> staging; free both.
                let len = 1 + rng.below(8192) as usize;
                if p.staging_used + len > STAGING {
                    continue;
                }
                let byte = rng.next() as u8;
                let a = s.malloc_async(len).map_err(|x| e("malloc_async", x))?;
                let b = s.malloc_async(len).map_err(|x| e("malloc_async", x))?;
                if len % 4 == 0 {
                    s.memset_d32(a.va(), u32::from_ne_bytes([byte; 4]), len as u64 / 4)
                        .map_err(|x| e("memset_d32", x))?;
                } else {
                    s.memset(a.va(), byte, len as u64)
                        .map_err(|x| e("memset", x))?;
                }
                s.memcpy(b.va(), a.va(), len as u64)
                    .map_err(|x| e("memcpy", x))?;
                let off = p.staging_used;
                s.memcpy(staging.va() + off as u64, b.va(), len as u64)
                    .map_err(|x| e("memcpy", x))?;
                a.free_async(s).map_err(|x| e("free_async", x))?;
                b.free_async(s).map_err(|x| e("free_async", x))?;
                p.copies.push((off, byte, len));
                p.staging_used = (off + len).next_multiple_of(64);
                counts.allocs.fetch_add(2, Ordering::Relaxed);
                counts.memsets.fetch_add(1, Ordering::Relaxed);
                counts.copies.fetch_add(2, Ordering::Relaxed);
            }
            _ => {
                // Destroy a (possibly busy) stream and replace it; its work must finish.
                let ev = dev
                    .create_event(EventFlags::DISABLE_TIMING)
                    .map_err(|x| e("create_event", x))?;
                ev.record(s).map_err(|x| e("event record", x))?;
                p.graves.push(ev);
                streams[i] = new_stream(&mut rng)?;
                counts.destroys.fetch_add(1, Ordering::Relaxed);
            }
        }
        ops += 1;
        if ops % OPS_PER_CHECKPOINT == 0 {
            checkpoint(t, &streams, &slots, &staging, &mut p, &called, counts)?;
        }
    }
    checkpoint(t, &streams, &slots, &staging, &mut p, &called, counts)
}

fn checkpoint(
    t: usize,
    streams: &[Stream],
    slots: &Buffer,
    staging: &Buffer,
    p: &mut Pending,
    called: &AtomicU64,
    counts: &Counts,
) -> Result<(), String> {
    for (k, s) in streams.iter().enumerate() {
        s.synchronize_timeout(WAIT)
            .map_err(|x| format!("thread {t}: synchronize stream {k}: {x}"))?;
    }
    for ev in p.graves.drain(..) {
        ev.wait_timeout(WAIT)
            .map_err(|x| format!("thread {t}: work of a destroyed stream: {x}"))?;
    }
    for &(slot, v) in &p.writes {
        let got = slots
            .atomic_u32(4 * slot)
            .map_err(|x| x.to_string())?
            .load(Ordering::Acquire);
        if got != v {
            return Err(format!(
                "thread {t}: write to slot {slot}: expected {v:#x}, found {got:#x}"
            ));
        }
    }
    let mut buf = Vec::new();
    for &(off, byte, len) in &p.copies {
        buf.resize(len, 0);
        staging.read(off, &mut buf).map_err(|x| x.to_string())?;
        if let Some(bad) = buf.iter().position(|&b| b != byte) {
            return Err(format!(
                "thread {t}: allocation bytes: copy of {len} bytes at staging+{off:#x}: byte \
                 {bad} is {:#x}, expected {byte:#x}",
                buf[bad]
            ));
        }
    }
    // Callbacks: each exactly once. All earlier work is complete, so every callback added
    // has run or is running; wait (bounded) for those still running, then no more.
    let t0 = Instant::now();
    while called.load(Ordering::Acquire) < p.callbacks_added {
        if t0.elapsed() > WAIT {
            return Err(format!(
                "thread {t}: {} of {} callbacks ran",
                called.load(Ordering::Acquire),
                p.callbacks_added
            ));
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    let n = called.swap(0, Ordering::AcqRel);
    if n != p.callbacks_added {
        return Err(format!(
            "thread {t}: {n} callback runs for {} callbacks",
            p.callbacks_added
        ));
    }
    counts.callbacks.fetch_add(n, Ordering::Relaxed);
    p.callbacks_added = 0;
    p.writes.clear();
    p.copies.clear();
    p.staging_used = 0;
    slots
        .write(0, &vec![0u8; SLOTS * 4])
        .map_err(|x| x.to_string())?;
    counts.checkpoints.fetch_add(1, Ordering::Relaxed);
    Ok(())
}
