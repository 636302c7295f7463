//! The SDMA engine's packet processor: executes what [`pm4::sdma::decode_sdma`] returns
//! from an SDMA ring (byte read/write pointers) and its indirect buffers (one level).

use pm4::sdma::{self, SdmaPacket, TimestampKind};

use super::memio::MemCache;
use super::pm4exec::{tri, Step, Stop};
use super::queue::{trace_packet, QueueExec, RunOut, RunState};
use super::Inner;

/// Longest packet the engine reads ahead to learn a packet's length (WRITE's count dword).
const HEAD_DWORDS: usize = 4;

fn exec(
    q: &mut QueueExec,
    mem: &mut MemCache,
    inner: &Inner,
    pkt: &SdmaPacket<'_>,
    in_ib: bool,
) -> Step {
    match pkt {
        SdmaPacket::Nop(_) => Step::Done,
        SdmaPacket::CopyLinear(c) => {
            tri!(mem.copy(c.dst, c.src, c.bytes as u64));
            Step::Done
        }
        SdmaPacket::ConstFill(f) => {
            let pattern = match f.fill_size {
                0 => u32::from_ne_bytes([f.data as u8; 4]),
                1 => (f.data & 0xFFFF) | (f.data << 16),
                _ => f.data,
            };
            tri!(mem.fill(f.dst, f.bytes as u64, pattern));
            Step::Done
        }
        SdmaPacket::Fence(f) => {
            tri!(mem.store_u32(f.addr, f.data));
            Step::Done
        }
        SdmaPacket::PollRegmem(p) => {
            if !p.mem_poll {
                if p.hdp_flush {
                    // The HDP flush handshake (write request register, poll done register):
                    // the emulator has no HDP cache, the flush is complete at once.
                    return Step::Done;
                }
                if p.func == pm4::pkt3::CompareFn::Always {
                    // Function 0 passes without looking at the register. ROCr's gfx9+ HDP
                    // flush is this packet: the fixed template {0x8, 0, 0x80000000, 0, 0, 0}
                    // (blit_sdma.cpp `BuildHdpFlushCommand`, SDMA microcode >= 0x1a5), which
                    // the emulator (no HDP cache) completes at once.
                    return Step::Done;
                }
                return Step::stop(Stop::new(
                    "POLL_REGMEM on a register: registers are not modelled",
                ));
            }
            let (mask, reference) = (u64::from(p.mask), u64::from(p.reference));
            Step::done_if(tri!(mem.poll(p.addr, false, p.func, mask, reference)))
        }
        SdmaPacket::Trap(t) => {
            inner.interrupt(mem, Some(t.int_context));
            Step::Done
        }
        SdmaPacket::Atomic(a) => {
            if a.atomic_op != pm4::sdma::ATOMIC_ADD64 {
                return Step::stop(Stop::new(format!(
                    "SDMA ATOMIC operation {} is not modelled (only ADD64 = {})",
                    a.atomic_op,
                    pm4::sdma::ATOMIC_ADD64
                )));
            }
            let cell = tri!(mem.atomic_u64(a.addr));
            cell.fetch_add(a.src_data, std::sync::atomic::Ordering::AcqRel);
            Step::Done
        }
        SdmaPacket::Timestamp(t) => {
            let now = inner.clock.now();
            match t.kind {
                TimestampKind::SetLocal => q.sdma_ts_offset = t.value.wrapping_sub(now),
                TimestampKind::GetLocal => {
                    tri!(mem.store_u64(t.value, now.wrapping_add(q.sdma_ts_offset)))
                }
                TimestampKind::GetGlobal => tri!(mem.store_u64(t.value, now)),
            }
            Step::Done
        }
        SdmaPacket::Write(w) => {
            tri!(mem.write(w.dst, bytemuck::cast_slice(w.data)));
            Step::Done
        }
        SdmaPacket::Indirect(i) => {
            if in_ib {
                return Step::stop(Stop::new("SDMA INDIRECT inside an indirect buffer"));
            }
            if i.ib_dwords > 0 {
                tri!(mem.probe(i.ib_addr, i.ib_dwords as u64 * 4, false));
                q.sdma_ib = Some((i.ib_addr, i.ib_dwords, 0));
            }
            Step::Done
        }
    }
}

