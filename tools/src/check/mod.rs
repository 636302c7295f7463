//! `kfdrt check`: the device conformance suite.
//!
//! Each [`Check`] is a real test of the device through kfdrt (the runtime, or raw KFD
//! ioctls and packets on [`kfd::Backend`]) that asserts values and order, not only
//! success codes. The runner executes every selected check on a worker thread with a
//! deadline, so a hang becomes a failure named "timeout" instead of a stuck run.
//! A check that needs something the device lacks is skipped with the reason.

mod aql;
mod callbacks;
mod copies;
mod drain;
mod events;
mod faults;
mod firmware;
pub mod kernels;
mod managed;
mod memops;
mod memory;
mod pm4;
mod queues;
pub(crate) mod raw;
mod sdma;
mod selftest;
mod signals;
mod streams;
mod topology;
mod vmm;
mod xstream;

use std::fmt::Display;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kfdrt::{Device, DeviceSpec};

pub use drain::{Drain, FaultAudit};

/// How one run of a check ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The device behaved as required (optional detail: what was measured).
    Pass(Option<String>),
    /// The device did not behave as required: what was expected and what happened.
    Fail(String),
    /// The check could not run on this device: the reason.
    Skip(String),
}

impl Outcome {
    /// `pass`, `fail` or `skip`.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Pass(_) => "pass",
            Outcome::Fail(_) => "fail",
            Outcome::Skip(_) => "skip",
        }
    }
    /// The detail text, if any.
    pub fn detail(&self) -> Option<&str> {
        match self {
            Outcome::Pass(d) => d.as_deref(),
            Outcome::Fail(d) | Outcome::Skip(d) => Some(d),
        }
    }
}

/// What a check function returns: `Err` is a failure with its detail.
pub type CheckResult = Result<Outcome, String>;

/// A pass without detail.
pub fn pass() -> CheckResult {
    Ok(Outcome::Pass(None))
}

/// A pass with a detail (a measured value).
pub fn pass_with(detail: impl Into<String>) -> CheckResult {
    Ok(Outcome::Pass(Some(detail.into())))
}

/// A skip with its reason.
pub fn skip(reason: impl Into<String>) -> CheckResult {
    Ok(Outcome::Skip(reason.into()))
}

/// Fail with a formatted detail unless the condition holds.
macro_rules! ensure {
    ($cond:expr, $($fmt:tt)+) => {
        if !$cond {
            return Err(format!($($fmt)+));
        }
    };
}
pub(crate) use ensure;

/// Turn any displayable error into a failure detail naming the step that failed.
pub trait OrFail<T> {
    /// `Err(e)` becomes `"{what}: {e}"`.
    fn or_fail(self, what: &str) -> Result<T, String>;
}

impl<T, E: Display> OrFail<T> for Result<T, E> {
    fn or_fail(self, what: &str) -> Result<T, String> {
        self.map_err(|e| format!("{what}: {e}"))
    }
}

/// One named check.
#[derive(Clone, Copy)]
pub struct Check {
    /// `group.name`.
    pub name: &'static str,
    /// One line: what the check asserts.
    pub what: &'static str,
    /// The test.
    pub run: fn(&Ctx) -> CheckResult,
}

impl Check {
    /// The group: the part of the name before the first dot.
    pub fn group(&self) -> &'static str {
        self.name.split('.').next().unwrap_or(self.name)
    }

    /// Whether the check provokes GPU faults on purpose (on hardware they reach the
    /// device under test; on the emulator they run on a private device).
    pub fn provokes_faults(&self) -> bool {
        self.group() == "faults" || self.name == faults::INJECTED.name
    }
}

