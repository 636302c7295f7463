//! The CP's AQL packet processor.
//!
//! Slot `read_dispatch_id % slots` is processed while `read_dispatch_id` is below the
//! write index and its header type is not INVALID (an INVALID slot is not published yet:
//! the queue waits). After a packet completes the CP completes its `amd_signal_t`
//! completion signal (atomic decrement of `value` (offset 8) and, when
//! `event_mailbox_ptr` (offset 16) is non-zero, a write of `event_id` (offset 24) to the
//! mailbox followed by an interrupt carrying the event id), then writes INVALID into the
//! header (keeping the upper 16 bits) and bumps `read_dispatch_id`, which thus always
//! points at the eldest packet not yet released.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

use pm4::aql::{packet_type, AqlPacket, KernelDispatch};

use super::memio::{Access, AccessError, MemCache, Pinned, PinnedCell};
use super::pm4exec::{self, IbStep, Step, Stop};
use super::queue::{QueueExec, RunOut, RunState};
use super::{Inner, ISA_NOT_SUPPORTED};

/// `amd_signal_t` field offsets (the layout shared with the runtime, [`pm4::hsa`]).
pub(crate) mod signal {
    use pm4::hsa;
    /// `hsa_signal_value_t value`.
    pub(crate) const VALUE: u64 = hsa::SIGNAL_VALUE_OFFSET;
    /// `uint64_t event_mailbox_ptr`.
    pub(crate) const EVENT_MAILBOX_PTR: u64 = hsa::SIGNAL_MAILBOX_OFFSET;
    /// `uint32_t event_id`.
    pub(crate) const EVENT_ID: u64 = hsa::SIGNAL_EVENT_ID_OFFSET;
    /// `uint64_t start_ts`.
    pub(crate) const START_TS: u64 = hsa::SIGNAL_START_TS_OFFSET;
    /// `uint64_t end_ts`.
    pub(crate) const END_TS: u64 = hsa::SIGNAL_END_TS_OFFSET;
}

/// `amd_queue_t` offsets ([`pm4::hsa`]): `write_dispatch_id` is at 56, so the queue
/// starts 56 bytes before [`super::QueueDesc::wptr_va`].
mod amd_queue {
    use pm4::hsa;
    /// Offset of `write_dispatch_id`.
    pub(super) const WRITE_DISPATCH_ID: u64 = hsa::QUEUE_WRITE_DISPATCH_ID_OFFSET;
    /// Offset of `hsa_signal_t queue_inactive_signal`.
    pub(super) const QUEUE_INACTIVE_SIGNAL: u64 = hsa::QUEUE_INACTIVE_SIGNAL_OFFSET;
    /// Offset of `queue_properties`.
    pub(super) const QUEUE_PROPERTIES: u64 = hsa::QUEUE_PROPERTIES_OFFSET;
    /// `AMD_QUEUE_PROPERTIES_ENABLE_PROFILING` (bit 3).
    pub(super) const ENABLE_PROFILING: u32 = hsa::AMD_QUEUE_PROPERTIES_ENABLE_PROFILING;
}

/// The CP's error code for a packet it cannot process: bit 5, "invalid packet format"
/// (ROCR-Runtime amd_aql_queue.cpp `DynamicQueueEventsHandler` maps it to
/// HSA_STATUS_ERROR_INVALID_PACKET_FORMAT).
const QUEUE_ERROR_INVALID_PACKET_FORMAT: u64 = 32;

/// After an AQL queue stopped on a packet (not a memory fault, which KFD reports as a VM
/// fault): store the CP's error code into the queue's `queue_inactive_signal` and raise
/// its event, as the CP firmware does, so that ROCr runs its queue error handler (and
/// the program's error callback) instead of waiting forever. A queue without the signal
/// (0) is left alone.
pub(crate) fn report_queue_error(q: &QueueExec, mem: &mut MemCache, inner: &Inner) {
    if !matches!(q.shared().status(), super::QueueStatus::Faulted(ref f) if f.fault.is_none()) {
        return;
    }
    let amd_queue = q.wptr_va.wrapping_sub(amd_queue::WRITE_DISPATCH_ID);
    let Ok(sig) = mem.load_u64(amd_queue.wrapping_add(amd_queue::QUEUE_INACTIVE_SIGNAL)) else {
        return;
    };
    if sig == 0 {
        return;
    }
    let _ = (|| -> Access<()> {
        mem.atomic_u64(sig.wrapping_add(signal::VALUE))?
            .store(QUEUE_ERROR_INVALID_PACKET_FORMAT, Ordering::Release);
        raise_signal_event(mem, inner, sig)
    })();
}

