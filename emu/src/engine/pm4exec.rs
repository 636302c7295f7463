//! The PM4 interpreter of the CP (MEC): executes what [`pm4::pkt3::decode_pm4`] returns,
//! for PM4 compute queues and for the indirect buffers of AQL PM4-IB vendor packets.
//!
//! The emulator has no register file and no GDS: register writes (WRITE_DATA,
//! SET_SH_REG, COPY_DATA to a register) are discarded, register reads return 0, and a
//! wait on a register or any GDS access stops the queue with a fault.

use pm4::pkt3::{
    self, copy_sel, DataSel, DmaDstSel, DmaSrcSel, MemSpace, Pm4Packet, WaitOperation, WriteDataDst,
};

use super::firmware::{self, Firmware};
use super::memio::{AccessError, MemCache};
use super::{Inner, ISA_NOT_SUPPORTED};
use crate::gpumem::Fault;

/// Indirect-buffer levels below the ring (IB1 and IB2, as the CP has).
pub(crate) const MAX_IB_DEPTH: usize = 2;

/// Why a packet stopped the queue.
#[derive(Debug, Clone)]
pub(crate) struct Stop {
    pub(crate) fault: Option<Fault>,
    pub(crate) reason: String,
}

impl Stop {
    pub(crate) fn new(reason: impl Into<String>) -> Self {
        Stop {
            fault: None,
            reason: reason.into(),
        }
    }
}

impl From<AccessError> for Stop {
    fn from(e: AccessError) -> Self {
        match e {
            AccessError::Fault(f) => Stop {
                reason: format!("memory fault: {f}"),
                fault: Some(f),
            },
            AccessError::Misaligned { va, size } => Stop {
                fault: None,
                reason: format!("misaligned {size}-byte access at va={va:#x}"),
            },
        }
    }
}

/// Outcome of one packet.
#[derive(Debug)]
pub(crate) enum Step {
    /// Executed; move past it.
    Done,
    /// Its condition does not hold yet; execute it again later.
    Blocked,
    /// Stop the queue.
    Stop(Stop),
}

impl From<AccessError> for Step {
    fn from(e: AccessError) -> Self {
        Step::Stop(e.into())
    }
}

macro_rules! tri {
    ($e:expr) => {
        match $e {
            Ok(v) => v,
            Err(e) => return Step::from(e),
        }
    };
}
pub(crate) use tri;

/// One indirect buffer being executed.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct IbFrame {
    pub(crate) va: u64,
    pub(crate) size_dw: u32,
    pub(crate) off_dw: u32,
}

/// The CP state of one queue that outlives a packet.
#[derive(Debug, Default)]
pub(crate) struct Pm4State {
    pub(crate) frames: [IbFrame; MAX_IB_DEPTH],
    pub(crate) depth: usize,
    /// The value returned by the last returning ATOMIC_MEM (COPY_DATA source 6).
    pub(crate) atomic_ret: u64,
    /// Set when the last packet chained (replaced the current indirect buffer).
    chained: bool,
    /// Tracing: when the current IB packet was first fetched (host ns, GPU ticks).
    tr_start: Option<(u64, u64)>,
    /// The queue's EOP buffer (0: none); end-of-pipe RELEASE_MEM goes through it.
    pub(crate) eop_va: u64,
    /// XCCs that execute each indirect buffer (1 on a single-XCC GPU).
    pub(crate) xcc_count: u32,
    /// The XCC whose pass through the current indirect buffer is running.
    pub(crate) xcc: u32,
    /// The bottom indirect buffer as first pushed: every XCC starts its pass there.
    bottom: IbFrame,
}

impl Pm4State {
    /// The state of a new compute queue with EOP buffer `eop_va` on a GPU of `inner`.
    pub(crate) fn for_queue(inner: &Inner, eop_va: u64) -> Self {
        let fw = firmware::firmware(inner.cfg.family);
        Pm4State {
            eop_va,
            xcc_count: if fw.ib_runs_on_every_xcc {
                inner.cfg.num_xcc.max(1)
            } else {
                1
            },
            ..Default::default()
        }
    }
}

