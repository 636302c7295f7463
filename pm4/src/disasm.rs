//! Disassembler: one line per packet, `OFFSET NAME field=value ...`, field names
//! following the kernel (`soc15d.h`, `nvd.h`, `*_sdma_pkt_open.h`), Mesa `sid.h`
//! and ROCr/HSA headers. Unknown and malformed packets are printed as such with
//! their offset, and decoding continues where the length is known.

use alloc::format;
use alloc::string::{String, ToString};
use alloc::vec::Vec;
use core::fmt;

use crate::aql::{self, AqlPacket, PacketControl};
use crate::error::DecodeError;
use crate::pkt3::{self, copy_sel, event, Pm4Packet};
use crate::sdma::{self, SdmaPacket};
use crate::{GfxFamily, SdmaVersion};

/// Which engine's packet format a buffer holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Engine {
    /// PM4 type-3 (compute queue ring or IB).
    Pm4,
    /// AQL (64-byte slots).
    Aql,
    /// SDMA.
    Sdma,
}

impl Engine {
    /// Parses `pm4`, `aql` or `sdma`.
    pub fn from_name(s: &str) -> Option<Self> {
        match s {
            "pm4" => Some(Engine::Pm4),
            "aql" => Some(Engine::Aql),
            "sdma" => Some(Engine::Sdma),
            _ => None,
        }
    }
}

/// One disassembled packet (or one undecodable region).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DisasmLine {
    /// Byte offset of the packet in the buffer.
    pub offset: usize,
    /// Packet name (`WAIT_REG_MEM`, `BARRIER_AND`, `COPY_LINEAR`, ...),
    /// `UNKNOWN`, `BAD_HEADER` or `TRUNCATED`.
    pub name: &'static str,
    /// Dwords the line covers.
    pub dwords: usize,
    /// Fields in packet order.
    pub fields: Vec<(&'static str, String)>,
    /// Why the packet could not be decoded, if it could not.
    pub error: Option<String>,
    /// True for well-formed packets this crate does not decode.
    pub unknown: bool,
}

impl DisasmLine {
    fn new(offset_dw: usize, name: &'static str, dwords: usize) -> Self {
        DisasmLine {
            offset: offset_dw * 4,
            name,
            dwords,
            fields: Vec::new(),
            error: None,
            unknown: false,
        }
    }
    fn f(&mut self, k: &'static str, v: impl ToString) -> &mut Self {
        self.fields.push((k, v.to_string()));
        self
    }
    fn x(&mut self, k: &'static str, v: u64) -> &mut Self {
        self.fields.push((k, format!("{v:#x}")));
        self
    }
    fn err(mut self, e: DecodeError) -> Self {
        self.error = Some(e.to_string());
        self
    }

    /// True if the line reports an error or an unknown packet.
    pub fn is_problem(&self) -> bool {
        self.error.is_some() || self.unknown
    }

    /// This line as a JSON object:
    /// `{"offset":N,"name":"...","dwords":N,"fields":{"k":"v",...},"unknown":b,"error":null|"..."}`.
    pub fn to_json(&self) -> String {
        let mut s = String::new();
        s.push_str("{\"offset\":");
        s.push_str(&self.offset.to_string());
        s.push_str(",\"name\":");
        json_str(&mut s, self.name);
        s.push_str(",\"dwords\":");
        s.push_str(&self.dwords.to_string());
        s.push_str(",\"fields\":{");
        for (i, (k, v)) in self.fields.iter().enumerate() {
            if i > 0 {
                s.push(',');
            }
            json_str(&mut s, k);
            s.push(':');
            json_str(&mut s, v);
        }
        s.push_str("},\"unknown\":");
        s.push_str(if self.unknown { "true" } else { "false" });
        s.push_str(",\"error\":");
        match &self.error {
            Some(e) => json_str(&mut s, e),
            None => s.push_str("null"),
        }
        s.push('}');
        s
    }
}