fn raise_signal_event(mem: &mut MemCache, inner: &Inner, sig: u64) -> Access<()> {
    let mailbox = mem.load_u64(sig.wrapping_add(signal::EVENT_MAILBOX_PTR))?;
    if mailbox != 0 {
        let id = mem.load_u32(sig.wrapping_add(signal::EVENT_ID))?;
        if mailbox % 8 == 0 {
            mem.store_u64(mailbox, id as u64)?;
        } else {
            mem.store_u32(mailbox, id)?;
        }
        inner.interrupt(mem, Some(id));
    }
    Ok(())
}

/// The objects an AQL queue touches on every packet, each through its own pinned window
/// (see [`Pinned`]): one translation check per access instead of a cache look-up.
#[derive(Default)]
pub(crate) struct AqlPins {
    /// The ring.
    pub(crate) ring: Pinned,
    /// `write_dispatch_id` (read).
    wptr: PinnedCell<8, false>,
    /// `read_dispatch_id` (written).
    rptr: PinnedCell<8, true>,
    /// `queue_properties` (read).
    props: PinnedCell<4, false>,
    /// Completion signals.
    sig: Pinned,
    /// Signals barriers wait on.
    dep: Pinned,
    /// Event mailboxes.
    mbox: Pinned,
}

impl AqlPins {
    /// Lets go of every pinned window (the memory map changed: `sched::engine_main`).
    pub(crate) fn clear(&mut self) {
        for p in [&mut self.ring, &mut self.sig, &mut self.dep, &mut self.mbox] {
            p.clear();
        }
        self.wptr.clear();
        self.rptr.clear();
        self.props.clear();
    }
}

/// Decrements a completion signal and raises its event, as the CP does at end of pipe.
#[inline(always)]
fn complete_signal(pins: &mut AqlPins, mem: &mut MemCache, inner: &Inner, sig: u64) -> Access<()> {
    // `value`, `event_mailbox_ptr` and `event_id` through one translation when one
    // window holds all three (else field by field below, faulting exactly as always).
    const MAILBOX: usize = (signal::EVENT_MAILBOX_PTR - signal::VALUE) as usize;
    const ID: usize = (signal::EVENT_ID - signal::VALUE) as usize;
    let value_va = sig.wrapping_add(signal::VALUE);
    if let Some(p) = pins.sig.ptr(mem, value_va, ID as u64 + 4, true, 8) {
        // SAFETY: `[value_va, value_va + ID + 4)` lies in a live writable window and
        // `value_va` is 8-aligned (so are `+ MAILBOX`, and `+ ID` is 4-aligned); the
        // pointer is used before any other access can evict the window. Shared memory
        // is accessed atomically.
        let (mailbox, id) = unsafe {
            AtomicU64::from_ptr(p.cast()).fetch_sub(1, Ordering::AcqRel);
            let mailbox = AtomicU64::from_ptr(p.add(MAILBOX).cast()).load(Ordering::Acquire);
            let id = (mailbox != 0)
                .then(|| AtomicU32::from_ptr(p.add(ID).cast()).load(Ordering::Acquire));
            (mailbox, id)
        };
        if let Some(id) = id {
            if mailbox % 8 == 0 {
                pins.mbox.store_u64(mem, mailbox, id as u64)?;
            } else {
                pins.mbox.store_u32(mem, mailbox, id)?;
            }
            inner.interrupt(mem, Some(id));
        }
        return Ok(());
    }
    complete_signal_unpinned(mem, inner, sig)
}

/// [`complete_signal`] field by field, when no window holds the signal's fields (kept
/// out of line: the pinned path is the common one).
#[cold]
#[inline(never)]
fn complete_signal_unpinned(mem: &mut MemCache, inner: &Inner, sig: u64) -> Access<()> {
    mem.atomic_u64(sig.wrapping_add(signal::VALUE))?
        .fetch_sub(1, Ordering::AcqRel);
    raise_signal_event(mem, inner, sig)
}