/// Groups in run order, with their descriptions (for `--list` and the README).
pub const GROUPS: &[(&str, &str)] = &[
    (
        "topology",
        "KFD version, GPU nodes, apertures, clock counters",
    ),
    (
        "memory",
        "VRAM/GTT/USERPTR buffers, KFD memory errno, SVM attributes, peer access",
    ),
    (
        "queues",
        "CREATE_QUEUE argument checks, queue ids, priorities, CU masks",
    ),
    (
        "pm4",
        "PM4 packets: WRITE_DATA, WAIT_REG_MEM, RELEASE_MEM, PM4 compute queues",
    ),
    (
        "aql",
        "AQL barrier-AND/OR, completion signals, read/write dispatch ids",
    ),
    (
        "sdma",
        "SDMA COPY_LINEAR, CONST_FILL, FENCE, POLL_REGMEM, ring wrap",
    ),
    (
        "events",
        "KFD events: SET/WAIT/RESET, timeouts, errno; interrupts from the CP",
    ),
    (
        "signals",
        "amd_signal_t: CP decrements, mailbox interrupts, timestamps",
    ),
    (
        "streams",
        "streams: order, query, synchronize, null stream, destroy while busy",
    ),
    (
        "xstream",
        "events across streams and GPUs: wait on record, re-record, elapsed time",
    ),
    (
        "callbacks",
        "stream callbacks: once, in order, holding later work",
    ),
    (
        "memops",
        "stream memory ops: writeValue/waitValue 32/64-bit conditions",
    ),
    (
        "firmware",
        "per-family firmware rules: packet support, XCC predication, queue-error reporting",
    ),
    (
        "kernels",
        "kernels: load code objects, arguments, LDS, scratch, ordering with stream commands",
    ),
    (
        "faults",
        "queue faults: sticky LaunchFailure, no hang, KFD memory exception data",
    ),
    (
        "copies",
        "stream-ordered memcpy/memset through the runtime (CP DMA and SDMA)",
    ),
    (
        "managed",
        "managed memory on KFD SVM: prefetch, advise, range attributes, stream attach",
    ),
    (
        "vmm",
        "virtual memory management: reserve, create, map, access, dmabuf export/import",
    ),
    (
        "selftest",
        "checks of the checker (only with --inject-fault)",
    ),
];

/// Every check, in run order (faults last: a fault may disturb later work on real
/// hardware). `inject_fault` adds the deliberately failing self-test.
pub fn registry(inject_fault: bool) -> Vec<Check> {
    let mut v = Vec::new();
    v.extend(topology::checks());
    v.extend(memory::checks());
    v.extend(queues::checks());
    v.extend(pm4::checks());
    v.extend(aql::checks());
    v.extend(sdma::checks());
    v.extend(events::checks());
    v.extend(signals::checks());
    v.extend(streams::checks());
    v.extend(xstream::checks());
    v.extend(callbacks::checks());
    v.extend(memops::checks());
    v.extend(copies::checks());
    v.extend(managed::checks());
    v.extend(vmm::checks());
    v.extend(firmware::checks());
    v.extend(kernels::checks());
    v.extend(faults::checks());
    if inject_fault {
        v.push(faults::INJECTED);
        v.extend(selftest::checks());
    }
    v
}

/// Keep the checks whose name or group contains one of the comma-separated patterns.
pub fn select(all: Vec<Check>, only: Option<&str>) -> Vec<Check> {
    let Some(p) = only else { return all };
    let pats: Vec<&str> = p
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    all.into_iter()
        .filter(|c| {
            pats.iter()
                .any(|p| c.name.contains(p) || c.group().contains(p))
        })
        .collect()
}

/// What every check gets: the opened device and how to open a private one.
pub struct Ctx {
    /// The device under test (shared by the checks).
    pub dev: Device,
    /// For the emulator: the spec that opens another, independent emulated device (a
    /// fresh KFD process). `None` on hardware, where a process has one KFD context.
    pub private_spec: Option<DeviceSpec>,
}

impl Ctx {
    /// Build the context from the device under test and the spec that opened it.
    pub fn new(dev: Device, spec: &DeviceSpec) -> Ctx {
        let private_spec = match (dev.backend().kind(), spec) {
            (kfd::BackendKind::Emulated, DeviceSpec::Emulated(s)) => {
                Some(DeviceSpec::Emulated(s.clone()))
            }
            (kfd::BackendKind::Emulated, _) => Some(DeviceSpec::Emulated("emu".into())),
            _ => None,
        };
        Ctx { dev, private_spec }
    }

    /// The backend of the device under test.
    pub fn backend(&self) -> &dyn kfd::Backend {
        self.dev.backend().as_ref()
    }

    /// gpu_id of GPU `i`.
    pub fn gpu_id(&self, i: usize) -> u32 {
        self.dev.gpus()[i].gpu_id
    }

    /// A device of its own (a separate KFD process) for checks that provoke faults or
    /// own the event page; `Err` with a skip reason on hardware.
    pub fn private_device(&self) -> Result<Device, Outcome> {
        note_step(
            "opening a private emulated device (it needs a KFD process of its own: \
             memory for another emulated GPU and its engine threads)",
        );
        match &self.private_spec {
            Some(s) => Device::open_spec(s)
                .map_err(|e| Outcome::Fail(format!("opening a private emulated device: {e}"))),
            None => Err(Outcome::Skip(
                "needs a KFD process of its own; on hardware the runtime owns this one".into(),
            )),
        }
    }