impl Pm4State {
    /// Pushes (or, with `chain`, replaces the current) indirect buffer.
    pub(crate) fn push_ib(&mut self, mem: &mut MemCache, ib: &pkt3::IndirectBuffer) -> Step {
        if ib.size_dw == 0 {
            return Step::Done;
        }
        tri!(mem.probe(ib.addr, ib.size_dw as u64 * 4, false));
        let frame = IbFrame {
            va: ib.addr,
            size_dw: ib.size_dw,
            off_dw: 0,
        };
        if ib.chain && self.depth > 0 {
            if let Some(top) = self.frames.get_mut(self.depth - 1) {
                *top = frame;
                self.chained = true;
            }
            return Step::Done;
        }
        match self.frames.get_mut(self.depth) {
            Some(slot) => {
                *slot = frame;
                if self.depth == 0 {
                    self.bottom = frame;
                    self.xcc = 0;
                }
                self.depth += 1;
                Step::Done
            }
            None => Step::Stop(Stop::new(format!(
                "INDIRECT_BUFFER nested deeper than {MAX_IB_DEPTH} levels"
            ))),
        }
    }
}

/// What one call of [`step_ib`] did.
#[derive(Debug)]
pub(crate) enum IbStep {
    /// No indirect buffer is active.
    Empty,
    /// The top buffer ended and was popped.
    Popped,
    /// A packet ran (or blocked, or stopped the queue).
    Packet(Step),
}

/// Executes the next packet of the innermost indirect buffer.
pub(crate) fn step_ib(
    mem: &mut MemCache,
    inner: &Inner,
    st: &mut Pm4State,
    scratch: &mut Vec<u32>,
) -> IbStep {
    if st.depth == 0 {
        return IbStep::Empty;
    }
    let level = st.depth;
    let Some(frame) = st.frames.get(level - 1).copied() else {
        st.depth = 0;
        return IbStep::Empty;
    };
    if frame.off_dw >= frame.size_dw {
        if level == 1 && st.xcc + 1 < st.xcc_count {
            // Multi-XCC: the next XCC runs the same indirect buffer from its start.
            st.xcc += 1;
            if let Some(f) = st.frames.first_mut() {
                *f = st.bottom;
            }
            return IbStep::Popped;
        }
        st.depth -= 1;
        if st.depth == 0 {
            st.xcc = 0;
        }
        return IbStep::Popped;
    }
    let remaining = (frame.size_dw - frame.off_dw) as usize;
    let va = frame.va + frame.off_dw as u64 * 4;
    let h = match mem.load_u32(va) {
        Ok(h) => h,
        Err(e) => return IbStep::Packet(Step::Stop(e.into())),
    };
    let (opcode, n) = match pkt3::decode_header(h) {
        Ok(x) => x,
        Err(e) => {
            return IbStep::Packet(Step::Stop(ib_stop(
                frame,
                format!("malformed PM4 packet: {e}"),
            )))
        }
    };
    if n > remaining {
        return IbStep::Packet(Step::Stop(ib_stop(
            frame,
            format!("PM4 packet (opcode {opcode:#04x}, {n} dwords) crosses the end of the indirect buffer"),
        )));
    }
    let step = if opcode == pkt3::op::NOP {
        Step::Done
    } else if opcode == firmware::PRED_EXEC && n == 2 {
        // PRED_EXEC: the next EXEC_COUNT dwords run only on the selected XCCs.
        let ctl = match mem.load_u32(va + 4) {
            Ok(v) => v,
            Err(e) => return IbStep::Packet(Step::Stop(e.into())),
        };
        let count = ctl & 0x3FFF;
        let mask = ctl >> 24;
        if n + count as usize > remaining {
            return IbStep::Packet(Step::Stop(ib_stop(
                frame,
                format!("PRED_EXEC over {count} dwords crosses the end of the indirect buffer"),
            )));
        }
        if mem.tr.on {
            let p = pkt3::Pm4Packet::PredExec(pkt3::PredExec {
                exec_count: count as u16,
                xcc_mask: mask as u8,
            });
            let line = pm4::disasm::pm4_line(frame.off_dw as usize, &p, inner.cfg.family);
            let start = st.tr_start.take();
            super::queue::trace_packet(
                mem,
                inner,
                start,
                frame.off_dw as u64 * 4,
                (level as u8, frame.va),
                line,
                &[h, ctl],
            );
        }
        if mask >> st.xcc.min(31) & 1 == 0 {
            if let Some(f) = st.frames.get_mut(level - 1) {
                f.off_dw += count;
            }
        }
        Step::Done
    } else {
        if scratch.len() < n {
            scratch.resize(n, 0);
        }
        let Some(buf) = scratch.get_mut(..n) else {
            return IbStep::Packet(Step::Stop(Stop::new("internal: scratch")));
        };
        if let Err(e) = mem.read_dwords(va, buf) {
            return IbStep::Packet(Step::Stop(e.into()));
        }
        st.chained = false;
        match pkt3::decode_pm4(buf, inner.cfg.family) {
            Ok((pkt, _)) if mem.tr.on => {
                if st.tr_start.is_none() {
                    st.tr_start = Some(inner.stamp());
                }
                let r = exec(mem, inner, st, &pkt);
                if !matches!(r, Step::Blocked) {
                    let line = pm4::disasm::pm4_line(frame.off_dw as usize, &pkt, inner.cfg.family);
                    let at = (level as u8, frame.va);
                    let start = st.tr_start.take();
                    super::queue::trace_packet(
                        mem,
                        inner,
                        start,
                        frame.off_dw as u64 * 4,
                        at,
                        line,
                        buf,
                    );
                }
                r
            }
            Ok((pkt, _)) => exec(mem, inner, st, &pkt),
            Err(e) => Step::Stop(ib_stop(
                frame,
                format!("malformed PM4 packet (opcode {opcode:#04x}): {e}"),
            )),
        }
    };
    if let Step::Done = step {
        // Advance the buffer the packet came from (it may have pushed a new level below
        // it) unless the packet chained to a new buffer.
        if !std::mem::take(&mut st.chained) {
            if let Some(f) = st.frames.get_mut(level - 1) {
                f.off_dw += n as u32;
            }
        }
    }
    IbStep::Packet(step)
}