/// Appends `v` as a JSON string literal with escaping.
fn json_str(out: &mut String, v: &str) {
    out.push('"');
    for c in v.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

impl fmt::Display for DisasmLine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#06x} {}", self.offset, self.name)?;
        for (k, v) in &self.fields {
            write!(f, " {k}={v}")?;
        }
        if self.unknown {
            write!(f, " (unknown)")?;
        }
        if let Some(e) = &self.error {
            write!(f, " error=\"{e}\"")?;
        }
        Ok(())
    }
}

/// Renders lines as a JSON array.
pub fn to_json(lines: &[DisasmLine]) -> String {
    let mut s = String::from("[");
    for (i, l) in lines.iter().enumerate() {
        if i > 0 {
            s.push(',');
        }
        s.push_str(&l.to_json());
    }
    s.push(']');
    s
}

/// Renders lines as text, one per line.
pub fn to_text(lines: &[DisasmLine]) -> String {
    let mut s = String::new();
    for l in lines {
        s.push_str(&l.to_string());
        s.push('\n');
    }
    s
}

/// Disassembles a buffer of `engine` packets for `family` (SDMA uses
/// `SdmaVersion::for_family(family)`).
pub fn disasm(engine: Engine, family: GfxFamily, words: &[u32]) -> Vec<DisasmLine> {
    match engine {
        Engine::Pm4 => disasm_pm4(family, words),
        Engine::Aql => disasm_aql(words),
        Engine::Sdma => disasm_sdma(SdmaVersion::for_family(family), words),
    }
}

/// Incremental disassembly: decodes the packet at the start of `words`, whose first
/// dword is dword `base_dw` of the whole buffer (offsets in the line are absolute).
/// Returns the line and the dwords it covers (at least 1), or `None` when `words` ends
/// inside the packet and `at_end` is false: more words will follow, call again with a
/// longer slice. With `at_end`, a packet cut by the end is reported as `TRUNCATED`
/// covering the rest, as [`disasm`] does. `None` also when `words` is empty.
/// For [`Engine::Aql`], `base_dw` must be a multiple of 16 (a slot boundary).
pub fn disasm_step(
    engine: Engine,
    family: GfxFamily,
    words: &[u32],
    base_dw: usize,
    at_end: bool,
) -> Option<(DisasmLine, usize)> {
    if words.is_empty() {
        return None;
    }
    match engine {
        Engine::Pm4 => pm4_step(family, words, base_dw, at_end),
        Engine::Aql => aql_step(words, base_dw, at_end),
        Engine::Sdma => sdma_step(SdmaVersion::for_family(family), words, base_dw, at_end),
    }
}

/// Streaming disassembly with bounded memory: [`Disassembler::push`] words as they are
/// read, get lines as soon as their packet is complete; [`Disassembler::finish`] at the
/// end of the input. Holds at most one incomplete packet between pushes.
#[derive(Debug)]
pub struct Disassembler {
    engine: Engine,
    family: GfxFamily,
    pending: Vec<u32>,
    base_dw: usize,
}

impl Disassembler {
    /// A disassembler for `engine` packets of `family`.
    pub fn new(engine: Engine, family: GfxFamily) -> Self {
        Disassembler {
            engine,
            family,
            pending: Vec::new(),
            base_dw: 0,
        }
    }

    /// Dwords consumed so far (the offset of the next line, in dwords).
    pub fn position_dw(&self) -> usize {
        self.base_dw
    }

    /// Decode what `words` completes; `out` gets each line in order.
    pub fn push(&mut self, words: &[u32], out: &mut dyn FnMut(DisasmLine)) {
        if self.pending.is_empty() {
            let used = self.drain(words, false, out);
            self.pending.extend_from_slice(&words[used..]);
        } else {
            self.pending.extend_from_slice(words);
            let pending = core::mem::take(&mut self.pending);
            let used = self.drain(&pending, false, out);
            self.pending = pending;
            self.pending.drain(..used);
        }
    }