fn decode_stop(e: pm4::DecodeError) -> Stop {
    match e {
        pm4::DecodeError::UnknownSdmaOpcode { op, sub_op } => {
            Stop::new(format!("unknown SDMA opcode {op} (sub-opcode {sub_op})"))
        }
        e => Stop::new(format!("malformed SDMA packet: {e}")),
    }
}

/// Decodes and executes the packet in `words`, traced (once it no longer blocks) when
/// tracing is on. `at`: its dword index in the ring or IB, its byte offset there, and
/// (IB level, IB address): level 0 is the ring.
fn decode_exec(
    q: &mut QueueExec,
    mem: &mut MemCache,
    inner: &Inner,
    words: &[u32],
    at: (usize, u64, (u8, u64)),
) -> Step {
    let (dw, byte, ib) = at;
    let in_ib = ib.0 != 0;
    let pkt = match sdma::decode_sdma(words, inner.cfg.sdma_version) {
        Ok((pkt, _)) => pkt,
        Err(e) => return Step::stop(decode_stop(e)),
    };
    if !mem.tr.on {
        return exec(q, mem, inner, &pkt, in_ib);
    }
    if q.tr_start.is_none() {
        q.tr_start = Some(inner.stamp());
    }
    let r = exec(q, mem, inner, &pkt, in_ib);
    if !matches!(r, Step::Blocked) {
        let line = pm4::disasm::sdma_line(dw, &pkt, inner.cfg.sdma_version);
        let start = q.tr_start.take();
        trace_packet(mem, inner, start, byte, ib, line, words);
    }
    r
}

/// Executes the next packet of the running indirect buffer.
fn step_ib(q: &mut QueueExec, mem: &mut MemCache, inner: &Inner, ib: (u64, u32, u32)) -> Step {
    let (va, size, off) = ib;
    if off >= size {
        q.sdma_ib = None;
        return Step::Done;
    }
    let remaining = (size - off) as usize;
    let pva = va + off as u64 * 4;
    let head = HEAD_DWORDS.min(remaining);
    if q.scratch.len() < head {
        q.scratch.resize(head, 0);
    }
    let Some(buf) = q.scratch.get_mut(..head) else {
        return Step::stop(Stop::new("internal: scratch"));
    };
    tri!(mem.read_dwords(pva, buf));
    let n = match sdma::packet_dwords(buf) {
        Ok(n) => n,
        Err(e) => return Step::stop(decode_stop(e)),
    };
    if n > remaining {
        return Step::stop(Stop::new(format!(
            "SDMA packet of {n} dwords crosses the end of the indirect buffer {va:#x}"
        )));
    }
    if q.scratch.len() < n {
        q.scratch.resize(n, 0);
    }
    let mut scratch = std::mem::take(&mut q.scratch);
    let step = match scratch.get_mut(..n) {
        Some(buf) => match mem.read_dwords(pva, buf) {
            Ok(()) => decode_exec(q, mem, inner, buf, (off as usize, off as u64 * 4, (1, va))),
            Err(e) => Step::from(e),
        },
        None => Step::stop(Stop::new("internal: scratch")),
    };
    q.scratch = scratch;
    if let Step::Done = step {
        if let Some((v, s, o)) = q.sdma_ib {
            if v == va && s == size && o == off {
                q.sdma_ib = Some((v, s, o + n as u32));
            }
        }
    }
    step
}