/// Profiling: the CP stamps the packet's start and end into its signal before the
/// decrement.
#[cold]
#[inline(never)]
fn stamp_signal(mem: &mut MemCache, inner: &Inner, sig: u64, start: u64) -> Access<()> {
    mem.store_u64(sig.wrapping_add(signal::START_TS), start)?;
    mem.store_u64(sig.wrapping_add(signal::END_TS), inner.clock.now())
}

/// The value of a signal a barrier waits on.
#[inline(always)]
fn signal_value(pins: &mut AqlPins, mem: &mut MemCache, sig: u64) -> Access<i64> {
    Ok(pins.dep.load_u64(mem, sig.wrapping_add(signal::VALUE))? as i64)
}

/// Consumes the packet in `slot_va` (whose first dword, as fetched, is `hdr`) and
/// completes its signal.
#[inline(always)]
fn finish(
    q: &mut QueueExec,
    mem: &mut MemCache,
    inner: &Inner,
    slot_va: u64,
    hdr: u32,
    sig: u64,
) -> Access<()> {
    // The packet retires fully before the read index moves: its completion signal (and
    // mailbox/interrupt) first, so anyone who sees `read_dispatch_id` past a packet also
    // sees it complete; then the slot goes back to INVALID and the read index advances.
    let start = q.aql_start_ts.take();
    if sig != 0 {
        if let Some(start) = start {
            stamp_signal(mem, inner, sig, start)?;
        }
        complete_signal(&mut q.pins, mem, inner, sig)?;
    }
    q.pins.ring.store_u32(
        mem,
        slot_va,
        (hdr & 0xFFFF_0000) | packet_type::INVALID as u32,
    )?;
    q.rptr = q.rptr.wrapping_add(1);
    q.pins.rptr.store_u64(mem, q.rptr_va, q.rptr)?;
    Ok(())
}

/// Checks a dispatch as the CP would before launching waves: the validation error, if any.
fn dispatch_check(mem: &mut MemCache, k: &KernelDispatch) -> Option<Stop> {
    let dims = k.dimensions as usize;
    for i in 0..3 {
        let wg = k.workgroup_size.get(i).copied().unwrap_or(1);
        let grid = k.grid_size.get(i).copied().unwrap_or(1);
        if i < dims && (wg == 0 || grid == 0) {
            return Some(Stop::new(format!(
                "invalid kernel dispatch: dimension {i} has a zero work-group or grid size"
            )));
        }
        if i >= dims && (wg != 1 || grid != 1) {
            return Some(Stop::new(format!(
                "invalid kernel dispatch: unused dimension {i} must have work-group and grid size 1"
            )));
        }
    }
    let wg_items: u64 = k.workgroup_size.iter().map(|&x| x as u64).product();
    if wg_items > 1024 {
        return Some(Stop::new(format!(
            "invalid kernel dispatch: work-group of {wg_items} work-items exceeds 1024"
        )));
    }
    if k.kernel_object == 0 || k.kernel_object % 64 != 0 {
        return Some(Stop::new(format!(
            "invalid kernel dispatch: kernel object {:#x} is not a 64-byte aligned kernel descriptor",
            k.kernel_object
        )));
    }
    if let Err(e) = mem.probe(k.kernel_object, 64, false) {
        let mut s = Stop::from(e);
        s.reason = format!("kernel descriptor not mapped: {}", s.reason);
        return Some(s);
    }
    if k.kernarg_address != 0 {
        if let Err(e) = mem.probe(k.kernarg_address, 1, false) {
            let mut s = Stop::from(e);
            s.reason = format!("kernel arguments not mapped: {}", s.reason);
            return Some(s);
        }
    }
    None
}

