//! Kernel launch: typed arguments checked against the metadata ([`KernelArgs`]),
//! [`Stream::launch`], the per-queue kernarg ring and the per-queue scratch memory.
//!
//! A launch writes the kernarg segment (explicit arguments, then the hidden arguments of
//! code object v5/v6 at the offsets the metadata gives) into the kernarg ring of the
//! stream's hardware queue (GPU visible, allocated with the queue's first launch, shared by
//! the streams on that queue), then submits one AQL KERNEL_DISPATCH packet whose completion
//! signal is the stream's timeline, so the kernel is ordered with every other stream
//! command. The launch path allocates nothing and makes no system call once the ring and
//! the queue's scratch exist. Facts and sources: `firmware-notes/kernels.md`.
//!
//! ```no_run
//! # fn main() -> kfdrt::Result<()> {
//! let dev = kfdrt::Device::open()?;
//! let elf = std::fs::read("vadd.co").unwrap(); // clang -target amdgcn-amd-amdhsa ...
//! let module = dev.load_module(0, &elf)?;
//! let vadd = module.kernel("vadd")?;
//! let (a, b, c) = (
//!     dev.alloc(kfdrt::MemoryKind::Device, 0, 4096)?,
//!     dev.alloc(kfdrt::MemoryKind::Device, 0, 4096)?,
//!     dev.alloc(kfdrt::MemoryKind::Device, 0, 4096)?,
//! );
//! let mut args = vadd.args();
//! args.buffer(&a)?.buffer(&b)?.buffer(&c)?.arg(&1024u32)?;
//! let stream = dev.create_stream(0)?;
//! stream.launch(&vadd, 4, 256, 0, &args)?; // 4 workgroups of 256 work-items
//! stream.synchronize()?;
//! # Ok(()) }
//! ```

use std::sync::atomic::Ordering;
use std::sync::Arc;

use codeobj::ValueKind;
use pm4::aql::{AqlPacket, KernelDispatch, PacketControl};
use zerocopy::{Immutable, IntoBytes};

use crate::error::{Error, ErrorKind, Result};
use crate::memory::{Buffer, MemoryKind};
use crate::module::Kernel;
use crate::queue::{AqlQueue, OneSlot};
use crate::signal::Signal;
use crate::stream::{Point, Stream};
use crate::sync::lock;

/// Bytes of a queue's kernarg ring.
pub const KERNARG_RING_BYTES: usize = 1 << 20;
/// Alignment of every kernarg segment in the ring (at least the 16 bytes HSA requires; a
/// cache line keeps segments apart).
pub const KERNARG_SEGMENT_ALIGN: u64 = 64;

/// At most this many kernarg bytes are taken by one [`KernargRing::warm_next`].
const WARM_MAX_KERNARG_BYTES: u64 = 16 << 10;

/// Grid or block dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Dim3 {
    /// X.
    pub x: u32,
    /// Y.
    pub y: u32,
    /// Z.
    pub z: u32,
}

impl Dim3 {
    /// `(x, y, z)`.
    pub const fn new(x: u32, y: u32, z: u32) -> Dim3 {
        Dim3 { x, y, z }
    }
    fn arr(self) -> [u32; 3] {
        [self.x, self.y, self.z]
    }
}
impl From<u32> for Dim3 {
    fn from(x: u32) -> Dim3 {
        Dim3::new(x, 1, 1)
    }
}
impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Dim3 {
        Dim3::new(x, y, 1)
    }
}
impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Dim3 {
        Dim3::new(x, y, z)
    }
}
impl From<[u32; 3]> for Dim3 {
    fn from(a: [u32; 3]) -> Dim3 {
        Dim3::new(a[0], a[1], a[2])
    }
}

/// The explicit arguments of one kernel, pushed in order and checked against its
/// metadata: a wrong count, size, kind or alignment is an InvalidValue naming the
/// argument. Reusable across launches ([`KernelArgs::clear`]).
#[derive(Clone)]
pub struct KernelArgs {
    kernel: Kernel,
    bytes: Vec<u8>,
    next: usize,
}

impl std::fmt::Debug for KernelArgs {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "KernelArgs({}: {}/{} given)",
            self.kernel.name(),
            self.next,
            self.kernel.explicit.len()
        )
    }
}

const ARG_CALL: &str = "KernelArgs";

impl KernelArgs {
    /// An empty argument list for `kernel`.
    pub fn new(kernel: &Kernel) -> KernelArgs {
        KernelArgs {
            kernel: kernel.clone(),
            bytes: kernel.plan.args_template.clone(),
            next: 0,
        }
    }

    fn slot(&self, what: &str) -> Result<(usize, &codeobj::KernelArg)> {
        let n = self.kernel.explicit.len();
        let Some(&i) = self.kernel.explicit.get(self.next) else {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                ARG_CALL,
                format!(
                    "{}: {what} given as argument {} but the kernel takes {n} argument{}",
                    self.kernel.name(),
                    self.next,
                    if n == 1 { "" } else { "s" }
                ),
            ));
        };
        Ok((i, &self.kernel.metadata().args[i]))
    }

    fn describe(&self, a: &codeobj::KernelArg) -> String {
        format!(
            "{}: argument {} `{}`{} ({}, {} bytes at offset {})",
            self.kernel.name(),
            self.next,
            a.display_name(self.next),
            a.type_name
                .as_deref()
                .map(|t| format!(" of type {t}"))
                .unwrap_or_default(),
            a.value_kind.name(),
            a.size,
            a.offset
        )
    }

    fn put(&mut self, offset: u32, data: &[u8]) {
        let o = offset as usize;
        self.bytes[o..o + data.len()].copy_from_slice(data);
        self.next += 1;
    }

    /// The next argument, passed by value (`by_value`): `T`'s size must be the argument's
    /// and its alignment must not exceed the argument's.
    pub fn arg<T: IntoBytes + Immutable>(&mut self, v: &T) -> Result<&mut Self> {
        let (_, a) = self.slot("a value")?;
        // Borrowed, not cloned: the metadata (names included) is read only on errors.
        let bad = |why: String| Err(Error::new(ErrorKind::InvalidValue, ARG_CALL, why));
        match a.value_kind {
            ValueKind::ByValue => {}
            ValueKind::GlobalBuffer => {
                return bad(format!(
                    "{} is a pointer: pass it with KernelArgs::ptr",
                    self.describe(a)
                ))
            }
            _ => {
                return Err(Error::new(
                    ErrorKind::NotSupported,
                    ARG_CALL,
                    format!("{}: this argument kind is not supported", self.describe(a)),
                ))
            }
        }
        let b = v.as_bytes();
        if b.len() != a.size as usize {
            return bad(format!("{}: {} bytes given", self.describe(a), b.len()));
        }
        let align = core::mem::align_of::<T>() as u32;
        if align > a.align {
            return bad(format!(
                "{}: the value's {align}-byte alignment exceeds the argument's {}",
                self.describe(a),
                a.align
            ));
        }
        let offset = a.offset;
        self.put(offset, b);
        Ok(self)
    }

    /// The next argument, passed by value (`by_value`) as raw bytes of any size (a C
    /// caller's struct: HIP allows up to 4 KiB of kernarg); `bytes.len()` must be the
    /// argument's size. Like [`KernelArgs::arg`] of a byte array.
    pub fn arg_bytes(&mut self, bytes: &[u8]) -> Result<&mut Self> {
        let (_, a) = self.slot("a value")?;
        let kind = match a.value_kind {
            ValueKind::ByValue if bytes.len() == a.size as usize => None,
            ValueKind::ByValue | ValueKind::GlobalBuffer => Some(ErrorKind::InvalidValue),
            _ => Some(ErrorKind::NotSupported),
        };
        if let Some(kind) = kind {
            let why = format!("{}: {} value bytes given", self.describe(a), bytes.len());
            return Err(Error::new(kind, ARG_CALL, why));
        }
        let offset = a.offset;
        self.put(offset, bytes);
        Ok(self)
    }

    /// The next argument, a global address (`global_buffer`).
    pub fn ptr(&mut self, addr: u64) -> Result<&mut Self> {
        let (_, a) = self.slot("a pointer")?;
        if a.value_kind != ValueKind::GlobalBuffer || a.size != 8 {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                ARG_CALL,
                format!("{}: a pointer given", self.describe(a)),
            ));
        }
        let offset = a.offset;
        self.put(offset, &addr.to_le_bytes());
        Ok(self)
    }

    /// The next argument, the GPU address of `buf` (`global_buffer`).
    pub fn buffer(&mut self, buf: &Buffer) -> Result<&mut Self> {
        self.ptr(buf.va())
    }

    /// Forget the arguments given so far (to build a new list for the same kernel).
    pub fn clear(&mut self) {
        self.bytes.copy_from_slice(&self.kernel.plan.args_template);
        self.next = 0;
    }

    /// Arguments given so far.
    pub fn count(&self) -> usize {
        self.next
    }

    /// The kernarg segment as built so far: explicit arguments and the hidden arguments
    /// that are the same for every launch (apertures, zeros); those that depend on the
    /// launch (grid, block, dynamic LDS, queue) are zero until a launch fills them in the
    /// ring.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }
}

/// Launch-dependent values a hidden argument can take, by index into the array
/// [`HiddenWriter::write`] builds per launch: block counts x, y, z; group sizes x, y, z;
/// grid dims; dynamic LDS size; queue pointer.
const HV_BLOCK_COUNT: u8 = 0;
const HV_GROUP_SIZE: u8 = 3;
const HV_GRID_DIMS: u8 = 6;
const HV_DYNAMIC_LDS: u8 = 7;
const HV_QUEUE_PTR: u8 = 8;

/// Where a launch-dependent hidden argument goes in the kernarg segment: its offset,
/// size and value index (`HV_*`).
#[derive(Debug, Clone, Copy)]
struct HiddenField {
    offset: u32,
    size: u8,
    value: u8,
}

/// Launch-dependent hidden arguments a kernel can have: block counts and group sizes in
/// 3 dimensions, grid dims, dynamic LDS size, queue pointer.
const MAX_LAUNCH_HIDDEN: usize = 9;

/// No run (see [`HiddenWriter`]).
const NO_RUN: u32 = u32::MAX;

/// The launch-dependent hidden arguments one kernel's metadata declares, arranged at load
/// so that a launch writes exactly those: code object v5's `hidden_block_count_{x,y,z}`
/// (three u32 in a row) and `hidden_group_size_{x,y,z}` (three u16 in a row) each as one
/// run of two stores; any other declared field (or these in another layout) one store.
#[derive(Debug, Clone, Copy)]
struct HiddenWriter {
    /// Offset of the block-count run, or [`NO_RUN`].
    block_counts: u32,
    /// Offset of the group-size run, or [`NO_RUN`].
    group_sizes: u32,
    /// The other fields (`n` used).
    fields: [HiddenField; MAX_LAUNCH_HIDDEN],
    n: usize,
}

impl HiddenWriter {
    /// From the launch-dependent fields of a kernel's metadata.
    fn new(all: &[HiddenField]) -> HiddenWriter {
        let find =
            |value: u8, size: u8| all.iter().position(|f| f.value == value && f.size == size);
        // A run: value indexes `first..first + 3` of `size` bytes each, back to back.
        let run = |first: u8, size: u8| -> Option<u32> {
            let o = all[find(first, size)?].offset;
            let next = |d: u8| {
                find(first + d, size).map(|i| all[i].offset)
                    == Some(o + u32::from(d) * u32::from(size))
            };
            (next(1) && next(2)).then_some(o)
        };
        let block_counts = run(HV_BLOCK_COUNT, 4);
        let group_sizes = run(HV_GROUP_SIZE, 2);
        let in_run = |f: &HiddenField| {
            let within = |first: u8, run: Option<u32>, size: u8| {
                run.is_some_and(|o| {
                    (first..first + 3).contains(&f.value)
                        && f.size == size
                        && f.offset == o + u32::from(f.value - first) * u32::from(size)
                })
            };
            within(HV_BLOCK_COUNT, block_counts, 4) || within(HV_GROUP_SIZE, group_sizes, 2)
        };
        let mut w = HiddenWriter {
            block_counts: block_counts.unwrap_or(NO_RUN),
            group_sizes: group_sizes.unwrap_or(NO_RUN),
            fields: [HiddenField {
                offset: 0,
                size: 0,
                value: 0,
            }; MAX_LAUNCH_HIDDEN],
            n: 0,
        };
        for f in all.iter().filter(|f| !in_run(f)) {
            if let Some(slot) = w.fields.get_mut(w.n) {
                *slot = *f;
                w.n += 1;
            }
        }
        w
    }

    /// Nothing to write.
    fn is_empty(&self) -> bool {
        self.block_counts == NO_RUN && self.group_sizes == NO_RUN && self.n == 0
    }

    /// Write the fields into the segment at `seg`.
    ///
    /// # Safety
    /// `seg` points to a writable segment no one else accesses, holding every field
    /// (offsets and sizes checked against the segment size when the plan was made).
    #[inline(always)]
    unsafe fn write(
        &self,
        seg: *mut u8,
        grid: [u32; 3],
        block: [u32; 3],
        dims: u16,
        dynamic_lds: u32,
        queue_ptr: u64,
    ) {
        // SAFETY (all stores): offset + size lie inside the segment (checked in `new`, a
        // run's three fields each); unaligned, as metadata offsets need not be aligned.
        unsafe {
            if self.block_counts != NO_RUN {
                let p = seg.add(self.block_counts as usize);
                (p as *mut u64).write_unaligned(u64::from(grid[0]) | u64::from(grid[1]) << 32);
                (p.add(8) as *mut u32).write_unaligned(grid[2]);
            }
            if self.group_sizes != NO_RUN {
                let p = seg.add(self.group_sizes as usize);
                (p as *mut u32).write_unaligned((block[0] & 0xffff) | block[1] << 16);
                (p.add(4) as *mut u16).write_unaligned(block[2] as u16);
            }
        }
        if self.n == 0 {
            return;
        }
        let values: [u64; MAX_LAUNCH_HIDDEN] = [
            u64::from(grid[0]),
            u64::from(grid[1]),
            u64::from(grid[2]),
            u64::from(block[0]),
            u64::from(block[1]),
            u64::from(block[2]),
            u64::from(dims),
            u64::from(dynamic_lds),
            queue_ptr,
        ];
        for f in &self.fields[..self.n.min(MAX_LAUNCH_HIDDEN)] {
            let v = values[f.value as usize % MAX_LAUNCH_HIDDEN];
            // SAFETY: as above.
            unsafe {
                let p = seg.add(f.offset as usize);
                match f.size {
                    1 => p.write(v as u8),
                    2 => (p as *mut u16).write_unaligned(v as u16),
                    4 => (p as *mut u32).write_unaligned(v as u32),
                    _ => (p as *mut u64).write_unaligned(v),
                }
            }
        }
    }
}

