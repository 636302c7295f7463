//! The engine-private execution state of one queue and its ring walkers (PM4 and SDMA
//! rings here; AQL in `aql.rs`).

use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use pm4::pkt3;

use super::memio::MemCache;
use super::pm4exec::{self, IbStep, Pm4State, Step, Stop};
use super::sched::QueueShared;
use super::{Inner, QueueKind};
use crate::gpumem::MemWindow;

/// How a [`QueueExec::run`] call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RunState {
    /// Nothing to do until the write pointer moves.
    Idle,
    /// A packet waits for memory to change.
    Blocked,
    /// The quantum is used up; more work may be pending.
    Budget,
    /// The queue stopped on a fault.
    Faulted,
}

/// Result of a [`QueueExec::run`] call.
#[derive(Debug, Clone, Copy)]
pub(crate) struct RunOut {
    pub(crate) executed: u32,
    pub(crate) state: RunState,
}

/// Per-queue state owned by the engine thread.
pub(crate) struct QueueExec {
    shared: Arc<QueueShared>,
    pub(crate) kind: QueueKind,
    cfg_gen: u64,
    pub(crate) ring_va: u64,
    pub(crate) ring_size: u64,
    pub(crate) rptr_va: u64,
    pub(crate) wptr_va: u64,
    /// The queue's doorbell slot (owns the memory `doorbell_cell` points into).
    _doorbell: MemWindow,
    /// The doorbell's 64-bit cell in `doorbell` (which keeps it alive), found once: the
    /// window never changes for a queue. `None` when the window does not hold an aligned
    /// qword (then the doorbell reads as not rung, as `MemWindow::load_u64` failing did).
    doorbell_cell: Option<NonNull<AtomicU64>>,
    /// Engine read pointer: packets (AQL), dwords (PM4) or bytes (SDMA), never wrapped.
    pub(crate) rptr: u64,
    pub(crate) pm4: Pm4State,
    pub(crate) scratch: Vec<u32>,
    /// AQL: the completion signal and the header (as fetched) of the PM4-IB vendor
    /// packet whose buffer is running.
    pub(crate) aql_inflight: Option<(u64, u32)>,
    /// AQL: the kernel dispatch of the current packet, while it runs on the shader core.
    pub(crate) dispatch: Option<Arc<super::dispatch::Inflight>>,
    /// AQL: GPU clock when the current packet was first fetched (for `start_ts`).
    pub(crate) aql_start_ts: Option<u64>,
    /// AQL: the barrier that blocked (its read index, slot dwords and decoding): its
    /// re-polls use the decoding while the slot's header is unchanged.
    pub(crate) aql_blocked: Option<super::aql::BlockedBarrier>,
    /// AQL: the windows of the ring, indexes and signals (re-checked on every access).
    pub(crate) pins: super::aql::AqlPins,
    /// SDMA: the current IB (va, size in dwords, offset in dwords).
    pub(crate) sdma_ib: Option<(u64, u32, u32)>,
    /// SDMA: local timestamp = GPU clock + this (TIMESTAMP SET).
    pub(crate) sdma_ts_offset: u64,
    /// PM4: ring pointer of the packet that launched the running indirect buffer.
    ib_origin: u64,
    /// Tracing: when the current ring packet was first fetched (host ns, GPU ticks).
    pub(crate) tr_start: Option<(u64, u64)>,
    /// Tracing, AQL: the PM4-IB packet whose indirect buffer is running.
    pub(crate) tr_ib: Option<TracedIb>,
}

