//! The emulated shader core: a gfx9 (CDNA2 gfx90a, CDNA3 gfx942) wave64 interpreter that
//! executes a kernel dispatch's real machine code.
//!
//! Dispatch follows what the CP and SPI do (LLVM `AMDGPUUsage`, "Initial Kernel Execution
//! State"; notes in `firmware-notes/isa-gfx9.md`): read the 64-byte kernel descriptor at
//! `kernel_object`, decode the code at its entry once (cached by entry address until the
//! next TLB flush), then for every work-group: allocate LDS (the packet's
//! `group_segment_size`, at least the descriptor's static size), create
//! ceil(work-items / 64) waves, load their user SGPRs (private segment buffer, dispatch
//! ptr, queue ptr, kernarg ptr, dispatch id, flat scratch init, private segment size,
//! preloaded kernel arguments) and system SGPRs (work-group ids, work-group info, private
//! segment wave offset) and the packed work-item ids in v0, and run the waves round-robin
//! between `s_barrier`s. Work-groups are spread over worker threads (one per host core);
//! the first fault stops the dispatch.

mod lower;
mod mem;
mod wave;
mod workers;

pub use workers::{set_profiling, take_profiles, DispatchProfile, ThreadProfile};

use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use pm4::aql::KernelDispatch;
use pm4::kd::{code_props, KernelDescriptor};

use crate::engine::Inner;
use crate::gpumem::Fault;
use lower::Op;
use mem::{MemPort, QueueScratch};
use wave::{Ctx, Wave, WaveStop};

/// The instruction-set flavour.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// CDNA2 (MI210/MI250X).
    Gfx90a,
    /// CDNA3 (MI300X).
    Gfx942,
}

impl Target {
    /// The decoder's target.
    fn isa(self) -> amdgpu_isa::Target {
        match self {
            Target::Gfx90a => amdgpu_isa::Target::Gfx90a,
            Target::Gfx942 => amdgpu_isa::Target::Gfx942,
        }
    }

    /// The shader model for a KFD `gfx_target_version`, if there is one.
    pub(crate) fn from_gfx_target_version(v: u32) -> Option<Target> {
        match v {
            90010 => Some(Target::Gfx90a),
            90400..=90402 => Some(Target::Gfx942),
            _ => None,
        }
    }
}

/// Why a dispatch stopped: a fault naming the instruction, its address and the kernel.
#[derive(Debug, Clone)]
pub(crate) struct ShaderError {
    pub(crate) reason: String,
    pub(crate) fault: Option<Fault>,
}

impl ShaderError {
    pub(crate) fn new(reason: String) -> Self {
        ShaderError {
            reason,
            fault: None,
        }
    }

    /// An error at op index `pc` of `prog`.
    pub(crate) fn at(prog: &Program, pc: usize, msg: String, fault: Option<Fault>) -> Self {
        let va = prog.addr_of(pc);
        let desc = match prog.insts.get(pc) {
            Some(Some(inst)) => inst.to_string(),
            _ => prog.ops.get(pc).map(describe).unwrap_or_default(),
        };
        ShaderError {
            reason: format!(
                "{msg}: `{desc}` at {va:#x} (kernel {}+{:#x})",
                prog.name,
                va.wrapping_sub(prog.entry)
            ),
            fault,
        }
    }
}

/// A textual form of an op the decoder does not know: encoding, opcode number, raw words.
fn describe(op: &Op) -> String {
    let words: Vec<String> = op.words[..op.len.clamp(1, 3) as usize]
        .iter()
        .map(|w| format!("{w:08x}"))
        .collect();
    format!("{:?} opcode {:#x} [{}]", op.enc, op.op, words.join(" "))
}

/// A kernel's code, decoded once.
pub(crate) struct Program {
    /// Kernel name for messages (`kernel@ENTRY`).
    pub(crate) name: String,
    pub(crate) entry: u64,
    /// Address of the first decoded dword (below `entry` when device functions precede
    /// the kernel).
    base: u64,
    pub(crate) ops: Vec<Op>,
    /// The shared decoder's view of each op (`amdgpu_isa`), for disassembly in messages.
    pub(crate) insts: Vec<Option<amdgpu_isa::Inst>>,
    /// Address of each op.
    addrs: Vec<u64>,
    /// Dword index (from `base`) → op index (`u32::MAX` inside an instruction).
    index: Vec<u32>,
    /// What a wave can execute at most from `entry` when its reachable code is loop-free
    /// (see [`Program::straight_line_cost`]); `None` when it may loop.
    pub(crate) straight_cost: Option<u64>,
}