/// What every launch of one kernel reuses, computed when the kernel is looked up
/// ([`crate::Module::kernel`]): the launch path then only checks the shape, copies the
/// argument bytes into the ring and patches the few words that change.
pub(crate) struct LaunchPlan {
    /// The KERNEL_DISPATCH packet with the launch-independent fields (header with system
    /// scope fences and barrier, private segment size, static LDS, kernel object); the
    /// setup dimensions, sizes, dynamic LDS, kernarg address and completion signal are
    /// patched per launch.
    packet: [u32; 16],
    /// The kernarg segment with every launch-independent hidden argument filled in
    /// (private and shared aperture bases; zeros for remainders, offsets, multigrid).
    pub(crate) args_template: Vec<u8>,
    /// The launch-dependent hidden arguments the metadata declares.
    hidden: HiddenWriter,
    /// [`Stream::launch_params`]' copy plan: each explicit argument's (offset, size) in
    /// the kernarg segment, in order (argument `i` comes from `params[i]`).
    params: Box<[(u32, u32)]>,
    /// The (offset, length) runs of `args_template` that no explicit argument covers
    /// (the template's hidden arguments and padding): what `launch_params` copies from
    /// the template; empty when the explicit arguments fill the segment.
    template_runs: Box<[(u32, u32)]>,
    /// Why `launch_params` cannot pass the explicit arguments as raw bytes (an argument
    /// kind other than `by_value` and an 8-byte `global_buffer`, or one outside the
    /// segment), as [`KernelArgs::arg_bytes`] would refuse it.
    params_refuse: Option<(ErrorKind, String)>,
    /// `hidden` has something to write.
    has_hidden: bool,
    /// Why the kernel cannot be launched at all (dynamic stack, a hidden argument kfdrt
    /// does not provide, a kernarg segment too large for the ring).
    refuse: Option<(ErrorKind, String)>,
    ka_len: u64,
    ka_align: u64,
    /// The kernarg segment is empty (no argument, hidden ones included): launches point
    /// the packet at the ring's shared zero segment and take no ring space.
    no_kernargs: bool,
    explicit: usize,
    max_threads: u32,
    /// `max_threads`, or 0 when the launch path must refuse anyway (`refuse`, static LDS
    /// over the limit): one compare on the launch path covers all three.
    fast_max_threads: u32,
    /// Dynamic LDS bytes that still fit beside the static LDS.
    lds_room: u32,
    reqd: Option<[u32; 3]>,
    group_fixed: u32,
    private: u32,
    lds_limit: u32,
    wavefront_size: u32,
}

impl LaunchPlan {
    pub(crate) fn new(
        k: &codeobj::Kernel,
        kernel_object: u64,
        gpu: &crate::Gpu,
        explicit: usize,
    ) -> LaunchPlan {
        let meta = &k.meta;
        let kd = &k.descriptor;
        let name = &k.name;
        let private_base_hi = (gpu.apertures.scratch_base >> 32) as u32;
        let shared_base_hi = (gpu.apertures.lds_base >> 32) as u32;
        let mut args_template = vec![0u8; meta.kernarg_segment_size as usize];
        let mut hidden = [HiddenField {
            offset: 0,
            size: 0,
            value: 0,
        }; MAX_LAUNCH_HIDDEN];
        let mut n_hidden = 0;
        let mut refuse = None;
        if meta.uses_dynamic_stack {
            refuse = Some((
                ErrorKind::NotSupported,
                format!("{name} uses a dynamically sized stack (.uses_dynamic_stack)"),
            ));
        }
        for a in meta.args.iter().filter(|a| a.value_kind.is_hidden()) {
            let (offset, size) = (a.offset, a.size);
            let fixed = match a.value_kind {
                ValueKind::HiddenBlockCount(d) if d < 3 => Err(HV_BLOCK_COUNT + d),
                ValueKind::HiddenGroupSize(d) if d < 3 => Err(HV_GROUP_SIZE + d),
                ValueKind::HiddenGridDims => Err(HV_GRID_DIMS),
                ValueKind::HiddenDynamicLdsSize => Err(HV_DYNAMIC_LDS),
                ValueKind::HiddenQueuePtr => Err(HV_QUEUE_PTR),
                // Whole workgroups only: the grid is given in workgroups.
                ValueKind::HiddenRemainder(_) => Ok(0),
                ValueKind::HiddenGlobalOffset(_) => Ok(0),
                ValueKind::HiddenNone => Ok(0),
                // Only a multi-grid cooperative launch passes one; 0 tells the kernel it
                // is not.
                ValueKind::HiddenMultigridSyncArg => Ok(0),
                ValueKind::HiddenPrivateBase => Ok(u64::from(private_base_hi)),
                ValueKind::HiddenSharedBase => Ok(u64::from(shared_base_hi)),
                _ => {
                    refuse.get_or_insert((
                        ErrorKind::NotSupported,
                        format!(
                            "{name} takes hidden argument {} at offset {offset}, which kfdrt \
                             does not provide",
                            a.value_kind.name()
                        ),
                    ));
                    continue;
                }
            };
            let in_segment = (offset as usize)
                .checked_add(size as usize)
                .is_some_and(|e| e <= args_template.len());
            if !matches!(size, 1 | 2 | 4 | 8) || !in_segment {
                refuse.get_or_insert((
                    ErrorKind::InvalidValue,
                    format!(
                        "{name}: hidden argument {} of {size} bytes at offset {offset} in a \
                         {}-byte kernarg segment",
                        a.value_kind.name(),
                        args_template.len()
                    ),
                ));
                continue;
            }
            match fixed {
                Ok(v) => {
                    let o = offset as usize;
                    args_template[o..o + size as usize]
                        .copy_from_slice(&v.to_le_bytes()[..size as usize]);
                }
                Err(value) => match hidden.get_mut(n_hidden) {
                    Some(h) => {
                        *h = HiddenField {
                            offset,
                            size: size as u8,
                            value,
                        };
                        n_hidden += 1;
                    }
                    None => {
                        refuse.get_or_insert((
                            ErrorKind::InvalidValue,
                            format!("{name}: more than {MAX_LAUNCH_HIDDEN} launch-dependent hidden arguments"),
                        ));
                    }
                },
            }
        }
        let (params, template_runs, params_refuse) = params_plan(k);
        let ka_len = u64::from(meta.kernarg_segment_size).max(1);
        if ka_len > KERNARG_RING_BYTES as u64 / 4 {
            refuse.get_or_insert((
                ErrorKind::NotSupported,
                format!("{name}: a {ka_len}-byte kernarg segment"),
            ));
        }
        let packet = AqlPacket::KernelDispatch(KernelDispatch::new(
            PacketControl::SYSTEM_BARRIER,
            [1, 1, 1],
            [1, 1, 1],
            kd.private_segment_fixed_size,
            kd.group_segment_fixed_size,
            kernel_object,
            0,
            0,
        ))
        .encode();
        let hidden = HiddenWriter::new(&hidden[..n_hidden]);
        let lds_limit = gpu.lds_limit();
        let lds_fits = kd.group_segment_fixed_size <= lds_limit;
        let fast_max_threads = if refuse.is_none() && lds_fits {
            meta.max_flat_workgroup_size
        } else {
            0
        };
        LaunchPlan {
            packet,
            args_template,
            has_hidden: !hidden.is_empty(),
            hidden,
            params,
            template_runs,
            params_refuse,
            refuse,
            ka_len,
            no_kernargs: meta.kernarg_segment_size == 0,
            ka_align: u64::from(meta.kernarg_segment_align)
                .max(KERNARG_SEGMENT_ALIGN)
                .next_power_of_two(),
            explicit,
            max_threads: meta.max_flat_workgroup_size,
            fast_max_threads,
            lds_room: lds_limit.saturating_sub(kd.group_segment_fixed_size),
            reqd: meta.reqd_workgroup_size,
            group_fixed: kd.group_segment_fixed_size,
            private: kd.private_segment_fixed_size,
            lds_limit,
            wavefront_size: meta.wavefront_size.max(1),
        }
    }

    /// The dispatch packet of one launch without its kernarg address (dwords 10..11) and
    /// completion signal (14..15), both left 0: the template with the launch's setup
    /// dimensions, workgroup and grid sizes and LDS. Dword 0 (header and setup) is for
    /// the caller's release store; the launch copies dwords 1..13 into its ring slot.
    #[inline(always)]
    fn packet_body(&self, dims: u16, block: [u32; 3], items: [u32; 3], lds: u32) -> [u32; 14] {
        let t = &self.packet;
        // hsa_kernel_dispatch_packet_t: setup (dimensions) in the header dword's high
        // half, workgroup sizes (u16), reserved0, grid sizes, private and group segment
        // sizes, kernel object, kernarg address, reserved2.
        [
            (t[0] & 0xffff) | u32::from(dims) << 16,
            (block[0] & 0xffff) | block[1] << 16,
            block[2] & 0xffff,
            items[0],
            items[1],
            items[2],
            t[6],
            lds,
            t[8],
            t[9],
            0,
            0,
            t[12],
            t[13],
        ]
    }

    /// The whole dispatch packet of one launch (completion signal 0), as a launch writes
    /// it.
    #[cfg(test)]
    fn packet(
        &self,
        dims: u16,
        block: [u32; 3],
        items: [u32; 3],
        lds: u32,
        ka_va: u64,
    ) -> [u32; 16] {
        let mut w = [0u32; 16];
        w[..14].copy_from_slice(&self.packet_body(dims, block, items, lds));
        w[10] = ka_va as u32;
        w[11] = (ka_va >> 32) as u32;
        w
    }
}

/// Write the dispatch packet `body` (from [`LaunchPlan::packet_body`]) into the reserved
/// ring slot at `p`: dwords 1..13 with the kernarg address `ka_va` (the completion signal
/// is the queue's to write). Returns dword 0, for the caller's release store.
///
/// # Safety
/// `p` points at 16 writable dwords no one reads until the header is published.
#[inline(always)]
unsafe fn write_packet(p: *mut u32, body: &[u32; 14], ka_va: u64) -> u32 {
    // SAFETY: per the contract; dwords 1..13 of the slot (a fixed-size copy: a few
    // vector moves), then the kernarg address over dwords 10..11.
    unsafe {
        core::ptr::copy_nonoverlapping(body.as_ptr().add(1), p.add(1), 13);
        (p.add(10) as *mut u64).write_unaligned(ka_va);
    }
    body[0]
}

/// [`write_packet`] for a launch whose packet body was not built before (the unshaped
/// launches): dwords 1..13 of the plan's template, then the launch's workgroup and grid
/// sizes, LDS and kernarg address over them, straight into the slot. Returns dword 0.
///
/// # Safety
/// As [`write_packet`].
#[inline(always)]
unsafe fn write_packet_planned(p: *mut u32, plan: &LaunchPlan, shape: &Shape, ka_va: u64) -> u32 {
    let t = &plan.packet;
    let (b, n) = (shape.block, shape.items);
    // SAFETY: per the contract; the same dwords as `packet_body` gives `write_packet`.
    unsafe {
        core::ptr::copy_nonoverlapping(t.as_ptr().add(1), p.add(1), 13);
        // Workgroup sizes (u16 each) and reserved0; grid sizes; group segment size.
        let wg = u64::from((b[0] & 0xffff) | b[1] << 16) | u64::from(b[2] & 0xffff) << 32;
        (p.add(1) as *mut u64).write_unaligned(wg);
        (p.add(3) as *mut u64).write_unaligned(u64::from(n[0]) | u64::from(n[1]) << 32);
        p.add(5).write(n[2]);
        // Fits in u32: dynamic_lds <= lds_limit - group_fixed.
        p.add(7).write(plan.group_fixed + shape.dynamic_lds);
        (p.add(10) as *mut u64).write_unaligned(ka_va);
    }
    (t[0] & 0xffff) | u32::from(shape.dims) << 16
}

/// The copy plan of [`Stream::launch_params`] for kernel `k`: the explicit arguments'
/// (offset, size), the template runs they leave uncovered, and why the arguments cannot
/// be passed as raw bytes (the refusals of [`KernelArgs::arg_bytes`]).
#[allow(clippy::type_complexity)]
fn params_plan(
    k: &codeobj::Kernel,
) -> (
    Box<[(u32, u32)]>,
    Box<[(u32, u32)]>,
    Option<(ErrorKind, String)>,
) {
    let len = k.meta.kernarg_segment_size as usize;
    if len > KERNARG_RING_BYTES {
        // The plan refuses every launch of this kernel anyway (its segment does not fit
        // the ring): no byte map of an implausible size.
        let why = format!("{}: a {len}-byte kernarg segment", k.name);
        return (
            Box::new([]),
            Box::new([]),
            Some((ErrorKind::NotSupported, why)),
        );
    }
    let mut covered = vec![false; len];
    let mut params = Vec::new();
    let mut refuse = None;
    for (i, a) in k
        .meta
        .args
        .iter()
        .filter(|a| !a.value_kind.is_hidden())
        .enumerate()
    {
        let what = || {
            format!(
                "{}: argument {i} `{}` ({}, {} bytes at offset {})",
                k.name,
                a.display_name(i),
                a.value_kind.name(),
                a.size,
                a.offset
            )
        };
        let why = match a.value_kind {
            ValueKind::ByValue => None,
            ValueKind::GlobalBuffer if a.size == 8 => None,
            ValueKind::GlobalBuffer => Some((ErrorKind::InvalidValue, "a pointer must be 8 bytes")),
            _ => Some((
                ErrorKind::NotSupported,
                "this argument kind is not supported",
            )),
        };
        let (o, n) = (a.offset as usize, a.size as usize);
        let why = why.or_else(|| {
            (o.checked_add(n).is_none_or(|e| e > len))
                .then_some((ErrorKind::InvalidValue, "outside the kernarg segment"))
        });
        if let Some((kind, why)) = why {
            refuse.get_or_insert_with(|| (kind, format!("{}: {why}", what())));
            continue;
        }
        covered[o..o + n].fill(true);
        params.push((a.offset, a.size));
    }
    let mut runs = Vec::new();
    let mut at = 0;
    while at < len {
        let Some(start) = (at..len).find(|&b| !covered[b]) else {
            break;
        };
        let end = (start..len).find(|&b| covered[b]).unwrap_or(len);
        runs.push((start as u32, (end - start) as u32));
        at = end;
    }
    (params.into(), runs.into(), refuse)
}

/// Copy `len` bytes from `src` to `dst` (not overlapping): the sizes of one argument
/// (8, 4, 16 bytes) as single moves, anything else with `copy_nonoverlapping`.
///
/// # Safety
/// As `core::ptr::copy_nonoverlapping` (no alignment needed).
#[inline(always)]
unsafe fn copy_bytes(dst: *mut u8, src: *const u8, len: usize) {
    // SAFETY: per the contract; unaligned accesses.
    unsafe {
        match len {
            8 => (dst as *mut u64).write_unaligned((src as *const u64).read_unaligned()),
            4 => (dst as *mut u32).write_unaligned((src as *const u32).read_unaligned()),
            16 => (dst as *mut u128).write_unaligned((src as *const u128).read_unaligned()),
            _ => core::ptr::copy_nonoverlapping(src, dst, len),
        }
    }
}

/// `hsa_kernel_dispatch_packet_t.setup` / `hidden_grid_dims`: the highest dimension whose
/// grid or workgroup extent exceeds 1.
#[inline(always)]
fn dims(grid: [u32; 3], block: [u32; 3]) -> u16 {
    // Branch-free: 1, plus 1 when y or z exceeds 1, plus 1 when z does.
    let z = (grid[2] | block[2]) > 1;
    let yz = z | ((grid[1] | block[1]) > 1);
    1 + u16::from(yz) + u16::from(z)
}