    /// Require GPU `gpu`'s VRAM to be CPU-visible (a large-BAR board: VRAM heap
    /// FB_PUBLIC), else a skip: on a small-BAR board KFD refuses CPU-visible VRAM.
    pub fn need_large_bar(&self, gpu: usize) -> Result<(), Outcome> {
        if vram_cpu_visible(&self.dev, gpu) {
            Ok(())
        } else {
            Err(Outcome::Skip("VRAM not CPU-visible: small BAR".into()))
        }
    }

    /// Require `n` GPUs, else a skip naming the count.
    pub fn need_gpus(&self, n: usize) -> Result<(), Outcome> {
        let have = self.dev.gpus().len();
        if have < n {
            Err(Outcome::Skip(format!(
                "needs {n} GPUs; the device has {have}"
            )))
        } else {
            Ok(())
        }
    }
}

/// Run `f` for a [`Ctx::private_device`] / [`Ctx::need_gpus`] style precondition:
/// `Err(outcome)` ends the check with that outcome.
macro_rules! require {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(o) => return Ok(o),
        }
    };
}
pub(crate) use require;

/// Poll `f` every 100 µs until it holds; fail naming `what` after `limit`.
pub fn wait_for(what: &str, limit: Duration, mut f: impl FnMut() -> bool) -> Result<(), String> {
    note_step(format!("waiting for {what}"));
    let t = Instant::now();
    while !f() {
        if t.elapsed() > limit {
            return Err(format!("timed out after {limit:?} waiting for {what}"));
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    Ok(())
}

/// The default limit of [`wait_for`] inside checks.
pub const WAIT: Duration = Duration::from_secs(5);

/// `len` pseudo-random bytes (xorshift32), a different sequence per `seed`.
pub fn pattern(len: usize, seed: u32) -> Vec<u8> {
    let mut x = seed.wrapping_mul(2_654_435_761) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// Whether GPU `gpu`'s VRAM heap is CPU-visible (large BAR: `HEAP_TYPE_FB_PUBLIC`).
pub fn vram_cpu_visible(dev: &kfdrt::Device, gpu: usize) -> bool {
    dev.gpu(gpu).is_ok_and(|g| {
        g.node
            .mem_banks
            .iter()
            .any(|b| b.heap_type == kfd::topology::HEAP_TYPE_FB_PUBLIC)
    })
}

/// `len` bytes at GPU address `va` read through GPU `gpu` (a copy to pinned host memory on
/// a new stream), for memory the CPU may not see (small-BAR VRAM, VMM mappings).
pub fn read_via_gpu(
    dev: &kfdrt::Device,
    gpu: usize,
    va: u64,
    len: usize,
) -> Result<Vec<u8>, String> {
    let host = dev
        .alloc(kfdrt::MemoryKind::HostPinned, gpu, len.max(1))
        .or_fail("alloc bounce buffer")?;
    let s = dev.create_stream(gpu).or_fail("create_stream")?;
    let _drain = Drain::streams(&[&s]);
    s.memcpy(host.va(), va, len as u64).or_fail("memcpy out")?;
    s.synchronize().or_fail("synchronize")?;
    let mut v = vec![0; len];
    host.read(0, &mut v).or_fail("read bounce buffer")?;
    Ok(v)
}

/// Write `data` at GPU address `va` through GPU `gpu` (pinned host memory copied in on a
/// new stream); see [`read_via_gpu`].
pub fn write_via_gpu(dev: &kfdrt::Device, gpu: usize, va: u64, data: &[u8]) -> Result<(), String> {
    let host = dev
        .alloc(kfdrt::MemoryKind::HostPinned, gpu, data.len().max(1))
        .or_fail("alloc bounce buffer")?;
    host.write(0, data).or_fail("write bounce buffer")?;
    let s = dev.create_stream(gpu).or_fail("create_stream")?;
    let _drain = Drain::streams(&[&s]);
    s.memcpy(va, host.va(), data.len() as u64)
        .or_fail("memcpy in")?;
    s.synchronize().or_fail("synchronize")
}

/// Hold `s`'s later work behind the word at `gate` (a waitValue32 for the word >= 1: the
/// check releases it by storing 1, and so does its [`Drain`] on every way out).
pub fn hold(s: &kfdrt::Stream, gate: u64) -> Result<(), String> {
    s.wait_value32(gate, 1, kfdrt::WaitCompare::Gte, u32::MAX)
        .or_fail("wait_value32")
}

/// Give the device time to do what it must not do; the assertion after this checks it
/// did not happen (the outcome never depends on this duration).
pub fn settle() {
    std::thread::sleep(Duration::from_millis(20));
}

/// One result row.
#[derive(Debug, Clone)]
pub struct Record {
    /// Check name.
    pub name: &'static str,
    /// Group.
    pub group: &'static str,
    /// 1-based run number (`--repeat`).
    pub run: u32,
    /// Outcome.
    pub outcome: Outcome,
    /// Wall time.
    pub elapsed: Duration,
}

/// Run `checks` `repeat` times, each on a worker thread with `timeout`. `progress` is
/// called before each check with (index from 1, total, name), `done` with each record
/// as soon as it is known (so the caller can print it at once). A GPU memory fault on the
/// device under test seen as a check ends fails that check (unless it provokes faults on
/// purpose): the work it left behind touched memory no longer mapped.
pub fn run(
    ctx: &Arc<Ctx>,
    checks: &[Check],
    repeat: u32,
    timeout: Duration,
    mut progress: impl FnMut(usize, usize, &str),
    mut done: impl FnMut(&Record),
) -> Vec<Record> {
    let total = checks.len() * repeat as usize;
    let mut out = Vec::with_capacity(total);
    let audit = FaultAudit::new(ctx.backend());
    for r in 1..=repeat {
        for c in checks {
            progress(out.len() + 1, total, c.name);
            let t = Instant::now();
            let mut outcome = run_one(ctx, *c, timeout);
            if let Some(f) = audit.take(0).filter(|_| !c.provokes_faults()) {
                outcome = blame_fault(outcome, &f);
            }
            let rec = Record {
                name: c.name,
                group: c.group(),
                run: r,
                outcome,
                elapsed: t.elapsed(),
            };
            done(&rec);
            out.push(rec);
        }
    }
    out
}

/// `outcome` of a check after which the device reported fault `f`.
fn blame_fault(outcome: Outcome, f: &str) -> Outcome {
    let f = format!(
        "{f} raised while this check ran, or as the one before it ended (work left on a queue?)"
    );
    Outcome::Fail(match outcome {
        Outcome::Fail(d) => format!("{d}; and a {f}"),
        _ => format!("a {f}"),
    })
}

type StepNote = Arc<std::sync::Mutex<Option<String>>>;

thread_local! {
    /// The running check's step note ([`note_step`]); set on each check's worker thread.
    static STEP: std::cell::RefCell<Option<StepNote>> = const { std::cell::RefCell::new(None) };
}

/// Record what the running check is doing or waiting for, so that a timeout can say
/// what the check was waiting for (and what it needed) instead of only "timeout".
pub fn note_step(what: impl Into<String>) {
    STEP.with(|s| {
        if let Some(n) = s.borrow().as_ref() {
            if let Ok(mut g) = n.lock() {
                *g = Some(what.into());
            }
        }
    });
}

thread_local! {
    /// Where the running check panicked (set by the hook [`quiet_check_panics`] installs).
    static PANIC_AT: std::cell::RefCell<Option<String>> = const { std::cell::RefCell::new(None) };
}

/// Prefix of the check worker threads' names.
const CHECK_THREAD: &str = "check ";

/// A panic on a check's worker thread is that check's failure, reported in its row: the
/// panic hook records where it happened instead of printing (other threads keep the
/// previous hook).
fn quiet_check_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let on_check = std::thread::current()
                .name()
                .is_some_and(|n| n.starts_with(CHECK_THREAD));
            if on_check {
                let at = info
                    .location()
                    .map(|l| format!("{}:{}", l.file(), l.line()));
                PANIC_AT.with(|p| *p.borrow_mut() = at);
            } else {
                prev(info);
            }
        }));
    });
}