    /// End of input: decode what is left (a cut packet becomes `TRUNCATED`).
    pub fn finish(mut self, out: &mut dyn FnMut(DisasmLine)) {
        let pending = core::mem::take(&mut self.pending);
        self.drain(&pending, true, out);
    }

    fn drain(&mut self, words: &[u32], at_end: bool, out: &mut dyn FnMut(DisasmLine)) -> usize {
        let mut off = 0;
        while let Some((line, n)) = disasm_step(
            self.engine,
            self.family,
            &words[off..],
            self.base_dw,
            at_end,
        ) {
            out(line);
            let n = n.clamp(1, words.len() - off);
            off += n;
            self.base_dw += n;
        }
        off
    }
}

fn yn(b: bool) -> u8 {
    b as u8
}

/// Non-default WAIT_REG_MEM fields, printed only when set.
fn wait_extras(l: &mut DisasmLine, opn: pkt3::WaitOperation, engine: u8, cp: pkt3::CachePolicy) {
    if opn != pkt3::WaitOperation::WaitRegMem {
        l.f("operation", opn.name());
    }
    if engine != 0 {
        l.f("engine", if engine == 1 { "pfp" } else { "reserved" });
    }
    if cp != pkt3::CachePolicy::Lru {
        l.f("cache_policy", cp.name());
    }
}