/// A queue's kernarg ring: GPU-visible memory handed out in order; a segment is reused
/// once the launch that used it has completed on its stream's timeline (segments of
/// several streams interleave, each tracked by its own completion point).
pub(crate) struct KernargRing {
    /// The ring's memory: owned here, read on the launch path only through `cpu` and `va`.
    #[cfg_attr(not(test), allow(dead_code))]
    buf: Buffer,
    /// CPU address of `buf` (host memory, mapped at its GPU address).
    cpu: *mut u8,
    /// GPU address of `buf` and its length - 1 (a power of two), kept here so a launch
    /// does not read them through the buffer.
    va: u64,
    mask: u64,
    /// A zeroed segment no launch writes: the kernarg address of kernels without
    /// arguments (the kernel reads none of it; the address is still a valid one).
    zero: Buffer,
    /// Bytes handed out so far (monotonic; the ring offset is `head % len`).
    head: u64,
    /// The ring offset the next rewind starts at: 0 and half the ring in turn, so that a
    /// rewind does not land on the lines the batch since the last rewind used (the ones
    /// the shader cores read last; a batch of at most half the ring), and
    /// [`KernargRing::warm_next`] takes the lines of the next batch, not this one's.
    rewind_base: u64,
    /// `head` at the last [`KernargRing::warm_next`].
    warm_head: u64,
    /// A reservation ending at or before this position needs no look at `inflight`:
    /// the oldest in-flight segment's start + the ring's length (no segment in flight:
    /// `u64::MAX`; the record full: 0). Never above the true bound (it only rises when
    /// segments retire, which `refresh_free` follows).
    free_until: u64,
    /// (start, end, index in `timelines`, packet count) of launches that may still read
    /// their segment: complete when that timeline reaches the count.
    inflight: Inflight,
    /// The timelines of the streams that launched on the queue (deduplicated, so a launch
    /// clones no `Arc`), and the index and address of the last one used (a launch of the
    /// same stream again compares one address).
    timelines: Vec<Arc<Signal>>,
    last_tl: usize,
    last_tl_ptr: *const Signal,
    /// The queue's id and GPU (the completion points handed out to wait for).
    queue_id: u32,
    gpu_index: usize,
}

// SAFETY: `cpu` is the CPU mapping of `buf`, which the ring owns; it is written only
// under the queue's `kernargs` mutex.
unsafe impl Send for KernargRing {}

impl KernargRing {
    fn new(q: &AqlQueue) -> Result<KernargRing> {
        let buf = Buffer::alloc(
            q.core(),
            MemoryKind::HostPinned,
            q.gpu_index(),
            KERNARG_RING_BYTES,
        )?;
        let cpu = buf.as_ptr();
        let (va, mask) = (buf.va(), buf.len() as u64 - 1);
        let zero = Buffer::alloc(
            q.core(),
            MemoryKind::HostPinned,
            q.gpu_index(),
            KERNARG_SEGMENT_ALIGN as usize,
        )?;
        zero.write(0, &[0; KERNARG_SEGMENT_ALIGN as usize])?;
        Ok(KernargRing {
            zero,
            buf,
            cpu,
            va,
            mask,
            head: 0,
            free_until: u64::MAX,
            rewind_base: 0,
            warm_head: 0,
            // Every segment takes at least KERNARG_SEGMENT_ALIGN bytes of a lap, so at
            // most this many are ever in flight: `push_back` never reallocates.
            inflight: Inflight::new(KERNARG_RING_BYTES / KERNARG_SEGMENT_ALIGN as usize),
            timelines: Vec::new(),
            last_tl: 0,
            last_tl_ptr: std::ptr::null(),
            queue_id: q.queue_id(),
            gpu_index: q.gpu_index(),
        })
    }

    /// Find `len` contiguous bytes aligned to `align` (a power of two): `Ok((start,
    /// ring offset))`, to be [`KernargRing::commit`]ted, or `Err(point)` to wait for when
    /// the oldest segment in the way is still in use.
    #[inline(always)]
    fn try_reserve(
        &mut self,
        len: u64,
        align: u64,
        drained: bool,
    ) -> std::result::Result<(u64, u64), Point> {
        let mask = self.mask;
        let cap = mask + 1; // a power of two
        let mut start = (self.head + align - 1) & !(align - 1);
        if (start & mask) + len > cap {
            start = (start + mask) & !mask; // do not straddle the end
        }
        // After a synchronize on the queue (`drained`): when every segment handed out has
        // completed, start again at the ring's beginning or middle (`rewind_base`), so that
        // a launch loop which synchronizes now and then reuses the same few pages and cache
        // lines (mapped, cached) instead of walking the whole ring.
        if drained {
            start = self.drained_start(start);
        }
        let end = start + len;
        if end <= self.free_until {
            return Ok((start, start & mask));
        }
        self.reserve_in_the_way(start, end)
    }

    /// The start of a reservation after a synchronize on the queue (see
    /// [`KernargRing::try_reserve`]): [`KernargRing::rewound`] unless `start` is at the
    /// rewind's base already (off the launch path).
    #[cold]
    #[inline(never)]
    fn drained_start(&mut self, start: u64) -> u64 {
        if start & self.mask != self.rewind_base {
            self.rewound(start)
        } else {
            start
        }
    }

    /// [`KernargRing::try_reserve`] when the oldest in-flight segment may be in the way:
    /// completed segments are retired only then (or when the record is full), not on
    /// every launch.
    #[inline(never)]
    fn reserve_in_the_way(
        &mut self,
        start: u64,
        end: u64,
    ) -> std::result::Result<(u64, u64), Point> {
        let (mask, cap) = (self.mask, self.mask + 1);
        let r = self.retire_in_the_way(end, cap);
        self.refresh_free();
        r.map(|()| (start, start & mask))
    }

    fn retire_in_the_way(&mut self, end: u64, cap: u64) -> std::result::Result<(), Point> {
        while let Some(&(s0, _, tl, target)) = self.inflight.front() {
            let in_the_way = end - s0 > cap;
            if !in_the_way && self.inflight.len() < self.inflight.capacity() {
                break; // everything still in flight lies within one lap behind `end`
            }
            let timeline = &self.timelines[tl as usize];
            if timeline.load() <= crate::stream::TIMELINE_BASE - target as i64 {
                self.inflight.pop_front();
                continue;
            }
            // In the way, or the record is full (then the oldest is in the way too: each
            // segment takes at least KERNARG_SEGMENT_ALIGN bytes of a lap).
            return Err(Point {
                timeline: timeline.clone(),
                target,
                queue_id: self.queue_id,
                gpu_index: self.gpu_index,
            });
        }
        Ok(())
    }

    /// Recompute `free_until` from the in-flight record.
    fn refresh_free(&mut self) {
        self.free_until = match self.inflight.front() {
            None => u64::MAX,
            Some(_) if self.inflight.len() >= self.inflight.capacity() => 0,
            Some(&(s0, ..)) => s0 + self.mask + 1,
        };
    }

    /// `start`, or the first position after it at ring offset `rewind_base` when no
    /// segment is in flight any more (completed ones retired here); the next rewind then
    /// takes the other base.
    #[cold]
    #[inline(never)]
    fn rewound(&mut self, start: u64) -> u64 {
        // One stream launched here (one timeline): its newest segment completing means all
        // have (a timeline completes in order).
        if let ([t], Some(&(_, _, _, target))) = (&self.timelines[..], self.inflight.back()) {
            if t.load() > crate::stream::TIMELINE_BASE - target as i64 {
                return start;
            }
            self.inflight.clear();
        }
        while let Some(&(_, _, tl, target)) = self.inflight.front() {
            if self.timelines[tl as usize].load() > crate::stream::TIMELINE_BASE - target as i64 {
                self.refresh_free();
                return start;
            }
            self.inflight.pop_front();
        }
        self.free_until = u64::MAX;
        let (base, cap) = (self.rewind_base, self.mask + 1);
        self.rewind_base = if base == 0 { cap / 2 } else { 0 };
        // The first position at or after `start` at ring offset `base`.
        let mut at = (start & !self.mask) + base;
        if at < start {
            at += cap;
        }
        // The bytes handed out from here on are what the next `warm_next` takes.
        self.warm_head = at;
        at
    }

    /// Part of [`crate::queue::AqlQueue::warm_next`] (the producer lock held): own the
    /// lines of the segments the next launches take after a drained synchronize (from
    /// [`KernargRing::rewind_base`]): as many bytes as were handed out since the last
    /// call, at most [`WARM_MAX_KERNARG_BYTES`]. Launches that were not followed by a
    /// rewind would have written elsewhere; the stores leave memory unchanged either way.
    pub(crate) fn warm_next(&mut self) {
        // A launch that failed after its reservation leaves `head` behind a rewind.
        let span = self
            .head
            .saturating_sub(self.warm_head)
            .min(WARM_MAX_KERNARG_BYTES);
        self.warm_head = self.head;
        let base = self.rewind_base as usize;
        for off in (base..base + span as usize).step_by(64) {
            // SAFETY: `base + span <= len / 2 + len / 4`: inside the CPU-mapped ring,
            // written by CPUs only under the producer lock the caller holds.
            unsafe { crate::queue::own_line(self.cpu.add(off)) };
        }
    }

    /// The segment at `start` (from [`KernargRing::try_reserve`]) is in use until
    /// `timeline` has completed `target` packets.
    #[inline(always)]
    fn commit(&mut self, start: u64, len: u64, timeline: &Arc<Signal>, target: u64) {
        self.head = start + len;
        let tl = if Arc::as_ptr(timeline) == self.last_tl_ptr {
            self.last_tl
        } else {
            self.timeline_index(timeline)
        };
        self.inflight
            .push_back((start, start + len, tl as u32, target));
        // The first segment in flight: the bound changes. A record this push fills needs no
        // check: each segment takes at least KERNARG_SEGMENT_ALIGN bytes of a lap and the
        // record holds a lap's worth, so the next reservation ends past `free_until` (the
        // oldest start + a lap) and retires first (`retire_in_the_way`).
        if self.free_until == u64::MAX {
            self.refresh_free();
        }
    }

    /// Index of `timeline` in `timelines` (added if new; timelines no launch in flight
    /// uses are dropped once there are many, as streams come and go).
    #[cold]
    fn timeline_index(&mut self, timeline: &Arc<Signal>) -> usize {
        let i = match self.timelines.iter().position(|t| Arc::ptr_eq(t, timeline)) {
            Some(i) => i,
            None => {
                if self.timelines.len() >= 32 {
                    let mut used = vec![false; self.timelines.len()];
                    self.inflight.for_each_mut(|e| used[e.2 as usize] = true);
                    let mut remap = vec![0u32; used.len()];
                    let mut kept = Vec::new();
                    for (j, t) in self.timelines.drain(..).enumerate() {
                        if used[j] {
                            remap[j] = kept.len() as u32;
                            kept.push(t);
                        }
                    }
                    self.timelines = kept;
                    self.inflight.for_each_mut(|e| e.2 = remap[e.2 as usize]);
                }
                self.timelines.push(timeline.clone());
                self.timelines.len() - 1
            }
        };
        self.last_tl = i;
        self.last_tl_ptr = Arc::as_ptr(timeline);
        i
    }
}

/// The in-flight record of a [`KernargRing`]: a fixed ring of (start, end, timeline
/// index, packet count), oldest first (no allocation after creation). Once empty it starts
/// again at its first entry: its 512 KiB are zero pages the allocator never touched, and
/// walking them took a minor page fault (~3-7 us in a VM) every 128 launches of a launch
/// loop that synchronizes (bench-results/2026-11-24-s8-launch-row.txt).
struct Inflight {
    buf: Box<[(u64, u64, u32, u64)]>,
    /// Entries pushed / popped so far (`buf.len()` is a power of two).
    head: usize,
    tail: usize,
}

impl Inflight {
    fn new(capacity: usize) -> Inflight {
        Inflight {
            buf: vec![(0, 0, 0, 0); capacity.next_power_of_two()].into_boxed_slice(),
            head: 0,
            tail: 0,
        }
    }
    fn capacity(&self) -> usize {
        self.buf.len()
    }
    fn len(&self) -> usize {
        self.head - self.tail
    }
    #[inline(always)]
    fn front(&self) -> Option<&(u64, u64, u32, u64)> {
        (self.head != self.tail).then(|| &self.buf[self.tail & (self.buf.len() - 1)])
    }
    fn back(&self) -> Option<&(u64, u64, u32, u64)> {
        (self.head != self.tail).then(|| &self.buf[(self.head - 1) & (self.buf.len() - 1)])
    }
    /// Forget every entry.
    fn clear(&mut self) {
        self.head = 0;
        self.tail = 0;
    }

    fn pop_front(&mut self) {
        if self.head != self.tail {
            self.tail += 1;
            if self.tail == self.head {
                self.clear();
            }
        }
    }
    /// Appends `e`; the caller checked there is room (`len() < capacity()`).
    #[inline(always)]
    fn push_back(&mut self, e: (u64, u64, u32, u64)) {
        debug_assert!(
            self.len() < self.capacity(),
            "a push into a full in-flight record"
        );
        let mask = self.buf.len() - 1;
        self.buf[self.head & mask] = e;
        self.head += 1;
    }
    fn for_each_mut(&mut self, mut f: impl FnMut(&mut (u64, u64, u32, u64))) {
        let mask = self.buf.len() - 1;
        for k in self.tail..self.head {
            f(&mut self.buf[k & mask]);
        }
    }
}

/// The scratch (private segment) memory of one AQL queue and the `amd_queue_t` fields
/// describing it.
#[derive(Default)]
pub(crate) struct QueueScratch {
    buf: Option<Buffer>,
    /// Bytes per work-item the memory is laid out for.
    per_thread: u32,
    /// Waves per XCC it holds.
    waves: u32,
    /// Smaller allocations replaced while dispatches using them may run; freed with the
    /// queue.
    retired: Vec<Buffer>,
}

/// Scratch layout facts per family (ROCr `AqlQueue::InitScratchSRD`,
/// `queue_scratch_.mem_alignment_size`).
struct ScratchFamily {
    /// COMPUTE_TMPRING_SIZE.WAVESIZE granule: 1 KiB on gfx9/gfx10, 256 bytes on gfx11+.
    granule: u32,
    /// Width of the WAVESIZE field.
    wavesize_bits: u32,
    gfx11: bool,
}

fn scratch_family(gfx_major: u32) -> ScratchFamily {
    if gfx_major >= 11 {
        ScratchFamily {
            granule: 256,
            wavesize_bits: 15,
            gfx11: true,
        }
    } else {
        ScratchFamily {
            granule: 1024,
            wavesize_bits: 13,
            gfx11: false,
        }
    }
}

/// The four dwords of the scratch buffer resource (V#) ROCr writes into
/// `amd_queue_t.scratch_resource_descriptor`.
pub fn scratch_srd(gfx_major: u32, base: u64, bytes_per_xcc: u32) -> [u32; 4] {
    let dst_sel = 4 | 5 << 3 | 6 << 6 | 7 << 9; // X, Y, Z, W
    let w0 = base as u32;
    let hi = ((base >> 32) as u32) & 0xffff;
    if gfx_major >= 11 {
        // WORD1_GFX11: SWIZZLE_ENABLE (bits 30..31) = 1. WORD3_GFX11: FORMAT 32_UINT (20),
        // INDEX_STRIDE 0 (the CP fills it), ADD_TID_ENABLE, OOB_SELECT 2, TYPE buffer.
        [
            w0,
            hi | 1 << 30,
            bytes_per_xcc,
            dst_sel | 20 << 12 | 1 << 23 | 2 << 28,
        ]
    } else {
        // WORD1: SWIZZLE_ENABLE (bit 31). WORD3: NUM_FORMAT UINT (4), DATA_FORMAT 32 (4),
        // ELEMENT_SIZE 1 (4 bytes), INDEX_STRIDE 3 (64), ADD_TID_ENABLE, TYPE buffer.
        [
            w0,
            hi | 1 << 31,
            bytes_per_xcc,
            dst_sel | 4 << 12 | 4 << 15 | 1 << 19 | 3 << 21 | 1 << 23,
        ]
    }
}

/// COMPUTE_TMPRING_SIZE: WAVES (bits 0..11) and WAVESIZE (bits 12..) in granules.
pub fn compute_tmpring_size(waves: u32, wavesize_granules: u32) -> u32 {
    (waves & 0xfff) | wavesize_granules << 12
}

/// `amd_queue_t` byte offsets of the scratch fields (`amd_hsa_queue.h`).
const Q_COMPUTE_TMPRING_SIZE: usize = 140;
const Q_SCRATCH_SRD: usize = 144;
const Q_SCRATCH_LOCATION: usize = 160;
const Q_SCRATCH_BYTES: usize = 168;
const Q_SCRATCH_WORKITEM_BYTES: usize = 176;