fn run_one(ctx: &Arc<Ctx>, c: Check, timeout: Duration) -> Outcome {
    quiet_check_panics();
    let (tx, rx) = std::sync::mpsc::channel();
    let ctx2 = ctx.clone();
    let note: StepNote = Arc::default();
    let note2 = note.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("{CHECK_THREAD}{}", c.name))
        .spawn(move || {
            STEP.with(|s| *s.borrow_mut() = Some(note2));
            let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (c.run)(&ctx2)));
            let o = match r {
                Ok(Ok(o)) => o,
                Ok(Err(detail)) => Outcome::Fail(detail),
                Err(p) => {
                    let msg = p
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| p.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_else(|| "unknown panic".into());
                    let at = PANIC_AT.with(|p| p.borrow_mut().take());
                    Outcome::Fail(match at {
                        Some(at) => format!("panicked at {at}: {msg}"),
                        None => format!("panicked: {msg}"),
                    })
                }
            };
            let _ = tx.send(o);
        });
    if let Err(e) = spawned {
        return Outcome::Fail(format!("could not start the check thread: {e}"));
    }
    match rx.recv_timeout(timeout) {
        Ok(o) => o,
        // The worker is left behind (it may be stuck in the device); the run goes on.
        Err(_) => {
            let step = note.lock().ok().and_then(|g| g.clone());
            Outcome::Fail(match step {
                Some(step) => format!(
                    "timeout: no result after {:.1} s; it was {step}",
                    timeout.as_secs_f64()
                ),
                None => format!(
                    "timeout: no result after {:.1} s (the device hung or a wait never \
                     completed)",
                    timeout.as_secs_f64()
                ),
            })
        }
    }
}