/// Fields of one decoded PM4 packet.
pub fn pm4_line(offset_dw: usize, p: &Pm4Packet<'_>, family: GfxFamily) -> DisasmLine {
    let mut l = DisasmLine::new(offset_dw, p.name(), p.dwords(family));
    match p {
        Pm4Packet::Nop(n) => {
            l.f("dwords", n.dwords);
        }
        Pm4Packet::WriteData(w) => {
            l.f("dst_sel", w.dst_sel.name())
                .f("addr_incr", yn(w.addr_incr))
                .f("wr_confirm", yn(w.wr_confirm))
                .f("cache_policy", w.cache_policy.name())
                .f("engine_sel", w.engine_sel)
                .x("dst_addr", w.addr)
                .f("count", w.data.len());
            let shown: Vec<String> = w.data.iter().take(8).map(|d| format!("{d:#x}")).collect();
            let mut data = shown.join(",");
            if w.data.len() > 8 {
                data.push_str(",...");
            }
            l.f("data", data);
        }
        Pm4Packet::WaitRegMem(w) => {
            l.f("function", w.function.name())
                .f("mem_space", w.mem_space.name())
                .x("addr", w.addr)
                .x("reference", w.reference as u64)
                .x("mask", w.mask as u64)
                .f("poll_interval", w.poll_interval);
            wait_extras(&mut l, w.operation, w.engine, w.cache_policy);
            if w.optimize_ace_offload {
                l.f("optimize_ace_offload", 1);
            }
        }
        Pm4Packet::WaitRegMem64(w) => {
            l.f("function", w.function.name())
                .f("mem_space", w.mem_space.name())
                .x("addr", w.addr)
                .x("reference", w.reference)
                .x("mask", w.mask)
                .f("poll_interval", w.poll_interval);
            wait_extras(&mut l, w.operation, w.engine, w.cache_policy);
        }
        Pm4Packet::ReleaseMem(r) => {
            match event::name(r.event_type) {
                Some(n) => l.f("event_type", n),
                None => l.x("event_type", r.event_type as u64),
            };
            l.f("event_index", r.event_index)
                .x(
                    if family.has_gcr() {
                        "gcr_cntl"
                    } else {
                        "cache_action"
                    },
                    r.cache_actions as u64,
                )
                .f("cache_policy", r.cache_policy.name())
                .f("execute", yn(r.execute))
                .f("dst_sel", r.dst_sel)
                .f("int_sel", r.int_sel.name())
                .f("data_sel", r.data_sel.name())
                .x("addr", r.addr)
                .x("data", r.data)
                .x("int_ctxid", r.int_ctxid as u64);
        }
        Pm4Packet::AcquireMem(a) => {
            l.f("engine", a.engine)
                .x("coher_cntl", a.coher_cntl as u64)
                .x("coher_size", a.coher_size)
                .x("coher_base", a.coher_base)
                .f("poll_interval", a.poll_interval);
            if family.has_gcr() {
                l.x("gcr_cntl", a.gcr_cntl as u64);
            }
        }
        Pm4Packet::IndirectBuffer(ib) => {
            l.x("ib_base", ib.addr)
                .f("ib_size", ib.size_dw)
                .f("chain", yn(ib.chain))
                .f("offload_polling", yn(ib.offload_polling))
                .f("volatile", yn(ib.volatile))
                .f("valid", yn(ib.valid))
                .f("vmid", ib.vmid)
                .f("cache_policy", ib.cache_policy.name())
                .f("pre_resume", yn(ib.pre_resume))
                .f("priv", yn(ib.priv_));
        }
        Pm4Packet::EventWrite(e) => {
            match event::name(e.event_type) {
                Some(n) => l.f("event_type", n),
                None => l.x("event_type", e.event_type as u64),
            };
            l.f("event_index", e.event_index);
            if let Some(a) = e.addr {
                l.x("address", a);
            }
        }
        Pm4Packet::CopyData(c) => {
            l.f("src_sel", copy_sel::src_name(c.src_sel))
                .f("dst_sel", copy_sel::dst_name(c.dst_sel))
                .f("src_cache_policy", c.src_cache_policy.name())
                .f("count_sel", if c.count_sel_64 { "64" } else { "32" })
                .f("wr_confirm", yn(c.wr_confirm))
                .f("dst_cache_policy", c.dst_cache_policy.name())
                .f("pq_exe_status", yn(c.pq_exe_status))
                .f("engine_sel", c.engine_sel)
                .x("src", c.src)
                .x("dst", c.dst);
        }
        Pm4Packet::DmaData(d) => {
            l.f("engine_sel", d.engine_sel)
                .f("src_sel", d.src_sel.name())
                .f("dst_sel", d.dst_sel.name())
                .f("src_cache_policy", d.src_cache_policy.name())
                .f("dst_cache_policy", d.dst_cache_policy.name())
                .f("cp_sync", yn(d.cp_sync))
                .x(
                    if matches!(d.src_sel, pkt3::DmaSrcSel::Data) {
                        "data"
                    } else {
                        "src_addr"
                    },
                    d.src,
                )
                .x("dst_addr", d.dst)
                .f("byte_count", d.byte_count)
                .f("sas", yn(d.sas))
                .f("das", yn(d.das))
                .f("saic", yn(d.saic))
                .f("daic", yn(d.daic))
                .f("raw_wait", yn(d.raw_wait))
                .f("dis_wc", yn(d.dis_wc));
        }
        Pm4Packet::AtomicMem(a) => {
            l.f("atomic", a.atomic)
                .f("command", a.command)
                .f("cache_policy", a.cache_policy.name())
                .f("engine_sel", a.engine_sel)
                .x("addr", a.addr)
                .x("src_data", a.src_data)
                .x("cmp_data", a.cmp_data)
                .f("loop_interval", a.loop_interval);
        }
        Pm4Packet::SetShReg(s) => {
            l.x("reg_offset", s.reg_offset as u64)
                .x("reg", (pkt3::SH_REG_START + s.reg_offset as u32) as u64);
            let vals: Vec<String> = s.values.iter().map(|d| format!("{d:#x}")).collect();
            l.f("values", vals.join(","));
        }
        Pm4Packet::DispatchDirect(d) => {
            l.f("dim_x", d.dim_x)
                .f("dim_y", d.dim_y)
                .f("dim_z", d.dim_z)
                .x("dispatch_initiator", d.dispatch_initiator as u64);
        }
        Pm4Packet::PredExec(p) => {
            l.f("exec_count", p.exec_count)
                .x("xcc_mask", p.xcc_mask as u64);
        }
        Pm4Packet::Unknown { opcode, .. } => {
            l.x("opcode", *opcode as u64);
            l.unknown = true;
        }
    }
    l
}

