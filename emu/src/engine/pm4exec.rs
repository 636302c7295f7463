//! The PM4 interpreter of the CP (MEC): executes what [`pm4::pkt3::decode_pm4`] returns,
//! for PM4 compute queues and for the indirect buffers of AQL PM4-IB vendor packets.
//!
//! Registers: the SH (persistent state) registers that SET_SH_REG writes are kept per
//! queue, because DISPATCH_DIRECT reads the COMPUTE_* ones (program address, resource
//! registers, user data, work-group size: [`firmware::sh`]). Other register writes
//! (WRITE_DATA, COPY_DATA to a register) are discarded, register reads return 0, and a
//! wait on a register or any GDS access stops the queue with a fault (there is no GDS).

use pm4::pkt3::{
    self, copy_sel, DataSel, DmaDstSel, DmaSrcSel, MemSpace, Pm4Packet, WaitOperation, WriteDataDst,
};

use super::dispatch::Inflight;
use super::firmware::{self, Firmware};
use super::memio::{AccessError, MemCache, Pinned};
use super::{Inner, ISA_NOT_SUPPORTED};
use crate::gpumem::Fault;
use crate::shader::{DispatchStats, ShaderError};
use std::sync::Arc;

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
    /// Stop the queue (boxed: keeps `Step` and [`IbStep`] two words wide; they are moved
    /// out of every IB step and returned through the AQL loop, and a stop is rare).
    Stop(Box<Stop>),
}

impl Step {
    /// Stops the queue with `s` (out of line: every caller is a cold path).
    #[cold]
    #[inline(never)]
    pub(crate) fn stop(s: Stop) -> Step {
        Step::Stop(Box::new(s))
    }

    /// Done when `cond` holds (a wait whose condition is met), else Blocked.
    pub(crate) fn done_if(cond: bool) -> Step {
        if cond {
            Step::Done
        } else {
            Step::Blocked
        }
    }
}

impl From<AccessError> for Step {
    fn from(e: AccessError) -> Self {
        Step::stop(e.into())
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
    /// The SH registers (dword offsets from `SH_REG_START`), empty until the first
    /// SET_SH_REG.
    pub(crate) sh: Vec<u32>,
    /// The queue id (for the dispatch pool and the trace).
    pub(crate) queue_id: u32,
    /// The DISPATCH_DIRECT running on the shader core.
    pub(crate) inflight: Option<Arc<Inflight>>,
    /// The window the bottom indirect buffer was last read through (kfdrt's command
    /// buffers sit in one object per queue): one bounds check per read instead of a
    /// translation-cache look-up (see [`Pinned`]).
    ib_pin: Pinned,
    /// The window of the last one-dword WRITE_DATA destination (as `ib_pin`).
    dst_pin: Pinned,
    /// Tests: every packet through the general path (the fast path's reference).
    #[cfg(test)]
    general_only: bool,
}

impl Pm4State {
    /// Lets go of the kept IB-buffer and WRITE_DATA-destination windows (see
    /// `QueueExec::release_windows`).
    pub(crate) fn release_windows(&mut self) {
        self.ib_pin.clear();
        self.dst_pin.clear();
    }