impl Program {
    fn decode(entry: u64, base: u64, words: &[u32], target: Target) -> Program {
        let mut ops = Vec::with_capacity(words.len());
        let mut insts = Vec::with_capacity(words.len());
        let mut addrs = Vec::with_capacity(words.len());
        let mut index = vec![u32::MAX; words.len()];
        let mut i = 0usize;
        while i < words.len() {
            let w = &words[i..words.len().min(i + 3)];
            let raw = [
                w[0],
                w.get(1).copied().unwrap_or(0),
                w.get(2).copied().unwrap_or(0),
            ];
            let inst = amdgpu_isa::decode(w, target.isa()).ok();
            let op = match &inst {
                Some(ins) => lower::lower(ins, raw),
                None => lower::Op::invalid(raw),
            };
            insts.push(inst);
            index[i] = ops.len() as u32;
            addrs.push(base + 4 * i as u64);
            ops.push(op);
            i += op.len.max(1) as usize;
        }
        let mut p = Program {
            name: format!("kernel@{entry:#x}"),
            entry,
            base,
            ops,
            insts,
            addrs,
            index,
            straight_cost: None,
        };
        p.straight_cost = p.straight_line_cost();
        p
    }

    /// The most a wave can execute from `entry` (each op once, an MFMA weighing
    /// [`MFMA_COST`]) when the code it can reach has no backward branch and no computed
    /// jump (`s_setpc_b64`, `s_swappc_b64`, `s_rfe_b64`): the only ways the program counter
    /// moves other than to the next op are the SOPP branches (`Wave::sopp`) and those
    /// (`Wave::sop1`). The reachable code ends at the first `s_endpgm` no forward branch
    /// jumps past. `None` when a wave may loop (or the scan leaves the decoded code).
    fn straight_line_cost(&self) -> Option<u64> {
        let start = self.index_of(self.entry)?;
        // The furthest op a forward branch seen so far can reach.
        let mut reach = start;
        let mut cost = 0u64;
        for (i, op) in self.ops.iter().enumerate().skip(start) {
            cost += if op.enc == lower::Enc::Mai {
                MFMA_COST
            } else {
                1
            };
            match (op.enc, op.op) {
                // s_branch, s_cbranch_{scc0,scc1,vccz,vccnz,execz,execnz}.
                (lower::Enc::Sopp, 0x02 | 0x04..=0x09) => {
                    if op.imm < 0 {
                        return None;
                    }
                    let t = self
                        .addr_of(i + 1)
                        .wrapping_add((op.imm as u64).wrapping_mul(4));
                    // A target that is not an instruction faults when taken.
                    if let Some(t) = self.index_of(t) {
                        reach = reach.max(t);
                    }
                }
                (lower::Enc::Sopp, 0x01) if i >= reach => return Some(cost),
                (lower::Enc::Sop1, 0x1d..=0x1f) => return None,
                _ => {}
            }
        }
        None
    }

    /// Absolute targets of `s_getpc_b64 s[n:n+1]; s_add_u32 sn, sn, lo; s_addc_u32 sn+1,
    /// sn+1, hi` sequences (how clang materialises call and jump-table addresses).
    fn call_targets(&self) -> Vec<u64> {
        let mut out = Vec::new();
        for i in 0..self.ops.len() {
            let (Some(g), Some(a), Some(c)) =
                (self.ops.get(i), self.ops.get(i + 1), self.ops.get(i + 2))
            else {
                break;
            };
            if g.enc == lower::Enc::Sop1
                && g.op == 0x1c
                && a.enc == lower::Enc::Sop2
                && a.op == 0x00
                && a.dst == g.dst
                && a.src == [g.dst, 255, 0]
                && c.enc == lower::Enc::Sop2
                && c.op == 0x04
                && c.dst == g.dst + 1
                && c.src == [g.dst + 1, 255, 0]
            {
                let off = a.lit as u64 | (c.lit as u64) << 32;
                out.push(self.addr_of(i + 1).wrapping_add(off));
            }
        }
        out
    }

    /// Address of op `i` (one past the end for `i == len`).
    pub(crate) fn addr_of(&self, i: usize) -> u64 {
        match self.addrs.get(i) {
            Some(&a) => a,
            None => self.base + 4 * self.index.len() as u64,
        }
    }

    /// The op index at `va`, when an instruction starts there.
    pub(crate) fn index_of(&self, va: u64) -> Option<usize> {
        let off = va.checked_sub(self.base)?;
        if off % 4 != 0 {
            return None;
        }
        match self.index.get((off / 4) as usize) {
            Some(&i) if i != u32::MAX => Some(i as usize),
            _ => None,
        }
    }
}

/// Decoded programs by entry address, dropped when the GPU's mappings change.
#[derive(Default)]
pub(crate) struct ProgramCache {
    /// The memory-map generation, the programs, and the last one looked up (a launch
    /// loop's kernel: no hashing).
    map: Mutex<ProgramMap>,
}

#[derive(Default)]
struct ProgramMap {
    gen: u64,
    by_entry: HashMap<u64, Arc<Program>>,
    last: Option<Arc<Program>>,
}

/// Most code decoded from one entry (the rest of the code object's segment).
const MAX_CODE_BYTES: u64 = 512 * 1024;