/// Counts of (passed, failed, skipped).
pub fn summary(records: &[Record]) -> (usize, usize, usize) {
    let mut s = (0, 0, 0);
    for r in records {
        match r.outcome {
            Outcome::Pass(_) => s.0 += 1,
            Outcome::Fail(_) => s.1 += 1,
            Outcome::Skip(_) => s.2 += 1,
        }
    }
    s
}

/// The summary line: `N passed, N failed, N skipped`.
pub fn summary_line(records: &[Record], wall: Duration) -> String {
    let (p, f, s) = summary(records);
    format!(
        "{p} passed, {f} failed, {s} skipped ({} results in {:.2} s)",
        records.len(),
        wall.as_secs_f64()
    )
}

/// The result table, printed row by row as checks finish: check, result, time, detail
/// (for failures and skips). Column widths come from the selected checks' names.
pub struct Table {
    w: usize,
    run_col: bool,
}

impl Table {
    /// The table for `checks` run `repeat` times.
    pub fn new(checks: &[Check], repeat: u32) -> Self {
        let w = checks
            .iter()
            .map(|c| c.name.len())
            .max()
            .unwrap_or(5)
            .max(5);
        Table {
            w,
            run_col: repeat > 1,
        }
    }

    /// The header line.
    pub fn header(&self) -> String {
        let w = self.w;
        format!(
            "{}{:<w$}  {:<6} {:>9}  DETAIL\n",
            if self.run_col { "RUN " } else { "" },
            "CHECK",
            "RESULT",
            "TIME"
        )
    }

    /// One result line.
    pub fn row(&self, r: &Record) -> String {
        let w = self.w;
        let mut s = String::new();
        if self.run_col {
            s.push_str(&format!("{:<3} ", r.run));
        }
        let detail = match &r.outcome {
            Outcome::Pass(_) => "",
            Outcome::Fail(d) | Outcome::Skip(d) => d.as_str(),
        };
        let label = match r.outcome {
            Outcome::Pass(_) => "PASS",
            Outcome::Fail(_) => "FAIL",
            Outcome::Skip(_) => "SKIP",
        };
        let line = format!(
            "{:<w$}  {:<6} {:>7.1}ms  {}",
            r.name,
            label,
            r.elapsed.as_secs_f64() * 1e3,
            detail
        );
        s.push_str(line.trim_end());
        s.push('\n');
        s
    }
}

/// Every group with what it covers, one per line (for `kfdrt help`).
pub fn render_groups() -> String {
    let w = GROUPS.iter().map(|(g, _)| g.len()).max().unwrap_or(8);
    GROUPS
        .iter()
        .map(|(g, what)| format!("    {g:<w$}  {what}\n"))
        .collect()
}