/// Disassembles a PM4 buffer.
pub fn disasm_pm4(family: GfxFamily, words: &[u32]) -> Vec<DisasmLine> {
    collect(Engine::Pm4, family, words)
}

fn collect(engine: Engine, family: GfxFamily, words: &[u32]) -> Vec<DisasmLine> {
    let mut out = Vec::new();
    let mut off = 0;
    while let Some((l, n)) = disasm_step(engine, family, &words[off..], off, true) {
        out.push(l);
        off += n.clamp(1, words.len() - off);
    }
    out
}

fn pm4_step(
    family: GfxFamily,
    words: &[u32],
    base: usize,
    at_end: bool,
) -> Option<(DisasmLine, usize)> {
    match pkt3::decode_pm4(words, family) {
        Ok((p, n)) => Some((pm4_line(base, &p, family), n)),
        Err(e @ DecodeError::BadHeaderType { header, .. }) => {
            let mut l = DisasmLine::new(base, "BAD_HEADER", 1);
            l.x("header", header as u64);
            Some((l.err(e), 1))
        }
        Err(DecodeError::Truncated { .. }) if !at_end => None,
        Err(e @ DecodeError::Truncated { .. }) => {
            let mut l = DisasmLine::new(base, "TRUNCATED", words.len());
            l.x("header", words[0] as u64);
            if let Ok((opc, _)) = pkt3::decode_header(words[0]) {
                l.f("opcode", pkt3::opcode_name(opc).unwrap_or("UNKNOWN"));
            }
            Some((l.err(e), words.len()))
        }
        Err(e) => {
            // A type-3 header with a bad body: its length is known, skip it.
            let (opc, n) = pkt3::decode_header(words[0]).unwrap_or((0, 1));
            if n > words.len() && !at_end {
                return None;
            }
            let mut l = DisasmLine::new(base, pkt3::opcode_name(opc).unwrap_or("UNKNOWN"), n);
            l.x("header", words[0] as u64);
            Some((l.err(e), n.max(1)))
        }
    }
}

/// Fields of one decoded SDMA packet.
pub fn sdma_line(offset_dw: usize, p: &SdmaPacket<'_>, version: SdmaVersion) -> DisasmLine {
    let mut l = DisasmLine::new(offset_dw, p.name(), p.dwords(version));
    match p {
        SdmaPacket::Nop(n) => {
            l.f("count", n.count);
        }
        SdmaPacket::CopyLinear(c) => {
            l.f("count", c.bytes - 1)
                .f("bytes", c.bytes)
                .f("tmz", yn(c.tmz))
                .x("parameter", c.parameter as u64)
                .x("src_addr", c.src)
                .x("dst_addr", c.dst);
        }
        SdmaPacket::ConstFill(c) => {
            l.f("fillsize", c.fill_size)
                .x("dst_addr", c.dst)
                .x("src_data", c.data as u64)
                .f("count", c.bytes - 1)
                .f("bytes", c.bytes);
        }
        SdmaPacket::Fence(f) => {
            l.f("mtype", f.mtype)
                .f("gcc", yn(f.gcc))
                .f("sys", yn(f.sys))
                .f("snp", yn(f.snp))
                .f("gpa", yn(f.gpa))
                .f("l2_policy", f.l2_policy)
                .x("addr", f.addr)
                .x("data", f.data as u64);
        }
        SdmaPacket::PollRegmem(p) => {
            l.f("func", p.func.name())
                .f("mem_poll", yn(p.mem_poll))
                .f("hdp_flush", yn(p.hdp_flush))
                .x("addr", p.addr)
                .x("value", p.reference as u64)
                .x("mask", p.mask as u64)
                .f("interval", p.interval)
                .x("retry_count", p.retry_count as u64);
        }
        SdmaPacket::Trap(t) => {
            l.x("int_context", t.int_context as u64);
        }
        SdmaPacket::Atomic(a) => {
            l.f("atomic_op", a.atomic_op)
                .f("loop", yn(a.loop_))
                .f("tmz", yn(a.tmz))
                .x("addr", a.addr)
                .x("src_data", a.src_data)
                .x("cmp_data", a.cmp_data)
                .f("loop_interval", a.loop_interval);
        }
        SdmaPacket::Timestamp(t) => {
            match t.kind {
                sdma::TimestampKind::SetLocal => l.x("init_data", t.value),
                _ => l.x("addr", t.value),
            };
        }
        SdmaPacket::Write(w) => {
            l.x("dst_addr", w.dst).f("count", w.data.len() - 1);
            let shown: Vec<String> = w.data.iter().take(8).map(|d| format!("{d:#x}")).collect();
            let mut data = shown.join(",");
            if w.data.len() > 8 {
                data.push_str(",...");
            }
            l.f("data", data);
        }
        SdmaPacket::Indirect(i) => {
            l.f("vmid", i.vmid)
                .x("base", i.ib_addr)
                .f("ib_size", i.ib_dwords)
                .x("csa_addr", i.csa_addr);
        }
    }
    l
}