impl QueueScratch {
    /// Make the queue's scratch hold `waves_needed` waves (per XCC, capped at what the
    /// GPU runs at once) of `private_size` bytes per work-item; grows (a new allocation,
    /// the `amd_queue_t` fields, and a queue reload so the CP reads them) when too small.
    fn ensure(&mut self, q: &AqlQueue, private_size: u32, waves_needed: u64) -> Result<()> {
        let call = "Stream::launch";
        if private_size == 0 {
            return Ok(());
        }
        let gpu = q.gpu()?;
        let props = &gpu.node.properties;
        let major = props.gfx_target_version / 10000;
        let fam = scratch_family(major);
        let xcc = gpu.node.properties.xcc_count().max(1);
        let per_thread_gran = fam.granule / 64;
        let per_thread = private_size
            .max(self.per_thread)
            .next_multiple_of(per_thread_gran);
        let cus_per_xcc = (gpu.cu_count() / xcc).max(1);
        let max_waves = (cus_per_xcc * props.max_slots_scratch_cu.max(1)).min(0xfff);
        let waves = (waves_needed.min(u64::from(max_waves)) as u32)
            .max(self.waves)
            .max(1);
        if self.buf.is_some() && per_thread <= self.per_thread && waves <= self.waves {
            return Ok(());
        }
        // Scratch lanes are laid out for 64 lanes even for wave32 (ROCr lanes_per_wave).
        let wave_bytes = (u64::from(per_thread) * 64).next_multiple_of(u64::from(fam.granule));
        let wavesize = wave_bytes / u64::from(fam.granule);
        if wavesize >= 1 << fam.wavesize_bits {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                call,
                format!(
                    "private segment of {private_size} bytes per work-item exceeds the \
                     COMPUTE_TMPRING_SIZE.WAVESIZE limit"
                ),
            ));
        }
        let per_xcc = wave_bytes * u64::from(waves);
        let total = (per_xcc * u64::from(xcc)).next_multiple_of(4096);
        let per_xcc32 = u32::try_from(per_xcc).map_err(|_| {
            Error::new(
                ErrorKind::OutOfMemory,
                call,
                "scratch per XCC exceeds 4 GiB",
            )
        })?;
        let buf = Buffer::alloc(q.core(), MemoryKind::Device, q.gpu_index(), total as usize)?;
        let base = buf.va();
        let mut tmpring_waves = waves;
        if fam.gfx11 {
            // gfx11+: WAVES counts waves per shader engine.
            let se = (props.array_count / props.simd_arrays_per_engine.max(1)).max(1);
            tmpring_waves = (waves / se).max(1);
        }
        let srd = scratch_srd(major, base, per_xcc32);
        let tmpring = compute_tmpring_size(tmpring_waves, wavesize as u32);
        q.write_amd_queue(Q_SCRATCH_SRD, srd.as_bytes())?;
        q.write_amd_queue(Q_SCRATCH_LOCATION, &base.to_le_bytes())?;
        q.write_amd_queue(Q_SCRATCH_BYTES, &per_xcc.to_le_bytes())?;
        q.write_amd_queue(Q_SCRATCH_WORKITEM_BYTES, &per_thread.to_le_bytes())?;
        q.write_amd_queue(Q_COMPUTE_TMPRING_SIZE, &tmpring.to_le_bytes())?;
        std::sync::atomic::fence(std::sync::atomic::Ordering::SeqCst);
        // The CP keeps its copy of the scratch fields from queue connect: reload.
        q.reload()?;
        if let Some(old) = self.buf.replace(buf) {
            self.retired.push(old);
        }
        self.per_thread = per_thread;
        self.waves = waves;
        Ok(())
    }
}

impl Stream {
    /// The stream's work has completed (a synchronize returned): tell its queue `qp` (the
    /// stream's `cur`, possibly tagged) that its kernarg ring may be drained, so the next
    /// launch there checks and starts again at the ring's beginning or middle.
    #[inline]
    pub(crate) fn kernargs_drained(&self, qp: *mut AqlQueue) {
        let qp = qp.map_addr(|a| a & !1);
        // SAFETY: a queue `cur` pointed to lives as long as the stream (see `cur`).
        if let Some(q) = unsafe { qp.as_ref() } {
            if !q.kernargs_drained.load(Ordering::Relaxed) {
                q.kernargs_drained.store(true, Ordering::Relaxed);
            }
        }
    }

    /// `hipModuleLaunchKernel`: run `kernel` over `grid` workgroups of `block` work-items
    /// with `dynamic_lds` bytes of dynamic LDS per workgroup, after the stream's earlier
    /// work; later stream work runs after it. Errors (InvalidValue unless said):
    /// arguments missing or built for another kernel; a zero dimension; a block larger
    /// than the kernel's maximum or different from its required size; LDS over the
    /// device's limit; a hidden argument kfdrt does not provide (NotSupported, named).
    pub fn launch(
        &self,
        kernel: &Kernel,
        grid: impl Into<Dim3>,
        block: impl Into<Dim3>,
        dynamic_lds: u32,
        args: &KernelArgs,
    ) -> Result<()> {
        let (grid, block) = (grid.into().arr(), block.into().arr());
        if args.kernel.kernel_object != kernel.kernel_object || args.next < kernel.plan.explicit {
            return launch_refused(self, kernel, grid, block, dynamic_lds, Some(args));
        }
        let bytes = &args.bytes;
        self.launch_with(kernel, grid, block, dynamic_lds, Some(args), |seg| {
            // SAFETY: `seg` holds the kernel's kernarg segment, `bytes.len()` bytes.
            unsafe { copy_bytes(seg, bytes.as_ptr(), bytes.len()) };
            Ok(())
        })
    }

    /// [`Stream::launch`] with the explicit arguments given as HIP's `kernelParams` (what
    /// `hipLaunchKernel` and `hipModuleLaunchKernel` receive): `params[i]` points at the
    /// value of the i-th explicit argument, as many bytes as the kernel's metadata gives
    /// it. The bytes go straight into the kernarg segment by a copy plan made when the
    /// kernel was looked up (the metadata's offsets and sizes; the hidden arguments from
    /// the kernel's template): no [`KernelArgs`] is built. `params` may be null for a
    /// kernel without explicit arguments. Errors as [`Stream::launch`], and InvalidValue
    /// for a null `params` or `params[i]`; an argument kind a byte copy cannot pass (an
    /// image, a sampler...) is NotSupported, as with [`KernelArgs::arg_bytes`].
    ///
    /// # Safety
    /// `params` is null or points at one readable pointer per explicit argument of
    /// `kernel`, each null or pointing at the argument's size in readable bytes.
    ///
    /// # Example
    ///
    /// ```no_run
    /// use std::ffi::c_void;
    ///
    /// use kfdrt::MemoryKind;
    ///
    /// # fn main() -> kfdrt::Result<()> {
    /// let dev = kfdrt::Device::open()?;
    /// let elf = std::fs::read("vadd.co").unwrap(); // vadd(float *a, float *b, float *c, uint n)
    /// let vadd = dev.load_module(0, &elf)?.kernel("vadd")?;
    /// let [a, b, c] = [0; 3].map(|_| dev.alloc(MemoryKind::Device, 0, 4096));
    /// let (a, b, c, n) = (a?.va(), b?.va(), c?.va(), 1024u32);
    /// let params: [*const c_void; 4] = [
    ///     (&a as *const u64).cast(),
    ///     (&b as *const u64).cast(),
    ///     (&c as *const u64).cast(),
    ///     (&n as *const u32).cast(),
    /// ];
    /// let stream = dev.create_stream(0)?;
    /// // SAFETY: one pointer per explicit argument of `vadd`, each at its value's bytes.
    /// unsafe { stream.launch_params(&vadd, 4, 256, 0, params.as_ptr())? };
    /// stream.synchronize()?;
    /// # Ok(()) }
    /// ```
    #[inline(always)]
    pub unsafe fn launch_params(
        &self,
        kernel: &Kernel,
        grid: impl Into<Dim3>,
        block: impl Into<Dim3>,
        dynamic_lds: u32,
        params: *const *const core::ffi::c_void,
    ) -> Result<()> {
        let (grid, block) = (grid.into().arr(), block.into().arr());
        let plan = &*kernel.plan;
        if plan.params_refuse.is_some() || (params.is_null() && !plan.params.is_empty()) {
            return params_refused(self, kernel, grid, block, dynamic_lds, params);
        }
        // `move`: the closure holds `params` itself, not a reference to a stack copy.
        self.launch_with(kernel, grid, block, dynamic_lds, None, move |seg| {
            // SAFETY: per the contract.
            unsafe { fill_params(kernel, plan, seg, params) }
        })
    }

    /// [`Stream::launch_params`] in a shape checked before ([`crate::Kernel::launch_shape`]):
    /// the same launch without the shape's checks and computations. A shape made for
    /// another kernel is checked again ([`Stream::launch_params`]).
    ///
    /// # Safety
    /// As [`Stream::launch_params`].
    ///
    /// # Example
    ///
    /// ```no_run
    /// use std::ffi::c_void;
    ///
    /// # fn main() -> kfdrt::Result<()> {
    /// let dev = kfdrt::Device::open()?;
    /// let elf = std::fs::read("scale.co").unwrap(); // scale(float *x, uint n)
    /// let scale = dev.load_module(0, &elf)?.kernel("scale")?;
    /// let x = dev.alloc(kfdrt::MemoryKind::Device, 0, 4096)?.va();
    /// let n = 1024u32;
    /// let params: [*const c_void; 2] = [(&x as *const u64).cast(), (&n as *const u32).cast()];
    /// // Checked once: 4 work-groups of 256, no dynamic LDS.
    /// let shape = scale.launch_shape(4, 256, 0).expect("a shape scale accepts");
    /// let stream = dev.create_stream(0)?;
    /// for _ in 0..100 {
    ///     // SAFETY: one pointer per explicit argument of `scale`, each at its value's bytes.
    ///     unsafe { stream.launch_params_shaped(&scale, &shape, params.as_ptr())? };
    /// }
    /// stream.synchronize()?;
    /// # Ok(()) }
    /// ```
    #[inline(always)]
    pub unsafe fn launch_params_shaped(
        &self,
        kernel: &Kernel,
        shape: &LaunchShape,
        params: *const *const core::ffi::c_void,
    ) -> Result<()> {
        let sh = &shape.shape;
        if !Arc::ptr_eq(&shape.plan, &kernel.plan) {
            // SAFETY: per the contract.
            return unsafe {
                self.launch_params(kernel, sh.grid, sh.block, sh.dynamic_lds, params)
            };
        }
        let plan = &*kernel.plan;
        if plan.params_refuse.is_some() || (params.is_null() && !plan.params.is_empty()) {
            return params_refused(self, kernel, sh.grid, sh.block, sh.dynamic_lds, params);
        }
        self.launch_shaped(kernel, sh, Some(&shape.body), None, move |seg| {
            // SAFETY: as in `launch_params`.
            unsafe { fill_params(kernel, plan, seg, params) }
        })
    }

    /// The launch once the arguments are known to be complete: the shape checks, then
    /// [`Stream::launch_shaped`].
    #[inline(always)]
    fn launch_with(
        &self,
        kernel: &Kernel,
        grid: [u32; 3],
        block: [u32; 3],
        dynamic_lds: u32,
        args: Option<&KernelArgs>,
        fill: impl Fn(*mut u8) -> Result<()>,
    ) -> Result<()> {
        let Some(shape) = Shape::of(&kernel.plan, grid, block, dynamic_lds) else {
            return launch_refused(self, kernel, grid, block, dynamic_lds, args);
        };
        self.launch_shaped(kernel, &shape, None, args, fill)
    }

    /// The launch in a checked `shape`: the packet (`body` when it was built before, see
    /// [`write_body`]), with `fill` writing the kernarg segment (explicit arguments and the
    /// launch-independent hidden ones) into the ring. `args` only names the arguments in
    /// the refusal's message.
    #[inline(always)]
    fn launch_shaped(
        &self,
        kernel: &Kernel,
        shape: &Shape,
        body: Option<&[u32; 14]>,
        args: Option<&KernelArgs>,
        fill: impl Fn(*mut u8) -> Result<()>,
    ) -> Result<()> {
        let s = &*self.inner;
        let plan = &*kernel.plan;
        if !Arc::ptr_eq(&kernel.module.dev, &s.dev) || kernel.gpu_index() != s.gpu_index {
            let sh = shape;
            return launch_refused(self, kernel, sh.grid, sh.block, sh.dynamic_lds, args);
        }
        // The fast path without a closure, so that everything is inlined here.
        let wait_for = match self.packet_slot_fast() {
            Some(mut slot) => {
                let target = self.slot_target(&slot);
                // Once: the ring writes between here and the publish may alias the queue's
                // fields as far as the compiler knows.
                let p = slot.packet_ptr();
                match build_launch(
                    &mut slot,
                    p,
                    self.timeline(),
                    target,
                    plan,
                    shape,
                    body,
                    &fill,
                )? {
                    Built::Header(header) => {
                        self.publish_built(slot, p, header);
                        return Ok(());
                    }
                    Built::Full(p) => Some(p),
                }
            }
            None => None,
        };
        self.launch_slow(plan, *shape, body, &fill, wait_for)
    }

    /// The launch off its fast path: the stream's slow submission (dependencies to
    /// publish first, a move under way...) when `wait_for` is None; else, and whenever the
    /// kernarg ring has no room, wait for the oldest segment's dispatch outside the
    /// stream's lock and try again. `shape`: the launch's, checked by the caller.
    #[cold]
    #[inline(never)]
    fn launch_slow(
        &self,
        plan: &LaunchPlan,
        shape: Shape,
        body: Option<&[u32; 14]>,
        fill: &impl Fn(*mut u8) -> Result<()>,
        mut wait_for: Option<Point>,
    ) -> Result<()> {
        let s = &*self.inner;
        let attempt = |wait_for: &mut Option<Point>, slow: bool| {
            let build = |slot: &mut OneSlot<'_>, timeline: &Arc<Signal>, target: u64| {
                let p = slot.packet_ptr();
                Ok(
                    match build_launch(slot, p, timeline, target, plan, &shape, body, fill)? {
                        Built::Header(h) => Some(h),
                        Built::Full(p) => {
                            *wait_for = Some(p);
                            None
                        }
                    },
                )
            };
            if slow {
                self.submit_packet_slow(build)
            } else {
                self.submit_packet(build)
            }
        };
        if wait_for.is_none() && attempt(&mut wait_for, true)? {
            return Ok(());
        }
        loop {
            match wait_for.take() {
                Some(p) => s.dev.wait_point(&p, Some(&self.inner), s.dev.wait_spin())?,
                None => {
                    return Err(Error::new(
                        ErrorKind::Driver,
                        "hipModuleLaunchKernel",
                        "no dispatch submitted and nothing to wait for",
                    ))
                }
            }
            if attempt(&mut wait_for, false)? {
                return Ok(());
            }
        }
    }
}

/// Write the kernarg segment of a [`Stream::launch_params`] launch at `seg`: the
/// template's runs, then each explicit argument from `params`.
///
/// # Safety
/// `seg` holds the kernel's kernarg segment; `params` as [`Stream::launch_params`]
/// requires, non-null when the kernel has explicit arguments.
#[inline(always)]
unsafe fn fill_params(
    kernel: &Kernel,
    plan: &LaunchPlan,
    seg: *mut u8,
    params: *const *const core::ffi::c_void,
) -> Result<()> {
    // SAFETY: the plan's runs and arguments lie inside the segment (checked when it was
    // made); `params` per the contract.
    unsafe {
        let t = plan.args_template.as_ptr();
        for &(o, n) in plan.template_runs.iter() {
            copy_bytes(seg.add(o as usize), t.add(o as usize), n as usize);
        }
        for (i, &(o, n)) in plan.params.iter().enumerate() {
            let p = *params.add(i) as *const u8;
            if p.is_null() {
                return Err(null_param(kernel, i));
            }
            copy_bytes(seg.add(o as usize), p, n as usize);
        }
    }
    Ok(())
}