/// The dispatch hook (out of line and cold: its registers and string formatting stay out of
/// [`run`]'s loop, which the barrier and PM4-IB packets share): hands the kernel to the shader core (`crate::shader`) on a
/// dispatch thread and reports `Ok(false)` while it runs (the queue stays on the packet),
/// `Ok(true)` once it finished (traced), or the fault that stopped it.
#[cold]
#[inline(never)]
fn dispatch(
    q: &mut QueueExec,
    mem: &mut MemCache,
    inner: &Inner,
    k: &KernelDispatch,
    slot_va: u64,
) -> Result<bool, Stop> {
    let Some(fl) = q.dispatch.clone() else {
        if let Some(s) = dispatch_check(mem, k) {
            return Err(s);
        }
        let queue_va = q.wptr_va.wrapping_sub(amd_queue::WRITE_DISPATCH_ID);
        let (kk, id) = (*k, q.rptr);
        let fl = inner
            .dispatches
            .start(mem.inner_arc(), q.shared().id, move |inner, on_cp| {
                crate::shader::prepare(inner, &kk, slot_va, queue_va, id, on_cp)
            });
        q.dispatch = Some(fl);
        // A dispatch the CP ran itself has finished already.
        return dispatch(q, mem, inner, k, slot_va);
    };
    let Some(r) = fl.take() else {
        return Ok(false);
    };
    q.dispatch = None;
    if mem.tr.on {
        let entry = mem
            .load_u64(k.kernel_object.wrapping_add(16))
            .map(|off| k.kernel_object.wrapping_add(off))
            .unwrap_or(0);
        super::pm4exec::trace_dispatch(mem, inner, &fl, "KERNEL_DISPATCH", entry, &r);
    }
    match r {
        Ok(st) => {
            if mem.tr.on {
                let kind = crate::trace::TraceKind::Packet {
                    offset: slot_va.wrapping_sub(q.ring_va),
                    ib_depth: 0,
                    ib_va: 0,
                    name: "DISPATCH",
                    disasm: format!(
                        "DISPATCH kernel_object={:#x} workgroups={} waves={} instructions={} lane_instructions={}",
                        k.kernel_object, st.workgroups, st.waves, st.instructions, st.lane_instructions
                    ),
                    words: pm4::aql::AqlPacket::KernelDispatch(*k).encode().into(),
                };
                mem.tr.push(fl.started, inner.stamp(), kind);
            }
            Ok(true)
        }
        Err(e) => {
            if e.reason.starts_with(ISA_NOT_SUPPORTED) {
                return Err(Stop::new(format!(
                    "{} (kernel dispatch of kernel object {:#x}, grid {:?}, work-group {:?})",
                    e.reason, k.kernel_object, k.grid_size, k.workgroup_size
                )));
            }
            Err(Stop {
                fault: e.fault,
                reason: format!("shader fault: {}", e.reason),
            })
        }
    }
}

/// A barrier packet that blocked: its read index, its slot's dwords as fetched (the
/// header first) and its decoding, which its re-polls use (see [`run`]).
#[derive(Clone, Copy)]
pub(crate) struct BlockedBarrier {
    at: u64,
    words: [u32; 16],
    pkt: AqlPacket,
}

/// Polls a barrier packet's condition: `Some(completion signal)` once it holds, `None`
/// while it does not (or for a packet that is not a barrier).
#[inline(always)]
fn poll_barrier(pins: &mut AqlPins, mem: &mut MemCache, pkt: &AqlPacket) -> Access<Option<u64>> {
    match pkt {
        AqlPacket::BarrierAnd(b) => {
            for &dep in b.dep_signals.iter().filter(|&&d| d != 0) {
                if signal_value(pins, mem, dep)? != 0 {
                    return Ok(None);
                }
            }
            Ok(Some(b.completion_signal))
        }
        AqlPacket::BarrierOr(b) => {
            let mut any = false;
            for &dep in b.dep_signals.iter().filter(|&&d| d != 0) {
                any = true;
                if signal_value(pins, mem, dep)? == 0 {
                    return Ok(Some(b.completion_signal));
                }
            }
            Ok((!any).then_some(b.completion_signal))
        }
        AqlPacket::BarrierValue(b) => {
            let v = signal_value(pins, mem, b.signal)?;
            Ok(b.cond
                .test(v, b.mask, b.value)
                .then_some(b.completion_signal))
        }
        _ => Ok(None),
    }
}

/// Whether `amd_queue_t.queue_properties` asks for profiling (timestamps in completion
/// signals); an unreadable field reads as off. (Inlined: out of line it costs ~30 host
/// instructions more per call, measured.)
fn profiling_on(q: &mut QueueExec, mem: &mut MemCache) -> bool {
    let props_va = q
        .wptr_va
        .wrapping_sub(amd_queue::WRITE_DISPATCH_ID)
        .wrapping_add(amd_queue::QUEUE_PROPERTIES);
    q.pins
        .props
        .load_u32(mem, props_va)
        .is_ok_and(|p| p & amd_queue::ENABLE_PROFILING != 0)
}