/// Disassembles an SDMA buffer. Unknown opcodes have no known length: they are
/// reported one dword at a time.
pub fn disasm_sdma(version: SdmaVersion, words: &[u32]) -> Vec<DisasmLine> {
    let mut out = Vec::new();
    let mut off = 0;
    while off < words.len() {
        let Some((l, n)) = sdma_step(version, &words[off..], off, true) else {
            break;
        };
        out.push(l);
        off += n.clamp(1, words.len() - off);
    }
    out
}

fn sdma_step(
    version: SdmaVersion,
    words: &[u32],
    base: usize,
    at_end: bool,
) -> Option<(DisasmLine, usize)> {
    match sdma::decode_sdma(words, version) {
        Ok((p, n)) => Some((sdma_line(base, &p, version), n)),
        Err(e @ DecodeError::UnknownSdmaOpcode { op, sub_op }) => {
            let mut l = DisasmLine::new(base, "UNKNOWN", 1);
            l.f("op", op)
                .f("sub_op", sub_op)
                .x("header", words[0] as u64);
            l.unknown = true;
            Some((l.err(e), 1))
        }
        Err(DecodeError::Truncated { .. }) if !at_end => None,
        Err(e @ DecodeError::Truncated { .. }) => {
            let mut l = DisasmLine::new(base, "TRUNCATED", words.len());
            l.x("header", words[0] as u64);
            Some((l.err(e), words.len()))
        }
        Err(e) => {
            let n = sdma::packet_dwords(words).unwrap_or(1).max(1);
            if n > words.len() && !at_end {
                return None;
            }
            let name = sdma_op_name(words[0] as u8);
            let mut l = DisasmLine::new(base, name, n);
            l.x("header", words[0] as u64);
            Some((l.err(e), n))
        }
    }
}

fn sdma_op_name(op: u8) -> &'static str {
    match op {
        sdma::op::NOP => "NOP",
        sdma::op::COPY => "COPY",
        sdma::op::WRITE => "WRITE",
        sdma::op::INDIRECT => "INDIRECT",
        sdma::op::FENCE => "FENCE",
        sdma::op::TRAP => "TRAP",
        sdma::op::POLL_REGMEM => "POLL_REGMEM",
        sdma::op::CONST_FILL => "CONST_FILL",
        sdma::op::TIMESTAMP => "TIMESTAMP",
        _ => "UNKNOWN",
    }
}

fn control_fields(l: &mut DisasmLine, c: &PacketControl) {
    l.f("barrier", yn(c.barrier))
        .f("acquire", c.acquire.name())
        .f("release", c.release.name());
}