    /// The state of a new compute queue with EOP buffer `eop_va` on a GPU of `inner`.
    pub(crate) fn for_queue(inner: &Inner, eop_va: u64, queue_id: u32) -> Self {
        let fw = firmware::firmware(inner.cfg.family);
        Pm4State {
            eop_va,
            queue_id,
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
        self.push_probed(ib)
    }

    /// [`Pm4State::push_ib`] once the buffer is known to be readable whole.
    fn push_probed(&mut self, ib: &pkt3::IndirectBuffer) -> Step {
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
            None => Step::stop(Stop::new(format!(
                "INDIRECT_BUFFER nested deeper than {MAX_IB_DEPTH} levels"
            ))),
        }
    }
}

/// [`Pm4State::push_ib`] and, when it pushed, the first [`step_ib`] (`None`: not taken,
/// the caller steps as after `push_ib`). A buffer the fast path takes (tracing off, no
/// buffer active, 4-aligned, at most [`FAST_IB_MAX_DW`] dwords) is read whole once: a read
/// that succeeds is the probe's check (one object holds the whole buffer) and the first
/// step's read, which follows with nothing in between; a read that fails leaves the push
/// to `push_ib`, whose probe reports the fault (the whole buffer's length) as always.
pub(crate) fn push_ib_and_step(
    mem: &mut MemCache,
    inner: &Inner,
    st: &mut Pm4State,
    ib: &pkt3::IndirectBuffer,
    scratch: &mut Vec<u32>,
) -> (Step, Option<IbStep>) {
    let size = ib.size_dw as usize;
    #[cfg(test)]
    let general_only = st.general_only;
    #[cfg(not(test))]
    let general_only = false;
    let mut buf = [0u32; FAST_IB_MAX_DW];
    if !general_only && !mem.tr.on && st.depth == 0 && size != 0 && ib.addr % 4 == 0 {
        if let Some(words) = read_ib(mem, &mut st.ib_pin, ib.addr, &mut buf, size) {
            {
                // The writeValue32 command: pushed and stepped in one (no buffer is active).
                if let Some(r) = one_write(mem, inner, st, ib.addr, words) {
                    return (Step::Done, Some(r));
                }
                let push = st.push_probed(ib);
                if !matches!(push, Step::Done) {
                    return (push, None);
                }
                let first = match walk_ib_fast(mem, inner, st, words) {
                    Some(r) => r,
                    None => step_ib_general(mem, inner, st, scratch),
                };
                return (Step::Done, Some(first));
            }
        }
    }
    (st.push_ib(mem, ib), None)
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
    if let Some(r) = step_ib_fast(mem, inner, st) {
        return r;
    }
    step_ib_general(mem, inner, st, scratch)
}

/// [`step_ib`] for every case: one packet read from memory, decoded and executed.
#[inline(never)]
fn step_ib_general(
    mem: &mut MemCache,
    inner: &Inner,
    st: &mut Pm4State,
    scratch: &mut Vec<u32>,
) -> IbStep {
    // The XCC passes over the bottom buffer and the dwords PRED_EXEC skips on an XCC
    // run in one call (no packet executes there), so the next XCC's first packet costs
    // no round through the queue's packet loop.
    let (level, frame, va, opcode, n) = loop {
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
                if !mem.tr.on {
                    st.xcc = skip_idle_xcc_passes(mem, st);
                }
                if st.xcc < st.xcc_count {
                    if let Some(f) = st.frames.first_mut() {
                        *f = st.bottom;
                    }
                    continue;
                }
            }
            st.depth -= 1;
            if st.depth == 0 {
                st.xcc = 0;
            }
            return IbStep::Popped;
        }
        let remaining = (frame.size_dw - frame.off_dw) as usize;
        let va = frame.va + frame.off_dw as u64 * 4;
        // The header and the dword after it in one cache look-up (PRED_EXEC's control,
        // fetched on every XCC pass); any failure takes the single-dword path, which
        // reports exactly the fault it always did.
        let mut next = None;
        let mut pair = [0u32; 2];
        let h = if remaining >= 2 && va % 4 == 0 && mem.read_dwords(va, &mut pair).is_ok() {
            next = Some(pair[1]);
            pair[0]
        } else {
            match mem.load_u32(va) {
                Ok(h) => h,
                Err(e) => return IbStep::Packet(Step::stop(e.into())),
            }
        };
        let (opcode, n) = match pkt3::decode_header(h) {
            Ok(x) => x,
            Err(e) => {
                return IbStep::Packet(Step::stop(ib_stop(
                    frame,
                    format!("malformed PM4 packet: {e}"),
                )))
            }
        };
        if n > remaining {
            return IbStep::Packet(Step::stop(ib_stop(
            frame,
            format!("PM4 packet (opcode {opcode:#04x}, {n} dwords) crosses the end of the indirect buffer"),
        )));
        }
        if opcode == firmware::PRED_EXEC && n == 2 {
            // PRED_EXEC: the next EXEC_COUNT dwords run only on the selected XCCs.
            let ctl = match next {
                Some(v) => v,
                None => match mem.load_u32(va + 4) {
                    Ok(v) => v,
                    Err(e) => return IbStep::Packet(Step::stop(e.into())),
                },
            };
            let count = ctl & 0x3FFF;
            let mask = ctl >> 24;
            if n + count as usize > remaining {
                return IbStep::Packet(Step::stop(ib_stop(
                    frame,
                    format!("PRED_EXEC over {count} dwords crosses the end of the indirect buffer"),
                )));
            }
            if mem.tr.on {
                let p = pkt3::Pm4Packet::PredExec(pkt3::PredExec {
                    exec_count: count as u16,
                    xcc_mask: mask as u8,
                });
                trace_in_ib(mem, inner, st, (frame, level), &p, &[h, ctl]);
            }
            let skip = if mask >> st.xcc.min(31) & 1 == 0 {
                count
            } else {
                0
            };
            if let Some(f) = st.frames.get_mut(level - 1) {
                f.off_dw += n as u32 + skip;
            }
            continue;
        }
        break (level, frame, va, opcode, n);
    };
    let step = if opcode == pkt3::op::NOP {
        Step::Done
    } else {
        if scratch.len() < n {
            scratch.resize(n, 0);
        }
        let Some(buf) = scratch.get_mut(..n) else {
            return IbStep::Packet(Step::stop(Stop::new("internal: scratch")));
        };
        if let Err(e) = mem.read_dwords(va, buf) {
            return IbStep::Packet(Step::stop(e.into()));
        }
        st.chained = false;
        match pkt3::decode_pm4(buf, inner.cfg.family) {
            Ok((pkt, _)) if mem.tr.on => {
                if st.tr_start.is_none() {
                    st.tr_start = Some(inner.stamp());
                }
                let r = exec(mem, inner, st, &pkt);
                if !matches!(r, Step::Blocked) {
                    trace_in_ib(mem, inner, st, (frame, level), &pkt, buf);
                }
                r
            }
            Ok((pkt, _)) => exec(mem, inner, st, &pkt),
            Err(e) => Step::stop(ib_stop(
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

/// Largest bottom indirect buffer (dwords) that [`step_ib_fast`] reads whole: a ring
/// slot's IB area (what kfdrt's command buffers fill) is 16 dwords.
const FAST_IB_MAX_DW: usize = 16;

/// [`step_ib`] for the common case: tracing off and only the bottom indirect buffer
/// active, unchained, at most [`FAST_IB_MAX_DW`] dwords. The buffer is read once (one
/// translated read instead of a header pair, a packet and the idle-pass read per XCC),
/// then walked as the general path walks it: PRED_EXEC skips per XCC, every XCC's pass
/// from the start, at most one packet executed per call (what counts toward the queue's
/// quantum is unchanged), and the idle rest of the passes taken in the same call.
///
/// Everything it does not do exactly as the general path is left to it: a read that
/// fails, a malformed header or packet, a bound crossed, a packet the firmware rejects,
/// INDIRECT_BUFFER: it then stores the position reached (the general path moves through
/// the same positions) and returns `None` (or, when a packet already ran in this call,
/// that packet's Done: the next call gets there), and the general path re-reads and
/// reports.
/// A packet is decoded by the decoder `decode_pm4` uses (WRITE_DATA and the waits without
/// building a `Pm4Packet`) and executed by the function `exec` uses. After a packet that
/// may have written the buffer itself (any but NOP, the waits, and a WRITE_DATA outside
/// it) the call ends, so the next packet is read afresh, as the general path reads it.
fn step_ib_fast(mem: &mut MemCache, inner: &Inner, st: &mut Pm4State) -> Option<IbStep> {
    let b = st.bottom;
    let top = st.frames.first().copied()?;
    #[cfg(test)]
    if st.general_only {
        return None;
    }
    if mem.tr.on || st.depth != 1 || top.va != b.va || top.size_dw != b.size_dw || b.va % 4 != 0 {
        return None;
    }
    let size = b.size_dw as usize;
    let mut buf = [0u32; FAST_IB_MAX_DW];
    let words = read_ib(mem, &mut st.ib_pin, b.va, &mut buf, size)?;
    walk_ib_fast(mem, inner, st, words)
}

/// The `size` dwords (at most [`FAST_IB_MAX_DW`]) of the indirect buffer at 4-aligned
/// `va`, read whole into `buf`: through `pin` when its window holds them (all 16 dwords of
/// `buf` are copied when the window holds them too: a fixed-size copy, and reading memory
/// has no effect), else through `mem` exactly as before; `None` when the read fails.
#[inline(always)]
fn read_ib<'a>(
    mem: &mut MemCache,
    pin: &mut Pinned,
    va: u64,
    buf: &'a mut [u32; FAST_IB_MAX_DW],
    size: usize,
) -> Option<&'a [u32]> {
    const FULL: u64 = FAST_IB_MAX_DW as u64 * 4;
    let len = size as u64 * 4;
    if size > FAST_IB_MAX_DW {
        return None;
    }
    if let Some(p) = pin.ptr(mem, va, len, false, 4) {
        if pin.holds(va, FULL) {
            // SAFETY: `[va, va + 64)` lies in the pinned window, `va` is 4-aligned;
            // shared memory is copied out.
            *buf = unsafe { p.cast::<[u32; FAST_IB_MAX_DW]>().read() };
        } else {
            // SAFETY: `[va, va + len)` lies in the pinned window; `buf` is a distinct
            // Rust buffer of at least `len` bytes.
            unsafe { core::ptr::copy_nonoverlapping(p, buf.as_mut_ptr().cast(), len as usize) };
        }
        return buf.get(..size);
    }
    let words = buf.get_mut(..size)?;
    mem.read_dwords(va, words).ok()?;
    Some(words)
}

/// [`step_ib_fast`]'s walk over `words`, the bottom buffer (the only one active,
/// unchained, 4-aligned, at most [`FAST_IB_MAX_DW`] dwords, tracing off) just read whole.
fn walk_ib_fast(
    mem: &mut MemCache,
    inner: &Inner,
    st: &mut Pm4State,
    words: &[u32],
) -> Option<IbStep> {
    let b = st.bottom;
    let top = st.frames.first().copied()?;
    let size = words.len();
    let ib_end = b.va.saturating_add(size as u64 * 4);
    let mut off = top.off_dw as usize;
    let mut xcc = st.xcc;
    // A packet ran in this call: the next one waits for the next call.
    let mut ran = false;
    let out = loop {
        if off >= size {
            if xcc + 1 < st.xcc_count {
                // Multi-XCC: the next XCC runs the buffer from its start; the idle passes
                // (nothing runs in them: the buffer is one PRED_EXEC chain selecting
                // none of them) taken at once, as the general path takes them.
                xcc = first_busy_xcc(words, xcc + 1, st.xcc_count);
                if xcc < st.xcc_count {
                    off = 0;
                    continue;
                }
            }
            if let Some(f) = st.frames.first_mut() {
                f.off_dw = off as u32;
            }
            st.depth = 0;
            st.xcc = 0;
            return Some(if ran {
                IbStep::Packet(Step::Done)
            } else {
                IbStep::Popped
            });
        }
        let remaining = size - off;
        let Some(&h) = words.get(off) else {
            break None;
        };
        let Ok((opcode, n)) = pkt3::decode_header(h) else {
            break None;
        };
        if n > remaining {
            break None;
        }
        if opcode == firmware::PRED_EXEC && n == 2 {
            let Some(&ctl) = words.get(off + 1) else {
                break None;
            };
            let (count, mask) = ((ctl & 0x3FFF) as usize, ctl >> 24);
            if n + count > remaining {
                break None;
            }
            off += n + if mask >> xcc.min(31) & 1 == 0 {
                count
            } else {
                0
            };
            continue;
        }
        if ran {
            break Some(IbStep::Packet(Step::Done));
        }
        let Some(pw) = words.get(off..off + n) else {
            break None;
        };
        // A packet the firmware refuses (NOP: every one takes it) goes to the general
        // path, which reports it.
        if opcode != pkt3::op::NOP && !firmware::firmware(inner.cfg.family).accepts(opcode) {
            break None;
        }
        // (step, whether the buffer read above still holds after it)
        let (step, fresh) = match opcode {
            pkt3::op::NOP => (Step::Done, true),
            pkt3::op::WRITE_DATA => {
                let Ok(w) = pkt3::WriteData::decode_body(pw) else {
                    break None;
                };
                let len = if w.addr_incr {
                    w.data.len() as u64 * 4
                } else {
                    4
                };
                let outside = !w.dst_sel.is_memory()
                    || w.addr >= ib_end
                    || w.addr.saturating_add(len) <= b.va;
                (write_data(mem, &mut st.dst_pin, &w), outside)
            }
            pkt3::op::WAIT_REG_MEM => {
                let Ok(w) = pkt3::WaitRegMem::decode_body(pw) else {
                    break None;
                };
                (wait_reg_mem(mem, &w), true)
            }
            pkt3::op::WAIT_REG_MEM64 => {
                let Ok(w) = pkt3::WaitRegMem64::decode_body(pw) else {
                    break None;
                };
                (wait_reg_mem64(mem, &w), true)
            }
            pkt3::op::INDIRECT_BUFFER => break None,
            _ => {
                let Ok((p, _)) = pkt3::decode_pm4(pw, inner.cfg.family) else {
                    break None;
                };
                st.chained = false;
                (exec(mem, inner, st, &p), false)
            }
        };
        match step {
            Step::Done => {
                off += n;
                ran = true;
                if !fresh {
                    break Some(IbStep::Packet(Step::Done));
                }
            }
            // Blocked or stopped: the queue stays on the packet.
            s => break Some(IbStep::Packet(s)),
        }
    };
    if let Some(f) = st.frames.first_mut() {
        f.off_dw = off as u32;
    }
    st.xcc = xcc;
    match out {
        // The packet that ran is this call's step; the next call takes the rest.
        None if ran => Some(IbStep::Packet(Step::Done)),
        out => out,
    }
}

/// The push of the indirect buffer at `va` (no buffer active: it becomes the bottom one,
/// offset 0, XCC 0) and [`walk_ib_fast`]'s first step over it, for the command kfdrt's
/// writeValue32 puts in a ring slot's IB area (`CmdBuf::write_mem`'s hot path): one
/// WRITE_DATA of one dword with the [`pkt3::WriteData::memory`] control word, behind a
/// PRED_EXEC over it on a multi-XCC GPU (`words`, the whole buffer). The walk runs the
/// write on XCC 0, finds the other XCCs' passes idle and pops; here the same from fixed
/// offsets, without the walk's header loop, and the state the push and the walk leave.
/// Anything else (another XCC selected or none, no PRED_EXEC on several XCCs, another
/// count or control word, a misaligned or in-buffer destination) returns `None` before
/// anything ran or changed, and the push and the walk take it.
#[inline(always)]
fn one_write(
    mem: &mut MemCache,
    inner: &Inner,
    st: &mut Pm4State,
    va: u64,
    words: &[u32],
) -> Option<IbStep> {
    const PRED_EXEC_2: u32 = pkt3::packet3(firmware::PRED_EXEC, 0);
    const WD: [u32; 4] = pkt3::WriteData::memory(0, &[0]).head();
    let (wd_off, wd) = match *words {
        [h, ctl, ref wd @ ..] if wd.len() == 5 => {
            // PRED_EXEC (bits 7:0 not decoded) over exactly the WRITE_DATA, selecting XCC 0
            // and no other XCC of this GPU.
            let mask = ctl >> 24;
            if h & 0xFFFF_FF00 != PRED_EXEC_2
                || ctl & 0x3FFF != 5
                || mask & 1 == 0
                || (st.xcc_count > 1 && next_selected_xcc(mask, 1, st.xcc_count) < st.xcc_count)
            {
                return None;
            }
            (2u32, wd)
        }
        // Unpredicated: every XCC would run it; one XCC only.
        [..] if words.len() == 5 && st.xcc_count <= 1 => (0u32, words),
        _ => return None,
    };
    let &[h, control, lo, hi, value] = wd else {
        return None;
    };
    let addr = u64::from(lo) | u64::from(hi) << 32;
    let size_dw = words.len() as u32;
    let ib_end = va.saturating_add(u64::from(size_dw) * 4);
    // The header (bits 7:0 not decoded), the control word, the destination's bits 1:0
    // (reserved), a destination outside the buffer (the walk re-reads after a write into
    // it), the firmware's opcode check.
    if h & 0xFFFF_FF00 != WD[0] & 0xFFFF_FF00
        || control != WD[1]
        || lo & 3 != 0
        || !(addr >= ib_end || addr.saturating_add(4) <= va)
        || !firmware::firmware(inner.cfg.family).accepts(pkt3::op::WRITE_DATA)
    {
        return None;
    }
    // What `push_probed` leaves (the bottom frame, XCC 0), then the walk's end: popped
    // past the buffer's end, or stopped on the WRITE_DATA (still pushed).
    let frame = IbFrame {
        va,
        size_dw,
        off_dw: 0,
    };
    st.bottom = frame;
    st.xcc = 0;
    let (off_dw, depth, step) = match st.dst_pin.write_dword(mem, addr, value) {
        Ok(()) => (size_dw, 0, Step::Done),
        Err(e) => (wd_off, 1, Step::from(e)),
    };
    if let Some(f) = st.frames.first_mut() {
        *f = IbFrame { off_dw, ..frame };
    }
    st.depth = depth;
    Some(IbStep::Packet(step))
}

/// Largest bottom indirect buffer (dwords) whose idle XCC passes [`skip_idle_xcc_passes`]
/// recognises (a PRED_EXEC-guarded command buffer is a few dwords).
const IDLE_PASS_MAX_DW: usize = 64;

/// The first XCC from `st.xcc` on whose pass over the bottom indirect buffer would do
/// something (`st.xcc_count` when none would). A pass is idle when the buffer, read now,
/// is a chain of well-formed PRED_EXEC packets that all skip their dwords on that XCC:
/// such a pass reads the same dwords, cannot fault (the whole buffer was just read),
/// executes nothing and counts nothing toward the quantum, so with tracing off skipping
/// it is exactly the pass. An XCC that any of the PRED_EXECs selects, any other packet, a
/// malformed header or a bound crossed makes the pass non-idle, and it runs (and faults)
/// through [`step_ib`] as before. Nothing runs between the skipped passes, so one read
/// serves them all.
fn skip_idle_xcc_passes(mem: &mut MemCache, st: &Pm4State) -> u32 {
    let size = st.bottom.size_dw as usize;
    let mut buf = [0u32; IDLE_PASS_MAX_DW];
    let Some(words) = buf.get_mut(..size) else {
        return st.xcc;
    };
    if size == 0 || st.bottom.va % 4 != 0 || mem.read_dwords(st.bottom.va, words).is_err() {
        return st.xcc;
    }
    first_busy_xcc(words, st.xcc, st.xcc_count)
}

/// The first XCC from `xcc` on (`xcc_count` when none) whose pass over the bottom
/// indirect buffer `words` (read whole) is not idle, as [`skip_idle_xcc_passes`] defines
/// idle; `xcc` itself when `words` is not a chain of well-formed PRED_EXECs.
#[inline]
fn first_busy_xcc(words: &[u32], xcc: u32, xcc_count: u32) -> u32 {
    let size = words.len();
    // The common chain, one PRED_EXEC guarding the rest of the buffer (kfdrt's multi-XCC
    // commands), tested without the walk: a header `decode_header` reads as PRED_EXEC of
    // 2 dwords (type 3, count 0, opcode; the low byte is not decoded) whose EXEC_COUNT
    // reaches the end exactly.
    if let [h, ctl, ..] = *words {
        const PRED_EXEC_2: u32 = pkt3::packet3(firmware::PRED_EXEC, 0);
        if h & 0xFFFF_FF00 == PRED_EXEC_2 && (ctl & 0x3FFF) as usize + 2 == size {
            if xcc >= xcc_count {
                return xcc;
            }
            return next_selected_xcc(ctl >> 24, xcc, xcc_count);
        }
    }
    // The XCCs some PRED_EXEC of the skip chain selects (VIRTUAL_XCC_ID_SELECT is 8
    // bits: XCC 8 and up are never selected).
    let mut selected = 0u32;
    let mut off = 0usize;
    while off < size {
        let (Some(&h), Some(&ctl)) = (words.get(off), words.get(off + 1)) else {
            return xcc;
        };
        let Ok((opcode, n)) = pkt3::decode_header(h) else {
            return xcc;
        };
        let (count, mask) = ((ctl & 0x3FFF) as usize, ctl >> 24);
        if opcode != firmware::PRED_EXEC || n != 2 || n + count > size - off {
            return xcc;
        }
        selected |= mask;
        off += n + count;
    }
    if xcc >= xcc_count {
        return xcc;
    }
    next_selected_xcc(selected, xcc, xcc_count)
}

/// The lowest XCC from `xcc` (below `xcc_count`) on that `selected` (the masks of a
/// buffer's PRED_EXEC chain) selects; `xcc_count` when none.
#[inline]
fn next_selected_xcc(selected: u32, xcc: u32, xcc_count: u32) -> u32 {
    let ahead = selected
        .checked_shl(xcc)
        .map_or(0, |_| selected >> xcc << xcc);
    if ahead == 0 {
        xcc_count
    } else {
        ahead.trailing_zeros().min(xcc_count)
    }
}

/// Traces `pkt` (its `words`), run from `frame` at IB level `level`, as started when
/// the queue first fetched it.
fn trace_in_ib(
    mem: &mut MemCache,
    inner: &Inner,
    st: &mut Pm4State,
    (frame, level): (IbFrame, usize),
    pkt: &pkt3::Pm4Packet<'_>,
    words: &[u32],
) {
    let line = pm4::disasm::pm4_line(frame.off_dw as usize, pkt, inner.cfg.family);
    let start = st.tr_start.take();
    let at = (level as u8, frame.va);
    super::queue::trace_packet(mem, inner, start, frame.off_dw as u64 * 4, at, line, words);
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
        return Step::stop(Stop::new(format!(
            "unknown PM4 opcode {:#04x} ({}): the {:?} MEC firmware does not implement it",
            pkt.opcode(),
            pkt.name(),
            fw.family
        )));
    }
    match pkt {
        Pm4Packet::Nop(_) => Step::Done,
        Pm4Packet::WriteData(w) => write_data(mem, &mut st.dst_pin, w),
        Pm4Packet::WaitRegMem(w) => wait_reg_mem(mem, w),
        Pm4Packet::WaitRegMem64(w) => wait_reg_mem64(mem, w),
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
                return Step::stop(Stop {
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
                    return Step::stop(Stop::new("RELEASE_MEM from GDS: GDS is not modelled"))
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
        Pm4Packet::SetShReg(r) => set_sh_reg(st, r),
        Pm4Packet::PredExec(_) => Step::stop(Stop::new(
            "PRED_EXEC outside an indirect buffer is not modelled by the emulator",
        )),
        Pm4Packet::DispatchDirect(d) => dispatch_direct(mem, inner, st, d),
        Pm4Packet::Unknown { opcode, .. } => Step::stop(Stop::new(format!(
            "unknown PM4 opcode {opcode:#04x}{}",
            pkt3::opcode_name(*opcode)
                .map(|n| format!(" ({n}, not supported on a compute queue)"))
                .unwrap_or_default()
        ))),
    }
}

/// WRITE_DATA (the firmware accepted it).
#[inline(always)]
fn write_data(mem: &mut MemCache, dst: &mut Pinned, w: &pkt3::WriteData<'_>) -> Step {
    match w.dst_sel {
        WriteDataDst::Register => Step::Done,
        WriteDataDst::Gds => Step::stop(Stop::new("WRITE_DATA to GDS: GDS is not modelled")),
        WriteDataDst::MemorySync | WriteDataDst::TcL2 | WriteDataDst::Memory => {
            if let ([v], true) = (w.data, w.addr_incr) {
                // The common one-dword write: one store through the destination's pinned
                // window (else exactly `MemCache::write`'s bytes and faults).
                tri!(dst.write_dword(mem, w.addr, *v));
            } else if w.addr_incr {
                tri!(mem.write(w.addr, bytemuck::cast_slice(w.data)));
            } else if let Some(&last) = w.data.last() {
                // WR_ONE_ADDR: every dword goes to the same address; the last wins.
                tri!(mem.store_u32(w.addr, last));
            }
            Step::Done
        }
    }
}

/// WAIT_REG_MEM (the firmware accepted it).
#[inline]
fn wait_reg_mem(mem: &mut MemCache, w: &pkt3::WaitRegMem) -> Step {
    if w.mem_space == MemSpace::Register || w.operation == WaitOperation::WrWaitWrReg {
        return Step::stop(Stop::new(
            "WAIT_REG_MEM on a register: registers are not modelled",
        ));
    }
    let (mask, reference) = (u64::from(w.mask), u64::from(w.reference));
    Step::done_if(tri!(mem.poll(w.addr, false, w.function, mask, reference)))
}

/// WAIT_REG_MEM64 (the firmware accepted it).
#[inline]
fn wait_reg_mem64(mem: &mut MemCache, w: &pkt3::WaitRegMem64) -> Step {
    if w.mem_space == MemSpace::Register || w.operation == WaitOperation::WrWaitWrReg {
        return Step::stop(Stop::new(
            "WAIT_REG_MEM64 on a register: registers are not modelled",
        ));
    }
    Step::done_if(tri!(mem.poll(
        w.addr,
        true,
        w.function,
        w.mask,
        w.reference
    )))
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
        copy_sel::GDS => return Step::stop(Stop::new("COPY_DATA from GDS: GDS is not modelled")),
        other => {
            return Step::stop(Stop::new(format!(
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
        copy_sel::GDS => Step::stop(Stop::new("COPY_DATA to GDS: GDS is not modelled")),
        other => Step::stop(Stop::new(format!(
            "COPY_DATA: unsupported destination select {other}"
        ))),
    }
}

fn dma_data(mem: &mut MemCache, fw: &Firmware, d: &pkt3::DmaData) -> Step {
    if d.byte_count > fw.dma_data_max_bytes {
        return Step::stop(Stop::new(format!(
            "DMA_DATA of {} bytes: the {:?} CP DMA moves at most {} bytes per packet",
            d.byte_count, fw.family, fw.dma_data_max_bytes
        )));
    }
    if matches!(d.src_sel, DmaSrcSel::Gds) || matches!(d.dst_sel, DmaDstSel::Gds) {
        return Step::stop(Stop::new("DMA_DATA with GDS: GDS is not modelled"));
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
        return Step::stop(Stop::new(format!(
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

/// SET_SH_REG: stores the values into the queue's SH registers. A range outside the SH
/// register space faults (the CP's register-address check).
fn set_sh_reg(st: &mut Pm4State, r: &pkt3::SetShReg) -> Step {
    let start = r.reg_offset as usize;
    let end = start + r.values.len();
    if end > firmware::sh::SPACE as usize {
        return Step::stop(Stop::new(format!(
            "SET_SH_REG of {} registers at {:#x}: outside the SH register space {:#x}..{:#x}",
            r.values.len(),
            pkt3::SH_REG_START + start as u32,
            pkt3::SH_REG_START,
            pkt3::SH_REG_START + firmware::sh::SPACE
        )));
    }
    if st.sh.len() < firmware::sh::SPACE as usize {
        st.sh.resize(firmware::sh::SPACE as usize, 0);
    }
    if let Some(dst) = st.sh.get_mut(start..end) {
        dst.copy_from_slice(r.values);
    }
    Step::Done
}

/// Records a finished dispatch on the CP's track (tracing is on).
pub(crate) fn trace_dispatch(
    mem: &mut MemCache,
    inner: &Inner,
    fl: &Inflight,
    packet: &'static str,
    entry: u64,
    r: &Result<DispatchStats, ShaderError>,
) {
    let st = r.as_ref().ok().copied().unwrap_or_default();
    let queue = mem.tr.queue.take();
    mem.tr.push(
        fl.started,
        inner.stamp(),
        crate::trace::TraceKind::Dispatch {
            queue_id: fl.queue_id,
            packet,
            entry,
            workgroups: st.workgroups,
            waves: st.waves,
            instructions: st.instructions,
            lane_instructions: st.lane_instructions,
            fault: r.as_ref().err().map(|e| e.reason.clone()),
        },
    );
    mem.tr.queue = queue;
}

/// The dispatch the COMPUTE_* registers describe, checked as the CP/SPI would.
fn compute_launch(
    inner: &Inner,
    st: &Pm4State,
    d: &pkt3::DispatchDirect,
) -> Result<(crate::shader::Launch, pm4::aql::KernelDispatch), Stop> {
    use firmware::sh;
    let reg = |r: u32| st.sh.get(r as usize).copied().unwrap_or(0);
    let init = d.dispatch_initiator;
    if init & sh::INITIATOR_COMPUTE_SHADER_EN == 0 {
        return Err(Stop::new(format!(
            "DISPATCH_DIRECT with DISPATCH_INITIATOR {init:#x}: COMPUTE_SHADER_EN is not set"
        )));
    }
    if init & sh::INITIATOR_USE_THREAD_DIMENSIONS != 0 {
        return Err(Stop::new(
            "DISPATCH_DIRECT with USE_THREAD_DIMENSIONS (grid in threads) is not modelled by the emulator",
        ));
    }
    let start = [reg(sh::START_X), reg(sh::START_Y), reg(sh::START_Z)];
    if init & sh::INITIATOR_FORCE_START_AT_000 == 0 && start != [0; 3] {
        return Err(Stop::new(format!(
            "DISPATCH_DIRECT with COMPUTE_START {start:?}: a non-zero start work-group is not modelled by the emulator"
        )));
    }
    let groups = [d.dim_x, d.dim_y, d.dim_z];
    let wg = [
        reg(sh::NUM_THREAD_X) & sh::NUM_THREAD_FULL_MASK,
        reg(sh::NUM_THREAD_Y) & sh::NUM_THREAD_FULL_MASK,
        reg(sh::NUM_THREAD_Z) & sh::NUM_THREAD_FULL_MASK,
    ];
    if wg.contains(&0) {
        return Err(Stop::new(format!(
            "DISPATCH_DIRECT with COMPUTE_NUM_THREAD {wg:?}: a work-group dimension is 0"
        )));
    }
    let items: u64 = wg.iter().map(|&x| x as u64).product();
    if items > 1024 {
        return Err(Stop::new(format!(
            "DISPATCH_DIRECT: work-group of {items} work-items exceeds 1024"
        )));
    }
    let mut grid = [0u32; 3];
    for i in 0..3 {
        grid[i] = match groups[i].checked_mul(wg[i]) {
            Some(g) => g,
            None => {
                return Err(Stop::new(format!(
                    "DISPATCH_DIRECT of {groups:?} work-groups of {wg:?}: the grid exceeds 2^32 work-items"
                )))
            }
        };
    }
    let pgm = ((reg(sh::PGM_LO) as u64) | ((reg(sh::PGM_HI) as u64) << 32)) << 8;
    if pgm == 0 {
        return Err(Stop::new(
            "DISPATCH_DIRECT with COMPUTE_PGM_LO/HI = 0: no program address",
        ));
    }
    let fw = firmware::firmware(inner.cfg.family);
    let tmpring = reg(sh::TMPRING_SIZE);
    let wavesize = (tmpring >> sh::TMPRING_WAVESIZE_SHIFT) & fw.tmpring_wavesize_mask;
    let lane_private = wavesize * fw.tmpring_wavesize_granule / 64;
    let kd = pm4::kd::KernelDescriptor {
        group_segment_fixed_size: 0,
        private_segment_fixed_size: lane_private,
        kernarg_size: 0,
        kernel_code_entry_byte_offset: 0,
        compute_pgm_rsrc3: reg(sh::PGM_RSRC3),
        compute_pgm_rsrc1: reg(sh::PGM_RSRC1),
        compute_pgm_rsrc2: reg(sh::PGM_RSRC2),
        kernel_code_properties: 0,
        kernarg_preload: 0,
    };
    let lds = kd.granulated_lds_size() * sh::LDS_GRANULE;
    let user = (sh::USER_DATA_0..sh::USER_DATA_0 + 16).map(reg).collect();
    let dims = if groups[2] > 1 || wg[2] > 1 {
        3
    } else if groups[1] > 1 || wg[1] > 1 {
        2
    } else {
        1
    };
    let k = pm4::aql::KernelDispatch {
        control: pm4::aql::PacketControl::SYSTEM_BARRIER,
        dimensions: dims,
        workgroup_size: [wg[0] as u16, wg[1] as u16, wg[2] as u16],
        grid_size: grid,
        private_segment_size: lane_private,
        group_segment_size: lds,
        kernel_object: 0,
        kernarg_address: 0,
        completion_signal: 0,
    };
    Ok((
        crate::shader::Launch {
            kd,
            entry: pgm,
            user_data: Some(user),
            tmpring,
            scratch_base: (u64::from(reg(sh::DISPATCH_SCRATCH_BASE_LO))
                | u64::from(reg(sh::DISPATCH_SCRATCH_BASE_HI) & 0xFF) << 32)
                << 8,
        },
        k,
    ))
}

/// DISPATCH_DIRECT: launches the work-groups the COMPUTE_* registers describe on the
/// shader core and stays on the packet (blocked) until they finished; other queues run
/// meanwhile. On a multi-XCC partition every XCC takes its share of the work-groups of
/// one dispatch: the emulator runs the whole grid on the first XCC's pass only.
fn dispatch_direct(
    mem: &mut MemCache,
    inner: &Inner,
    st: &mut Pm4State,
    d: &pkt3::DispatchDirect,
) -> Step {
    if let Some(fl) = st.inflight.clone() {
        let Some(r) = fl.take() else {
            return Step::Blocked;
        };
        st.inflight = None;
        if mem.tr.on {
            let pgm = ((st
                .sh
                .get(firmware::sh::PGM_LO as usize)
                .copied()
                .unwrap_or(0) as u64)
                | ((st
                    .sh
                    .get(firmware::sh::PGM_HI as usize)
                    .copied()
                    .unwrap_or(0) as u64)
                    << 32))
                << 8;
            trace_dispatch(mem, inner, &fl, "DISPATCH_DIRECT", pgm, &r);
        }
        return match r {
            Ok(_) => Step::Done,
            Err(e) if e.reason.starts_with(ISA_NOT_SUPPORTED) => {
                Step::stop(Stop::new(format!("DISPATCH_DIRECT: {}", e.reason)))
            }
            Err(e) => Step::stop(Stop {
                fault: e.fault,
                reason: format!("shader fault: {}", e.reason),
            }),
        };
    }
    if st.xcc > 0 {
        return Step::Done;
    }
    if crate::shader::Target::from_gfx_target_version(inner.cfg.gfx_target_version).is_none() {
        return Step::stop(Stop::new(format!(
            "DISPATCH_DIRECT: {ISA_NOT_SUPPORTED} (no shader model for gfx_target_version {})",
            inner.cfg.gfx_target_version
        )));
    }
    if d.dim_x == 0 || d.dim_y == 0 || d.dim_z == 0 {
        // No work-groups: nothing is launched.
        return Step::Done;
    }
    let (launch, k) = match compute_launch(inner, st, d) {
        Ok(x) => x,
        Err(s) => return Step::stop(s),
    };
    let fl = inner
        .dispatches
        .start(mem.inner_arc(), st.queue_id, move |inner, on_cp| {
            crate::shader::prepare_launch(inner, &launch, &k, 0, 0, 0, on_cp)
        });
    st.inflight = Some(fl);
    // A dispatch the CP ran itself has finished already.
    dispatch_direct(mem, inner, st, d)
}

#[cfg(test)]
mod tests {
    //! The indirect-buffer fast path against the general path: the same IBs run through
    //! both on gfx942 (8 XCCs), gfx90a and gfx11 must leave the same memory, count the
    //! same packets, raise the same interrupts and end (or fault) the same way.

    use super::*;
    use crate::engine::{CountingInterrupts, EngineConfig, GpuEngines};
    use crate::gpumem::HeapMemory;
    use pm4::pkt3::{
        op, packet3, AtomicMem, CachePolicy, CompareFn, CopyData, IntSel, Nop, PredExec,
        ReleaseMem, WaitRegMem, WaitRegMem64, WriteData,
    };
    use pm4::GfxFamily;

    const IB_VA: u64 = 0x10_0000;
    const DATA_VA: u64 = 0x20_0000;
    const EOP_VA: u64 = 0x30_0000;
    const UNMAPPED: u64 = 0x50_0000;
    /// (name, family, XCCs).
    const GPUS: [(&str, GfxFamily, u32); 3] = [
        ("gfx942", GfxFamily::Gfx9, 8),
        ("gfx90a", GfxFamily::Gfx9, 1),
        ("gfx1100", GfxFamily::Gfx11, 1),
    ];

    /// What running one IB did (everything both paths must agree on).
    #[derive(PartialEq)]
    struct Outcome {
        /// Packets that completed (what counts toward the queue's quantum).
        executed: u32,
        /// How the IB ended: run out, blocked, or stopped (with the reason and fault).
        end: String,
        /// The data region and the IB region afterwards.
        data: Vec<u32>,
        ib: Vec<u32>,
        /// Event interrupts raised.
        events: u64,
    }

    /// Shows the dwords that changed, not the whole regions.
    impl std::fmt::Debug for Outcome {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            let data: Vec<_> = (self.data.iter().enumerate())
                .filter(|&(i, &v)| v != i as u32)
                .collect();
            let ib: Vec<_> = self.ib.iter().enumerate().filter(|p| *p.1 != 0).collect();
            f.debug_struct("Outcome")
                .field("executed", &self.executed)
                .field("end", &self.end)
                .field("events", &self.events)
                .field("data changed", &data)
                .field("ib", &ib)
                .finish()
        }
    }

    /// Runs `ib` from its start as the bottom indirect buffer; on the first Blocked,
    /// `release` (a data dword and its value) is stored and the IB goes on. Returns the
    /// outcome and the number of `step_ib` calls.
    fn run(
        family: GfxFamily,
        num_xcc: u32,
        ib: &[u32],
        mut release: Option<(u64, u32)>,
        general: bool,
    ) -> (Outcome, u32) {
        let mem = Arc::new(HeapMemory::new());
        let ib_mem = mem.add_region(IB_VA, 4096);
        let data = mem.add_region(DATA_VA, 4096);
        let _eop = mem.add_region(EOP_VA, 4096);
        ib_mem.write(IB_VA, bytemuck::cast_slice(ib)).unwrap();
        for i in 0..1024u32 {
            data.store_u32(DATA_VA + 4 * u64::from(i), i).unwrap();
        }
        let irq = Arc::new(CountingInterrupts::default());
        let cfg = EngineConfig::for_unit_test(family, num_xcc);
        let engines = GpuEngines::new(cfg, mem.clone(), irq.clone());
        let inner = engines.inner.clone();
        let mut mc = MemCache::new(inner.clone());
        let mut st = Pm4State::for_queue(&inner, EOP_VA, 1);
        st.general_only = general;
        let mut scratch = Vec::new();
        let (mut executed, mut calls) = (0, 0);
        // The AQL queue's push: the fast path's first step comes with it.
        let ib_pkt = pkt3::IndirectBuffer::new(IB_VA, ib.len() as u32);
        let (push, mut first) = push_ib_and_step(&mut mc, &inner, &mut st, &ib_pkt, &mut scratch);
        let end = match push {
            Step::Done => loop {
                if calls > 10_000 {
                    break "never ends".to_string();
                }
                calls += 1;
                let r = match first.take() {
                    Some(r) => r,
                    None => step_ib(&mut mc, &inner, &mut st, &mut scratch),
                };
                match r {
                    IbStep::Empty => break "ran out".to_string(),
                    IbStep::Popped => {}
                    IbStep::Packet(Step::Done) => executed += 1,
                    IbStep::Packet(Step::Blocked) => match release.take() {
                        Some((va, v)) => data.store_u32(va, v).unwrap(),
                        None => {
                            break format!(
                                "blocked on XCC {} at dword {}",
                                st.xcc, st.frames[0].off_dw
                            )
                        }
                    },
                    IbStep::Packet(Step::Stop(s)) => {
                        // With the state the stop leaves (the queue's next look at it).
                        break format!(
                            "stopped on XCC {} at dword {} (depth {}, bottom {:#x}+{}): {} ({:?})",
                            st.xcc,
                            st.frames[0].off_dw,
                            st.depth,
                            st.bottom.va,
                            st.bottom.size_dw,
                            s.reason,
                            s.fault
                        );
                    }
                }
            },
            other => format!("push: {other:?}"),
        };
        drop(mc);
        let read = |w: &crate::gpumem::MemWindow, va: u64| -> Vec<u32> {
            (0..1024u64)
                .map(|i| w.load_u32(va + 4 * i).unwrap())
                .collect()
        };
        let out = Outcome {
            executed,
            end,
            data: read(&data, DATA_VA),
            ib: read(&ib_mem, IB_VA),
            events: irq.events(),
        };
        drop(engines);
        (out, calls)
    }

    /// A packet encoder: writes its dwords for a family, returns how many.
    type Enc<'a> = &'a dyn Fn(GfxFamily, &mut [u32]) -> usize;

    fn enc(family: GfxFamily, pkts: &[Enc<'_>]) -> Vec<u32> {
        let mut out = vec![0u32; 256];
        let mut n = 0;
        for p in pkts {
            n += p(family, &mut out[n..]);
        }
        out.truncate(n);
        out
    }

    fn wd(addr: u64, data: &'static [u32]) -> impl Fn(GfxFamily, &mut [u32]) -> usize {
        move |f, o| WriteData::memory(addr, data).encode(f, o).unwrap()
    }

    fn pred(mask: u8, count: u16) -> impl Fn(GfxFamily, &mut [u32]) -> usize {
        move |f, o| {
            PredExec {
                exec_count: count,
                xcc_mask: mask,
            }
            .encode(f, o)
            .unwrap()
        }
    }

    fn wait32(
        addr: u64,
        function: CompareFn,
        reference: u32,
    ) -> impl Fn(GfxFamily, &mut [u32]) -> usize {
        move |f, o| {
            WaitRegMem::memory(function, addr, reference, u32::MAX, 4)
                .encode(f, o)
                .unwrap()
        }
    }

    fn raw<const N: usize>(words: [u32; N]) -> impl Fn(GfxFamily, &mut [u32]) -> usize {
        move |_, o| {
            o[..words.len()].copy_from_slice(&words);
            words.len()
        }
    }

    fn atomic_add(addr: u64) -> impl Fn(GfxFamily, &mut [u32]) -> usize {
        move |f, o| AtomicMem::add_32(addr, 1).encode(f, o).unwrap()
    }

    /// A named IB and what to store (data dword, value) when it first blocks.
    type Case = (&'static str, Vec<u32>, Option<(u64, u32)>);

    /// The IBs, encoded for `family`.
    fn cases(family: GfxFamily) -> Vec<Case> {
        let d = DATA_VA;
        let e = |p: &[Enc<'_>]| enc(family, p);
        let wdh = WriteData::memory(d, &[5]).head();
        // DST_SEL 1 (memory sync) rather than the constructor's 5: both write memory.
        let copy = CopyData {
            dst_sel: pkt3::copy_sel::MEMORY,
            ..CopyData::imm64_to_mem(0x1234_5678_9abc_def0, d + 0x100)
        };
        let release = ReleaseMem::end_of_pipe_write32(d + 0x200, 77)
            .with_interrupt(IntSel::SendInterruptAfterWriteConfirm, 3);
        let w64 = WaitRegMem64 {
            function: CompareFn::Equal,
            mem_space: pkt3::MemSpace::Memory,
            operation: pkt3::WaitOperation::WaitRegMem,
            engine: 0,
            cache_policy: CachePolicy::Lru,
            addr: d + 0x300,
            reference: 0xC0 | (0xC1 << 32),
            mask: u64::MAX,
            poll_interval: 4,
        };
        let mut w64_words = vec![0u32; WaitRegMem64::DWORDS];
        // Encoded for gfx11 (gfx9's firmware rejects it; the encoder writes the same words).
        w64.encode(GfxFamily::Gfx11, &mut w64_words).unwrap();
        let ib_self = |v: u32| -> Vec<u32> {
            // WRITE_DATA over the IB's own dword 9 (the data dword of the next
            // WRITE_DATA), then that WRITE_DATA.
            let mut w = enc(family, &[&wd(IB_VA + 9 * 4, &[0])]);
            w[4] = v;
            w.extend(enc(family, &[&wd(d + 0x40, &[1])]));
            w
        };
        vec![
            // What the runtime's writeValue32 is on a multi-XCC GPU and on one.
            ("pred write", e(&[&pred(1, 5), &wd(d, &[5])]), None),
            ("write", e(&[&wd(d + 8, &[9])]), None),
            ("write 3 dwords", e(&[&wd(d + 8, &[9, 10, 11])]), None),
            (
                "write one address",
                {
                    let mut w = e(&[&wd(d + 8, &[9, 10, 11])]);
                    w[1] |= 1 << 16;
                    w
                },
                None,
            ),
            (
                "write to register",
                {
                    let mut w = e(&[&wd(0x40, &[9])]);
                    w[1] &= !(0xF << 8);
                    w
                },
                None,
            ),
            (
                "write to gds",
                {
                    let mut w = e(&[&wd(0x40, &[9])]);
                    w[1] = (w[1] & !(0xF << 8)) | (3 << 8);
                    w
                },
                None,
            ),
            (
                "write unmapped",
                e(&[&pred(1, 5), &wd(UNMAPPED, &[5])]),
                None,
            ),
            (
                "wait met then write",
                e(&[
                    &wait32(d + 16, CompareFn::Equal, 4),
                    &pred(1, 5),
                    &wd(d, &[6]),
                ]),
                None,
            ),
            (
                "wait blocked then released",
                e(&[
                    &wait32(d + 16, CompareFn::Equal, 99),
                    &pred(1, 5),
                    &wd(d, &[6]),
                ]),
                Some((d + 16, 99)),
            ),
            (
                "wait blocked",
                e(&[
                    &pred(1, 5),
                    &wd(d, &[6]),
                    &wait32(d + 16, CompareFn::Equal, 99),
                ]),
                None,
            ),
            (
                "wait64",
                {
                    let mut w = e(&[&pred(1, 5), &wd(d, &[6])]);
                    w.extend_from_slice(&w64_words);
                    w
                },
                None,
            ),
            (
                "pred mask 0xA5 atomic",
                e(&[&pred(0xA5, 9), &atomic_add(d + 0x80)]),
                None,
            ),
            (
                "atomic on every XCC",
                e(&[&atomic_add(d + 0x80), &atomic_add(d + 0x84)]),
                None,
            ),
            ("pred none", e(&[&pred(0, 5), &wd(d, &[5])]), None),
            // The writeValue32 command's neighbours (`one_write` takes the command itself
            // and must leave each of these to the walk, or do exactly what it does).
            (
                "pred write XCC 0 and 1",
                e(&[&pred(3, 5), &wd(d, &[5])]),
                None,
            ),
            ("pred write XCC 1", e(&[&pred(2, 5), &wd(d, &[5])]), None),
            (
                "pred write XCC 0 and 7",
                e(&[&pred(0x81, 5), &wd(d, &[5])]),
                None,
            ),
            (
                "pred write over its own data",
                e(&[&pred(1, 5), &wd(IB_VA + 6 * 4, &[5])]),
                None,
            ),
            (
                "pred write just past its ib",
                e(&[&pred(1, 5), &wd(IB_VA + 7 * 4, &[5])]),
                None,
            ),
            (
                "pred write just below its ib",
                e(&[&pred(1, 5), &wd(IB_VA - 4, &[5])]),
                None,
            ),
            ("write over its header", e(&[&wd(IB_VA, &[5])]), None),
            (
                "pred write without confirm",
                {
                    let mut w = e(&[&pred(1, 5), &wd(d, &[5])]);
                    w[3] &= !(1 << 20);
                    w
                },
                None,
            ),
            (
                "pred write, undecoded bits set",
                {
                    // Header bits 7:0 of both packets, PRED_EXEC control bits 23:14.
                    let mut w = e(&[&pred(1, 5), &wd(d, &[5])]);
                    w[0] |= 0x5A;
                    w[1] |= 0xFF_C000;
                    w[2] |= 0xA5;
                    w
                },
                None,
            ),
            // The selected XCC's packet runs past the PRED_EXEC's region: the chain's
            // next position falls inside it (the idle-pass walk must not take the chain).
            (
                "pred region inside its packet",
                e(&[&pred(1, 3), &wd(d, &[5]), &pred(4, 0)]),
                None,
            ),
            (
                "pred chain of three",
                e(&[
                    &pred(0, 5),
                    &wd(d, &[5]),
                    &pred(0x40, 5),
                    &wd(d + 4, &[6]),
                    &pred(0, 0),
                ]),
                None,
            ),
            (
                "pred two",
                e(&[&pred(1, 5), &wd(d, &[5]), &pred(2, 5), &wd(d + 4, &[6])]),
                None,
            ),
            (
                "nop header-only and padded",
                e(&[
                    &raw([packet3(op::NOP, 0x3FFF)]),
                    &|f, o| Nop { dwords: 3 }.encode(f, o).unwrap(),
                    &pred(1, 5),
                    &wd(d, &[5]),
                ]),
                None,
            ),
            (
                "copy data",
                e(&[
                    &|f, o| copy.encode(f, o).unwrap(),
                    &pred(1, 5),
                    &wd(d, &[5]),
                ]),
                None,
            ),
            (
                "release mem interrupt",
                e(&[&|f, o| release.encode(f, o).unwrap()]),
                None,
            ),
            ("self-modifying", ib_self(0xAB), None),
            // XCC 0 rewrites the control of the PRED_EXEC that follows (mask 0 -> XCC 0),
            // which is then walked without a packet in between.
            (
                "self-modifying pred",
                e(&[
                    &pred(1, 5),
                    &wd(IB_VA + 8 * 4, &[0x0100_0005]),
                    &pred(0, 5),
                    &wd(d + 0x40, &[1]),
                ]),
                None,
            ),
            // Malformed.
            (
                "truncated packet",
                {
                    let mut w = e(&[&pred(1, 5), &wd(d, &[5])]);
                    w.pop();
                    w
                },
                None,
            ),
            (
                "pred crosses the end",
                e(&[&pred(1, 9), &wd(d, &[5])]),
                None,
            ),
            (
                "bad count",
                vec![packet3(op::WRITE_DATA, 2), wdh[1], wdh[2], wdh[3]],
                None,
            ),
            (
                "bad count after pred",
                e(&[
                    &pred(1, 4),
                    &raw([packet3(op::WRITE_DATA, 2)]),
                    &raw([0x500, 0x20_0000, 0]),
                ]),
                None,
            ),
            (
                "pred of 3 dwords",
                e(&[
                    &raw([packet3(op::PRED_EXEC, 1), 0x0100_0005, 0]),
                    &wd(d, &[5]),
                ]),
                None,
            ),
            (
                "misaligned write",
                {
                    let mut w = e(&[&pred(1, 5), &wd(d, &[5])]);
                    w[4] |= 2;
                    w
                },
                None,
            ),
            (
                "reserved bit",
                {
                    let mut w = e(&[&pred(1, 5), &wd(d, &[5])]);
                    w[3] |= 1 << 2;
                    w
                },
                None,
            ),
            (
                "bad dst_sel",
                {
                    let mut w = e(&[&wd(d, &[5])]);
                    w[1] |= 0xF << 8;
                    w
                },
                None,
            ),
            (
                "type-2 header",
                e(&[&pred(1, 5), &wd(d, &[5]), &raw([0x8000_0000])]),
                None,
            ),
            (
                "unknown opcode",
                e(&[&pred(1, 5), &wd(d, &[5]), &raw([packet3(0x11, 0), 0])]),
                None,
            ),
            (
                "gfx-only opcode",
                e(&[&raw([packet3(0x69, 1), 0, 0])]),
                None,
            ),
            (
                "nested ib",
                e(&[
                    &|f, o| {
                        pkt3::IndirectBuffer::new(IB_VA + 0x200, 0)
                            .encode(f, o)
                            .unwrap()
                    },
                    &wd(d, &[5]),
                ]),
                None,
            ),
            (
                "long ib",
                {
                    let mut w = Vec::new();
                    for i in 0..10u64 {
                        w.extend(e(&[&pred(1, 5), &raw([wdh[0], wdh[1]]), &raw([0, 0, 0])]));
                        let n = w.len();
                        w[n - 3] = (d + 0x400 + 4 * i) as u32;
                        w[n - 1] = i as u32;
                    }
                    w
                },
                None,
            ),
        ]
    }

    /// Every case, on every GPU: the fast path and the general path agree exactly.
    #[test]
    fn ib_fast_path_matches_the_general_path() {
        for (gpu, family, xcc) in GPUS {
            for (name, ib, release) in cases(family) {
                let (fast, _) = run(family, xcc, &ib, release, false);
                let (general, _) = run(family, xcc, &ib, release, true);
                assert_eq!(fast, general, "{gpu}: {name}: {ib:08x?}");
            }
        }
    }

    /// Every single-bit flip of the writeValue32 command (PRED_EXEC + WRITE_DATA, and the
    /// bare WRITE_DATA), on every GPU: the fast path (`one_write` or the walk) and the
    /// general path agree, whether the flipped command still runs, runs elsewhere, runs
    /// on other XCCs or stops the queue.
    #[test]
    fn write_command_bit_flips_match_the_general_path() {
        for (gpu, family, xcc) in GPUS {
            for base in [
                enc(family, &[&pred(1, 5), &wd(DATA_VA + 0x40, &[5])]),
                enc(family, &[&wd(DATA_VA + 0x40, &[5])]),
            ] {
                let (mut ran, mut other) = (0, 0);
                for d in 0..base.len() {
                    for bit in 0..32 {
                        let mut ib = base.clone();
                        ib[d] ^= 1 << bit;
                        let (fast, _) = run(family, xcc, &ib, None, false);
                        let (general, _) = run(family, xcc, &ib, None, true);
                        if fast.data[0x10] == 5 && fast.end == "ran out" {
                            ran += 1;
                        } else {
                            other += 1;
                        }
                        assert_eq!(fast, general, "{gpu}: dword {d} bit {bit}: {ib:08x?}");
                    }
                }
                // Both kinds of flip occur (the value bits still write, the opcode's not).
                assert!(ran > 10 && other > 10, "{gpu}: {ran} ran, {other} not");
            }
        }
    }

    /// The cases do what they say (so the agreement above is about real effects).
    #[test]
    fn ib_cases_have_their_effects() {
        for (gpu, family, xcc) in GPUS {
            let by_name = |n: &str| {
                let (_, ib, rel) = cases(family).into_iter().find(|c| c.0 == n).unwrap();
                run(family, xcc, &ib, rel, false).0
            };
            let o = by_name("pred write");
            assert_eq!(
                (o.data[0], o.executed, o.end.as_str()),
                (5, 1, "ran out"),
                "{gpu}"
            );
            // Unpredicated: every XCC runs it.
            let o = by_name("write");
            assert_eq!((o.data[2], o.executed), (9, xcc), "{gpu}");
            // The XCCs of mask 0xA5 below the XCC count each add 1 once.
            let o = by_name("pred mask 0xA5 atomic");
            let want = (0..xcc).filter(|x| 0xA5u32 >> x & 1 != 0).count() as u32;
            assert_eq!(o.data[0x20], 0x20 + want, "{gpu}");
            let o = by_name("atomic on every XCC");
            assert_eq!(
                (o.data[0x20], o.data[0x21]),
                (0x20 + xcc, 0x21 + xcc),
                "{gpu}"
            );
            let o = by_name("wait blocked then released");
            assert_eq!((o.data[0], o.end.as_str()), (6, "ran out"), "{gpu}");
            let o = by_name("wait blocked");
            assert_eq!(
                (o.data[0], o.end.as_str()),
                (6, "blocked on XCC 0 at dword 7"),
                "{gpu}"
            );
            let o = by_name("write unmapped");
            assert!(
                o.end.contains("memory fault") && o.end.contains("Some(Fault"),
                "{gpu}: {}",
                o.end
            );
            let o = by_name("wait64");
            if family == GfxFamily::Gfx9 {
                assert!(
                    o.end.contains("firmware does not implement it"),
                    "{gpu}: {}",
                    o.end
                );
            } else {
                // Its reference is what memory holds: met at once.
                assert_eq!((o.end.as_str(), o.executed), ("ran out", 2), "{gpu}");
            }
            let o = by_name("release mem interrupt");
            assert_eq!((o.data[0x80], o.events), (77, u64::from(xcc)), "{gpu}");
            // XCC 0 rewrites the second write's data before running it; later XCCs see
            // the rewritten IB.
            let o = by_name("self-modifying pred");
            assert_eq!(
                (o.data[0x10], o.ib[8], o.executed),
                (1, 0x0100_0005, 2),
                "{gpu}"
            );
            let o = by_name("self-modifying");
            assert_eq!((o.data[0x10], o.ib[9]), (0xAB, 0xAB), "{gpu}");
            for bad in [
                "truncated packet",
                "pred crosses the end",
                "bad count",
                "bad count after pred",
                "pred of 3 dwords",
                "misaligned write",
                "reserved bit",
                "bad dst_sel",
                "type-2 header",
            ] {
                let o = by_name(bad);
                assert!(
                    o.end.starts_with("stopped") && o.end.contains("indirect buffer"),
                    "{gpu}: {bad}: {}",
                    o.end
                );
            }
            let o = by_name("unknown opcode");
            assert!(
                o.end.contains("unknown PM4 opcode 0x11"),
                "{gpu}: {}",
                o.end
            );
            let o = by_name("gfx-only opcode");
            assert!(o.end.contains("unknown PM4 opcode"), "{gpu}: {}", o.end);
            let o = by_name("long ib");
            assert_eq!(
                o.data[0x100..0x10A],
                [0, 1, 2, 3, 4, 5, 6, 7, 8, 9],
                "{gpu}"
            );
        }
    }

    /// `push_ib_and_step` on an IB that one read does not hold: one that runs off its
    /// memory faults at the push with the whole IB's length, as `push_ib`'s probe
    /// reports it, nothing stepped; one that spans two objects is pushed (the probe
    /// passes) and left to `step_ib`, which runs it.
    #[test]
    fn fused_push_faults_as_push_ib() {
        let mem = Arc::new(HeapMemory::new());
        let ib_mem = mem.add_region(IB_VA, 4096);
        let ib_next = mem.add_region(IB_VA + 4096, 4096);
        let data = mem.add_region(DATA_VA, 4096);
        let wv = enc(GfxFamily::Gfx9, &[&pred(1, 0), &wd(DATA_VA, &[5])]);
        // Straddles the two regions: the PRED_EXEC in the first, WRITE_DATA in the second.
        let split_va = IB_VA + 4096 - 8;
        ib_mem
            .write(split_va, bytemuck::cast_slice(&wv[..2]))
            .unwrap();
        ib_next
            .write(IB_VA + 4096, bytemuck::cast_slice(&wv[2..]))
            .unwrap();
        let cfg = EngineConfig::for_unit_test(GfxFamily::Gfx9, 1);
        let irq = Arc::new(CountingInterrupts::default());
        let engines = GpuEngines::new(cfg, mem.clone(), irq);
        let inner = engines.inner.clone();
        let mut mc = MemCache::new(inner.clone());
        let mut scratch = Vec::new();
        // Not mapped at all: the fault names the whole IB; runs off the end of the second
        // region: the fault is where the probe finds the first unmapped byte.
        let unmapped = UNMAPPED;
        for (ib, fault) in [
            ((unmapped, 16), (unmapped, 64)),
            ((IB_VA + 8192 - 8, 16), (IB_VA + 8192, 56)),
        ] {
            let ib = pkt3::IndirectBuffer::new(ib.0, ib.1);
            let mut st = Pm4State::for_queue(&inner, EOP_VA, 1);
            let (push, first) = push_ib_and_step(&mut mc, &inner, &mut st, &ib, &mut scratch);
            let Step::Stop(s) = push else {
                panic!("push of an IB off its memory: {push:?}")
            };
            let f = s.fault.expect("a VM fault");
            assert_eq!((f.va, f.len, f.write), (fault.0, fault.1, false));
            assert!(first.is_none());
            assert_eq!(st.depth, 0);
            let mut st2 = Pm4State::for_queue(&inner, EOP_VA, 1);
            let Step::Stop(s2) = st2.push_ib(&mut mc, &ib) else {
                panic!("push_ib of an IB off its memory")
            };
            assert_eq!(format!("{:?}", s2.fault), format!("{:?}", Some(f)));
            assert_eq!(s2.reason, s.reason);
        }
        // Spans two objects: pushed, then run by step_ib.
        let split = pkt3::IndirectBuffer::new(split_va, wv.len() as u32);
        let mut st = Pm4State::for_queue(&inner, EOP_VA, 1);
        let (push, first) = push_ib_and_step(&mut mc, &inner, &mut st, &split, &mut scratch);
        assert!(matches!(push, Step::Done), "{push:?}");
        assert!(first.is_none());
        assert_eq!(st.depth, 1);
        assert!(matches!(
            step_ib(&mut mc, &inner, &mut st, &mut scratch),
            IbStep::Packet(Step::Done)
        ));
        drop(mc);
        assert_eq!(data.load_u32(DATA_VA).unwrap(), 5);
        drop(engines);
    }

    /// The runtime's writeValue32 IB runs in one `step_ib` call on the fast path (every
    /// XCC pass included), in two on the general path (the packet, then the pop).
    #[test]
    fn write_value32_ib_takes_one_call() {
        for (gpu, family, xcc) in GPUS {
            let ib = if xcc > 1 {
                enc(family, &[&pred(1, 5), &wd(DATA_VA, &[5])])
            } else {
                enc(family, &[&wd(DATA_VA, &[5])])
            };
            let (fast, fast_calls) = run(family, xcc, &ib, None, false);
            let (general, general_calls) = run(family, xcc, &ib, None, true);
            assert_eq!(fast, general, "{gpu}");
            // + the call that finds the IB stack empty.
            assert_eq!((fast_calls, general_calls), (2, 3), "{gpu}");
        }
    }
}