fn ib_stop(frame: IbFrame, reason: String) -> Stop {
    Stop::new(format!(
        "{reason} (in indirect buffer {:#x} at dword {})",
        frame.va, frame.off_dw
    ))
}

/// Executes one decoded packet (from the ring or an indirect buffer).
pub(crate) fn exec(
    mem: &mut MemCache,
    inner: &Inner,
    st: &mut Pm4State,
    pkt: &Pm4Packet<'_>,
) -> Step {
    let fw = firmware::firmware(inner.cfg.family);
    if !matches!(pkt, Pm4Packet::Unknown { .. }) && !fw.accepts(pkt.opcode()) {
        return Step::Stop(Stop::new(format!(
            "unknown PM4 opcode {:#04x} ({}): the {:?} MEC firmware does not implement it",
            pkt.opcode(),
            pkt.name(),
            fw.family
        )));
    }
    match pkt {
        Pm4Packet::Nop(_) => Step::Done,
        Pm4Packet::WriteData(w) => {
            match w.dst_sel {
                WriteDataDst::Register => Step::Done,
                WriteDataDst::Gds => {
                    Step::Stop(Stop::new("WRITE_DATA to GDS: GDS is not modelled"))
                }
                WriteDataDst::MemorySync | WriteDataDst::TcL2 | WriteDataDst::Memory => {
                    if w.addr_incr {
                        tri!(mem.write(w.addr, bytemuck::cast_slice(w.data)));
                    } else if let Some(&last) = w.data.last() {
                        // WR_ONE_ADDR: every dword goes to the same address; the last wins.
                        tri!(mem.store_u32(w.addr, last));
                    }
                    Step::Done
                }
            }
        }
        Pm4Packet::WaitRegMem(w) => {
            if w.mem_space == MemSpace::Register || w.operation == WaitOperation::WrWaitWrReg {
                return Step::Stop(Stop::new(
                    "WAIT_REG_MEM on a register: registers are not modelled",
                ));
            }
            let v = tri!(mem.load_u32(w.addr));
            if w.function.test(v as u64, w.mask as u64, w.reference as u64) {
                Step::Done
            } else {
                Step::Blocked
            }
        }
        Pm4Packet::WaitRegMem64(w) => {
            if w.mem_space == MemSpace::Register || w.operation == WaitOperation::WrWaitWrReg {
                return Step::Stop(Stop::new(
                    "WAIT_REG_MEM64 on a register: registers are not modelled",
                ));
            }
            let v = tri!(mem.load_u64(w.addr));
            if w.function.test(v, w.mask, w.reference) {
                Step::Done
            } else {
                Step::Blocked
            }
        }
        Pm4Packet::ReleaseMem(r) => {
            if fw.eop_release_needs_eop_buffer
                && r.event_index == pkt3::event::INDEX_END_OF_PIPE
                && st.eop_va == 0
            {
                // The CP queues the end-of-pipe event in the EOP buffer: none is a VM
                // fault at the null EOP address (tinygrad ops_amd.py `timestamp`).
                let f = Fault {
                    gpu_id: inner.cfg.gpu_id,
                    va: 0,
                    len: 4,
                    write: true,
                    kind: crate::gpumem::FaultKind::NotMapped,
                };
                return Step::Stop(Stop {
                    reason: format!(
                        "end-of-pipe RELEASE_MEM on a queue without an EOP buffer: memory fault: {f}"
                    ),
                    fault: Some(f),
                });
            }
            // Everything before completed (the emulator is serial): the end-of-pipe event
            // fires now, then the data write, then the interrupt.
            match r.data_sel {
                DataSel::None => {}
                DataSel::Value32 => tri!(mem.store_u32(r.addr, r.data as u32)),
                DataSel::Value64 => tri!(mem.store_u64_dw(r.addr, r.data)),
                DataSel::GpuClock | DataSel::SystemClock => {
                    tri!(mem.store_u64_dw(r.addr, inner.clock.now()))
                }
                DataSel::Gds => {
                    return Step::Stop(Stop::new("RELEASE_MEM from GDS: GDS is not modelled"))
                }
            }
            if r.int_sel.interrupts() {
                inner.interrupt(mem, Some(r.int_ctxid));
            }
            Step::Done
        }
        // Caches are coherent in the emulator: acquires and cache events are no-ops.
        Pm4Packet::AcquireMem(_) | Pm4Packet::EventWrite(_) => Step::Done,
        Pm4Packet::IndirectBuffer(ib) => st.push_ib(mem, ib),
        Pm4Packet::CopyData(c) => copy_data(mem, inner, st, c),
        Pm4Packet::DmaData(d) => dma_data(mem, fw, d),
        Pm4Packet::AtomicMem(a) => atomic_mem(mem, st, a),
        Pm4Packet::SetShReg(_) => Step::Done,
        Pm4Packet::PredExec(_) => Step::Stop(Stop::new(
            "PRED_EXEC outside an indirect buffer is not modelled by the emulator",
        )),
        Pm4Packet::DispatchDirect(_) => {
            Step::Stop(Stop::new(format!("DISPATCH_DIRECT: {ISA_NOT_SUPPORTED}")))
        }
        Pm4Packet::Unknown { opcode, .. } => Step::Stop(Stop::new(format!(
            "unknown PM4 opcode {opcode:#04x}{}",
            pkt3::opcode_name(*opcode)
                .map(|n| format!(" ({n}, not supported on a compute queue)"))
                .unwrap_or_default()
        ))),
    }
}