/// Fields of one decoded AQL packet.
pub fn aql_line(slot: usize, p: &AqlPacket) -> DisasmLine {
    let mut l = DisasmLine::new(slot * aql::PACKET_DWORDS, p.name(), aql::PACKET_DWORDS);
    match p {
        AqlPacket::KernelDispatch(k) => {
            control_fields(&mut l, &k.control);
            l.f("dimensions", k.dimensions)
                .f(
                    "workgroup_size",
                    format!(
                        "{}x{}x{}",
                        k.workgroup_size[0], k.workgroup_size[1], k.workgroup_size[2]
                    ),
                )
                .f(
                    "grid_size",
                    format!("{}x{}x{}", k.grid_size[0], k.grid_size[1], k.grid_size[2]),
                )
                .f("private_segment_size", k.private_segment_size)
                .f("group_segment_size", k.group_segment_size)
                .x("kernel_object", k.kernel_object)
                .x("kernarg_address", k.kernarg_address)
                .x("completion_signal", k.completion_signal);
        }
        AqlPacket::BarrierAnd(b) | AqlPacket::BarrierOr(b) => {
            control_fields(&mut l, &b.control);
            let deps: Vec<String> = b.dep_signals.iter().map(|d| format!("{d:#x}")).collect();
            l.f("dep_signal", deps.join(","))
                .x("completion_signal", b.completion_signal);
        }
        AqlPacket::VendorPm4Ib(v) => {
            control_fields(&mut l, &v.control);
            l.f("amd_format", aql::amd_format::PM4_IB)
                .x("ib_base", v.ib.addr)
                .f("ib_size", v.ib.size_dw)
                .f("valid", yn(v.ib.valid))
                .x("dw_cnt_remain", aql::PM4_IB_DW_CNT_REMAIN as u64)
                .x("completion_signal", v.completion_signal);
        }
        AqlPacket::BarrierValue(b) => {
            control_fields(&mut l, &b.control);
            l.f("amd_format", aql::amd_format::BARRIER_VALUE)
                .x("signal", b.signal)
                .x("value", b.value as u64)
                .x("mask", b.mask as u64)
                .f("cond", b.cond.name())
                .x("completion_signal", b.completion_signal);
        }
        AqlPacket::Invalid => {}
        AqlPacket::Unknown { words } => {
            l.f("type", aql::packet_type::name(words[0] as u8))
                .x("header", (words[0] & 0xFFFF) as u64);
            if words[0] as u8 == aql::packet_type::VENDOR_SPECIFIC {
                l.f("amd_format", (words[0] >> 16) as u8);
            }
            l.unknown = true;
        }
    }
    l
}

/// Disassembles an AQL ring or buffer, one line per 64-byte slot.
pub fn disasm_aql(words: &[u32]) -> Vec<DisasmLine> {
    collect(Engine::Aql, GfxFamily::Gfx9, words)
}

fn aql_step(words: &[u32], base: usize, at_end: bool) -> Option<(DisasmLine, usize)> {
    let Some(c) = words.get(..aql::PACKET_DWORDS) else {
        if !at_end {
            return None;
        }
        let l = DisasmLine::new(base, "TRUNCATED", words.len());
        return Some((
            l.err(DecodeError::Truncated {
                needed: aql::PACKET_DWORDS,
                available: words.len(),
            }),
            words.len(),
        ));
    };
    let slot = base / aql::PACKET_DWORDS;
    let mut w = [0u32; 16];
    w.copy_from_slice(c);
    let line = match AqlPacket::decode(&w) {
        Ok(p) => aql_line(slot, &p),
        Err(e) => {
            let name = match w[0] as u8 {
                aql::packet_type::KERNEL_DISPATCH => "KERNEL_DISPATCH",
                aql::packet_type::BARRIER_AND => "BARRIER_AND",
                aql::packet_type::BARRIER_OR => "BARRIER_OR",
                _ => "VENDOR_SPECIFIC",
            };
            let mut l = DisasmLine::new(base, name, aql::PACKET_DWORDS);
            l.x("header", w[0] as u64);
            l.err(e)
        }
    };
    Some((line, aql::PACKET_DWORDS))
}