/// Executes up to `budget` SDMA packets.
pub(crate) fn run(q: &mut QueueExec, mem: &mut MemCache, inner: &Inner, budget: u32) -> RunOut {
    let ring_bytes = q.ring_size;
    let ring_dw = ring_bytes / 4;
    let mut executed = 0u32;
    loop {
        if executed >= budget {
            return RunOut {
                executed,
                state: RunState::Budget,
            };
        }
        let off = q.rptr % ring_bytes;
        if let Some(ib) = q.sdma_ib {
            match step_ib(q, mem, inner, ib) {
                Step::Done => executed += 1,
                Step::Blocked => {
                    return RunOut {
                        executed,
                        state: RunState::Blocked,
                    }
                }
                Step::Stop(s) => {
                    // Report the ring offset of the INDIRECT packet.
                    let at = q.rptr.wrapping_sub(24) % ring_bytes;
                    return RunOut {
                        executed,
                        ..q.fault(inner, at, *s)
                    };
                }
            }
            continue;
        }
        let Some(wptr) = q.ring_wptr(mem) else {
            return RunOut {
                executed,
                ..q.fault(inner, off, Stop::new("write pointer not readable"))
            };
        };
        let pending = wptr.wrapping_sub(q.rptr);
        if pending == 0 || pending > (1 << 62) {
            return RunOut {
                executed,
                state: RunState::Idle,
            };
        }
        if q.rptr % 4 != 0 || wptr % 4 != 0 {
            let s = Stop::new(format!(
                "SDMA pointers must be dword aligned (rptr {:#x}, wptr {wptr:#x})",
                q.rptr
            ));
            return RunOut {
                executed,
                ..q.fault(inner, off, s)
            };
        }
        if pending > ring_bytes {
            let s = Stop::new(format!(
                "write pointer {wptr:#x} is more than a ring ({ring_bytes:#x} bytes) ahead of the read pointer {:#x}",
                q.rptr
            ));
            return RunOut {
                executed,
                ..q.fault(inner, off, s)
            };
        }
        let pos = off / 4;
        let pending_dw = (pending / 4) as usize;
        let head = HEAD_DWORDS.min(ring_dw as usize).min(pending_dw.max(1));
        if let Err(s) = q.read_ring(mem, pos, head) {
            return RunOut {
                executed,
                ..q.fault(inner, off, s)
            };
        }
        let n = match sdma::packet_dwords(q.scratch.get(..head).unwrap_or(&[])) {
            Ok(n) => n,
            Err(pm4::DecodeError::Truncated { .. }) if head < HEAD_DWORDS => {
                // A WRITE whose count dword is not submitted yet.
                return RunOut {
                    executed,
                    state: RunState::Idle,
                };
            }
            Err(e) => {
                return RunOut {
                    executed,
                    ..q.fault(inner, off, decode_stop(e))
                }
            }
        };
        if n as u64 > ring_dw {
            let s = Stop::new(format!("SDMA packet of {n} dwords is larger than the ring"));
            return RunOut {
                executed,
                ..q.fault(inner, off, s)
            };
        }
        if n > pending_dw {
            return RunOut {
                executed,
                state: RunState::Idle,
            };
        }
        if let Err(s) = q.read_ring(mem, pos, n) {
            return RunOut {
                executed,
                ..q.fault(inner, off, s)
            };
        }
        let scratch = std::mem::take(&mut q.scratch);
        let step = match scratch.get(..n) {
            Some(words) => decode_exec(q, mem, inner, words, (pos as usize, off, (0, 0))),
            None => Step::stop(Stop::new("internal: scratch")),
        };
        q.scratch = scratch;
        match step {
            Step::Done => {
                q.rptr = q.rptr.wrapping_add(n as u64 * 4);
                executed += 1;
                if let Err(e) = mem.store_u64(q.rptr_va, q.rptr) {
                    return RunOut {
                        executed,
                        ..q.fault(inner, off, e.into())
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
                    ..q.fault(inner, off, *s)
                }
            }
        }
    }
}