impl ProgramCache {
    /// The program at `entry`, decoded when not cached if `decode` (else `None`).
    fn get(
        &self,
        inner: &Inner,
        entry: u64,
        target: Target,
        decode: bool,
    ) -> Result<Option<Arc<Program>>, ShaderError> {
        let gen = inner.tlb_gen.load(Ordering::Acquire);
        {
            let mut g = self.map.lock().unwrap_or_else(|e| e.into_inner());
            if g.gen != gen {
                g.by_entry.clear();
                g.last = None;
                g.gen = gen;
            }
            if let Some(p) = g.last.as_ref().filter(|p| p.entry == entry) {
                return Ok(Some(p.clone()));
            }
            if let Some(p) = g.by_entry.get(&entry).cloned() {
                g.last = Some(p.clone());
                return Ok(Some(p));
            }
        }
        if !decode {
            return Ok(None);
        }
        let w = inner
            .mem
            .resolve(inner.cfg.gpu_id, entry, 4)
            .map_err(|f| ShaderError {
                reason: format!("kernel code at {entry:#x} not mapped: {f}"),
                fault: Some(f),
            })?;
        let end = (w.va() + w.len() as u64).min(entry.saturating_add(MAX_CODE_BYTES));
        let decode_from = |base: u64| -> Result<Program, ShaderError> {
            let n = ((end.saturating_sub(base)) / 4) as usize;
            let p = w
                .host_ptr(base, 4 * n as u64, false)
                .map_err(|f| ShaderError::new(format!("kernel code at {base:#x}: {f}")))?;
            let words: Vec<u32> = (0..n)
                // SAFETY: [base, base + 4n) lies in the live window `w`.
                .map(|i| unsafe { mem::load_raw(p.add(4 * i), 4) } as u32)
                .collect();
            Ok(Program::decode(entry, base, &words, target))
        };
        // Device functions placed before the kernel: start decoding at the lowest call
        // target found in the code (until no new lower target appears).
        let mut prog = decode_from(entry)?;
        for _ in 0..8 {
            let low = prog
                .call_targets()
                .into_iter()
                .filter(|&t| t >= w.va() && t % 4 == 0)
                .min()
                .unwrap_or(prog.base);
            if low >= prog.base {
                break;
            }
            prog = decode_from(low)?;
        }
        let prog = Arc::new(prog);
        let mut g = self.map.lock().unwrap_or_else(|e| e.into_inner());
        // Not cached when the mappings changed while it was decoded.
        if g.gen == gen {
            g.by_entry.insert(entry, prog.clone());
        }
        Ok(Some(prog))
    }
}

/// What a dispatch did (for the trace).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct DispatchStats {
    pub(crate) workgroups: u64,
    pub(crate) waves: u64,
    pub(crate) instructions: u64,
    pub(crate) lane_instructions: u64,
}

/// Per-dispatch constants each wave's initial state derives from.
pub(crate) struct Setup {
    kd: KernelDescriptor,
    k: KernelDispatch,
    target: Target,
    /// D16 loads zero the unused half (SRAM ECC on) instead of keeping it.
    sramecc: bool,
    packet_va: u64,
    queue_va: u64,
    dispatch_id: u64,
    groups: [u32; 3],
    wg: [u32; 3],
    lds_bytes: usize,
    priv_bytes: u32,
    nregs: usize,
    acc_base: usize,
    preload: Vec<u32>,
    /// PM4 dispatch: the COMPUTE_USER_DATA registers, loaded as the user SGPRs.
    user_data: Option<Vec<u32>>,
    /// The queue's scratch, when the dispatch has a private segment.
    scratch: Option<QueueScratch>,
    /// gfx942 FLAT_SCRATCH base of XCC 0's slice (AQL: the V# base; PM4:
    /// COMPUTE_DISPATCH_SCRATCH_BASE).
    flat_scratch_base: u64,
    /// XCCs the work-groups are spread over (round-robin by work-group number) and the
    /// bytes between their scratch slices (`amd_queue_t.scratch_backing_memory_byte_size`;
    /// 0 for PM4, whose whole grid runs with XCC 0's registers).
    num_xcc: u32,
    xcc_scratch_bytes: u64,
    /// Scratch slots per worker (the most waves a work-group has).
    slots_per_worker: u32,
}

/// A dispatch set up to run: its work-groups' job, the dispatching thread's memory port,
/// and whether the CP may run it on its own thread.
pub(crate) struct Prepared {
    job: Arc<workers::Job>,
    port: MemPort,
    /// The memory-map generation `port` was checked against, when it is the CP thread's
    /// kept port ([`cp_port`]).
    port_gen: Option<u64>,
    workers: usize,
    /// Bounded and unable to wait: see [`INLINE_MAX_COST`].
    pub(crate) inline: bool,
}

impl Prepared {
    /// Runs the dispatch to completion on the calling thread and its helpers.
    pub(crate) fn run(mut self) -> Result<DispatchStats, ShaderError> {
        workers::run(self.job.clone(), &mut self.port, self.workers - 1);
        self.job.result()
    }

    /// [`Prepared::run`] on the CP thread that set it up, which keeps its memory port
    /// (and the translations in it) for its next dispatch.
    pub(crate) fn run_on_cp(mut self) -> Result<DispatchStats, ShaderError> {
        workers::run(self.job.clone(), &mut self.port, self.workers - 1);
        if let Some(gen) = self.port_gen {
            CP_PORT.with(|c| *c.borrow_mut() = Some((gen, self.port)));
        }
        self.job.result()
    }
}