fn copy_data(mem: &mut MemCache, inner: &Inner, st: &mut Pm4State, c: &pkt3::CopyData) -> Step {
    let wide = c.count_sel_64;
    let value: u64 = match c.src_sel {
        copy_sel::REGISTER | copy_sel::PERFCOUNTERS => 0,
        copy_sel::MEMORY | copy_sel::TC_L2 => {
            if wide {
                tri!(mem.load_u64(c.src))
            } else {
                tri!(mem.load_u32(c.src)) as u64
            }
        }
        copy_sel::IMMEDIATE_OR_DST_MEMORY => {
            if wide {
                c.src
            } else {
                c.src & 0xFFFF_FFFF
            }
        }
        copy_sel::ATOMIC_RETURN_DATA => st.atomic_ret,
        // 9 = GPU clock count, 10 = system clock count: both the emulator's clock.
        copy_sel::GPU_CLOCK_COUNT | 10 => inner.clock.now(),
        copy_sel::GDS => return Step::Stop(Stop::new("COPY_DATA from GDS: GDS is not modelled")),
        other => {
            return Step::Stop(Stop::new(format!(
                "COPY_DATA: unsupported source select {other}"
            )))
        }
    };
    match c.dst_sel {
        copy_sel::REGISTER | copy_sel::PERFCOUNTERS => Step::Done,
        copy_sel::MEMORY | copy_sel::TC_L2 | copy_sel::IMMEDIATE_OR_DST_MEMORY => {
            if wide {
                tri!(mem.store_u64_dw(c.dst, value));
            } else {
                tri!(mem.store_u32(c.dst, value as u32));
            }
            Step::Done
        }
        copy_sel::GDS => Step::Stop(Stop::new("COPY_DATA to GDS: GDS is not modelled")),
        other => Step::Stop(Stop::new(format!(
            "COPY_DATA: unsupported destination select {other}"
        ))),
    }
}