/// Tracing, AQL: a PM4-IB packet whose indirect buffer runs: (start, name, disasm line,
/// the slot's dwords).
pub(crate) type TracedIb = ((u64, u64), &'static str, String, Box<[u32]>);

/// Records a finished packet (tracing is on): from `start` (or now) to now.
/// The 64-bit cell of a queue's doorbell window: None when the window does not start
/// 8-aligned or holds fewer than 8 bytes (then the engine cannot read the value).
pub(crate) fn doorbell_cell(w: &MemWindow) -> Option<NonNull<AtomicU64>> {
    (w.va() % 8 == 0)
        .then(|| w.host_ptr(w.va(), 8, false).ok())
        .flatten()
        .and_then(|p| NonNull::new(p.cast::<AtomicU64>()))
}

pub(crate) fn trace_packet(
    mem: &mut MemCache,
    inner: &Inner,
    start: Option<(u64, u64)>,
    offset: u64,
    ib: (u8, u64),
    line: pm4::disasm::DisasmLine,
    words: &[u32],
) {
    let end = inner.stamp();
    let name = line.name;
    mem.tr.push(
        start.unwrap_or(end),
        end,
        crate::trace::TraceKind::Packet {
            offset,
            ib_depth: ib.0,
            ib_va: ib.1,
            name,
            disasm: line.to_string(),
            words: words.into(),
        },
    );
}

impl QueueExec {
    /// Lets go of every window this queue keeps (the AQL pins, the PM4-IB buffer and
    /// WRITE_DATA destination windows): the memory map changed (`sched::engine_main`), so
    /// unmapped memory is released now, not at the queue's next access of that kind.
    pub(crate) fn release_windows(&mut self) {
        self.pins.clear();
        self.pm4.release_windows();
    }

    pub(crate) fn new(
        shared: Arc<QueueShared>,
        mem: &mut MemCache,
        _inner: &Inner,
        _sdma: bool,
    ) -> Self {
        let d = shared.desc();
        let cfg_gen = shared.cfg_gen.load(Ordering::Acquire);
        // The engine starts where the read pointer in memory says (0 for a fresh queue).
        let rptr = mem.load_u64(d.rptr_va).unwrap_or(0);
        QueueExec {
            kind: d.kind,
            cfg_gen,
            ring_va: d.ring_va,
            ring_size: d.ring_size as u64,
            rptr_va: d.rptr_va,
            wptr_va: d.wptr_va,
            doorbell_cell: doorbell_cell(&d.doorbell),
            _doorbell: d.doorbell,
            rptr,
            pm4: Pm4State::for_queue(_inner, d.eop_va, d.queue_id),
            scratch: vec![0; 256],
            aql_inflight: None,
            dispatch: None,
            aql_start_ts: None,
            aql_blocked: None,
            pins: Default::default(),
            sdma_ib: None,
            sdma_ts_offset: 0,
            ib_origin: 0,
            tr_start: None,
            tr_ib: None,
            shared,
        }
    }

    pub(crate) fn shared(&self) -> &Arc<QueueShared> {
        &self.shared
    }

    /// AQL: whether the queue's current packet is one it fetched and is still running (a
    /// PM4-IB's indirect buffer, a dispatch on the shader core): a run that blocks then
    /// blocks inside that packet, with every later packet behind it.
    pub(crate) fn waits_in_packet(&self) -> bool {
        self.kind == QueueKind::Aql && (self.aql_inflight.is_some() || self.dispatch.is_some())
    }

    /// Whether the queue waits for a dispatch running on the shader core (AQL
    /// KERNEL_DISPATCH or PM4 DISPATCH_DIRECT): its end kicks the CP.
    pub(crate) fn dispatching(&self) -> bool {
        self.dispatch.is_some() || self.pm4.inflight.is_some()
    }

    /// The doorbell's value as stored, rung or not (0 without a cell): the engine's
    /// doorbell watch sums these (`sched::doorbell_state`).
    #[inline]
    pub(crate) fn doorbell_raw(&self) -> u64 {
        // SAFETY: as in `doorbell_value`: an aligned qword of `_doorbell`'s live memory.
        self.doorbell_cell
            .map_or(0, |p| unsafe { p.as_ref() }.load(Ordering::Relaxed))
    }

    /// The doorbell's 64-bit value, once a doorbell was rung.
    pub(crate) fn doorbell_value(&self, mem: &MemCache) -> Option<u64> {
        let rung = match mem.inner().doorbells.get(self.shared.id as usize) {
            Some(slot) => slot.rung.load(Ordering::Acquire),
            None => self.shared.doorbell_rung.load(Ordering::Acquire),
        };
        if !rung {
            return None;
        }
        // SAFETY: an aligned qword inside `self._doorbell`'s live memory; shared memory is
        // accessed atomically.
        self.doorbell_cell
            .map(|p| unsafe { p.as_ref() }.load(Ordering::Acquire))
    }

    /// PM4 / SDMA write pointer: max(doorbell value, value at `wptr_va`).
    pub(crate) fn ring_wptr(&self, mem: &mut MemCache) -> Option<u64> {
        let from_mem = if self.wptr_va != 0 {
            mem.load_u64(self.wptr_va).ok()
        } else {
            None
        };
        match (self.doorbell_value(mem), from_mem) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        }
    }

    fn reload_config(&mut self) {
        let g = self.shared.cfg_gen.load(Ordering::Acquire);
        if g != self.cfg_gen {
            let d = self.shared.desc();
            self.ring_va = d.ring_va;
            self.ring_size = d.ring_size as u64;
            self.cfg_gen = g;
            self.pins.ring.clear();
            // A decoding belongs to its ring.
            self.aql_blocked = None;
        }
    }

    /// Stops the queue on `stop` at ring byte `offset`. Out of line and cold: the packet
    /// loops call it from a dozen fault sites, and inlined copies only crowd their hot
    /// paths.
    #[cold]
    #[inline(never)]
    pub(crate) fn fault(&self, inner: &Inner, offset: u64, stop: Stop) -> RunOut {
        self.shared
            .set_fault(inner, offset, stop.fault, stop.reason);
        RunOut {
            executed: 0,
            state: RunState::Faulted,
        }
    }

    /// Executes up to `budget` packets.
    pub(crate) fn run(&mut self, mem: &mut MemCache, inner: &Inner, budget: u32) -> RunOut {
        self.reload_config();
        if self.ring_va == 0 || self.ring_size == 0 {
            return RunOut {
                executed: 0,
                state: RunState::Idle,
            };
        }
        if self.ring_size < 64 {
            let s = Stop::new(format!("ring size {:#x} is too small", self.ring_size));
            return self.fault(inner, 0, s);
        }
        if !self.ring_size.is_power_of_two() {
            return self.fault(
                inner,
                0,
                Stop::new(format!(
                    "ring size {:#x} is not a power of two",
                    self.ring_size
                )),
            );
        }
        match self.kind {
            QueueKind::Aql => {
                let out = super::aql::run(self, mem, inner, budget);
                if matches!(out.state, RunState::Faulted) {
                    super::aql::report_queue_error(self, mem, inner);
                }
                out
            }
            QueueKind::Pm4 => self.run_pm4(mem, inner, budget),
            QueueKind::Sdma { .. } => super::sdma::run(self, mem, inner, budget),
        }
    }

    /// Reads `n` dwords of the ring from dword position `pos`, wrapping at the end.
    pub(crate) fn read_ring(&mut self, mem: &mut MemCache, pos: u64, n: usize) -> Result<(), Stop> {
        if self.scratch.len() < n {
            self.scratch.resize(n, 0);
        }
        let ring_dw = self.ring_size / 4;
        let first = (n as u64).min(ring_dw - pos) as usize;
        let (a, b) = self.scratch.split_at_mut(first);
        mem.read_dwords(self.ring_va.wrapping_add(pos * 4), a)?;
        let rest = n - first;
        if rest > 0 {
            let Some(b) = b.get_mut(..rest) else {
                return Err(Stop::new("internal: scratch"));
            };
            mem.read_dwords(self.ring_va, b)?;
        }
        Ok(())
    }

    fn run_pm4(&mut self, mem: &mut MemCache, inner: &Inner, budget: u32) -> RunOut {
        let ring_dw = self.ring_size / 4;
        let mut executed = 0u32;
        let mut wptr = self.rptr;
        let mut reread = false;
        loop {
            if executed >= budget {
                return RunOut {
                    executed,
                    state: RunState::Budget,
                };
            }
            if self.pm4.depth > 0 {
                match pm4exec::step_ib(mem, inner, &mut self.pm4, &mut self.scratch) {
                    IbStep::Empty | IbStep::Popped => {}
                    IbStep::Packet(Step::Done) => executed += 1,
                    IbStep::Packet(Step::Blocked) => {
                        return RunOut {
                            executed,
                            state: RunState::Blocked,
                        }
                    }
                    IbStep::Packet(Step::Stop(s)) => {
                        // Report the ring offset of the INDIRECT_BUFFER packet.
                        let off = (self.ib_origin() % ring_dw) * 4;
                        return RunOut {
                            executed,
                            ..self.fault(inner, off, *s)
                        };
                    }
                }
                continue;
            }
            let stale = wptr == self.rptr || wptr.wrapping_sub(self.rptr) > (1 << 62);
            let fresh = stale || reread;
            if fresh {
                // Re-read the write pointer only when the cached one is consumed.
                reread = false;
                wptr = match self.ring_wptr(mem) {
                    Some(w) => w,
                    None => {
                        let s = Stop::new("write pointer not readable");
                        let off = (self.rptr % ring_dw) * 4;
                        return RunOut {
                            executed,
                            ..self.fault(inner, off, s)
                        };
                    }
                };
            }
            let pending = wptr.wrapping_sub(self.rptr);
            if pending == 0 || pending > (1 << 62) {
                return RunOut {
                    executed,
                    state: RunState::Idle,
                };
            }
            let pos = self.rptr % ring_dw;
            let off = pos * 4;
            if pending > ring_dw {
                let s = Stop::new(format!(
                    "write pointer {wptr:#x} is more than a ring ({ring_dw:#x} dwords) ahead of the read pointer {:#x}",
                    self.rptr
                ));
                return RunOut {
                    executed,
                    ..self.fault(inner, off, s)
                };
            }
            let h = match mem.load_u32(self.ring_va.wrapping_add(off)) {
                Ok(h) => h,
                Err(e) => {
                    return RunOut {
                        executed,
                        ..self.fault(inner, off, e.into())
                    }
                }
            };
            let (opcode, n) = match pkt3::decode_header(h) {
                Ok(x) => x,
                Err(e) => {
                    return RunOut {
                        executed,
                        ..self.fault(inner, off, Stop::new(format!("malformed PM4 packet: {e}")))
                    }
                }
            };
            if n as u64 > ring_dw {
                let s = Stop::new(format!("PM4 packet of {n} dwords is larger than the ring"));
                return RunOut {
                    executed,
                    ..self.fault(inner, off, s)
                };
            }
            if n as u64 > pending && !fresh {
                reread = true;
                continue;
            }
            if n as u64 > pending {
                // The rest of the packet is not submitted yet.
                return RunOut {
                    executed,
                    state: RunState::Idle,
                };
            }
            let step = if opcode == pkt3::op::NOP {
                Step::Done
            } else {
                if let Err(s) = self.read_ring(mem, pos, n) {
                    return RunOut {
                        executed,
                        ..self.fault(inner, off, s)
                    };
                }
                let Some(words) = self.scratch.get(..n) else {
                    return RunOut {
                        executed,
                        ..self.fault(inner, off, Stop::new("internal: scratch"))
                    };
                };
                match pkt3::decode_pm4(words, inner.cfg.family) {
                    Ok((pkt, _)) => {
                        let depth_before = self.pm4.depth;
                        if mem.tr.on && self.tr_start.is_none() {
                            self.tr_start = Some(inner.stamp());
                        }
                        let r = pm4exec::exec(mem, inner, &mut self.pm4, &pkt);
                        if mem.tr.on && !matches!(r, Step::Blocked) {
                            let line = pm4::disasm::pm4_line(pos as usize, &pkt, inner.cfg.family);
                            trace_packet(
                                mem,
                                inner,
                                self.tr_start.take(),
                                off,
                                (0, 0),
                                line,
                                words,
                            );
                        }
                        if self.pm4.depth > depth_before {
                            self.ib_origin = self.rptr;
                        }
                        r
                    }
                    Err(e) => Step::stop(Stop::new(format!(
                        "malformed PM4 packet (opcode {opcode:#04x}): {e}"
                    ))),
                }
            };
            match step {
                Step::Done => {
                    self.rptr = self.rptr.wrapping_add(n as u64);
                    executed += 1;
                    if let Err(e) = mem.store_u64(self.rptr_va, self.rptr) {
                        return RunOut {
                            executed,
                            ..self.fault(inner, off, e.into())
                        };
                    }
                }
                Step::Blocked => {
                    return RunOut {
                        executed,
                        state: RunState::Blocked,
                    }
                }
                Step::Stop(s) => {
                    return RunOut {
                        executed,
                        ..self.fault(inner, off, *s)
                    }
                }
            }
        }
    }

    /// Ring pointer (dwords) of the INDIRECT_BUFFER packet that launched the current IB.
    fn ib_origin(&self) -> u64 {
        self.ib_origin
    }
}