thread_local! {
    /// The CP thread's memory port between the dispatches it sets up, with the
    /// memory-map generation its translations belong to: a launch loop's kernel
    /// descriptor, kernel arguments and buffers are resolved once, not per dispatch
    /// (~750 instructions: the memory map's lookup and the port's allocation and drop).
    static CP_PORT: std::cell::RefCell<Option<(u64, MemPort)>> =
        const { std::cell::RefCell::new(None) };
}

/// Drops the CP thread's kept memory port (called on the CP thread when the memory map
/// changed: its windows would keep freed memory alive until the next dispatch).
pub(crate) fn drop_kept_port() {
    CP_PORT.with(|c| {
        if let Ok(mut p) = c.try_borrow_mut() {
            *p = None;
        }
    });
}

/// The memory port for a dispatch set up on the calling thread: on the CP thread
/// (`on_cp`) the one it kept, when the GPU's mappings did not change since
/// ([`crate::engine::GpuEngines::flush_tlb`]: accesses that start after it resolve
/// addresses again), with the generation to keep it under.
fn dispatch_port(inner: &Inner, on_cp: bool) -> (MemPort, Option<u64>) {
    if !on_cp {
        return (MemPort::new(inner.cfg.gpu_id, inner.mem.clone()), None);
    }
    let gen = inner.tlb_gen.load(Ordering::Acquire);
    let kept = CP_PORT
        .with(|c| c.borrow_mut().take())
        .filter(|(g, p)| *g == gen && p.serves(inner.cfg.gpu_id, &inner.mem));
    let port = match kept {
        Some((_, p)) => p,
        None => MemPort::new(inner.cfg.gpu_id, inner.mem.clone()),
    };
    (port, Some(gen))
}

/// A dispatch may run on the CP's own thread (no hand-off to a dispatch thread and back)
/// when every wave's reachable code is loop-free ([`Program::straight_cost`]) and the
/// grid's waves together execute at most this many instructions (an MFMA counting as
/// [`MFMA_COST`]): at most ~0.1-0.3 ms, and, having no loop, it cannot wait for another
/// queue, the host or another work-group, so running it before the CP looks at its other
/// queues is one of the interleavings the hardware allows.
pub(crate) const INLINE_MAX_COST: u64 = 2048;
/// An MFMA's weight in [`INLINE_MAX_COST`] (a 32x32 one is ~64 VALU ops' work).
const MFMA_COST: u64 = 64;

/// Sets up kernel dispatch `k` (the AQL packet at `packet_va` of the queue whose
/// `amd_queue_t` is at `queue_va`). `on_cp`: called on the CP thread, which does not
/// decode a kernel's code (such a dispatch returns `Ok(None)`, and the caller sets it up
/// again off the CP) and keeps its memory port between dispatches.
pub(crate) fn prepare(
    inner: &Inner,
    k: &KernelDispatch,
    packet_va: u64,
    queue_va: u64,
    dispatch_id: u64,
    on_cp: bool,
) -> Result<Option<Prepared>, ShaderError> {
    prepare_on(inner, None, k, packet_va, queue_va, dispatch_id, on_cp)
}

/// The AQL dispatch `k`'s [`Launch`]: its kernel descriptor, read through `port` as the CP
/// reads it, and the code entry it gives.
fn aql_launch(port: &mut MemPort, k: &KernelDispatch) -> Result<Launch, ShaderError> {
    // One translation and eight 64-bit loads (the CP checked the descriptor is 64-byte
    // aligned; `load_raw` reads an unaligned one bytewise), not 64 byte loads.
    let p = port
        .ptr(k.kernel_object, 64, false)
        .map_err(|f| ShaderError {
            reason: format!("kernel descriptor not mapped: {f}"),
            fault: Some(f),
        })?;
    let mut kdb = [0u8; 64];
    for (i, b) in kdb.chunks_exact_mut(8).enumerate() {
        // SAFETY: `ptr` proved [kernel_object, +64) lies in a live mapping.
        let v = unsafe { mem::load_raw(p.add(8 * i), 8) };
        b.copy_from_slice(&v.to_le_bytes());
    }
    let kd = KernelDescriptor::from_bytes(&kdb);
    let entry = k
        .kernel_object
        .wrapping_add(kd.kernel_code_entry_byte_offset as u64);
    Ok(Launch {
        kd,
        entry,
        user_data: None,
        tmpring: 0,
        scratch_base: 0,
    })
}

/// What starts a dispatch's waves besides the packet: the kernel's resource registers
/// (a kernel descriptor: read from memory for AQL, built from the COMPUTE_PGM_RSRC*
/// registers for PM4 DISPATCH_DIRECT), the code entry, and for PM4 the COMPUTE_USER_DATA
/// registers that are loaded verbatim as the user SGPRs (instead of the values the
/// descriptor's enable bits select).
pub(crate) struct Launch {
    pub(crate) kd: KernelDescriptor,
    pub(crate) entry: u64,
    pub(crate) user_data: Option<Vec<u32>>,
    /// PM4: the COMPUTE_TMPRING_SIZE register (the queue's scratch waves and wave size;
    /// AQL dispatches read it from `amd_queue_t`).
    pub(crate) tmpring: u32,
    /// PM4: COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI as an address (gfx942's architected flat
    /// scratch base of the dispatching XCC; 0 when not programmed).
    pub(crate) scratch_base: u64,
}