// The cold parts of [`run`], kept out of line so that the hot packets (barriers, PM4-IB,
// completion) do not pay for their registers and spills in the loop.

/// Stops the queue on a memory access error at the slot at `off`.
#[cold]
#[inline(never)]
fn access_stop(q: &QueueExec, inner: &Inner, off: u64, executed: u32, e: AccessError) -> RunOut {
    RunOut {
        executed,
        ..q.fault(inner, off, e.into())
    }
}

/// Reads the slot at `slot_va` access by access, when no pinned window holds it: its
/// header and dwords, or `None` while it is INVALID (reserved but not yet published).
#[cold]
#[inline(never)]
fn read_slot_unpinned(mem: &mut MemCache, slot_va: u64) -> Access<Option<(u32, [u32; 16])>> {
    let hdr = mem.load_u32(slot_va)?;
    if hdr as u8 == packet_type::INVALID {
        return Ok(None);
    }
    let mut w = [0u32; 16];
    mem.read_dwords(slot_va, &mut w)?;
    Ok(Some((hdr, w)))
}

/// The stop for a slot [`AqlPacket::decode`] rejects.
#[cold]
#[inline(never)]
fn malformed(hdr: u32, e: pm4::DecodeError) -> Stop {
    Stop::new(format!(
        "malformed AQL packet (header {:#06x}): {e}",
        hdr & 0xFFFF
    ))
}

/// The stop for a packet type the CP does not process.
#[cold]
#[inline(never)]
fn unsupported(words: &[u32; 16]) -> Stop {
    let ty = words[0] as u8;
    let reason = if ty == packet_type::VENDOR_SPECIFIC {
        format!(
            "unsupported AMD vendor AQL packet format {}",
            (words[0] >> 16) as u8
        )
    } else {
        format!(
            "unsupported AQL packet type {ty} ({})",
            packet_type::name(ty)
        )
    };
    Stop::new(reason)
}

/// Tracing: a PM4-IB packet started; keeps its line until it completes.
#[cold]
#[inline(never)]
fn trace_ib_start(q: &mut QueueExec, inner: &Inner, slot: u64, pkt: &AqlPacket, w: &[u32; 16]) {
    let line = pm4::disasm::aql_line(slot as usize, pkt);
    let start = q.tr_start.take().unwrap_or_else(|| inner.stamp());
    q.tr_ib = Some((start, line.name, line.to_string(), Box::new(*w)));
}

/// Tracing: the PM4-IB packet at `off` completed.
#[cold]
#[inline(never)]
fn trace_ib_done(q: &mut QueueExec, mem: &mut MemCache, inner: &Inner, off: u64) {
    if let Some((start, name, disasm, words)) = q.tr_ib.take() {
        let end = inner.stamp();
        let kind = crate::trace::TraceKind::Packet {
            offset: off,
            ib_depth: 0,
            ib_va: 0,
            name,
            disasm,
            words,
        };
        mem.tr.push(start, end, kind);
    }
}

/// Tracing: the AQL packet at `off` (slot `slot`) completed.
#[cold]
#[inline(never)]
fn trace_aql(
    q: &mut QueueExec,
    mem: &mut MemCache,
    inner: &Inner,
    (slot, off): (u64, u64),
    pkt: &AqlPacket,
    w: &[u32; 16],
) {
    let line = pm4::disasm::aql_line(slot as usize, pkt);
    super::queue::trace_packet(mem, inner, q.tr_start.take(), off, (0, 0), line, w);
}

/// Tracing: the blocked barrier at `off` (slot `slot`) completed from its decoding.
#[cold]
#[inline(never)]
fn trace_blocked(q: &mut QueueExec, mem: &mut MemCache, inner: &Inner, at: (u64, u64)) {
    if let Some(b) = q.aql_blocked {
        trace_aql(q, mem, inner, at, &b.pkt, &b.words);
    }
}