/// What [`build_launch`] made: the packet's dword 0 to publish, or the completion point
/// to wait for when the kernarg ring has no room.
enum Built {
    Header(u32),
    Full(Point),
}

/// The InvalidValue of a null `params[i]` (kept off the launch path).
#[cold]
#[inline(never)]
fn null_param(kernel: &Kernel, i: usize) -> Error {
    let name = kernel
        .explicit
        .get(i)
        .and_then(|&a| kernel.metadata().args.get(a))
        .map_or_else(|| format!("explicit argument {i}"), |a| a.display_name(i));
    Error::new(
        ErrorKind::InvalidValue,
        "hipModuleLaunchKernel",
        format!(
            "{}: kernelParams[{i}] (argument `{name}`) is null",
            kernel.name(),
        ),
    )
}

/// The error of a [`Stream::launch_params`] whose arguments cannot be passed: the shape
/// checks first (as [`Stream::launch`] orders them), then the copy plan's refusal or the
/// null `params`.
#[cold]
#[inline(never)]
fn params_refused(
    s: &Stream,
    kernel: &Kernel,
    grid: [u32; 3],
    block: [u32; 3],
    dynamic_lds: u32,
    params: *const *const core::ffi::c_void,
) -> Result<()> {
    let call = "hipModuleLaunchKernel";
    let e = match launch_refused(s, kernel, grid, block, dynamic_lds, None) {
        // Only a launch the shape checks accept reaches their last resort (Driver).
        Err(e) if e.kind() != ErrorKind::Driver => return Err(e),
        r => r.err(),
    };
    if let Some((kind, why)) = &kernel.plan.params_refuse {
        return Err(Error::new(*kind, call, why.clone()));
    }
    if params.is_null() {
        return Err(Error::new(
            ErrorKind::InvalidValue,
            call,
            format!(
                "{}: kernelParams is null but the kernel takes {} arguments",
                kernel.name(),
                kernel.plan.params.len()
            ),
        ));
    }
    Err(e.unwrap_or_else(|| Error::new(ErrorKind::Driver, call, "launch refused without a reason")))
}

/// One attempt's packet, built in the slot `submit_packet` reserved: the segment comes from
/// the kernarg ring of the slot's queue, under that queue's producer lock; `fill` writes
/// the arguments into it and the packet's dwords 1..14 go straight into the slot.
/// The header dword to publish, or the point to wait for when the ring is full.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
fn build_launch(
    slot: &mut OneSlot<'_>,
    p: *mut u32,
    timeline: &Arc<Signal>,
    target: u64,
    plan: &LaunchPlan,
    shape: &Shape,
    body: Option<&[u32; 14]>,
    fill: &impl Fn(*mut u8) -> Result<()>,
) -> Result<Built> {
    let q = slot.queue();
    // The queue's kernarg ring, under the producer lock the slot holds.
    let ring = match slot.kernargs() {
        Some(r) => r,
        none => first_ring(q, none)?,
    };
    if plan.no_kernargs {
        let ka_va = ring.zero.va();
        // SAFETY: `p` is the reserved slot (read by no one before its header).
        return Ok(Built::Header(unsafe {
            write_body(p, plan, shape, body, ka_va)
        }));
    }
    // The hint is cleared by the launch that acts on it (under the producer lock).
    let drained = q.kernargs_drained.load(Ordering::Relaxed);
    if drained {
        q.kernargs_drained.store(false, Ordering::Relaxed);
    }
    let (start, off) = match ring.try_reserve(plan.ka_len, plan.ka_align, drained) {
        Ok(r) => r,
        Err(p) => return Ok(Built::Full(p)),
    };
    if plan.private > 0 {
        // By value: a reference would keep `shape` in memory on the fast path.
        ensure_scratch(q, plan, shape.threads, shape.grid)?;
    }
    let ka_va = ring.va + off;
    // SAFETY: `off + ka_len` lies in the ring (`try_reserve`), CPU-mapped host
    // memory; the segment is this launch's (no dispatch reads it before the
    // packet is published, no other launch gets it before that completes); `fill`
    // writes at most the kernel's kernarg segment size, at most `ka_len`.
    let seg = unsafe { ring.cpu.add(off as usize) };
    fill(seg)?;
    if plan.has_hidden {
        // SAFETY: as above.
        unsafe {
            plan.hidden.write(
                seg,
                shape.grid,
                shape.block,
                shape.dims,
                shape.dynamic_lds,
                q.amd_queue_va(),
            )
        };
    }
    ring.commit(start, plan.ka_len, timeline, target);
    // SAFETY: `p` is the reserved slot (read by no one before its header).
    Ok(Built::Header(unsafe {
        write_body(p, plan, shape, body, ka_va)
    }))
}

/// The packet of a launch in `shape` into the slot at `p`: `body` when the shape's body
/// was built before ([`LaunchShape`]), else from the plan's template.
///
/// # Safety
/// As [`write_packet`].
#[inline(always)]
unsafe fn write_body(
    p: *mut u32,
    plan: &LaunchPlan,
    shape: &Shape,
    body: Option<&[u32; 14]>,
    ka_va: u64,
) -> u32 {
    // SAFETY: per the contract.
    unsafe {
        match body {
            Some(b) => write_packet(p, b, ka_va),
            None => write_packet_planned(p, plan, shape, ka_va),
        }
    }
}

/// The queue's kernarg ring at its first launch (kept off the launch path).
#[cold]
#[inline(never)]
fn first_ring<'a>(q: &AqlQueue, none: &'a mut Option<KernargRing>) -> Result<&'a mut KernargRing> {
    Ok(none.insert(KernargRing::new(q)?))
}

/// The launch-dependent values of one [`Stream::launch`], checked.
#[derive(Clone, Copy)]
struct Shape {
    grid: [u32; 3],
    block: [u32; 3],
    threads: u64,
    dims: u16,
    dynamic_lds: u32,
    /// Work-items per dimension (grid times block; each fits in 32 bits).
    items: [u32; 3],
}

impl Shape {
    /// The shape of a launch of `plan` over `grid` workgroups of `block`, or None when
    /// [`launch_refused`] must say why: a zero dimension, more than 2^32 work-items in a
    /// dimension, a block over the kernel's maximum or not its required size, LDS over the
    /// limit, or a plan that refuses every launch.
    #[inline(always)]
    fn of(plan: &LaunchPlan, grid: [u32; 3], block: [u32; 3], dynamic_lds: u32) -> Option<Shape> {
        let item = |d: usize| u64::from(grid[d]) * u64::from(block[d]);
        let (x, y, z) = (item(0), item(1), item(2));
        let threads = u64::from(block[0]) * u64::from(block[1]) * u64::from(block[2]);
        // A zero dimension makes its product zero; none exceeds 32 bits. Non-short-circuit
        // `|`: one branch for all of them. `fast_max_threads` is 0 when the plan refuses
        // every launch (threads >= 1 here).
        let bad = (x.min(y).min(z) == 0)
            | ((x | y | z) >> 32 != 0)
            | (threads > u64::from(plan.fast_max_threads))
            | (dynamic_lds > plan.lds_room);
        if bad || plan.reqd.is_some_and(|r| r != block) {
            return None;
        }
        let dims = dims(grid, block);
        Some(Shape {
            grid,
            block,
            threads,
            dims,
            dynamic_lds,
            items: [x as u32, y as u32, z as u32],
        })
    }
}

/// The grid, block and dynamic LDS of a launch, checked against one kernel's limits once,
/// with the launch's dispatch packet computed: [`Stream::launch_params_shaped`] repeats
/// launches of that kernel in that shape without checking and computing them again (a
/// `<<<>>>` loop). Made by [`crate::Kernel::launch_shape`] (example at
/// [`Stream::launch_params_shaped`]).
#[derive(Clone)]
pub struct LaunchShape {
    /// The plan of the kernel the shape was checked for (held: compared by address).
    plan: Arc<LaunchPlan>,
    shape: Shape,
    /// The launch's dispatch packet ([`LaunchPlan::packet_body`]).
    body: [u32; 14],
}

impl std::fmt::Debug for LaunchShape {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LaunchShape")
            .field("grid", &self.shape.grid)
            .field("block", &self.shape.block)
            .field("dynamic_lds", &self.shape.dynamic_lds)
            .finish()
    }
}

impl crate::Kernel {
    /// A launch of this kernel over `grid` workgroups of `block` work-items with
    /// `dynamic_lds` bytes of dynamic LDS, checked once for [`Stream::launch_params_shaped`];
    /// None when [`Stream::launch`] would refuse it (a zero dimension, a block over the
    /// kernel's maximum or not its required size, LDS over the limit, more than 2^32
    /// work-items in a dimension, a kernel kfdrt cannot launch): that call says why.
    ///
    /// ```no_run
    /// # fn main() -> kfdrt::Result<()> {
    /// let dev = kfdrt::Device::open()?;
    /// let elf = std::fs::read("scale.co").unwrap();
    /// let scale = dev.load_module(0, &elf)?.kernel("scale")?;
    /// assert!(scale.launch_shape(4, 256, 0).is_some());
    /// assert!(scale.launch_shape(4, 4096, 0).is_none()); // more than 1024 work-items
    /// # Ok(()) }
    /// ```
    pub fn launch_shape(
        &self,
        grid: impl Into<Dim3>,
        block: impl Into<Dim3>,
        dynamic_lds: u32,
    ) -> Option<LaunchShape> {
        let shape = Shape::of(
            &self.plan,
            grid.into().arr(),
            block.into().arr(),
            dynamic_lds,
        )?;
        let body = self.plan.packet_body(
            shape.dims,
            shape.block,
            shape.items,
            // Fits in u32: dynamic_lds <= lds_limit - group_fixed.
            self.plan.group_fixed + shape.dynamic_lds,
        );
        Some(LaunchShape {
            plan: self.plan.clone(),
            shape,
            body,
        })
    }
}

/// Grow the queue's scratch for a launch of a kernel with a private segment (off the
/// empty-kernel path).
#[inline(never)]
fn ensure_scratch(q: &AqlQueue, plan: &LaunchPlan, threads: u64, grid: [u32; 3]) -> Result<()> {
    let per_wave = u64::from(plan.wavefront_size);
    let waves = threads.div_ceil(per_wave) * grid.iter().map(|&g| u64::from(g)).product::<u64>();
    lock(&q.scratch).ensure(q, plan.private, waves)
}