/// Sets up a dispatch whose kernel descriptor and entry are already known (see
/// [`Launch`]); `on_cp` as in [`prepare`].
pub(crate) fn prepare_launch(
    inner: &Inner,
    launch: &Launch,
    k: &KernelDispatch,
    packet_va: u64,
    queue_va: u64,
    dispatch_id: u64,
    on_cp: bool,
) -> Result<Option<Prepared>, ShaderError> {
    prepare_on(
        inner,
        Some(launch),
        k,
        packet_va,
        queue_va,
        dispatch_id,
        on_cp,
    )
}

/// [`prepare`] (`launch` None: read from the AQL packet's kernel descriptor) and
/// [`prepare_launch`], with the dispatching thread's memory port ([`dispatch_port`]).
fn prepare_on(
    inner: &Inner,
    launch: Option<&Launch>,
    k: &KernelDispatch,
    packet_va: u64,
    queue_va: u64,
    dispatch_id: u64,
    on_cp: bool,
) -> Result<Option<Prepared>, ShaderError> {
    let (mut port, port_gen) = dispatch_port(inner, on_cp);
    let read;
    let launch = match launch {
        Some(l) => l,
        None => {
            read = aql_launch(&mut port, k)?;
            &read
        }
    };
    let Some(target) = Target::from_gfx_target_version(inner.cfg.gfx_target_version) else {
        return Err(ShaderError::new(format!(
            "{} (no shader model for gfx_target_version {})",
            crate::engine::ISA_NOT_SUPPORTED,
            inner.cfg.gfx_target_version
        )));
    };
    let kd = launch.kd;
    let entry = launch.entry;
    if kd.has(code_props::ENABLE_WAVEFRONT_SIZE32) {
        return Err(ShaderError::new(
            "kernel descriptor asks for wave32, which gfx9 does not have".into(),
        ));
    }
    let Some(prog) = inner.programs.get(inner, entry, target, !on_cp)? else {
        return Ok(None);
    };
    let mut wg = [1u32; 3];
    let mut groups = [1u32; 3];
    for d in 0..3 {
        wg[d] = k.workgroup_size[d].max(1) as u32;
        groups[d] = k.grid_size[d].max(1).div_ceil(wg[d]);
    }
    // Unified VGPR file on gfx90a/gfx942: granule of 8 registers, AccVGPRs from
    // ACCUM_OFFSET (RSRC3) on.
    let nregs = ((kd.granulated_vgpr_count() as usize + 1) * 8).min(512);
    // `accum_offset()` is already in registers ((RSRC3 ACCUM_OFFSET + 1) * 4).
    let acc_base = kd.accum_offset() as usize;
    let preload_n = if target == Target::Gfx942 && launch.user_data.is_none() {
        kd.kernarg_preload_length() as usize
    } else {
        0
    };
    let mut preload = Vec::with_capacity(preload_n);
    for i in 0..preload_n {
        let va = k.kernarg_address + 4 * (kd.kernarg_preload_offset() as u64 + i as u64);
        preload.push(port.load(va, 4).map_err(|f| ShaderError {
            reason: format!("preloaded kernel arguments not mapped: {f}"),
            fault: Some(f),
        })? as u32);
    }
    let priv_bytes = k.private_segment_size.max(kd.private_segment_fixed_size);
    let wg_items: u64 = wg.iter().map(|&x| u64::from(x)).product();
    let slots_per_worker = wg_items.div_ceil(64).max(1) as u32;
    let num_xcc = inner.cfg.num_xcc.max(1);
    let (scratch, flat_scratch_base, xcc_scratch_bytes) = if priv_bytes == 0 {
        (None, 0, 0)
    } else {
        let (sc, flat, xcc_bytes) = queue_scratch(
            &mut port,
            launch,
            target,
            queue_va,
            priv_bytes,
            slots_per_worker,
            num_xcc,
        )?;
        // The private segment wave offset SGPR is 32 bits: the last XCC's last slot must
        // fit in it when the kernel reads it.
        let last = u64::from(num_xcc - 1) * xcc_bytes + u64::from(sc.waves) * sc.wave_bytes;
        if kd.private_segment_enabled() && last > u64::from(u32::MAX) {
            return Err(ShaderError::new(format!(
                "scratch of {last} bytes across {num_xcc} XCCs: a private segment wave \
                 offset beyond 4 GiB (32-bit SGPR) is not modelled"
            )));
        }
        (Some(sc), flat, xcc_bytes)
    };
    let setup = Setup {
        flat_scratch_base,
        num_xcc,
        xcc_scratch_bytes,
        lds_bytes: (k.group_segment_size.max(kd.group_segment_fixed_size) as usize).min(64 * 1024),
        priv_bytes,
        scratch,
        slots_per_worker,
        kd,
        k: *k,
        target,
        sramecc: inner.cfg.sramecc,
        packet_va,
        queue_va,
        dispatch_id,
        groups,
        wg,
        nregs,
        acc_base,
        preload,
        user_data: launch.user_data.clone(),
    };
    let total = groups.iter().map(|&g| g as u64).product::<u64>();
    // Work-groups in flight at once need a scratch slot per wave: no more workers than
    // the queue's COMPUTE_TMPRING_SIZE.WAVES slots hold (the SPI waits for free slots).
    let slot_workers = setup
        .scratch
        .map_or(usize::MAX, |sc| (sc.waves / slots_per_worker) as usize);
    let workers = match inner.shader_threads.load(Ordering::Relaxed) {
        0 => worker_threads(),
        n => n,
    }
    .min(total as usize)
    .min(slot_workers)
    .max(1);
    let inline = prog.straight_cost.is_some_and(|c| {
        c.saturating_mul(u64::from(slots_per_worker))
            .saturating_mul(total)
            <= INLINE_MAX_COST
    });
    let job = Arc::new(workers::Job::new(
        setup,
        prog,
        inner.mem.clone(),
        inner.cfg.gpu_id,
        inner.clock,
        total,
    ));
    Ok(Some(Prepared {
        job,
        port,
        port_gen,
        workers,
        inline,
    }))
}