/// Executes up to `budget` AQL packets (and the PM4 of PM4-IB packets). (Inlined into
/// its one caller, `QueueExec::run`: a call of its own costs more than it saves.)
#[inline(always)]
pub(crate) fn run(q: &mut QueueExec, mem: &mut MemCache, inner: &Inner, budget: u32) -> RunOut {
    let slots = q.ring_size / 64;
    if slots == 0 {
        return q.fault(inner, 0, Stop::new("AQL ring smaller than one packet"));
    }
    let mut executed = 0u32;
    // The write index, re-read only when the read index catches up with it.
    let mut limit = 0u64;
    // amd_queue_t.queue_properties: timestamps go into completion signals when profiling.
    // Read once per call, at the first packet fetched (a call that finds nothing to fetch
    // does not need it).
    let mut profiling: Option<bool> = None;
    // The first step of an indirect buffer, taken by the push (`push_ib_and_step`).
    let mut first_ib: Option<IbStep> = None;
    macro_rules! stop {
        ($off:expr, $s:expr) => {
            return RunOut {
                executed,
                ..q.fault(inner, $off, $s)
            }
        };
    }
    // A memory access error: converted to its stop out of line.
    macro_rules! fault {
        ($off:expr, $e:expr) => {
            return access_stop(q, inner, $off, executed, $e)
        };
    }
    loop {
        if executed >= budget {
            return RunOut {
                executed,
                state: RunState::Budget,
            };
        }
        // `slots` is a power of two (`QueueExec::run` checked the ring size).
        let slot = q.rptr & (slots - 1);
        let off = slot * 64;
        let slot_va = q.ring_va.wrapping_add(off);
        if let Some((sig, hdr)) = q.aql_inflight {
            // The indirect buffer's packets, each followed by the budget check the loop's
            // top would make (without recomputing the slot between them).
            while first_ib.is_some() || q.pm4.depth > 0 {
                let r = match first_ib.take() {
                    Some(r) => r,
                    None => pm4exec::step_ib(mem, inner, &mut q.pm4, &mut q.scratch),
                };
                match r {
                    IbStep::Empty | IbStep::Popped => {}
                    IbStep::Packet(Step::Done) => executed += 1,
                    IbStep::Packet(Step::Blocked) => {
                        return RunOut {
                            executed,
                            state: RunState::Blocked,
                        }
                    }
                    IbStep::Packet(Step::Stop(s)) => stop!(off, *s),
                }
                if executed >= budget {
                    return RunOut {
                        executed,
                        state: RunState::Budget,
                    };
                }
            }
            q.aql_inflight = None;
            if let Err(e) = finish(q, mem, inner, slot_va, hdr, sig) {
                fault!(off, e);
            }
            if q.tr_ib.is_some() {
                if mem.tr.on {
                    trace_ib_done(q, mem, inner, off);
                } else {
                    q.tr_ib = None;
                }
            }
            executed += 1;
            continue;
        }
        if q.rptr >= limit {
            let wmem = match q.pins.wptr.load_u64(mem, q.wptr_va) {
                Ok(v) => v,
                Err(e) => fault!(off, e),
            };
            limit = match q.doorbell_value(mem) {
                Some(d) => wmem.max(d.saturating_add(1)),
                None => wmem,
            };
        }
        if q.rptr >= limit {
            return RunOut {
                executed,
                state: RunState::Idle,
            };
        }
        // The header (acquire), then the body once the slot is published: through one
        // check of the ring's window when it holds the whole slot, else access by access
        // (faulting exactly as always).
        let mut w = [0u32; 16];
        let (hdr, slot_ptr) = match q.pins.ring.ptr(mem, slot_va, 64, false, 4) {
            Some(p) => {
                // SAFETY: `[slot_va, slot_va + 64)` lies in the pinned window and
                // `slot_va` is 4-aligned; shared memory is read atomically.
                let hdr = unsafe { AtomicU32::from_ptr(p.cast()) }.load(Ordering::Acquire);
                if hdr as u8 == packet_type::INVALID {
                    // Reserved but not yet published.
                    return RunOut {
                        executed,
                        state: RunState::Blocked,
                    };
                }
                (hdr, Some(p))
            }
            None => match read_slot_unpinned(mem, slot_va) {
                Ok(Some((hdr, s))) => {
                    w = s;
                    (hdr, None)
                }
                Ok(None) => {
                    return RunOut {
                        executed,
                        state: RunState::Blocked,
                    }
                }
                Err(e) => fault!(off, e),
            },
        };
        if q.aql_start_ts.is_none() && *profiling.get_or_insert_with(|| profiling_on(q, mem)) {
            q.aql_start_ts = Some(inner.clock.now());
        }
        if mem.tr.on && q.tr_start.is_none() {
            q.tr_start = Some(inner.stamp());
        }
        // A barrier polled again while it blocks is polled from its decoding at its first
        // fetch (as a packet processor works from the packet it fetched): the slot is the
        // packet processor's until the read index passes it, so only its header is
        // re-read (through the same window check, faulting as a fetch would), and a
        // changed header is fetched and decoded afresh. (An entry left by a barrier that
        // completed never matches again: the read index only grows.)
        if let Some(b) = &q.aql_blocked {
            if b.at == q.rptr && b.words[0] == hdr {
                let sig = match poll_barrier(&mut q.pins, mem, &b.pkt) {
                    Ok(Some(sig)) => sig,
                    Ok(None) => {
                        return RunOut {
                            executed,
                            state: RunState::Blocked,
                        }
                    }
                    Err(e) => fault!(off, e),
                };
                if let Err(e) = finish(q, mem, inner, slot_va, hdr, sig) {
                    fault!(off, e);
                }
                if mem.tr.on {
                    trace_blocked(q, mem, inner, (slot, off));
                }
                executed += 1;
                continue;
            }
        }
        if let Some(p) = slot_ptr {
            // SAFETY: as above (`[u32; 16]` is 4-aligned, 64 bytes): copied out by value.
            w = unsafe { p.cast::<[u32; 16]>().read() };
        }
        w[0] = hdr;
        // Decoded in place and matched by reference (moving the ~70-byte packet out of
        // the Result costs a copy per packet).
        let decoded = AqlPacket::decode(&w);
        let pkt = match &decoded {
            Ok(p) => p,
            Err(e) => stop!(off, malformed(hdr, *e)),
        };
        let sig = match pkt {
            AqlPacket::BarrierAnd(_) | AqlPacket::BarrierOr(_) | AqlPacket::BarrierValue(_) => {
                match poll_barrier(&mut q.pins, mem, pkt) {
                    Ok(Some(sig)) => sig,
                    Ok(None) => {
                        q.aql_blocked = Some(BlockedBarrier {
                            at: q.rptr,
                            words: w,
                            pkt: *pkt,
                        });
                        return RunOut {
                            executed,
                            state: RunState::Blocked,
                        };
                    }
                    Err(e) => fault!(off, e),
                }
            }
            AqlPacket::VendorPm4Ib(p) => {
                // The push and the buffer's first step in one read of it; the budget
                // check between them (the loop's top) passes: nothing ran since.
                let (push, first) =
                    pm4exec::push_ib_and_step(mem, inner, &mut q.pm4, &p.ib, &mut q.scratch);
                match push {
                    Step::Done => {}
                    Step::Blocked => {
                        return RunOut {
                            executed,
                            state: RunState::Blocked,
                        }
                    }
                    Step::Stop(s) => stop!(off, *s),
                }
                // A buffer whose first step ran it all (its one packet done, nothing left
                // pushed), untraced, with budget left after that packet: the packet
                // completes here, as the loop's next pass would complete it (that pass's
                // budget check passes and its buffer walk has nothing more to run).
                if q.pm4.depth == 0
                    && !mem.tr.on
                    && matches!(first, Some(IbStep::Packet(Step::Done)))
                    && executed + 1 < budget
                {
                    executed += 1;
                    p.completion_signal
                } else {
                    first_ib = first;
                    q.aql_inflight = Some((p.completion_signal, hdr));
                    if mem.tr.on {
                        trace_ib_start(q, inner, slot, pkt, &w);
                    }
                    continue;
                }
            }
            AqlPacket::KernelDispatch(k) => match dispatch(q, mem, inner, k, slot_va) {
                Ok(true) => k.completion_signal,
                // Running on the shader core: the queue stays on the packet; other queues
                // go on.
                Ok(false) => {
                    return RunOut {
                        executed,
                        state: RunState::Blocked,
                    }
                }
                Err(s) => stop!(off, s),
            },
            AqlPacket::Invalid => {
                return RunOut {
                    executed,
                    state: RunState::Blocked,
                }
            }
            AqlPacket::Unknown { words } => stop!(off, unsupported(words)),
        };
        if let Err(e) = finish(q, mem, inner, slot_va, hdr, sig) {
            fault!(off, e);
        }
        if mem.tr.on {
            trace_aql(q, mem, inner, (slot, off), pkt, &w);
        }
        executed += 1;
    }
}