/// `--list --json`: every check with its group and what it asserts.
pub fn render_list_json(checks: &[Check]) -> String {
    let groups: Vec<serde_json::Value> = GROUPS
        .iter()
        .filter(|(g, _)| checks.iter().any(|c| c.group() == *g))
        .map(|(g, what)| serde_json::json!({"name": g, "what": what}))
        .collect();
    let list: Vec<serde_json::Value> = checks
        .iter()
        .map(|c| serde_json::json!({"name": c.name, "group": c.group(), "what": c.what}))
        .collect();
    serde_json::to_string_pretty(&serde_json::json!({"groups": groups, "checks": list}))
        .unwrap_or_default()
}

/// The JSON report.
pub fn render_json(records: &[Record], device: &str, repeat: u32, wall: Duration) -> String {
    let (p, f, sk) = summary(records);
    let results: Vec<serde_json::Value> = records
        .iter()
        .map(|r| {
            serde_json::json!({
                "name": r.name,
                "group": r.group,
                "run": r.run,
                "result": r.outcome.label(),
                "time_ms": (r.elapsed.as_secs_f64() * 1e6).round() / 1e3,
                "detail": r.outcome.detail(),
            })
        })
        .collect();
    let v = serde_json::json!({
        "device": device,
        "repeat": repeat,
        "results": results,
        "summary": {"passed": p, "failed": f, "skipped": sk, "total": records.len(),
                     "seconds": wall.as_secs_f64()},
    });
    serde_json::to_string_pretty(&v).unwrap_or_default()
}

/// `--list`: every check with its group and what it asserts.
pub fn render_list(checks: &[Check]) -> String {
    let w = checks.iter().map(|c| c.name.len()).max().unwrap_or(5);
    let mut s = String::new();
    for (g, what) in GROUPS {
        let in_group: Vec<&Check> = checks.iter().filter(|c| c.group() == *g).collect();
        if in_group.is_empty() {
            continue;
        }
        s.push_str(&format!("{g}: {what}\n"));
        for c in in_group {
            s.push_str(&format!("  {:<w$}  {}\n", c.name, c.what));
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_grouped_and_enough() {
        let all = registry(true);
        let mut names: Vec<&str> = all.iter().map(|c| c.name).collect();
        names.sort_unstable();
        let n = names.len();
        names.dedup();
        assert_eq!(names.len(), n, "duplicate check names");
        for c in &all {
            assert!(
                GROUPS.iter().any(|(g, _)| *g == c.group()),
                "{} has an unknown group",
                c.name
            );
        }
        assert!(registry(false).len() >= 30, "at least 30 checks");
        assert!(!registry(false).iter().any(|c| c.group() == "selftest"));
    }

    #[test]
    fn a_timeout_says_what_the_check_was_waiting_for() {
        let dev = Device::open_spec(&DeviceSpec::Emulated("emu".into())).unwrap();
        let ctx = Arc::new(Ctx::new(dev, &DeviceSpec::Emulated("emu".into())));
        // The stuck check waits on this until the test lets it go (threads are not killed).
        static HOLD: std::sync::Mutex<Option<std::sync::mpsc::Receiver<()>>> =
            std::sync::Mutex::new(None);
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        *HOLD.lock().unwrap() = Some(rx);
        let c = Check {
            name: "selftest.stuck",
            what: "waits for a second GPU that never comes",
            run: |_| {
                note_step("waiting for a second GPU (the device has 1)");
                let rx = HOLD.lock().ok().and_then(|mut g| g.take());
                if let Some(rx) = rx {
                    let _ = rx.recv_timeout(Duration::from_secs(30));
                }
                pass()
            },
        };
        let o = run_one(&ctx, c, Duration::from_millis(200));
        let _ = tx.send(());
        match o {
            Outcome::Fail(d) => assert!(
                d.starts_with("timeout: no result after 0.2 s; it was waiting for a second GPU"),
                "{d}"
            ),
            other => panic!("{other:?}"),
        }
        // Without a note: the generic message.
        let c = Check {
            name: "selftest.stuck2",
            what: "sleeps",
            run: |_| {
                std::thread::sleep(Duration::from_millis(600));
                pass()
            },
        };
        match run_one(&ctx, c, Duration::from_millis(100)) {
            Outcome::Fail(d) => assert!(d.contains("the device hung"), "{d}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn select_matches_name_or_group_substrings() {
        let s = select(registry(false), Some("sdma.copy,topology"));
        assert!(s.iter().any(|c| c.name == "sdma.copy_linear_bytes"));
        assert!(s
            .iter()
            .all(|c| c.name.starts_with("sdma.copy") || c.group() == "topology"));
        assert!(select(registry(false), Some("no-such-check")).is_empty());
    }
}