/// `amd_queue_t.scratch_backing_memory_byte_size` (ROCr `amd_hsa_queue.h`): bytes of each
/// XCC's scratch slice.
const AMD_QUEUE_SCRATCH_BACKING_MEMORY_BYTE_SIZE: u64 = 168;

/// The scratch a dispatch with `priv_bytes` of private segment per work-item gets: the
/// queue's, read from its `amd_queue_t` as the CP does, with gfx942's FLAT_SCRATCH base
/// of XCC 0's slice and the bytes between XCC slices (ROCr splits the queue's scratch
/// evenly between the XCCs and reports the per-XCC size; XCC `x`'s slice starts at
/// base + x x that size: ROCdbgapi `aql_queue_t::scratch_memory_region`). A queue whose
/// scratch is missing or too small for the dispatch stops the dispatch as the CP does (on
/// hardware it raises the queue's scratch event for the runtime to grow it; kfdrt grows
/// it before submitting). PM4 dispatches take the slots from COMPUTE_TMPRING_SIZE and, on
/// gfx942, the base from COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI.
fn queue_scratch(
    port: &mut MemPort,
    launch: &Launch,
    target: Target,
    queue_va: u64,
    priv_bytes: u32,
    waves_per_group: u32,
    num_xcc: u32,
) -> Result<(QueueScratch, u64, u64), ShaderError> {
    let (sc, flat, xcc_bytes) = if launch.user_data.is_some() {
        // PM4: COMPUTE_TMPRING_SIZE gives the slots; the kernel's V# and (gfx90a) flat
        // scratch init come verbatim in COMPUTE_USER_DATA; gfx942's architected flat
        // scratch base is COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI.
        if target == Target::Gfx942 && launch.scratch_base == 0 {
            return Err(ShaderError::new(format!(
                "PM4 dispatch with a {priv_bytes}-byte private segment on gfx942 but \
                 COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI (the architected flat scratch base) \
                 is 0: no scratch for the waves"
            )));
        }
        (
            QueueScratch::from_tmpring(launch.tmpring, [0; 4], 0),
            launch.scratch_base,
            0,
        )
    } else {
        let not_readable = |f| ShaderError {
            reason: format!("amd_queue_t scratch fields not readable: {f}"),
            fault: Some(f),
        };
        let sc = QueueScratch::read(port, queue_va).map_err(not_readable)?;
        let xcc_bytes = port
            .load(queue_va + AMD_QUEUE_SCRATCH_BACKING_MEMORY_BYTE_SIZE, 8)
            .map_err(not_readable)?;
        if num_xcc > 1 && xcc_bytes < u64::from(sc.waves) * sc.wave_bytes {
            return Err(ShaderError::new(format!(
                "the queue's scratch slice per XCC (scratch_backing_memory_byte_size \
                 {xcc_bytes}) is smaller than COMPUTE_TMPRING_SIZE's {} waves of {} bytes: \
                 the {num_xcc} XCCs' slices would overlap",
                sc.waves, sc.wave_bytes
            )));
        }
        (sc, sc.base(), xcc_bytes)
    };
    if sc.lane_bytes() < u64::from(priv_bytes) {
        return Err(ShaderError::new(format!(
            "the dispatch needs {priv_bytes} bytes of scratch per work-item but the queue's \
             COMPUTE_TMPRING_SIZE gives {} ({} bytes per wave): scratch not set up for it",
            sc.lane_bytes(),
            sc.wave_bytes
        )));
    }
    if sc.waves < waves_per_group {
        return Err(ShaderError::new(format!(
            "a work-group has {waves_per_group} waves but the queue's scratch holds {} \
             (COMPUTE_TMPRING_SIZE.WAVES)",
            sc.waves
        )));
    }
    Ok((sc, flat, xcc_bytes))
}