/// The error of a launch [`Stream::launch`]'s fast checks refused: the checks again,
/// in order, with messages (kept off the launch path).
#[cold]
#[inline(never)]
fn launch_refused(
    s: &Stream,
    kernel: &Kernel,
    grid: [u32; 3],
    block: [u32; 3],
    dynamic_lds: u32,
    args: Option<&KernelArgs>,
) -> Result<()> {
    let call = "hipModuleLaunchKernel";
    let inv = |m: String| Err(Error::new(ErrorKind::InvalidValue, call, m));
    let si = &*s.inner;
    let name = kernel.name();
    let plan = &*kernel.plan;
    if !std::sync::Arc::ptr_eq(&kernel.module.dev, &si.dev) || kernel.gpu_index() != si.gpu_index {
        return inv(format!(
            "{name} is loaded on GPU {} (of its device) but the stream runs on GPU {}",
            kernel.gpu_index(),
            si.gpu_index
        ));
    }
    let meta = kernel.metadata();
    if let Some(args) = args.filter(|a| a.kernel.kernel_object != kernel.kernel_object) {
        return inv(format!(
            "arguments were built for {}, not {name}",
            args.kernel.name()
        ));
    }
    if let Some(args) = args.filter(|a| a.next < kernel.explicit.len()) {
        let a = &meta.args[kernel.explicit[args.next]];
        return inv(format!(
            "{name}: {} of {} arguments given; argument {} `{}` is missing",
            args.next,
            kernel.explicit.len(),
            args.next,
            a.display_name(args.next)
        ));
    }
    if grid.contains(&0) || block.contains(&0) {
        return inv(format!(
            "{name}: grid {grid:?} and block {block:?} must be non-zero"
        ));
    }
    let threads = u64::from(block[0]) * u64::from(block[1]) * u64::from(block[2]);
    if threads > u64::from(plan.max_threads) {
        return inv(format!(
            "{name}: block {block:?} has {threads} work-items, more than the kernel's \
             maximum {}",
            plan.max_threads
        ));
    }
    if let Some(r) = plan.reqd {
        if r != block {
            return inv(format!(
                "{name}: block {block:?} but the kernel requires {r:?}"
            ));
        }
    }
    if (0..3).any(|d| grid[d].checked_mul(block[d]).is_none()) {
        return inv(format!(
            "{name}: grid {grid:?} x block {block:?} exceeds 2^32 work-items in a dimension"
        ));
    }
    if u64::from(plan.group_fixed) + u64::from(dynamic_lds) > u64::from(plan.lds_limit) {
        return inv(format!(
            "{name}: {} bytes of static + {dynamic_lds} bytes of dynamic LDS exceed the \
             device's {} bytes per workgroup",
            plan.group_fixed, plan.lds_limit
        ));
    }
    if let Some((kind, why)) = &plan.refuse {
        return Err(Error::new(*kind, call, why.clone()));
    }
    Err(Error::new(
        ErrorKind::Driver,
        call,
        format!("{name}: launch refused without a reason"),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Device, DeviceSpec};
    use pm4::aql::AqlPacket;

    /// A record that drained (by pops or `clear`) writes its next entry at its first slot
    /// again, and keeps order and length across the wrap of a partly drained ring.
    #[test]
    fn inflight_restarts_at_its_first_entry_once_empty() {
        let mut r = Inflight::new(4);
        let at = |r: &Inflight, e: u64| r.buf.iter().position(|x| x.0 == e);
        for e in 1..=3 {
            r.push_back((e, 0, 0, 0));
        }
        r.pop_front();
        r.pop_front();
        assert_eq!((r.len(), r.front().map(|x| x.0)), (1, Some(3)));
        r.push_back((4, 0, 0, 0));
        r.push_back((5, 0, 0, 0)); // wraps to slot 0
        assert_eq!(at(&r, 5), Some(0));
        assert_eq!(
            (r.len(), r.front().map(|x| x.0), r.back().map(|x| x.0)),
            (3, Some(3), Some(5))
        );
        r.pop_front();
        r.pop_front();
        r.pop_front();
        assert_eq!((r.len(), r.front()), (0, None));
        r.push_back((6, 0, 0, 0));
        assert_eq!(at(&r, 6), Some(0), "drained by pops: first slot again");
        r.push_back((7, 0, 0, 0));
        r.clear();
        r.push_back((8, 0, 0, 0));
        assert_eq!(
            (at(&r, 8), r.len()),
            (Some(0), 1),
            "cleared: first slot again"
        );
    }

    /// The first 15 i32 of a test kernel's output buffer.
    fn first_i32s(out: &Buffer) -> Vec<i32> {
        let mut b = vec![0u8; 15 * 4];
        out.read(0, &mut b).unwrap();
        b.chunks(4)
            .map(|c| i32::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    fn open(spec: &str) -> Device {
        Device::open_spec(&DeviceSpec::parse(spec).unwrap()).unwrap()
    }

    /// Arguments of `cl/vadd.cl`'s `vadd` (a, b, c at fixed addresses the test never
    /// dereferences, and `n`).
    fn vadd_args(k: &Kernel, n: u32) -> KernelArgs {
        let mut args = k.args();
        args.ptr(0x1000)
            .unwrap()
            .ptr(0x2000)
            .unwrap()
            .ptr(0x3000)
            .unwrap();
        args.arg(&n).unwrap();
        args
    }

    /// The kernarg segment of the stream's most recent launch, as the CP reads it.
    fn last_kernargs(s: &Stream) -> (u64, Vec<u8>) {
        let q = s.current_queue();
        q.with_kernargs(|g| {
            let r = g.as_ref().expect("a launch created the ring");
            let &(start, end, _, _) = r.inflight.back().expect("a launch in flight");
            let cap = r.buf.len() as u64;
            let mut v = vec![0u8; (end - start) as usize];
            r.buf.read((start % cap) as usize, &mut v).unwrap();
            (r.buf.va() + start % cap, v)
        })
    }

    fn field(ka: &[u8], a: &codeobj::KernelArg) -> u64 {
        let mut b = [0u8; 8];
        b[..a.size as usize].copy_from_slice(&ka[a.offset as usize..(a.offset + a.size) as usize]);
        u64::from_le_bytes(b)
    }

    fn load(dev: &Device, src: &str) -> crate::Module {
        dev.load_module(0, &test_kernels::build(src, "gfx942").unwrap())
            .unwrap()
    }

    /// The kernarg ring keeps one reference per timeline: a launch of the same stream
    /// clones nothing, and once many timelines have been seen the ones no segment in
    /// flight uses are dropped while every in-flight entry keeps its own timeline.
    #[test]
    fn kernarg_ring_deduplicates_and_prunes_timelines() {
        let dev = open("emu:mi300x");
        let q = AqlQueue::new(&dev.inner, 0, 7, 64).unwrap();
        let mut ring = KernargRing::new(&q).unwrap();
        let tls: Vec<Arc<Signal>> = (0..40)
            .map(|_| Arc::new(Signal::new(&dev.inner.signals, 1).unwrap()))
            .collect();
        ring.commit(0, 64, &tls[0], 1);
        ring.commit(64, 64, &tls[0], 2);
        assert_eq!(ring.timelines.len(), 1);
        for (i, t) in tls.iter().enumerate().take(32).skip(1) {
            ring.commit(64 * (i as u64 + 1), 64, t, 1);
        }
        assert_eq!(ring.timelines.len(), 32);
        // The oldest 30 segments retire: timelines 0..=28 are no longer used.
        for _ in 0..30 {
            ring.inflight.pop_front();
        }
        ring.commit(64 * 33, 64, &tls[39], 5);
        // Kept: timelines 29, 30, 31 (in flight) and the new one.
        assert_eq!(ring.timelines.len(), 4);
        let mut seen = Vec::new();
        ring.inflight.for_each_mut(|e| seen.push(*e));
        let want = [
            (29usize, 64 * 30u64),
            (30, 64 * 31),
            (31, 64 * 32),
            (39, 64 * 33),
        ];
        assert_eq!(seen.len(), want.len());
        for (e, (tl, start)) in seen.iter().zip(want) {
            assert_eq!(e.0, start);
            assert!(
                Arc::ptr_eq(&ring.timelines[e.2 as usize], &tls[tl]),
                "entry at {start}"
            );
        }
    }

    /// A lap of the smallest segments (one byte, taking KERNARG_SEGMENT_ALIGN each) fills
    /// the in-flight record exactly as it fills the ring: the reservation after it waits
    /// for the oldest segment (`commit` does not watch for a full record), and once that
    /// completed, retires it and takes its place; no push ever lands in a full record.
    #[test]
    fn a_lap_of_the_smallest_segments_fills_the_record_then_waits() {
        use crate::stream::TIMELINE_BASE;
        let dev = open("emu:mi300x");
        let q = AqlQueue::new(&dev.inner, 0, 7, 64).unwrap();
        let mut ring = KernargRing::new(&q).unwrap();
        // No packet of this timeline has completed.
        let tl = Arc::new(Signal::new(&dev.inner.signals, TIMELINE_BASE).unwrap());
        let lap = ring.inflight.capacity() as u64;
        assert_eq!(lap * KERNARG_SEGMENT_ALIGN, ring.mask + 1);
        for i in 0..lap {
            let Ok((start, _)) = ring.try_reserve(1, KERNARG_SEGMENT_ALIGN, false) else {
                panic!("segment {i} of a lap waits");
            };
            assert_eq!(start, i * KERNARG_SEGMENT_ALIGN);
            ring.commit(start, 1, &tl, i + 1);
        }
        assert_eq!(ring.inflight.len(), ring.inflight.capacity());
        let Err(p) = ring.try_reserve(1, KERNARG_SEGMENT_ALIGN, false) else {
            panic!("a reservation past a full record does not wait");
        };
        assert_eq!(p.target, 1);
        assert_eq!(ring.inflight.len(), ring.inflight.capacity());
        // The oldest launch completes: its segment retires and the next lap starts there.
        tl.store(TIMELINE_BASE - 1);
        let r = ring.try_reserve(1, KERNARG_SEGMENT_ALIGN, false);
        assert_eq!(r.ok(), Some((lap * KERNARG_SEGMENT_ALIGN, 0)));
        assert_eq!(ring.inflight.len(), ring.inflight.capacity() - 1);
        ring.commit(lap * KERNARG_SEGMENT_ALIGN, 1, &tl, lap + 1);
        assert_eq!(ring.inflight.len(), ring.inflight.capacity());
        assert!(ring.try_reserve(1, KERNARG_SEGMENT_ALIGN, false).is_err());
    }

    /// A launch on a failed stream reserves its queue's slot before it sees the sticky
    /// error (one load of the stream's marks, under the producer lock), then gives the
    /// slot back unpublished: the producer lock is free again and nothing was published.
    #[test]
    fn a_failed_streams_launch_gives_its_slot_back() {
        let dev = open("emu:mi300x");
        let m = load(&dev, "cl/empty.cl");
        let k = m.kernel("empty").unwrap();
        let s = dev.create_stream(0).unwrap();
        s.launch(&k, 1, 64, 0, &k.args()).unwrap();
        s.synchronize().unwrap();
        let q = s.current_queue();
        let next = q.next_index();
        s.inner.fail("failed by the test".into());
        let e = s.launch(&k, 1, 64, 0, &k.args()).unwrap_err();
        assert!(e.to_string().contains("failed by the test"), "{e}");
        assert_eq!(q.next_index(), next, "nothing published");
        assert!(q.try_reserve_one().is_some(), "the producer lock is free");
    }

    /// Streams on one shared hardware queue take their kernarg segments from that
    /// queue's one ring: consecutive, distinct segments, each holding its own arguments.
    #[test]
    fn streams_on_one_queue_share_its_kernarg_ring() {
        let dev = open("emu:mi300x");
        let m = load(&dev, "cl/vadd.cl");
        let k = m.kernel("vadd").unwrap();
        // More streams than shared queues: two of them land on the same queue.
        let streams: Vec<Stream> = (0..crate::stream::max_hw_queues() + 1)
            .map(|_| dev.create_stream(0).unwrap())
            .collect();
        let (a, b) = streams
            .iter()
            .enumerate()
            .find_map(|(i, x)| {
                streams[i + 1..]
                    .iter()
                    .find(|y| y.hw_queue_id() == x.hw_queue_id())
                    .map(|y| (x, y))
            })
            .expect("two streams share a queue");
        let mut segs = Vec::new();
        for (s, v) in [(a, 11u32), (b, 22u32), (a, 33u32)] {
            let args = vadd_args(&k, v);
            s.launch(&k, 1, 64, 0, &args).unwrap();
            let (va, ka) = last_kernargs(s);
            assert_eq!(&ka[24..28], &v.to_le_bytes());
            segs.push((va, ka.len() as u64));
        }
        let q = a.current_queue();
        let (base, len) = q.with_kernargs(|r| {
            let buf = &r.as_ref().unwrap().buf;
            (buf.va(), buf.len() as u64)
        });
        for w in segs.windows(2) {
            assert!(w[1].0 >= w[0].0 + w[0].1, "segments overlap: {segs:x?}");
        }
        for (va, l) in &segs {
            assert!(*va >= base && va + l <= base + len);
        }
    }

    /// More launches than the kernarg ring holds, behind a waitValue the host releases
    /// later: the launcher blocks on the full ring (the oldest segment's dispatch has not
    /// run), and after the release every launch runs with its own arguments although the
    /// ring wrapped twice.
    #[test]
    fn a_full_kernarg_ring_waits_for_the_oldest_segment() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        use std::time::Duration;
        const N: u32 = 600;
        let dev = open("emu:mi300x");
        let m = load(&dev, "cl/big_args.cl");
        let k = m.kernel("big_args").unwrap();
        let per_lap = KERNARG_RING_BYTES as u64 / plan_ka_span(&k);
        assert!(u64::from(N) > 2 * per_lap, "{per_lap} segments per lap");
        let flag = dev.alloc(MemoryKind::HostPinned, 0, 4096).unwrap();
        let out = dev.alloc(MemoryKind::Device, 0, 4 * N as usize).unwrap();
        let s = dev.create_stream(0).unwrap();
        s.wait_value32(flag.va(), 1, crate::WaitCompare::Gte, u32::MAX)
            .unwrap();
        let done = Arc::new(AtomicUsize::new(0));
        let (tx, rx) = std::sync::mpsc::channel();
        let (out_va, d) = (out.va(), done.clone());
        std::thread::spawn(move || {
            let r = (0..N).try_for_each(|i| {
                let mut v = vec![0u8; 4000];
                v[4 * i as usize..4 * i as usize + 4].copy_from_slice(&(i * 7 + 1).to_le_bytes());
                let mut args = k.args();
                args.ptr(out_va)?.arg(&i)?.arg_bytes(&v)?;
                s.launch(&k, 1, 64, 0, &args)?;
                d.fetch_add(1, Ordering::Release);
                Ok::<(), Error>(())
            });
            let _ = tx.send((s, r));
        });
        // Held: at most one lap of segments can be handed out.
        std::thread::sleep(Duration::from_millis(100));
        let launched = done.load(Ordering::Acquire) as u64;
        assert!(
            launched <= per_lap,
            "{launched} launches with {per_lap} segments per lap"
        );
        flag.atomic_u32(0).unwrap().store(1, Ordering::Release);
        let (s, r) = rx
            .recv_timeout(Duration::from_secs(120))
            .expect("the launches finished after the release");
        r.unwrap();
        s.synchronize().unwrap();
        let mut b = vec![0u8; 4 * N as usize];
        out.read(0, &mut b).unwrap();
        for i in 0..N as usize {
            let got = u32::from_le_bytes(b[4 * i..4 * i + 4].try_into().unwrap());
            assert_eq!(got, i as u32 * 7 + 1, "launch {i}");
        }
    }

    /// A kernel without arguments takes no kernarg ring space (its packet points at the
    /// ring's zero segment) and runs; a kernel with arguments after it gets a segment.
    #[test]
    fn a_kernel_without_arguments_takes_no_ring_space() {
        let dev = open("emu:mi300x");
        let m = load(&dev, "cl/empty.cl");
        let k = m.kernel("empty").unwrap();
        assert!(k.plan.no_kernargs);
        let s = dev.create_stream(0).unwrap();
        for _ in 0..3 {
            s.launch(&k, 2, 64, 0, &k.args()).unwrap();
        }
        s.synchronize().unwrap();
        let q = s.current_queue();
        let (head, inflight, zero) = q.with_kernargs(|r| {
            let r = r.as_ref().expect("a launch created the ring");
            let mut z = vec![1u8; KERNARG_SEGMENT_ALIGN as usize];
            r.zero.read(0, &mut z).unwrap();
            (r.head, r.inflight.len(), z)
        });
        assert_eq!((head, inflight), (0, 0));
        assert!(zero.iter().all(|&b| b == 0));
        let v = load(&dev, "cl/vadd.cl");
        let vk = v.kernel("vadd").unwrap();
        let args = vadd_args(&vk, 0u32);
        s.launch(&vk, 1, 64, 0, &args).unwrap();
        let (_, ka) = last_kernargs(&s);
        assert_eq!(&ka[..8], &0x1000u64.to_le_bytes());
        s.synchronize().unwrap();
    }

    /// Bytes of the kernarg ring one launch of `k` takes (its segment, aligned).
    fn plan_ka_span(k: &Kernel) -> u64 {
        k.plan.ka_len.next_multiple_of(k.plan.ka_align)
    }

    fn hf(offset: u32, size: u8, value: u8) -> HiddenField {
        HiddenField {
            offset,
            size,
            value,
        }
    }

    /// Writes `w`'s fields for grid (5, 6, 7), block (64, 2, 3), dims 3, dynamic LDS
    /// 0x1234 and queue pointer 0x1122334455667788 into 128 bytes of 0xAA.
    fn written(w: &HiddenWriter) -> Vec<u8> {
        let mut seg = vec![0xAAu8; 128];
        // SAFETY: every field of the tests' writers lies within 128 bytes.
        unsafe {
            w.write(
                seg.as_mut_ptr(),
                [5, 6, 7],
                [64, 2, 3],
                3,
                0x1234,
                0x1122_3344_5566_7788,
            )
        };
        seg
    }

    /// The v5 layout (block counts u32 x3, group sizes u16 x3 in a row) is written as
    /// two runs; grid dims, dynamic LDS and queue pointer one store each; every other
    /// byte (remainders, reserved, explicit arguments) untouched.
    #[test]
    fn hidden_writer_v5_runs() {
        let mut fields = vec![hf(16, 2, HV_GRID_DIMS)];
        fields.extend((0..3).map(|d| hf(40 + 4 * u32::from(d), 4, HV_BLOCK_COUNT + d)));
        fields.extend((0..3).map(|d| hf(52 + 2 * u32::from(d), 2, HV_GROUP_SIZE + d)));
        fields.push(hf(80, 4, HV_DYNAMIC_LDS));
        fields.push(hf(96, 8, HV_QUEUE_PTR));
        let w = HiddenWriter::new(&fields);
        assert_eq!((w.block_counts, w.group_sizes, w.n), (40, 52, 3));
        let seg = written(&w);
        let mut want = vec![0xAAu8; 128];
        want[16..18].copy_from_slice(&3u16.to_le_bytes());
        for (d, v) in [5u32, 6, 7].iter().enumerate() {
            want[40 + 4 * d..44 + 4 * d].copy_from_slice(&v.to_le_bytes());
        }
        for (d, v) in [64u16, 2, 3].iter().enumerate() {
            want[52 + 2 * d..54 + 2 * d].copy_from_slice(&v.to_le_bytes());
        }
        want[80..84].copy_from_slice(&0x1234u32.to_le_bytes());
        want[96..104].copy_from_slice(&0x1122_3344_5566_7788u64.to_le_bytes());
        assert_eq!(seg, want);
    }

    /// A kernel whose metadata declares only some hidden arguments (here group size x,
    /// block count z and grid dims, in an order and at offsets of no run) gets exactly
    /// those written; the rest of the segment is left as the template made it.
    #[test]
    fn hidden_writer_writes_only_the_declared_fields() {
        let fields = [
            hf(2, 2, HV_GROUP_SIZE),
            hf(9, 4, HV_BLOCK_COUNT + 2),
            hf(30, 1, HV_GRID_DIMS),
        ];
        let w = HiddenWriter::new(&fields);
        assert_eq!((w.block_counts, w.group_sizes, w.n), (NO_RUN, NO_RUN, 3));
        let seg = written(&w);
        let mut want = vec![0xAAu8; 128];
        want[2..4].copy_from_slice(&64u16.to_le_bytes());
        want[9..13].copy_from_slice(&7u32.to_le_bytes());
        want[30] = 3;
        assert_eq!(seg, want);
        // Block counts x, y, z with a gap: no run, three single stores.
        let gap: Vec<_> = (0..3)
            .map(|d| hf(8 * u32::from(d), 4, HV_BLOCK_COUNT + d))
            .collect();
        let w = HiddenWriter::new(&gap);
        assert_eq!((w.block_counts, w.n), (NO_RUN, 3));
        let seg = written(&w);
        let mut want = vec![0xAAu8; 128];
        for (d, v) in [5u32, 6, 7].iter().enumerate() {
            want[8 * d..8 * d + 4].copy_from_slice(&v.to_le_bytes());
        }
        assert_eq!(seg, want);
        // Nothing declared: nothing to write.
        let w = HiddenWriter::new(&[]);
        assert!(w.is_empty());
        assert_eq!(written(&w), vec![0xAAu8; 128]);
    }

    /// `cl/mixed_args.cl`'s `mixed` arguments as bytes: (value bytes per explicit
    /// argument) for `out` at `out_va` and a variant `v` of every value.
    fn mixed_values(out_va: u64, v: i64) -> Vec<Vec<u8>> {
        // struct odd { char c; double d; short s; }: 24 bytes, d at 8, s at 16.
        let mut odd = vec![0u8; 24];
        odd[0] = (3 + v) as u8;
        odd[8..16].copy_from_slice(&(2.5 + v as f64).to_le_bytes());
        odd[16..18].copy_from_slice(&(-7 - v as i16).to_le_bytes());
        let three: Vec<u8> = [1 + v as i32, 2, 3]
            .iter()
            .flat_map(|x| x.to_le_bytes())
            .collect();
        vec![
            out_va.to_le_bytes().to_vec(),
            vec![(-5 - v) as i8 as u8],
            (-300 - v as i16).to_le_bytes().to_vec(),
            odd,
            (123_456 + v as i32).to_le_bytes().to_vec(),
            (0x1234_5678_9abc_u64 + v as u64).to_le_bytes().to_vec(),
            (-(1_i64 << 40) - v).to_le_bytes().to_vec(),
            (1.75f32 + v as f32).to_le_bytes().to_vec(),
            three,
            vec![(200 + v) as u8],
        ]
    }

    /// What `mixed` writes for [`mixed_values`] with a `bx` x `by` workgroup (64-bit
    /// values as low, high halves).
    fn mixed_expected(v: i64, bx: i32, by: i32) -> Vec<i32> {
        let halves = |x: u64| [x as u32 as i32, (x >> 32) as u32 as i32];
        let d = halves((2.5 + v as f64).to_bits());
        let p = halves(0x1234_5678_9abc_u64 + v as u64);
        let l = halves((-(1_i64 << 40) - v) as u64);
        let v = v as i32;
        vec![
            -5 - v,
            -300 - v,
            3 + v,
            d[0],
            d[1],
            -7 - v,
            123_456 + v,
            p[0],
            p[1],
            l[0],
            l[1],
            (1.75 + v as f32).to_bits() as i32,
            (1 + v) + 10 * 2 + 100 * 3,
            200 + v,
            bx * 1000 + by,
        ]
    }

    #[test]
    fn launch_params_writes_the_kernargs_launch_writes() {
        let dev = open("emu:mi300x");
        let s = dev.create_stream(0).unwrap();
        let out = dev.alloc(MemoryKind::HostPinned, 0, 4096).unwrap();
        let read_out = || first_i32s(&out);
        // Code object v5 (hidden arguments after the explicit ones: block counts, group
        // sizes, remainders, offsets, grid dims) and v4 (none: the dispatch packet).
        for (version, flags) in [(5, &[][..]), (4, &["-mcode-object-version=4"][..])] {
            let elf = test_kernels::build_with("cl/mixed_args.cl", "gfx942", flags).unwrap();
            let m = dev.load_module(0, &elf).unwrap();
            let k = m.kernel("mixed").unwrap();
            assert_eq!(k.attributes().code_object_version, version);
            for (v, grid, block) in [(0i64, [2, 3, 1], [8, 4, 1]), (9, [1, 1, 1], [64, 1, 1])] {
                let vals = mixed_values(out.va(), v);
                let mut args = k.args();
                args.ptr(out.va()).unwrap();
                for b in &vals[1..] {
                    // The pointer `p` (argument 5) is a global_buffer.
                    if b.len() == 8 && args.count() == 5 {
                        args.ptr(u64::from_le_bytes(b[..].try_into().unwrap()))
                            .unwrap();
                    } else {
                        args.arg_bytes(b).unwrap();
                    }
                }
                s.launch(&k, grid, block, 0, &args).unwrap();
                s.synchronize().unwrap();
                let (_, want) = last_kernargs(&s);
                out.write(0, &[0u8; 96]).unwrap();
                let params: Vec<*const core::ffi::c_void> =
                    vals.iter().map(|b| b.as_ptr().cast()).collect();
                // Dirty the ring first: launch_params must write every byte of its segment.
                let junk = vec![0xa5u8; KERNARG_RING_BYTES];
                s.current_queue()
                    .with_kernargs(|r| r.as_ref().unwrap().buf.write(0, &junk).unwrap());
                // SAFETY: one pointer per explicit argument, each to its size in bytes.
                unsafe { s.launch_params(&k, grid, block, 0, params.as_ptr()) }.unwrap();
                s.synchronize().unwrap();
                let (_, got) = last_kernargs(&s);
                assert_eq!(
                    got[..k.metadata().kernarg_segment_size as usize],
                    want[..k.metadata().kernarg_segment_size as usize],
                    "v{version} kernarg segment of launch_params vs launch"
                );
                assert_eq!(
                    read_out(),
                    mixed_expected(v, block[0] as i32, block[1] as i32),
                    "v{version}"
                );
            }
            // A null `params`, a null `params[i]`: InvalidValue, nothing launched.
            let vals = mixed_values(out.va(), 0);
            let mut params: Vec<*const core::ffi::c_void> =
                vals.iter().map(|b| b.as_ptr().cast()).collect();
            // SAFETY: null (refused before any read).
            let e = unsafe { s.launch_params(&k, 1, 64, 0, std::ptr::null()) }.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidValue, "{e}");
            params[3] = std::ptr::null();
            // SAFETY: one pointer per explicit argument (one null).
            let e = unsafe { s.launch_params(&k, 1, 64, 0, params.as_ptr()) }.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidValue, "{e}");
            assert!(e.to_string().contains("kernelParams[3]"), "{e}");
            // The shape checks come first, as with launch.
            // SAFETY: as above.
            let e = unsafe { s.launch_params(&k, 0, 64, 0, params.as_ptr()) }.unwrap_err();
            assert!(e.to_string().contains("non-zero"), "{e}");
            // A __local pointer argument cannot be passed as bytes: NotSupported, named.
            let l = m.kernel("local_arg").unwrap();
            let p = [out.va().to_le_bytes(), [0; 8]];
            let lp: Vec<*const core::ffi::c_void> = p.iter().map(|b| b.as_ptr().cast()).collect();
            // SAFETY: two pointers to 8 bytes each (refused before any read).
            let e = unsafe { s.launch_params(&l, 1, 64, 0, lp.as_ptr()) }.unwrap_err();
            assert_eq!(e.kind(), ErrorKind::NotSupported, "{e}");
            assert!(e.to_string().contains("dynamic_shared_pointer"), "{e}");
            // The stream still runs launches after the refusals.
            let vals = mixed_values(out.va(), 1);
            let params: Vec<*const core::ffi::c_void> =
                vals.iter().map(|b| b.as_ptr().cast()).collect();
            // SAFETY: one pointer per explicit argument.
            unsafe { s.launch_params(&k, 1, [4, 2, 1], 0, params.as_ptr()) }.unwrap();
            s.synchronize().unwrap();
            assert_eq!(read_out(), mixed_expected(1, 4, 2));
        }
    }

    /// A launch in a shape checked once (`Kernel::launch_shape`) writes the packet and the
    /// kernarg segment `launch_params` writes; a shape `launch` would refuse is None; a
    /// shape made for another kernel is checked again for the kernel launched.
    #[test]
    fn shaped_launches_write_what_launch_params_writes() {
        let dev = open("emu:mi300x");
        let s = dev.create_stream(0).unwrap();
        let out = dev.alloc(MemoryKind::HostPinned, 0, 4096).unwrap();
        let read_out = || first_i32s(&out);
        let last_packet = |s: &Stream| {
            let q = s.current_queue();
            q.packet_words(q.next_index() - 1)
        };
        let elf = test_kernels::build("cl/mixed_args.cl", "gfx942").unwrap();
        let m = dev.load_module(0, &elf).unwrap();
        let k = m.kernel("mixed").unwrap();
        let len = k.metadata().kernarg_segment_size as usize;
        for (v, grid, block) in [(0i64, [2, 3, 1], [8, 4, 1]), (9, [1, 1, 1], [64, 1, 1])] {
            let vals = mixed_values(out.va(), v);
            let params: Vec<*const core::ffi::c_void> =
                vals.iter().map(|b| b.as_ptr().cast()).collect();
            // SAFETY: one pointer per explicit argument, each to its size in bytes.
            unsafe { s.launch_params(&k, grid, block, 0, params.as_ptr()) }.unwrap();
            s.synchronize().unwrap();
            let (_, want_args) = last_kernargs(&s);
            let want = last_packet(&s);
            out.write(0, &[0u8; 96]).unwrap();
            let shape = k.launch_shape(grid, block, 0).expect("a valid shape");
            for _ in 0..2 {
                // SAFETY: as above.
                unsafe { s.launch_params_shaped(&k, &shape, params.as_ptr()) }.unwrap();
            }
            s.synchronize().unwrap();
            let (ka, got_args) = last_kernargs(&s);
            let got = last_packet(&s);
            assert_eq!(got_args[..len], want_args[..len], "kernarg segment");
            // Dword 0 was invalidated by the CP after the dispatch; 10..11 are the
            // kernarg address, different per launch.
            assert_eq!(got[1..10], want[1..10], "grid {grid:?} block {block:?}");
            assert_eq!(got[12..], want[12..], "grid {grid:?} block {block:?}");
            assert_eq!(u64::from(got[10]) | u64::from(got[11]) << 32, ka);
            assert_eq!(
                read_out(),
                mixed_expected(v, block[0] as i32, block[1] as i32)
            );
        }
        // What `launch` refuses has no shape: a zero dimension, a block over the
        // kernel's maximum, LDS over the limit, more than 2^32 work-items.
        assert!(k.launch_shape([0, 1, 1], 64, 0).is_none());
        assert!(k.launch_shape(1, 2048, 0).is_none());
        assert!(k.launch_shape(1, 64, u32::MAX).is_none());
        assert!(k.launch_shape(1 << 30, 64, 0).is_none());
        // HIP reports a grid of INT32_MAX work-groups in every dimension
        // (hipDeviceProp_t::maxGridSize, as CLR 5.2): such a grid with one work-item per
        // group in that dimension has a shape.
        for d in 0..3 {
            let mut grid = [1u32; 3];
            grid[d] = i32::MAX as u32;
            assert!(k.launch_shape(grid, 1, 0).is_some(), "grid {grid:?}");
        }
        // A shape of `mixed` given with `reduce` (a required workgroup size): checked
        // again for `reduce`, refused as `launch` refuses it; the stream runs on.
        let r = dev
            .load_module(0, &test_kernels::build("cl/reduce.cl", "gfx942").unwrap())
            .unwrap()
            .kernel("reduce")
            .unwrap();
        let shape = k.launch_shape(1, 64, 0).unwrap();
        let (a, b, n) = (out.va(), out.va() + 1024, 0u32);
        let p: [*const core::ffi::c_void; 3] = [
            (&a as *const u64).cast(),
            (&b as *const u64).cast(),
            (&n as *const u32).cast(),
        ];
        // SAFETY: one pointer per explicit argument of `reduce`, each to its size.
        let e = unsafe { s.launch_params_shaped(&r, &shape, p.as_ptr()) }.unwrap_err();
        assert_eq!(e.kind(), ErrorKind::InvalidValue, "{e}");
        assert!(e.to_string().contains("requires"), "{e}");
        let vals = mixed_values(out.va(), 1);
        let params: Vec<*const core::ffi::c_void> =
            vals.iter().map(|b| b.as_ptr().cast()).collect();
        out.write(0, &[0u8; 96]).unwrap();
        // SAFETY: as above.
        unsafe { s.launch_params_shaped(&k, &shape, params.as_ptr()) }.unwrap();
        s.synchronize().unwrap();
        assert_eq!(read_out(), mixed_expected(1, 64, 1));
    }

    #[test]
    fn the_params_plan_covers_the_segment_once() {
        let dev = open("emu:mi300x");
        let elf = test_kernels::build("cl/mixed_args.cl", "gfx942").unwrap();
        let m = dev.load_module(0, &elf).unwrap();
        let k = m.kernel("mixed").unwrap();
        let plan = &k.plan;
        let len = k.metadata().kernarg_segment_size as usize;
        let mut hits = vec![0u8; len];
        for &(o, n) in plan.params.iter().chain(plan.template_runs.iter()) {
            for h in &mut hits[o as usize..(o + n) as usize] {
                *h += 1;
            }
        }
        assert!(hits.iter().all(|&h| h == 1), "{hits:?}");
        // mixed's explicit arguments: out, c, s, o, i, p, l, f, t, last.
        let want: Vec<(u32, u32)> = k
            .metadata()
            .args
            .iter()
            .filter(|a| !a.value_kind.is_hidden())
            .map(|a| (a.offset, a.size))
            .collect();
        assert_eq!(&plan.params[..], &want[..]);
        assert_eq!(plan.params.len(), 10);
        assert!(plan.params_refuse.is_none());
    }

    /// A synchronize takes the next batch's lines without changing a byte: the ring, the IB
    /// areas and the kernarg ring read the same after `warm_next`, which covers as many
    /// slots after the write pointer as were published since its last call.
    #[test]
    fn warm_next_takes_the_next_batchs_lines_without_changing_memory() {
        let dev = open("emu:mi300x");
        let m = load(&dev, "cl/vadd.cl");
        let k = m.kernel("vadd").unwrap();
        let s = dev.create_stream(0).unwrap();
        let idle = vadd_args(&k, 0);
        for _ in 0..5 {
            s.launch(&k, 1, 64, 0, &idle).unwrap();
        }
        s.synchronize().unwrap();
        let q = s.current_queue();
        let (w, to) = q.warm_marks();
        assert!(w >= 5, "write pointer {w}");
        // The first call: everything published so far (at most WARM_MAX_SLOTS).
        assert_eq!(to, w + w.min(64), "slots taken after {w}");
        let kernargs = || {
            q.with_kernargs(|r| {
                let r = r.as_ref().unwrap();
                let mut v = vec![0u8; r.buf.len()];
                r.buf.read(0, &mut v).unwrap();
                v
            })
        };
        // Nothing published since: one slot at most, already taken.
        q.warm_next();
        assert_eq!(q.warm_marks(), (w, to));
        // Ten more, completed without a synchronize (no warm_next on the way).
        for _ in 0..10 {
            s.launch(&k, 1, 64, 0, &idle).unwrap();
        }
        while s.query().is_err() {
            std::thread::yield_now();
        }
        let (ring, ka) = (q.ring_and_ib_bytes(), kernargs());
        q.warm_next();
        // Ten slots after the new write pointer, those taken before excepted.
        assert_eq!(
            q.warm_marks(),
            (w + 10, (w + 20).max(to)),
            "ten slots taken after the write pointer"
        );
        assert!(
            q.ring_and_ib_bytes() == ring,
            "warm_next changed the ring or IBs"
        );
        assert!(kernargs() == ka, "warm_next changed the kernarg ring");
    }

    /// The kernarg ring starts again at its beginning at the first launch after a
    /// synchronize when every segment handed out has completed, at its middle the next
    /// time; with a launch still running it goes on after that launch's segment.
    #[test]
    fn kernarg_ring_rewinds_when_drained() {
        let dev = open("emu:mi300x");
        let m = load(&dev, "cl/vadd.cl");
        let k = m.kernel("vadd").unwrap();
        let span = plan_ka_span(&k);
        let offset = |s: &Stream| {
            let (va, _) = last_kernargs(s);
            let base = s
                .current_queue()
                .with_kernargs(|r| r.as_ref().unwrap().buf.va());
            va - base
        };
        let stream = dev.create_stream(0).unwrap();
        let a = &stream;
        // n = 0: the kernel reads and writes nothing.
        let idle = vadd_args(&k, 0);
        for i in 0..3 {
            a.launch(&k, 1, 64, 0, &idle).unwrap();
            assert_eq!(offset(a), i * span);
        }
        a.synchronize().unwrap();
        // The drained ring starts again at its beginning, and the launch runs with its
        // own arguments (c = a + b).
        let buf = dev.alloc(MemoryKind::HostPinned, 0, 4096).unwrap();
        let x: Vec<u8> = (0..64u32).flat_map(|i| (i as f32).to_le_bytes()).collect();
        buf.write(0, &x).unwrap();
        let mut args = k.args();
        args.ptr(buf.va()).unwrap().ptr(buf.va()).unwrap();
        args.ptr(buf.va() + 1024).unwrap().arg(&64u32).unwrap();
        a.launch(&k, 1, 64, 0, &args).unwrap();
        assert_eq!(offset(a), 0, "a drained ring starts again at its beginning");
        // Without a synchronize in between: the next segment follows.
        a.launch(&k, 1, 64, 0, &idle).unwrap();
        assert_eq!(offset(a), span);
        a.synchronize().unwrap();
        let mut c = vec![0u8; 256];
        buf.read(1024, &mut c).unwrap();
        for (i, v) in c.chunks(4).enumerate() {
            assert_eq!(f32::from_le_bytes(v.try_into().unwrap()), 2.0 * i as f32);
        }
        // A launch still running (a kernel spinning on a host flag) keeps its segment:
        // with the hint set, the next launch checks and goes on after it.
        let spin_m = load(&dev, "cl/spin.cl");
        let spin = spin_m.kernel("spin_until").unwrap();
        let flag = dev.alloc(MemoryKind::HostPinned, 0, 4096).unwrap();
        let mut sa = spin.args();
        sa.ptr(flag.va()).unwrap().ptr(flag.va() + 64).unwrap();
        sa.arg(&u32::MAX).unwrap();
        a.launch(&spin, 1, 64, 0, &sa).unwrap();
        let held = offset(a);
        assert_eq!(
            held,
            KERNARG_RING_BYTES as u64 / 2,
            "the second rewind takes the ring's other half, not the lines just read"
        );
        a.current_queue()
            .kernargs_drained
            .store(true, Ordering::Relaxed);
        a.launch(&k, 1, 64, 0, &idle).unwrap();
        assert!(
            offset(a) > held,
            "{} overwrote the running launch's segment at {held}",
            offset(a)
        );
        flag.atomic_u32(0).unwrap().store(1, Ordering::Release);
        a.synchronize().unwrap();
        assert_eq!(
            flag.atomic_u32(64).unwrap().load(Ordering::Acquire),
            1,
            "the spin ended on the flag"
        );
    }

    #[test]
    fn hidden_arguments_follow_the_metadata() {
        let dev = open("emu:mi300x");
        let m = load(&dev, "cl/vadd.cl");
        let k = m.kernel("vadd").unwrap();
        let args = vadd_args(&k, 77u32);
        let s = dev.create_stream(0).unwrap();
        s.launch(&k, 5, 64, 0, &args).unwrap();
        let (va, ka) = last_kernargs(&s);
        assert_eq!(va % KERNARG_SEGMENT_ALIGN, 0);
        assert_eq!(ka.len(), 288);
        assert_eq!(&ka[..8], &0x1000u64.to_le_bytes());
        assert_eq!(&ka[16..24], &0x3000u64.to_le_bytes());
        assert_eq!(&ka[24..28], &77u32.to_le_bytes());
        let mut seen = 0;
        for a in &k.metadata().args {
            let want = match a.value_kind {
                ValueKind::HiddenBlockCount(0) => 5,
                ValueKind::HiddenGroupSize(0) => 64,
                ValueKind::HiddenBlockCount(_) | ValueKind::HiddenGroupSize(_) => 1,
                ValueKind::HiddenRemainder(_) | ValueKind::HiddenGlobalOffset(_) => 0,
                ValueKind::HiddenGridDims => 1,
                _ => continue,
            };
            assert_eq!(field(&ka, a), want, "{}", a.value_kind.name());
            seen += 1;
        }
        assert_eq!(seen, 13);
        // A 2D launch: grid dims 2, counts per dimension.
        s.launch(&k, (3, 4), (16, 8), 0, &args).unwrap();
        let (_, ka) = last_kernargs(&s);
        for a in &k.metadata().args {
            let want = match a.value_kind {
                ValueKind::HiddenBlockCount(d) => [3, 4, 1][d as usize],
                ValueKind::HiddenGroupSize(d) => [16, 8, 1][d as usize],
                ValueKind::HiddenGridDims => 2,
                _ => continue,
            };
            assert_eq!(field(&ka, a), want, "{}", a.value_kind.name());
        }
    }

    #[test]
    fn dynamic_lds_size_and_queue_ptr() {
        let dev = open("emu:mi300x");
        let m = load(&dev, "hip/dynlds.hip");
        let k = m.kernel("dynlds").unwrap();
        let mut args = k.args();
        args.ptr(0x1000).unwrap().ptr(0x2000).unwrap();
        let s = dev.create_stream(0).unwrap();
        s.launch(&k, 2, 128, 512, &args).unwrap();
        let (_, ka) = last_kernargs(&s);
        let a = k
            .metadata()
            .args
            .iter()
            .find(|a| a.value_kind == ValueKind::HiddenDynamicLdsSize)
            .unwrap();
        assert_eq!(field(&ka, a), 512);

        let q = load(&dev, "cl/queue_ptr.cl");
        let qk = q.kernel("queue_ptr").unwrap();
        let mut qa = qk.args();
        qa.ptr(0x1000).unwrap();
        s.launch(&qk, 1, 64, 0, &qa).unwrap();
        let (_, ka) = last_kernargs(&s);
        let a = qk
            .metadata()
            .args
            .iter()
            .find(|a| a.value_kind == ValueKind::HiddenQueuePtr)
            .unwrap();
        let qp = field(&ka, a);
        assert_eq!(qp % 64, 0);
        // SAFETY: the queue pointer is the CPU-mapped amd_queue_t of the stream's queue
        // (GPU VA == CPU VA), alive while the stream is.
        let rd_off = unsafe { core::ptr::read_volatile((qp + 136) as *const u32) };
        assert_eq!(u64::from(rd_off), crate::hsa::QUEUE_READ_DISPATCH_ID_OFFSET);
    }

    fn amd_queue_u32(qp: u64, off: u64) -> u32 {
        // SAFETY: `qp` is a live, CPU-mapped amd_queue_t (see dynamic_lds_size_and_queue_ptr).
        unsafe { core::ptr::read_volatile((qp + off) as *const u32) }
    }

    #[test]
    fn scratch_is_set_up_in_amd_queue_t_and_grows() {
        let dev = open("emu:mi300x");
        let gpu = dev.gpu(0).unwrap();
        let xcc = gpu.node.properties.xcc_count();
        let p = load(&dev, "cl/private_array.cl");
        let pk = p.kernel("private_array").unwrap();
        let private = pk.descriptor().private_segment_fixed_size;
        let mut pa = pk.args();
        pa.ptr(0x1000)
            .unwrap()
            .ptr(0x2000)
            .unwrap()
            .arg(&1u32)
            .unwrap();
        let q = load(&dev, "cl/queue_ptr.cl");
        let qk = q.kernel("queue_ptr").unwrap();
        let mut qa = qk.args();
        qa.ptr(0x1000).unwrap();
        let s = dev.create_stream(0).unwrap();
        s.launch(&qk, 1, 64, 0, &qa).unwrap();
        let (_, ka) = last_kernargs(&s);
        let qp = field(
            &ka,
            qk.metadata()
                .args
                .iter()
                .find(|a| a.value_kind == ValueKind::HiddenQueuePtr)
                .unwrap(),
        );
        assert_eq!(
            amd_queue_u32(qp, 140),
            0,
            "no scratch before a kernel needs it"
        );

        // 8 workgroups of one wave each.
        s.launch(&pk, 8, 64, 0, &pa).unwrap();
        let per_thread = private.next_multiple_of(16);
        let wavesize = (per_thread * 64).div_ceil(1024);
        let tmpring = amd_queue_u32(qp, 140);
        assert_eq!(tmpring & 0xfff, 8, "WAVES");
        assert_eq!(tmpring >> 12, wavesize, "WAVESIZE in KiB");
        let base =
            u64::from(amd_queue_u32(qp, 144)) | u64::from(amd_queue_u32(qp, 148) & 0xffff) << 32;
        assert_ne!(base, 0);
        assert_eq!(amd_queue_u32(qp, 148) >> 31, 1, "SWIZZLE_ENABLE");
        let per_xcc = 8 * wavesize * 1024;
        assert_eq!(amd_queue_u32(qp, 152), per_xcc, "NUM_RECORDS per XCC");
        assert_eq!(
            amd_queue_u32(qp, 156),
            0x00ea_4fac,
            "gfx9 scratch SRD word 3"
        );
        let loc = u64::from(amd_queue_u32(qp, 160)) | u64::from(amd_queue_u32(qp, 164)) << 32;
        assert_eq!(loc, base, "gfx9+: the absolute scratch address");
        assert_eq!(amd_queue_u32(qp, 168), per_xcc);
        assert_eq!(amd_queue_u32(qp, 176), per_thread);
        assert!(xcc >= 1);

        // A smaller dispatch keeps it; a larger one grows it.
        s.launch(&pk, 4, 64, 0, &pa).unwrap();
        assert_eq!(amd_queue_u32(qp, 140) & 0xfff, 8);
        s.launch(&pk, 20, 128, 0, &pa).unwrap();
        assert_eq!(amd_queue_u32(qp, 140) & 0xfff, 40);
        let base2 =
            u64::from(amd_queue_u32(qp, 144)) | u64::from(amd_queue_u32(qp, 148) & 0xffff) << 32;
        assert_ne!(base2, base, "a new, larger allocation");
    }

    /// The per-kernel packet template patched for a launch is the packet the pm4
    /// encoder makes for that launch, for every dimensionality; so is what each of the two
    /// ways a launch writes its packet into the ring slot (a [`LaunchShape`]'s body built
    /// before; the plan's template patched in place, for unshaped launches) leaves in a
    /// slot holding garbage, header dword included.
    #[test]
    fn dispatch_packet_template_matches_the_encoder() {
        let dev = open("emu:mi300x");
        let m = load(&dev, "cl/private_array.cl");
        let k = m.kernel("private_array").unwrap();
        let kd = k.descriptor();
        for (grid, block, dyn_lds) in [
            ([1, 1, 1], [64, 1, 1], 0),
            ([7, 1, 1], [256, 1, 1], 128),
            ([3, 5, 1], [16, 4, 1], 0),
            ([2, 1, 9], [1, 1, 8], 4096),
            ([1, 1, 1], [1, 1, 2], 0),
        ] {
            let items = [grid[0] * block[0], grid[1] * block[1], grid[2] * block[2]];
            let lds = kd.group_segment_fixed_size + dyn_lds;
            let ka = 0x7f12_3456_7840;
            let want = AqlPacket::KernelDispatch(KernelDispatch::new(
                PacketControl::SYSTEM_BARRIER,
                [block[0] as u16, block[1] as u16, block[2] as u16],
                items,
                kd.private_segment_fixed_size,
                lds,
                k.kernel_object(),
                ka,
                0,
            ))
            .encode();
            assert_eq!(
                k.plan.packet(dims(grid, block), block, items, lds, ka),
                want,
                "grid {grid:?} block {block:?}"
            );
            let shape = Shape::of(&k.plan, grid, block, dyn_lds).expect("a valid shape");
            let ready = k.launch_shape(grid, block, dyn_lds).expect("a valid shape");
            for body in [None, Some(&ready.body)] {
                // The completion signal (dwords 14..15) is the queue's to write.
                let mut slot = [0xdead_beef_u32; 16];
                // SAFETY: 16 writable dwords.
                slot[0] = unsafe { write_body(slot.as_mut_ptr(), &k.plan, &shape, body, ka) };
                let how = if body.is_some() { "shaped" } else { "planned" };
                assert_eq!(
                    slot[..14],
                    want[..14],
                    "{how}: grid {grid:?} block {block:?}"
                );
                assert_eq!(slot[14..], [0xdead_beef; 2], "{how}: the completion signal");
            }
        }
    }

    /// Hidden arguments that are the same for every launch are in the argument
    /// template (gfx9 kernels read the apertures from registers, so the aperture
    /// arguments are added to a real kernel's metadata here); `clear` keeps them; one
    /// kfdrt does not provide refuses the kernel.
    #[test]
    fn constant_hidden_arguments_are_prefilled() {
        let dev = open("emu:mi300x");
        let gpu = dev.gpu(0).unwrap();
        let m = load(&dev, "hip/dynlds.hip");
        let k = m.kernel("dynlds").unwrap();
        let mut info = k.info().clone();
        let mut add = |kind: ValueKind, offset: u32, size: u32| {
            let mut a = info.meta.args[0].clone();
            (a.value_kind, a.offset, a.size, a.align) = (kind, offset, size, size);
            info.meta.args.push(a.clone());
            a
        };
        let end = info.meta.kernarg_segment_size;
        let pb = add(ValueKind::HiddenPrivateBase, end - 8, 4);
        let sb = add(ValueKind::HiddenSharedBase, end - 4, 4);
        let plan = LaunchPlan::new(&info, k.kernel_object(), gpu, 2);
        assert!(plan.refuse.is_none());
        let want_p = gpu.apertures.scratch_base >> 32;
        let want_s = gpu.apertures.lds_base >> 32;
        assert_ne!(want_p, 0);
        assert_eq!(field(&plan.args_template, &pb), want_p);
        assert_eq!(field(&plan.args_template, &sb), want_s);
        // Through KernelArgs: the real kernel's template, kept by `clear`.
        let mut args = k.args();
        let before = args.bytes().to_vec();
        args.ptr(0x1000).unwrap();
        args.clear();
        assert_eq!(args.bytes(), &before[..]);
        assert_eq!(args.count(), 0);
        // A hidden heap pointer kfdrt does not provide refuses the kernel.
        let mut heap = info.clone();
        let mut a = heap.meta.args[0].clone();
        (a.value_kind, a.offset, a.size) = (ValueKind::HiddenHeapV1, end - 8, 8);
        heap.meta.args.push(a);
        let plan = LaunchPlan::new(&heap, k.kernel_object(), gpu, 2);
        let (kind, why) = plan.refuse.expect("refused");
        assert_eq!(kind, ErrorKind::NotSupported);
        assert!(why.contains("hidden_heap_v1"), "{why}");
    }

    #[test]
    fn srd_and_tmpring_encodings() {
        assert_eq!(
            scratch_srd(9, 0x1234_5678_9abc_d000, 4096),
            [0x9abc_d000, 0x5678 | 1 << 31, 4096, 0x00ea_4fac]
        );
        let g11 = scratch_srd(11, 0x7f00_0000_0000, 256);
        assert_eq!(g11[1], 0x7f00 | 1 << 30);
        assert_eq!(g11[3] >> 28, 2, "OOB_SELECT 2");
        assert_eq!(compute_tmpring_size(40, 65), 40 | 65 << 12);
        assert_eq!(scratch_family(9).granule, 1024);
        assert_eq!(scratch_family(11).granule, 256);
    }
}