fn dma_data(mem: &mut MemCache, fw: &Firmware, d: &pkt3::DmaData) -> Step {
    if d.byte_count > fw.dma_data_max_bytes {
        return Step::Stop(Stop::new(format!(
            "DMA_DATA of {} bytes: the {:?} CP DMA moves at most {} bytes per packet",
            d.byte_count, fw.family, fw.dma_data_max_bytes
        )));
    }
    if matches!(d.src_sel, DmaSrcSel::Gds) || matches!(d.dst_sel, DmaDstSel::Gds) {
        return Step::Stop(Stop::new("DMA_DATA with GDS: GDS is not modelled"));
    }
    let len = d.byte_count as u64;
    if len == 0 {
        return Step::Done;
    }
    let to_memory = matches!(d.dst_sel, DmaDstSel::DstAddr | DmaDstSel::DstAddrTcL2) && !d.das;
    match d.src_sel {
        DmaSrcSel::Data => {
            if to_memory {
                if d.daic {
                    tri!(mem.store_u32(d.dst, d.src as u32));
                } else {
                    tri!(mem.fill(d.dst, len, d.src as u32));
                }
            }
        }
        DmaSrcSel::SrcAddr | DmaSrcSel::SrcAddrTcL2 => {
            if d.sas {
                // Register source: reads 0.
                if to_memory {
                    tri!(mem.fill(d.dst, if d.daic { 4 } else { len }, 0));
                }
            } else if d.saic {
                // One source dword, repeated.
                let v = tri!(mem.load_u32(d.src));
                if to_memory {
                    tri!(mem.fill(d.dst, if d.daic { 4 } else { len }, v));
                }
            } else if !to_memory {
                tri!(mem.probe(d.src, len, false));
            } else if d.daic {
                let last = d.src.saturating_add(len.saturating_sub(4)) & !3;
                let v = tri!(mem.load_u32(last));
                tri!(mem.store_u32(d.dst, v));
            } else {
                tri!(mem.copy(d.dst, d.src, len));
            }
        }
        DmaSrcSel::Gds => {}
    }
    Step::Done
}

/// ATOMIC_MEM: `atomic` is a TC_OP code: bits 4:0 the operation, bit 5 the 64-bit form,
/// bit 6 the non-returning form (e.g. 15 ADD_RTN_32, 47 ADD_RTN_64, 72 CMPSWAP_32).
fn atomic_mem(mem: &mut MemCache, st: &mut Pm4State, a: &pkt3::AtomicMem) -> Step {
    let op = a.atomic & 0x1F;
    let wide = a.atomic & 0x20 != 0;
    if !is_known_atomic(op) {
        return Step::Stop(Stop::new(format!(
            "ATOMIC_MEM: unsupported atomic op {:#x}",
            a.atomic
        )));
    }
    let src = a.src_data;
    let cmp = a.cmp_data;
    let (old, ok) = if wide {
        let cell = tri!(mem.atomic_u64(a.addr));
        let r = cell.fetch_update(
            std::sync::atomic::Ordering::AcqRel,
            std::sync::atomic::Ordering::Acquire,
            |o| atomic_apply64(op, o, src, cmp),
        );
        match r {
            Ok(o) => (o, true),
            Err(o) => (o, false),
        }
    } else {
        let cell = tri!(mem.atomic_u32(a.addr));
        let r = cell.fetch_update(
            std::sync::atomic::Ordering::AcqRel,
            std::sync::atomic::Ordering::Acquire,
            |o| atomic_apply32(op, o, src as u32, cmp as u32),
        );
        match r {
            Ok(o) => (o as u64, true),
            Err(o) => (o as u64, false),
        }
    };
    st.atomic_ret = old;
    if !ok && a.command == 1 {
        // Loop until the compare is satisfied.
        return Step::Blocked;
    }
    Step::Done
}

fn is_known_atomic(op: u8) -> bool {
    matches!(op, 7 | 8 | 15..=25)
}

fn atomic_apply64(op: u8, o: u64, s: u64, c: u64) -> Option<u64> {
    Some(match op {
        7 => s,
        8 if o == c => s,
        8 => return None,
        15 => o.wrapping_add(s),
        16 => o.wrapping_sub(s),
        17 => (o as i64).min(s as i64) as u64,
        18 => o.min(s),
        19 => (o as i64).max(s as i64) as u64,
        20 => o.max(s),
        21 => o & s,
        22 => o | s,
        23 => o ^ s,
        24 => {
            if o >= s {
                0
            } else {
                o + 1
            }
        }
        25 => {
            if o == 0 || o > s {
                s
            } else {
                o - 1
            }
        }
        _ => return None,
    })
}

fn atomic_apply32(op: u8, o: u32, s: u32, c: u32) -> Option<u32> {
    Some(match op {
        17 => (o as i32).min(s as i32) as u32,
        19 => (o as i32).max(s as i32) as u32,
        _ => atomic_apply64(op, o as u64, s as u64, c as u64)? as u32,
    })
}