/// Worker threads per dispatch: `KFD_EMU_SHADER_THREADS` when set (for speed-up
/// measurements), else one per host core.
fn worker_threads() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| {
        std::env::var("KFD_EMU_SHADER_THREADS")
            .ok()
            .and_then(|v| v.parse().ok())
            .filter(|&n: &usize| n > 0)
            .unwrap_or_else(|| {
                std::thread::available_parallelism()
                    .map(|n| n.get())
                    .unwrap_or(1)
            })
    })
}

/// A worker thread's reusable state: the work-group's LDS and its waves (no allocation per
/// work-group or wave).
pub(crate) struct WorkerState {
    lds: Vec<u8>,
    pool: Vec<Wave>,
    /// Per-wave flags of the running work-group: ended, waiting at the barrier.
    done: Vec<bool>,
    at_barrier: Vec<bool>,
}

/// Runs work-group number `g` (x fastest) to completion on worker `worker` (whose
/// waves use scratch slots `worker * slots_per_worker ..`).
#[allow(clippy::too_many_arguments)]
pub(crate) fn run_workgroup(
    st: &Setup,
    prog: &Program,
    port: &mut MemPort,
    ws: &mut WorkerState,
    clock: &dyn Fn() -> u64,
    g: u64,
    worker: u32,
    stats: &mut DispatchStats,
) -> Result<(), ShaderError> {
    let gx = (g % st.groups[0] as u64) as u32;
    let gy = ((g / st.groups[0] as u64) % st.groups[1] as u64) as u32;
    let gz = (g / (st.groups[0] as u64 * st.groups[1] as u64)) as u32;
    let gid = [gx, gy, gz];
    // The work-group's XCC: dispatched round-robin over the XCCs by work-group number
    // (firmware-notes/isa-gfx9.md "Scratch"); its waves use that XCC's scratch slice.
    let xcc_offset = (g % u64::from(st.num_xcc)) * st.xcc_scratch_bytes;
    // Partial work-groups at the grid's edge have fewer work-items.
    let mut size = [0u32; 3];
    for d in 0..3 {
        let rem = st.k.grid_size[d].max(1) - gid[d] * st.wg[d];
        size[d] = rem.min(st.wg[d]);
    }
    let items = (size[0] * size[1] * size[2]) as usize;
    let nwaves = items.div_ceil(64).max(1);
    let WorkerState {
        lds,
        pool,
        done,
        at_barrier,
    } = ws;
    lds.iter_mut().for_each(|b| *b = 0);
    while pool.len() < nwaves {
        pool.push(Wave::new(st.nregs, st.acc_base, st.priv_bytes));
    }
    let waves = &mut pool[..nwaves];
    for (w, wave) in waves.iter_mut().enumerate() {
        wave.reset();
        init_wave(
            st,
            prog,
            gid,
            size,
            items,
            w,
            worker * st.slots_per_worker + w as u32,
            xcc_offset,
            wave,
        );
    }
    // Reused per work-group (no allocation per work-group).
    done.clear();
    done.resize(nwaves, false);
    at_barrier.clear();
    at_barrier.resize(nwaves, false);
    loop {
        let mut progressed = false;
        for w in 0..nwaves {
            if done[w] || at_barrier[w] {
                continue;
            }
            let mut ctx = Ctx {
                prog,
                mem: port,
                lds,
                target: st.target,
                sramecc: st.sramecc,
                clock,
            };
            match waves[w].run(&mut ctx)? {
                WaveStop::End => done[w] = true,
                WaveStop::Barrier => at_barrier[w] = true,
                WaveStop::Sleep => {}
            }
            progressed = true;
        }
        if done.iter().all(|&d| d) {
            break;
        }
        // Every live wave reached the barrier: release them (ended waves do not count).
        if (0..nwaves).all(|w| done[w] || at_barrier[w]) {
            at_barrier.iter_mut().for_each(|b| *b = false);
        } else if !progressed {
            return Err(ShaderError::new(format!(
                "work-group {gid:?} of kernel {} deadlocked at a barrier",
                prog.name
            )));
        }
    }
    stats.workgroups += 1;
    stats.waves += nwaves as u64;
    for w in waves.iter() {
        stats.instructions += w.instrs;
        stats.lane_instructions += w.lane_instrs;
    }
    Ok(())
}

/// A wave's initial state (LLVM AMDGPUUsage, "Initial Kernel Execution State"); `slot`
/// is its scratch slot in its XCC's slice, `xcc_offset` that slice's byte offset.
#[allow(clippy::too_many_arguments)]
fn init_wave(
    st: &Setup,
    prog: &Program,
    gid: [u32; 3],
    size: [u32; 3],
    items: usize,
    w: usize,
    slot: u32,
    xcc_offset: u64,
    wave: &mut Wave,
) {
    let kd = &st.kd;
    // The wave's scratch: its slot's offset in the queue's scratch (its XCC's slice plus
    // the slot), and (gfx940+, architected flat scratch; gfx90a kernels set it in their
    // prologue from flat scratch init + wave offset) FLAT_SCRATCH = the wave's scratch
    // base.
    let (wave_offset, flat_scratch) = match &st.scratch {
        Some(sc) => {
            wave.priv_size = sc.lane_bytes() as u32;
            let off = xcc_offset + sc.wave_offset(slot);
            (off as u32, st.flat_scratch_base.wrapping_add(off))
        }
        None => {
            wave.priv_size = 0;
            (0, 0)
        }
    };
    if st.target == Target::Gfx942 {
        wave.s[102] = flat_scratch as u32;
        wave.s[103] = (flat_scratch >> 32) as u32;
    }
    wave.pc = prog.index_of(prog.entry).unwrap_or(0);
    wave.hw_id = w as u32;
    // MODE from RSRC1: FP_ROUND [3:0], FP_DENORM [7:4], DX10_CLAMP [8], IEEE [9].
    wave.mode = kd.float_round_mode_32()
        | kd.float_round_mode_16_64() << 2
        | (kd.float_denorm_mode_32() << 4)
        | (kd.float_denorm_mode_16_64() << 6)
        | (kd.dx10_clamp() as u32) << 8
        | (kd.ieee_mode() as u32) << 9;
    let mut s = 0usize;
    let put = |wave: &mut Wave, s: &mut usize, v: u32| {
        if let Some(r) = wave.s.get_mut(*s) {
            *r = v;
        }
        *s += 1;
    };
    if let Some(ud) = &st.user_data {
        for &v in ud.iter().take(kd.user_sgpr_count() as usize) {
            put(wave, &mut s, v);
        }
    }
    // (A PM4 dispatch's descriptor has no enable bits: only its USER_DATA is loaded.)
    if kd.has(code_props::ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER) {
        // The queue's scratch V# (amd_queue_t.scratch_resource_descriptor).
        for v in st.scratch.map_or([0; 4], |sc| sc.srd) {
            put(wave, &mut s, v);
        }
    }
    if kd.has(code_props::ENABLE_SGPR_DISPATCH_PTR) {
        put(wave, &mut s, st.packet_va as u32);
        put(wave, &mut s, (st.packet_va >> 32) as u32);
    }
    if kd.has(code_props::ENABLE_SGPR_QUEUE_PTR) {
        put(wave, &mut s, st.queue_va as u32);
        put(wave, &mut s, (st.queue_va >> 32) as u32);
    }
    if kd.has(code_props::ENABLE_SGPR_KERNARG_SEGMENT_PTR) {
        put(wave, &mut s, st.k.kernarg_address as u32);
        put(wave, &mut s, (st.k.kernarg_address >> 32) as u32);
    }
    if kd.has(code_props::ENABLE_SGPR_DISPATCH_ID) {
        put(wave, &mut s, st.dispatch_id as u32);
        put(wave, &mut s, (st.dispatch_id >> 32) as u32);
    }
    if kd.has(code_props::ENABLE_SGPR_FLAT_SCRATCH_INIT) {
        // gfx9: the 64-bit address of the queue's scratch (scratch_backing_memory_location);
        // the prologue adds the wave offset and moves it to FLAT_SCRATCH.
        let loc = st.scratch.map_or(0, |sc| sc.location);
        put(wave, &mut s, loc as u32);
        put(wave, &mut s, (loc >> 32) as u32);
    }
    if kd.has(code_props::ENABLE_SGPR_PRIVATE_SEGMENT_SIZE) {
        put(wave, &mut s, st.priv_bytes);
    }
    for &v in &st.preload {
        put(wave, &mut s, v);
    }
    // System SGPRs start right after the USER_SGPR_COUNT user SGPRs.
    s = kd.user_sgpr_count() as usize;
    for (d, &id) in gid.iter().enumerate() {
        if kd.workgroup_id_enabled(d as u32) {
            put(wave, &mut s, id);
        }
    }
    if kd.workgroup_info_enabled() {
        put(wave, &mut s, 0);
    }
    if kd.private_segment_enabled() {
        put(wave, &mut s, wave_offset);
    }
    // EXEC: the wave's live work-items.
    let first = w * 64;
    let live = items.saturating_sub(first).min(64);
    let exec = if live == 64 {
        u64::MAX
    } else {
        (1u64 << live) - 1
    };
    wave.s[126] = exec as u32;
    wave.s[127] = (exec >> 32) as u32;
    // v0: work-item ids packed x | y << 10 | z << 20 (gfx90a/gfx94x); stepped from the
    // wave's first work-item (no division per lane).
    let (sx, sy) = (size[0].max(1), size[1].max(1));
    let f = first as u32;
    if sy == 1 && size[2] <= 1 {
        // A 1-D work-group: the ids are the lane numbers from `first` (a loop that
        // vectorises, no stepping).
        if let Some(v0) = wave.v.get_mut(..64) {
            let live = items.saturating_sub(first).min(64);
            for (l, r) in v0.iter_mut().enumerate() {
                *r = f + l as u32;
            }
            v0[live..].fill(0);
        }
        return;
    }
    let (mut x, mut y, mut z) = (f % sx, (f / sx) % sy, f / (sx * sy));
    for l in 0..64 {
        let id = if first + l < items {
            x | y << 10 | z << 20
        } else {
            0
        };
        if let Some(r) = wave.v.get_mut(l) {
            *r = id;
        }
        x += 1;
        if x == sx {
            x = 0;
            y += 1;
            if y == sy {
                y = 0;
                z += 1;
            }
        }
    }
}
