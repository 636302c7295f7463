//! The stream-ordered allocator and memory pools (`hipMallocAsync`, `hipFreeAsync`,
//! `hipMallocFromPoolAsync`, `hipMemPool*`, `hipDeviceSetMemPool` / `GetMemPool`, pool
//! IPC), on the runtime's streams.
//!
//! # Model
//! A pool owns backing chunks (KFD VRAM buffer objects of its GPU) and sub-allocates them
//! by size class (`src/mempool/suballoc.rs` documents the classes and the chunk size policy).
//! `free_async` on stream *S* does not return memory at once: the block goes to its
//! class's free list with a *mark*, the completion point of *S*'s work enqueued so far.
//! `malloc_async` on stream *T* may hand a free block out again only when that is safe:
//!
//! 1. the mark is on *T* itself (stream order) — always;
//! 2. the free's completion was observed by the host (a stream or event synchronize that
//!    found it complete, a TrimTo, or the freeing stream was destroyed after finishing):
//!    work submitted afterwards is ordered after it — always;
//! 3. `ReuseFollowEventDependencies`: *T* already waits (`hipStreamWaitEvent`, null-stream
//!    semantics, an earlier internal dependency) for a point at or after the mark;
//! 4. `ReuseAllowOpportunistic`: the mark has completed now (the timeline is read);
//! 5. otherwise new memory is carved or a new chunk allocated; only when that fails
//!    (`max_size` reached, or the GPU is out of memory) does
//!    `ReuseAllowInternalDependencies` take a block freed on another stream and insert a
//!    CP wait for its mark into *T* ([`Stream`]`::wait_for_point`), as CUDA does.
//!
//! All pools of a device share one lock, so `malloc_async` / `free_async` take exactly
//! one uncontended mutex, set/clear one bit of the chunk's live bitmap and do a free-list
//! push/pop: no syscall and no heap allocation once the pool holds enough memory.
//!
//! # Finding a live allocation
//! A chunk serves one class, its blocks at `chunk.va + i × class size`, so a block is
//! named by its chunk and index `i`, and each chunk keeps one live bit per block. A free
//! finds the chunk by address in its pool's sorted chunk directory (the pool of the last
//! allocation or free first), then accepts the pointer only when it is a block start whose
//! live bit is set: a double free, an interior pointer or an address outside every chunk
//! is InvalidValue. Imported pointers (not in any chunk) are kept in a map by address.
//!
//! # Release to the OS
//! `ReservedMemCurrent` counts backing chunks. A chunk can go back to the OS when none of
//! its blocks is live and every free in it has completed. `trim_to(n)` releases such
//! chunks, largest first, as long as at least `n` bytes stay reserved; frees whose
//! completion has not happened yet keep their chunk (the seed allows counting them as
//! outstanding). The release threshold is applied at every [`Stream::synchronize`] and
//! [`crate::Event::synchronize`] after a free: the pool is trimmed to
//! `ReleaseThreshold` (default 0, so all unused memory goes back, as in CUDA).
//!
//! # Choices where the seed is vague
//! - `size == 0` and a null pointer are InvalidValue (CLR's `hipMallocAsync` /
//!   `hipFreeAsync`); freeing an unknown or already freed pointer is InvalidValue.
//! - Pool handles stay valid until [`MemPool::destroy`]; using a destroyed pool is
//!   InvalidHandle.
//! - Boolean attributes take 0 (off) / non-zero (on); `ReservedMemHigh` / `UsedMemHigh`
//!   accept only 0, which resets the mark to the current value; the `*Current` attributes
//!   are read-only (InvalidValue).
//! - Pool locations are GPUs; `Location::Host` pools and read-only peer access are
//!   NotSupported (KFD maps a buffer object with one set of permissions on every GPU).
//! - IPC pools have one fixed backing (see the private `ipc` module): `TrimTo` and the release threshold
//!   do not shrink it.

mod ipc;
pub(crate) mod suballoc;

pub use ipc::{PtrExportData, IPC_DEFAULT_BYTES, LEDGER_BYTES};

use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::devcore::DeviceCore;
use crate::device::{Device, DeviceInner};
use crate::error::{Error, ErrorKind, Result};
use crate::memory::{Buffer, MemoryKind};
use crate::signal::Signal;
use crate::stream::{Point, Stream, StreamInner};
use crate::types::{AccessDesc, AccessFlags, HandleType, Location};
use crate::va::{VaReservation, HUGE, PAGE};
use suballoc::{chunk_bytes, class_index, class_size, is_slab_class, MAX_REQUEST, NUM_CLASSES};

/// `hipMemPoolProps`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolProps {
    /// Where the memory lives.
    pub location: Location,
    /// IPC capability.
    pub handle_type: HandleType,
    /// Maximum bytes the pool may reserve (0 = limited only by the GPU's memory; for an
    /// IPC pool, 0 means [`IPC_DEFAULT_BYTES`]).
    pub max_size: usize,
}

impl PoolProps {
    /// A non-IPC pool on GPU `gpu` without size limit.
    pub fn device(gpu: usize) -> Self {
        PoolProps {
            location: Location::Gpu(gpu),
            handle_type: HandleType::None,
            max_size: 0,
        }
    }
}

/// `hipMemPoolAttr`. Values are `u64`; booleans are 0 / 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PoolAttr {
    /// Bytes to keep reserved at synchronize (default 0).
    ReleaseThreshold,
    /// Reuse across streams ordered by events / null-stream waits (default 1).
    ReuseFollowEventDependencies,
    /// Reuse completed frees without a dependency (default 1).
    ReuseAllowOpportunistic,
    /// Insert a stream dependency to reuse a pending free (default 1).
    ReuseAllowInternalDependencies,
    /// Bytes of backing memory held (read-only).
    ReservedMemCurrent,
    /// High-water mark of `ReservedMemCurrent`; set 0 to reset.
    ReservedMemHigh,
    /// Bytes of live allocations, in class sizes (read-only).
    UsedMemCurrent,
    /// High-water mark of `UsedMemCurrent`; set 0 to reset.
    UsedMemHigh,
}

/// A memory pool (`hipMemPool_t`). Cloning copies the handle; the pool lives until
/// [`MemPool::destroy`] and its last allocation is freed (or the device goes).
///
/// # Example
///
/// ```
/// use kfdrt::{Device, PoolAttr, PoolProps};
///
/// # fn main() -> kfdrt::Result<()> {
/// let dev = Device::open()?;
/// let s = dev.create_stream(0)?;
/// let pool = dev.create_mem_pool(&PoolProps::device(0))?;
/// pool.set_attribute(PoolAttr::ReleaseThreshold, 8 << 20)?; // keep 8 MiB at sync
/// let p = s.malloc_from_pool_async(1 << 20, &pool)?;
/// s.memset(p.va(), 0, 1 << 20)?;
/// p.free_async(&s)?;
/// // Freed on the same stream: the next allocation may take the same memory.
/// let q = s.malloc_from_pool_async(1 << 20, &pool)?;
/// drop(q); // a drop frees on the allocating stream
/// s.synchronize()?;
/// assert!(pool.attribute(PoolAttr::ReservedMemCurrent)? >= 1 << 20);
/// assert_eq!(pool.attribute(PoolAttr::UsedMemCurrent)?, 0);
/// pool.destroy()?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct MemPool {
    dev: Arc<DeviceInner>,
    slot: u32,
}

impl PartialEq for MemPool {
    fn eq(&self, o: &Self) -> bool {
        Arc::ptr_eq(&self.dev, &o.dev) && self.slot == o.slot
    }
}
impl Eq for MemPool {}

impl std::fmt::Debug for MemPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "MemPool({})", self.slot)
    }
}

// ---------------------------------------------------------------------------------------
// State

#[derive(Default)]
struct PtrHasher(u64);
impl Hasher for PtrHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0 ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (v >> 8).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }
    fn finish(&self) -> u64 {
        self.0 ^ (self.0 >> 29)
    }
}
type PtrMap<V> = HashMap<u64, V, BuildHasherDefault<PtrHasher>>;

/// Where a free happened: an index into the pool's [`Timelines`] and the point. Marks
/// hold no reference count, so freeing and reusing costs no atomic operation beyond the
/// lock.
struct FreeMark {
    tl: u32,
    target: u64,
    queue_id: u32,
    gpu_index: u32,
}

/// The stream timelines a pool's pending frees refer to: `(address, weak reference)`.
/// A weak reference never keeps the device alive, and keeps the address unique while the
/// entry exists. A timeline that is gone belonged to a stream destroyed after its work
/// finished (or faulted): its frees are complete.
#[derive(Default)]
struct Timelines {
    v: Vec<(usize, Weak<Signal>)>,
    last: usize,
}

impl Timelines {
    #[inline]
    fn mark(&mut self, s: &Stream) -> FreeMark {
        let ptr = Arc::as_ptr(&s.inner.timeline) as usize;
        let tl = if self.v.get(self.last).is_some_and(|e| e.0 == ptr) {
            self.last
        } else {
            self.slot_of(s, ptr)
        };
        self.last = tl;
        let (target, queue_id) = s.point_parts();
        FreeMark {
            tl: tl as u32,
            target,
            queue_id,
            gpu_index: s.inner.gpu_index as u32,
        }
    }
    /// The entry of timeline `ptr` (of `s`), added when new.
    #[cold]
    fn slot_of(&mut self, s: &Stream, ptr: usize) -> usize {
        if let Some(i) = self.v.iter().position(|e| e.0 == ptr) {
            i
        } else {
            let e = (ptr, Arc::downgrade(&s.inner.timeline));
            match self.v.iter().position(|e| e.0 == 0) {
                Some(i) => {
                    self.v[i] = e;
                    i
                }
                None => {
                    self.v.push(e);
                    self.v.len() - 1
                }
            }
        }
    }
    fn point(&self, m: &FreeMark) -> Option<Point> {
        self.v[m.tl as usize].1.upgrade().map(|timeline| Point {
            timeline,
            target: m.target,
            queue_id: m.queue_id,
            gpu_index: m.gpu_index as usize,
        })
    }
    fn done(&self, m: &FreeMark) -> bool {
        self.point(m).is_none_or(|p| p.done())
    }
    fn on(&self, m: &FreeMark, s: &Stream) -> bool {
        self.v[m.tl as usize].0 == Arc::as_ptr(&s.inner.timeline) as usize
    }
    /// Drop entries of dead timelines no mark refers to.
    fn sweep(&mut self, referenced: &[bool]) {
        for (i, e) in self.v.iter_mut().enumerate() {
            if !referenced.get(i).copied().unwrap_or(false) && e.1.strong_count() == 0 {
                *e = (0, Weak::new());
            }
        }
    }
}

struct FreeBlock {
    va: u64,
    chunk: u32,
    /// The block's index in its chunk.
    index: u32,
    /// None once the free is known complete to the host.
    mark: Option<FreeMark>,
}

#[derive(Default)]
struct ClassState {
    free: Vec<FreeBlock>,
    /// Slab chunks of this class with never-used space.
    bump: Vec<u32>,
}

enum ChunkMem {
    Bo(Buffer),
    /// Carved out of the pool's IPC backing.
    Carved,
}

struct Chunk {
    va: u64,
    size: u64,
    live: u32,
    bump: u64,
    mem: ChunkMem,
    /// The class the chunk serves.
    class: u16,
    /// Its block size (`class_size(class)`).
    block: u64,
    /// One bit per block (`va + i × block`): set while the block is allocated.
    live_bits: Vec<u64>,
}

impl Chunk {
    /// The block index of `ptr` when it is the start of a block of this chunk.
    fn index_of(&self, ptr: u64) -> Option<usize> {
        let off = ptr.checked_sub(self.va)?;
        if off >= self.size || off % self.block != 0 {
            return None;
        }
        Some((off / self.block) as usize)
    }
    fn is_live(&self, i: usize) -> bool {
        self.live_bits
            .get(i / 64)
            .is_some_and(|w| w & (1 << (i % 64)) != 0)
    }
}

/// A live block: the pool slot, chunk index and block index in the chunk.
#[derive(Clone, Copy)]
struct BlockRef {
    pool: u32,
    chunk: u32,
    index: usize,
}

/// A block being handed out: its address, chunk and index in the chunk.
#[derive(Clone, Copy)]
struct Block {
    va: u64,
    chunk: u32,
    index: u32,
}

struct PoolState {
    gpu: usize,
    max_size: u64,
    is_default: bool,
    release_threshold: u64,
    follow: bool,
    opportunistic: bool,
    internal: bool,
    destroyed: bool,
    chunks: Vec<Option<Chunk>>,
    /// `(va, end, chunk index)` of every chunk, sorted by address.
    dir: Vec<(u64, u64, u32)>,
    /// IPC ledger slots of exported live allocations, by address.
    exported: PtrMap<u32>,
    holes: Vec<u32>,
    classes: Vec<ClassState>,
    reserved: u64,
    reserved_high: u64,
    used: u64,
    used_high: u64,
    live: u64,
    /// Peer GPUs given access (the owner is always mapped).
    peers: Vec<bool>,
    ipc: Option<ipc::IpcBacking>,
    import: Option<ipc::ImportedBacking>,
    timelines: Timelines,
    /// Address ranges of released chunks, still reserved (`PROT_NONE`, no memory behind
    /// them), most recent last: a later chunk of the same size is placed in one, so a pool
    /// that releases at every synchronize grows again without address-space system calls.
    spare_va: Vec<VaReservation>,
}

/// How many released chunks' address ranges a pool keeps reserved for regrowth.
const SPARE_VA_SLOTS: usize = 8;

/// Per-device allocator state (a field of the device).
pub(crate) struct DevicePools {
    state: Mutex<PoolsState>,
    /// Set by frees, attribute changes and destroys: a synchronize has work to do.
    dirty: AtomicBool,
}

struct PoolsState {
    pools: Vec<Option<PoolState>>,
    current: Vec<Option<u32>>,
    defaults: Vec<Option<u32>>,
    /// Live imported pointers (outside every chunk) and their pool's slot.
    imported: PtrMap<u32>,
    /// The pool and chunk of the last allocation or free: looked at first by a free
    /// (checked against the chunk's range, so it needs no invalidation).
    hint: (u32, u32),
}

impl DevicePools {
    pub(crate) fn new() -> Self {
        DevicePools {
            state: Mutex::new(PoolsState {
                pools: Vec::new(),
                current: Vec::new(),
                defaults: Vec::new(),
                imported: PtrMap::default(),
                hint: (0, 0),
            }),
            dirty: AtomicBool::new(false),
        }
    }
    fn lock(&self) -> MutexGuard<'_, PoolsState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn err(
    kind: ErrorKind,
    call: &'static str,
    msg: impl Into<std::borrow::Cow<'static, str>>,
) -> Error {
    Error::new(kind, call, msg)
}

impl PoolState {
    fn new(dev: &DeviceCore, gpu: usize, max_size: u64) -> Self {
        PoolState {
            gpu,
            max_size,
            is_default: false,
            release_threshold: 0,
            follow: true,
            opportunistic: true,
            internal: true,
            destroyed: false,
            chunks: Vec::new(),
            dir: Vec::new(),
            exported: PtrMap::default(),
            holes: Vec::new(),
            classes: (0..NUM_CLASSES).map(|_| ClassState::default()).collect(),
            reserved: 0,
            reserved_high: 0,
            used: 0,
            used_high: 0,
            live: 0,
            peers: vec![false; dev.gpus.len()],
            ipc: None,
            import: None,
            timelines: Timelines::default(),
            spare_va: Vec::new(),
        }
    }

    fn mapped_gpus(&self) -> Vec<usize> {
        let mut v = vec![self.gpu];
        v.extend(
            self.peers
                .iter()
                .enumerate()
                .filter(|&(g, &p)| p && g != self.gpu)
                .map(|(g, _)| g),
        );
        v
    }

    /// A free block of `class` that `s` may reuse without a new dependency.
    fn take_free(&mut self, class: usize, s: &Stream) -> Option<Block> {
        let tls = &self.timelines;
        let list = &mut self.classes[class].free;
        if let Some(i) = list
            .iter()
            .rposition(|b| b.mark.as_ref().is_none_or(|m| tls.on(m, s)))
        {
            let b = list.swap_remove(i);
            return Some(Block {
                va: b.va,
                chunk: b.chunk,
                index: b.index,
            });
        }
        let (follow, opp) = (self.follow, self.opportunistic);
        let i = list.iter().rposition(|b| {
            let Some(m) = &b.mark else { return true };
            match tls.point(m) {
                None => true,
                Some(p) => (follow && s.ordered_after(&p)) || (opp && p.done()),
            }
        })?;
        let b = list.swap_remove(i);
        Some(Block {
            va: b.va,
            chunk: b.chunk,
            index: b.index,
        })
    }

    /// Never-used space in a slab of `class`.
    fn carve(&mut self, class: usize) -> Option<Block> {
        let cs = class_size(class) as u64;
        while let Some(&ci) = self.classes[class].bump.last() {
            let c = self.chunks[ci as usize].as_mut()?;
            if c.bump + cs <= c.size {
                let b = Block {
                    va: c.va + c.bump,
                    chunk: ci,
                    index: (c.bump / cs) as u32,
                };
                c.bump += cs;
                if c.bump + cs > c.size {
                    self.classes[class].bump.pop();
                }
                return Some(b);
            }
            self.classes[class].bump.pop();
        }
        None
    }

    /// A new chunk for `class`; None when the pool may not or cannot grow.
    fn grow(&mut self, dev: &Arc<DeviceCore>, class: usize) -> Result<Option<Block>> {
        let bytes = chunk_bytes(class) as u64;
        let (va, mem) = if let Some(ipc) = &mut self.ipc {
            match ipc.ranges.alloc(bytes, 64 << 10) {
                Some(off) => (ipc.va() + off, ChunkMem::Carved),
                None => return Ok(None),
            }
        } else {
            if self.max_size != 0 && self.reserved + bytes > self.max_size {
                return Ok(None);
            }
            let gpus = self.mapped_gpus();
            // A kept range of this size, else a new one of its own (see
            // `VaReservation::isolated`), with Buffer's alignment rule.
            let spare = match self.spare_va.iter().rposition(|r| r.len() as u64 == bytes) {
                Some(i) => self.spare_va.remove(i),
                None => {
                    let align = if bytes as usize >= HUGE { HUGE } else { PAGE };
                    match VaReservation::isolated(bytes as usize, align) {
                        Ok(r) => r,
                        // No address space: like a failed ALLOC, the pool cannot grow.
                        Err(e) if e.kind() == ErrorKind::OutOfMemory => return Ok(None),
                        Err(e) => return Err(e),
                    }
                }
            };
            match Buffer::alloc_on(
                dev,
                MemoryKind::Device,
                self.gpu,
                bytes as usize,
                &gpus,
                Some(spare),
            ) {
                Ok(b) => (b.va(), ChunkMem::Bo(b)),
                Err(e) if e.kind() == ErrorKind::OutOfMemory => return Ok(None),
                Err(e) => return Err(e),
            }
        };
        if matches!(mem, ChunkMem::Bo(_)) {
            self.reserved += bytes;
            self.reserved_high = self.reserved_high.max(self.reserved);
        }
        let cs = class_size(class) as u64;
        let chunk = Chunk {
            va,
            size: bytes,
            live: 0,
            bump: cs,
            mem,
            class: class as u16,
            block: cs,
            live_bits: vec![0; (bytes / cs).div_ceil(64) as usize],
        };
        let ci = match self.holes.pop() {
            Some(i) => {
                self.chunks[i as usize] = Some(chunk);
                i
            }
            None => {
                self.chunks.push(Some(chunk));
                (self.chunks.len() - 1) as u32
            }
        };
        let at = self.dir.partition_point(|e| e.0 < va);
        self.dir.insert(at, (va, va + bytes, ci));
        if is_slab_class(class) && 2 * cs <= bytes {
            self.classes[class].bump.push(ci);
        }
        Ok(Some(Block {
            va,
            chunk: ci,
            index: 0,
        }))
    }

    /// A block freed on another stream, after making `s` wait for the free.
    fn take_dependent(&mut self, class: usize, s: &Stream) -> Result<Option<Block>> {
        if !self.internal {
            return Ok(None);
        }
        let list = &mut self.classes[class].free;
        let Some(b) = list.last() else {
            return Ok(None);
        };
        if let Some(p) = b.mark.as_ref().and_then(|m| self.timelines.point(m)) {
            s.wait_for_point(p)?;
        }
        let b = list.pop().expect("checked non-empty");
        Ok(Some(Block {
            va: b.va,
            chunk: b.chunk,
            index: b.index,
        }))
    }

    /// Mark completed frees as observed; per chunk, whether a free in it is pending.
    fn observe(&mut self) -> (Vec<bool>, bool) {
        let mut pending = vec![false; self.chunks.len()];
        let mut any = false;
        let mut referenced = vec![false; self.timelines.v.len()];
        for cl in &mut self.classes {
            for b in &mut cl.free {
                if let Some(m) = &b.mark {
                    if self.timelines.done(m) {
                        b.mark = None;
                    } else {
                        pending[b.chunk as usize] = true;
                        referenced[m.tl as usize] = true;
                        any = true;
                    }
                }
            }
        }
        self.timelines.sweep(&referenced);
        (pending, any)
    }

    /// Release releasable chunks, largest first, keeping at least `keep` bytes reserved
    /// (`None`: release all, including carved IPC chunks). Returns whether frees are
    /// still pending.
    fn release(&mut self, keep: Option<u64>) -> bool {
        let (pending, any) = self.observe();
        let mut cands: Vec<(u64, u64, usize)> = self
            .chunks
            .iter()
            .enumerate()
            .filter_map(|(i, c)| c.as_ref().map(|c| (i, c)))
            .filter(|(i, c)| c.live == 0 && !pending[*i])
            .map(|(i, c)| (c.size, c.va, i))
            .collect();
        if cands.is_empty() {
            return any;
        }
        cands.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
        let mut rel = vec![false; self.chunks.len()];
        let mut n = 0;
        for (size, _, i) in cands {
            let carved = matches!(
                self.chunks[i].as_ref().map(|c| &c.mem),
                Some(ChunkMem::Carved)
            );
            match keep {
                None => {}
                Some(_) if carved => continue,
                Some(k) => {
                    if self.reserved - size < k {
                        continue;
                    }
                    self.reserved -= size;
                }
            }
            rel[i] = true;
            n += 1;
        }
        if n == 0 {
            return any;
        }
        for cl in &mut self.classes {
            cl.free.retain(|b| !rel[b.chunk as usize]);
            cl.bump.retain(|&c| !rel[c as usize]);
        }
        self.dir.retain(|e| !rel[e.2 as usize]);
        for (i, r) in rel.iter().enumerate() {
            if !*r {
                continue;
            }
            if let Some(c) = self.chunks[i].take() {
                match c.mem {
                    ChunkMem::Bo(buf) => {
                        if keep.is_none() {
                            self.reserved -= c.size;
                            drop(buf);
                        } else if let Some(r) = buf.into_reservation() {
                            // The memory goes back now; only its address range is kept.
                            if self.spare_va.len() == SPARE_VA_SLOTS {
                                self.spare_va.remove(0);
                            }
                            self.spare_va.push(r);
                        }
                    }
                    ChunkMem::Carved => {
                        if let Some(ipc) = &mut self.ipc {
                            ipc.ranges.free(c.va - ipc.va(), c.size);
                        }
                    }
                }
                self.holes.push(i as u32);
            }
        }
        any
    }

    /// The chunk holding `ptr` and its block index, when `ptr` is a live block's start.
    fn find_block(&self, ptr: u64) -> Option<(u32, usize)> {
        let at = self.dir.partition_point(|e| e.0 <= ptr);
        let &(_, end, ci) = self.dir.get(at.checked_sub(1)?)?;
        if ptr >= end {
            return None;
        }
        let c = self.chunks.get(ci as usize)?.as_ref()?;
        let i = c.index_of(ptr)?;
        c.is_live(i).then_some((ci, i))
    }

    fn empty(&self) -> bool {
        self.chunks.iter().all(Option::is_none)
    }

    fn reserved_now(&self) -> u64 {
        match (&self.ipc, &self.import) {
            (Some(b), _) => b.buf.len() as u64,
            _ => self.reserved,
        }
    }
}

impl PoolsState {
    fn init(&mut self, dev: &DeviceCore) {
        if self.current.len() != dev.gpus.len() {
            self.current = vec![None; dev.gpus.len()];
            self.defaults = vec![None; dev.gpus.len()];
        }
    }

    /// Adds `p` to the device's pools; returns its slot.
    fn add(&mut self, dev: &DeviceCore, p: PoolState) -> u32 {
        self.init(dev);
        self.pools.push(Some(p));
        (self.pools.len() - 1) as u32
    }

    fn default_pool(&mut self, dev: &DeviceCore, gpu: usize) -> Result<u32> {
        dev.gpu(gpu)?;
        self.init(dev);
        if let Some(d) = self.defaults[gpu] {
            return Ok(d);
        }
        let mut p = PoolState::new(dev, gpu, 0);
        p.is_default = true;
        let slot = self.add(dev, p);
        self.defaults[gpu] = Some(slot);
        if self.current[gpu].is_none() {
            self.current[gpu] = Some(slot);
        }
        Ok(slot)
    }

    fn current_pool(&mut self, dev: &DeviceCore, gpu: usize) -> Result<u32> {
        match self.current.get(gpu) {
            Some(&Some(s)) => Ok(s),
            _ => self.default_pool(dev, gpu),
        }
    }

    fn pool(&mut self, slot: u32, call: &'static str) -> Result<&mut PoolState> {
        match self.pools.get_mut(slot as usize) {
            Some(Some(p)) if !p.destroyed => Ok(p),
            _ => Err(err(
                ErrorKind::InvalidHandle,
                call,
                "memory pool was destroyed",
            )),
        }
    }

    /// The live block at `ptr`, in any pool (the chunk of the last allocation or free
    /// first).
    #[inline]
    fn find_block(&self, ptr: u64) -> Option<BlockRef> {
        let (pool, chunk) = self.hint;
        if let Some(Some(p)) = self.pools.get(pool as usize) {
            if let Some(Some(c)) = p.chunks.get(chunk as usize) {
                if ptr.wrapping_sub(c.va) < c.size {
                    // Chunks never overlap: `ptr` is this chunk's block or nothing.
                    let i = c.index_of(ptr).filter(|&i| c.is_live(i))?;
                    return Some(BlockRef {
                        pool,
                        chunk,
                        index: i,
                    });
                }
            }
        }
        self.find_block_slow(ptr)
    }

    /// [`PoolsState::find_block`] through every pool's chunk directory.
    #[cold]
    fn find_block_slow(&self, ptr: u64) -> Option<BlockRef> {
        self.pools.iter().enumerate().find_map(|(slot, p)| {
            p.as_ref()?.find_block(ptr).map(|(chunk, index)| BlockRef {
                pool: slot as u32,
                chunk,
                index,
            })
        })
    }

    fn alloc(
        &mut self,
        dev: &DeviceInner,
        slot: u32,
        s: &Stream,
        size: usize,
        call: &'static str,
    ) -> Result<u64> {
        if size == 0 {
            return Err(err(ErrorKind::InvalidValue, call, "size is 0"));
        }
        if size > MAX_REQUEST {
            return Err(err(
                ErrorKind::OutOfMemory,
                call,
                format!("{size} bytes exceed the largest pool allocation"),
            ));
        }
        let class = class_index(size);
        let p = self.pool(slot, call)?;
        if p.import.is_some() {
            return Err(err(
                ErrorKind::InvalidValue,
                call,
                "imported pools cannot allocate",
            ));
        }
        let got = match p.take_free(class, s) {
            Some(b) => Some(b),
            None => p.carve(class),
        };
        let Block { va, chunk, index } = match got {
            Some(b) => b,
            None => match p.grow(&dev.core, class)? {
                Some(b) => b,
                None => {
                    // At the limit: give cached chunks back, then try again; then reuse
                    // a pending free behind an inserted dependency.
                    p.release(if p.ipc.is_some() { None } else { Some(0) });
                    match p.grow(&dev.core, class)? {
                        Some(b) => b,
                        None => match p.take_dependent(class, s)? {
                            Some(b) => b,
                            None => {
                                return Err(err(
                                    ErrorKind::OutOfMemory,
                                    call,
                                    format!(
                                        "pool cannot grow by {} bytes (reserved {}, max {})",
                                        chunk_bytes(class),
                                        p.reserved_now(),
                                        p.max_size
                                    ),
                                ))
                            }
                        },
                    }
                }
            },
        };
        let Some(c) = p.chunks[chunk as usize].as_mut() else {
            return Err(err(ErrorKind::Driver, call, "pool block without chunk"));
        };
        // A block handed out twice would corrupt data: check the allocator's own state.
        let bit = 1u64 << (index % 64);
        match c.live_bits.get_mut(index as usize / 64) {
            Some(w) if *w & bit == 0 && c.va + u64::from(index) * c.block == va => *w |= bit,
            _ => {
                return Err(err(
                    ErrorKind::Driver,
                    call,
                    format!("pool handed out {va:#x}, which is not a free block"),
                ))
            }
        }
        c.live += 1;
        p.used += c.block;
        p.used_high = p.used_high.max(p.used);
        p.live += 1;
        self.hint = (slot, chunk);
        Ok(va)
    }

    fn free(&mut self, s: Option<&Stream>, ptr: u64, dirty: &AtomicBool) -> Result<()> {
        // The common case in one pass: a block of the chunk of the last allocation or
        // free, in a live pool without exported pointers.
        let (pool, chunk) = self.hint;
        if let Some(Some(p)) = self.pools.get_mut(pool as usize) {
            if let Some(Some(c)) = p.chunks.get_mut(chunk as usize) {
                let off = ptr.wrapping_sub(c.va);
                if off < c.size && !p.destroyed && p.exported.is_empty() {
                    // Chunks never overlap: `ptr` is this chunk's block or nothing.
                    let i = off / c.block;
                    let bit = 1u64 << (i % 64);
                    match c.live_bits.get_mut((i / 64) as usize) {
                        Some(w) if *w & bit != 0 && i * c.block == off => *w &= !bit,
                        _ => return Err(not_live(ptr)),
                    }
                    c.live -= 1;
                    p.live -= 1;
                    p.used -= c.block;
                    let class = c.class as usize;
                    // No stream: the allocating stream is gone with its work finished.
                    let mark = s.map(|s| p.timelines.mark(s));
                    p.classes[class].free.push(FreeBlock {
                        va: ptr,
                        chunk,
                        index: i as u32,
                        mark,
                    });
                    dirty.store(true, Ordering::Relaxed);
                    return Ok(());
                }
            }
        }
        self.free_slow(s, ptr, dirty)
    }

    /// [`PoolsState::free`] of a block in another chunk, of a destroyed pool, of a pool
    /// with exported pointers, or of an imported pointer.
    #[inline(never)]
    fn free_slow(&mut self, s: Option<&Stream>, ptr: u64, dirty: &AtomicBool) -> Result<()> {
        let Some(b) = self.find_block(ptr) else {
            let Some(slot) = self.imported.remove(&ptr) else {
                return Err(not_live(ptr));
            };
            let Some(p) = self.pools[slot as usize].as_mut() else {
                return Ok(());
            };
            p.live -= 1;
            if p.destroyed {
                self.finish(slot);
            }
            return Ok(());
        };
        self.hint = (b.pool, b.chunk);
        let Some(p) = self.pools[b.pool as usize].as_mut() else {
            return Ok(());
        };
        p.live -= 1;
        if !p.exported.is_empty() {
            if let (Some(is), Some(ipc)) = (p.exported.remove(&ptr), &mut p.ipc) {
                ipc.clear(is);
            }
        }
        let Some(c) = p.chunks[b.chunk as usize].as_mut() else {
            return Ok(());
        };
        c.live_bits[b.index / 64] &= !(1 << (b.index % 64));
        c.live -= 1;
        let (class, block) = (c.class as usize, c.block);
        // No stream: the allocating stream is gone with its work finished.
        let mark = s.map(|s| p.timelines.mark(s));
        p.classes[class].free.push(FreeBlock {
            va: ptr,
            chunk: b.chunk,
            index: b.index as u32,
            mark,
        });
        p.used -= block;
        dirty.store(true, Ordering::Relaxed);
        if p.destroyed {
            self.finish(b.pool);
        }
        Ok(())
    }

    /// Release what a destroyed pool can; drop it when nothing is left.
    fn finish(&mut self, slot: u32) {
        let Some(p) = self.pools[slot as usize].as_mut() else {
            return;
        };
        if p.live > 0 {
            return;
        }
        p.release(None);
        if p.empty() {
            self.pools[slot as usize] = None;
        }
    }
}

/// The error of a free of an address that is not a live block's start.
#[cold]
fn not_live(ptr: u64) -> Error {
    err(
        ErrorKind::InvalidValue,
        "hipFreeAsync",
        format!("{ptr:#x} is not a live allocation of a memory pool of this device"),
    )
}

/// The flag that says a synchronize has allocator work to do (frees to observe, pools to
/// trim or finish; [`on_synchronize`] returns at once while it is clear): its address is
/// kept by each stream for the idle synchronize predicate.
pub(crate) fn release_pending_flag(dev: &DeviceInner) -> &AtomicBool {
    &dev.mempools.dirty
}

/// Synchronize hook (stream and event synchronize): observe completed frees, trim pools
/// above their release threshold, finish destroyed pools.
pub(crate) fn on_synchronize(dev: &DeviceInner) {
    let mp = &dev.mempools;
    if !mp.dirty.load(Ordering::Relaxed) {
        return;
    }
    let mut st = mp.lock();
    mp.dirty.store(false, Ordering::Relaxed);
    let mut pending = false;
    for slot in 0..st.pools.len() {
        let Some(p) = st.pools[slot].as_mut() else {
            continue;
        };
        if p.destroyed {
            st.finish(slot as u32);
            pending |= st.pools[slot].is_some();
            continue;
        }
        pending |= if p.ipc.is_none() && p.reserved > p.release_threshold {
            p.release(Some(p.release_threshold))
        } else {
            p.observe().1
        };
    }
    if pending {
        mp.dirty.store(true, Ordering::Relaxed);
    }
}

// ---------------------------------------------------------------------------------------
// Public API

/// Memory from a pool, ordered on a stream (`hipMallocAsync` / `hipMallocFromPoolAsync`):
/// owned, like cudarc's `CudaSlice`.
///
/// Free it on any stream of the device with [`PoolAlloc::free_async`] (`hipFreeAsync`);
/// dropping it frees it stream-ordered on the stream that allocated it. When that stream
/// has been destroyed and its work has finished, nothing can still use the memory and it is
/// freed at once. A C ABI that hands out bare addresses takes them with
/// [`PoolAlloc::into_raw`] and frees them with [`Stream::free_ptr_async`].
///
/// The memory is device memory (GPU VA == CPU VA, [`PoolAlloc::va`]), reached by stream
/// operations (copies, kernels); it is not host-accessible.
///
/// # Example
///
/// ```
/// use kfdrt::{Device, MemoryKind};
///
/// # fn main() -> kfdrt::Result<()> {
/// let dev = Device::open()?;
/// let (a, b) = (dev.create_stream(0)?, dev.create_stream(0)?);
/// let host = dev.alloc(MemoryKind::HostPinned, 0, 4096)?;
/// let scratch = a.malloc_async(4096)?;
/// a.memset(scratch.va(), 7, 4096)?;
/// a.memcpy(host.va(), scratch.va(), 4096)?;
/// a.synchronize()?;
/// scratch.free_async(&b)?; // freed on another stream (its work is done: a synchronized)
/// let tmp = a.malloc_async(1 << 20)?;
/// a.memset(tmp.va(), 0, 1 << 20)?;
/// drop(tmp); // freed on `a` after the memset
/// a.synchronize()?;
/// let mut back = [0u8; 16];
/// host.read(0, &mut back)?;
/// assert_eq!(back, [7; 16]);
/// # Ok(())
/// # }
/// ```
pub struct PoolAlloc {
    dev: Arc<DeviceInner>,
    /// 0 once freed or given away with `into_raw`.
    va: u64,
    len: usize,
    /// The allocating stream, for the free on drop; weak so that an allocation never
    /// keeps a destroyed stream (and its stream associations) alive.
    stream: Weak<StreamInner>,
}

impl std::fmt::Debug for PoolAlloc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PoolAlloc({:#x}, {} bytes)", self.va, self.len)
    }
}

impl PoolAlloc {
    fn new(s: &Stream, va: u64, len: usize) -> PoolAlloc {
        PoolAlloc {
            dev: s.inner.dev.clone(),
            va,
            len,
            stream: Arc::downgrade(&s.inner),
        }
    }

    /// The device address (GPU VA == CPU VA).
    pub fn va(&self) -> u64 {
        self.va
    }

    /// The size asked for, in bytes (the pool may have reserved more).
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the size is 0 (never: `hipMallocAsync` of 0 bytes is InvalidValue).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// `hipFreeAsync`: free the memory once `stream`'s earlier work is done; `stream` may
    /// be any stream of the device, not only the allocating one. A stream of another
    /// [`Device`] is InvalidValue (the memory is then freed on drop, on its own stream).
    pub fn free_async(mut self, stream: &Stream) -> Result<()> {
        if !Arc::ptr_eq(&self.dev, &stream.inner.dev) {
            return Err(err(
                ErrorKind::InvalidValue,
                "hipFreeAsync",
                "the allocation and the stream belong to different devices",
            ));
        }
        let va = std::mem::take(&mut self.va);
        stream.free_ptr_async(va)
    }

    /// Give up ownership: the address, which must later be freed with
    /// [`Stream::free_ptr_async`] (or it stays allocated until the device goes).
    pub fn into_raw(mut self) -> u64 {
        std::mem::take(&mut self.va)
    }
}

impl Drop for PoolAlloc {
    fn drop(&mut self) {
        if self.va == 0 {
            return;
        }
        let s = self.stream.upgrade().map(|inner| Stream { inner });
        let mut st = self.dev.mempools.lock();
        // A failure here means the pool went with its device's teardown: nothing to free.
        let _ = st.free(s.as_ref(), self.va, &self.dev.mempools.dirty);
        drop(st);
        // A temporary handle to a live stream: its drop only reaps finished streams (and
        // parks a busy one until its work is done, as any handle's drop does).
        drop(s);
    }
}

impl Stream {
    /// `hipMallocAsync`: `size` bytes from the current pool of the stream's GPU, ordered
    /// on this stream. The allocation frees itself on this stream when dropped.
    pub fn malloc_async(&self, size: usize) -> Result<PoolAlloc> {
        let va = self.malloc_async_raw(size)?;
        Ok(PoolAlloc::new(self, va, size))
    }

    /// [`Stream::malloc_async`] for a C ABI that hands out bare addresses: the address,
    /// to be freed with [`Stream::free_ptr_async`] (as [`PoolAlloc::into_raw`] of a
    /// `malloc_async`, without making and dropping the owning handle: its device and
    /// stream references are two atomic increments and two decrements per call).
    pub fn malloc_async_raw(&self, size: usize) -> Result<u64> {
        let dev = &*self.inner.dev;
        let mut st = dev.mempools.lock();
        let slot = st.current_pool(dev, self.inner.gpu_index)?;
        st.alloc(dev, slot, self, size, "hipMallocAsync")
    }

    /// `hipMallocFromPoolAsync`: `size` bytes from `pool` (which may be on another GPU
    /// of the same device), ordered on this stream.
    pub fn malloc_from_pool_async(&self, size: usize, pool: &MemPool) -> Result<PoolAlloc> {
        let call = "hipMallocFromPoolAsync";
        if !Arc::ptr_eq(&pool.dev, &self.inner.dev) {
            return Err(err(
                ErrorKind::InvalidValue,
                call,
                "pool and stream belong to different devices",
            ));
        }
        let dev = &*self.inner.dev;
        let mut st = dev.mempools.lock();
        let va = st.alloc(dev, pool.slot, self, size, call)?;
        Ok(PoolAlloc::new(self, va, size))
    }

    /// `hipFreeAsync` on a bare address: free `ptr` (from [`PoolAlloc::into_raw`], or
    /// imported with [`MemPool::import_pointer`] and given up the same way) once this
    /// stream's earlier work is done. An address that is not a live pool allocation of
    /// this device (0, freed already) is InvalidValue.
    pub fn free_ptr_async(&self, ptr: u64) -> Result<()> {
        if ptr == 0 {
            return Err(err(ErrorKind::InvalidValue, "hipFreeAsync", "null pointer"));
        }
        let dev = &*self.inner.dev;
        let mut st = dev.mempools.lock();
        st.free(Some(self), ptr, &dev.mempools.dirty)
    }
}

impl Device {
    /// The GPU whose stream-ordered pool memory holds `va`: an address inside a chunk of
    /// one of this device's pools (allocated or not: a pool's chunk is device memory of
    /// its GPU either way), or an imported pool pointer. What `hipPointerGetAttributes`
    /// reports for `hipMallocAsync` memory.
    ///
    /// ```
    /// let dev = kfdrt::Device::open()?;
    /// let s = dev.create_stream(0)?;
    /// let a = s.malloc_async(4096)?;
    /// assert_eq!(dev.pool_memory_gpu(a.va() + 100), Some(0));
    /// assert_eq!(dev.pool_memory_gpu(8), None);
    /// # a.free_async(&s)?;
    /// # Ok::<(), kfdrt::Error>(())
    /// ```
    pub fn pool_memory_gpu(&self, va: u64) -> Option<usize> {
        let st = self.inner.mempools.lock();
        for p in st.pools.iter().flatten() {
            let i = p.dir.partition_point(|&(start, _, _)| start <= va);
            if i > 0 && va < p.dir[i - 1].1 {
                return Some(p.gpu);
            }
        }
        let slot = *st.imported.get(&va)?;
        st.pools.get(slot as usize)?.as_ref().map(|p| p.gpu)
    }

    /// `hipDeviceGetDefaultMemPool`: the default pool of GPU `gpu` (created on first use;
    /// cannot be destroyed).
    pub fn default_mem_pool(&self, gpu: usize) -> Result<MemPool> {
        let slot = self.inner.mempools.lock().default_pool(&self.inner, gpu)?;
        Ok(MemPool {
            dev: self.inner.clone(),
            slot,
        })
    }

    /// `hipDeviceGetMemPool`: the pool `malloc_async` on GPU `gpu` uses.
    pub fn mem_pool(&self, gpu: usize) -> Result<MemPool> {
        self.inner.gpu(gpu)?;
        let slot = self.inner.mempools.lock().current_pool(&self.inner, gpu)?;
        Ok(MemPool {
            dev: self.inner.clone(),
            slot,
        })
    }

    /// `hipDeviceSetMemPool`: make `pool` (located on GPU `gpu`, not imported) the pool
    /// `malloc_async` on that GPU uses.
    pub fn set_mem_pool(&self, gpu: usize, pool: &MemPool) -> Result<()> {
        let call = "hipDeviceSetMemPool";
        self.inner.gpu(gpu)?;
        if !Arc::ptr_eq(&pool.dev, &self.inner) {
            return Err(err(ErrorKind::InvalidValue, call, "pool of another device"));
        }
        let mut st = self.inner.mempools.lock();
        st.default_pool(&self.inner, gpu)?;
        let p = st.pool(pool.slot, call)?;
        if p.import.is_some() {
            return Err(err(
                ErrorKind::InvalidValue,
                call,
                "imported pools cannot allocate",
            ));
        }
        if p.gpu != gpu {
            return Err(err(
                ErrorKind::InvalidValue,
                call,
                format!("pool is located on GPU {}, not {gpu}", p.gpu),
            ));
        }
        st.current[gpu] = Some(pool.slot);
        Ok(())
    }

    /// `hipMemPoolCreate`.
    pub fn create_mem_pool(&self, props: &PoolProps) -> Result<MemPool> {
        let call = "hipMemPoolCreate";
        let gpu = match props.location {
            Location::Gpu(g) => g,
            Location::Host => {
                return Err(err(ErrorKind::NotSupported, call, "host-located pools"));
            }
        };
        if props.handle_type.is_win32() {
            return Err(err(
                ErrorKind::NotSupported,
                call,
                "Win32 handle types do not exist on Linux",
            ));
        }
        self.inner
            .gpu(gpu)
            .map_err(|e| err(ErrorKind::InvalidValue, call, e.to_string()))?;
        let mut p = PoolState::new(&self.inner, gpu, props.max_size as u64);
        if props.handle_type == HandleType::PosixFileDescriptor {
            let size = if props.max_size == 0 {
                IPC_DEFAULT_BYTES
            } else {
                props.max_size
            };
            let b = ipc::IpcBacking::new(&self.inner.core, gpu, size, &[gpu])?;
            p.reserved = b.buf.len() as u64;
            p.reserved_high = p.reserved;
            p.ipc = Some(b);
        }
        let slot = self.inner.mempools.lock().add(&self.inner, p);
        Ok(MemPool {
            dev: self.inner.clone(),
            slot,
        })
    }

    /// `hipMemPoolExportPointer`: export data for a live allocation of an IPC pool.
    pub fn mem_pool_export_pointer(&self, ptr: u64) -> Result<PtrExportData> {
        let call = "hipMemPoolExportPointer";
        let no_ipc = || {
            err(
                ErrorKind::InvalidValue,
                call,
                "the allocation's pool was not created with an IPC handle type",
            )
        };
        let mut guard = self.inner.mempools.lock();
        let st = &mut *guard;
        let Some(b) = st.find_block(ptr) else {
            return Err(if st.imported.contains_key(&ptr) {
                no_ipc()
            } else {
                err(ErrorKind::InvalidValue, call, "not a live pool allocation")
            });
        };
        let p = st.pools[b.pool as usize]
            .as_mut()
            .ok_or_else(|| err(ErrorKind::InvalidValue, call, "pool gone"))?;
        let block = p.chunks[b.chunk as usize].as_ref().map_or(0, |c| c.block);
        let Some(ipc) = p.ipc.as_mut() else {
            return Err(no_ipc());
        };
        if let Some(&slot) = p.exported.get(&ptr) {
            return ipc.data_of(slot);
        }
        let (slot, data) = ipc.export(ptr, block)?;
        p.exported.insert(ptr, slot);
        Ok(data)
    }

    /// `hipMemPoolImportFromShareableHandle`: import a pool exported by another process
    /// (a dmabuf fd from [`MemPool::export_to_shareable_handle`]), mapped on GPU 0 of this
    /// device. The fd is not consumed. Imported pools cannot allocate.
    pub fn import_mem_pool(
        &self,
        handle: BorrowedFd<'_>,
        handle_type: HandleType,
        flags: u32,
    ) -> Result<MemPool> {
        let call = "hipMemPoolImportFromShareableHandle";
        if handle_type != HandleType::PosixFileDescriptor || flags != 0 {
            return Err(err(
                ErrorKind::InvalidValue,
                call,
                "handle type must be PosixFileDescriptor and flags 0",
            ));
        }
        let imp = ipc::ImportedBacking::import(&self.inner.core, 0, handle)?;
        let mut p = PoolState::new(&self.inner, 0, 0);
        p.import = Some(imp);
        let slot = self.inner.mempools.lock().add(&self.inner, p);
        Ok(MemPool {
            dev: self.inner.clone(),
            slot,
        })
    }

    /// Bytes of backing memory all pools of the device hold, including destroyed pools
    /// waiting for their last allocations (a diagnostic; not a HIP call).
    pub fn mem_pool_backing_bytes(&self) -> u64 {
        let st = self.inner.mempools.lock();
        st.pools.iter().flatten().map(PoolState::reserved_now).sum()
    }
}

impl MemPool {
    /// `hipMemPoolDestroy`: returns at once; the pool's memory goes when its last
    /// allocation is freed and those frees have completed. The default pool cannot be
    /// destroyed (InvalidValue); destroying a GPU's current pool makes the default pool
    /// current again.
    pub fn destroy(&self) -> Result<()> {
        let call = "hipMemPoolDestroy";
        let mut st = self.dev.mempools.lock();
        let p = st.pool(self.slot, call)?;
        if p.is_default {
            return Err(err(
                ErrorKind::InvalidValue,
                call,
                "a device's default pool cannot be destroyed",
            ));
        }
        p.destroyed = true;
        for g in 0..st.current.len() {
            if st.current[g] == Some(self.slot) {
                st.current[g] = st.defaults[g];
            }
        }
        st.finish(self.slot);
        self.dev.mempools.dirty.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// Where the pool's memory lives (`hipMemPoolProps.location`): always a GPU.
    pub fn location(&self) -> Result<Location> {
        Ok(Location::Gpu(
            self.dev
                .mempools
                .lock()
                .pool(self.slot, "hipMemPoolGetLocation")?
                .gpu,
        ))
    }

    /// Whether this pool was imported from another process.
    pub fn is_imported(&self) -> Result<bool> {
        Ok(self
            .dev
            .mempools
            .lock()
            .pool(self.slot, "hipMemPoolGetAttribute")?
            .import
            .is_some())
    }

    /// `hipMemPoolSetAttribute` (see [`PoolAttr`] and the module docs for the rules).
    pub fn set_attribute(&self, attr: PoolAttr, value: u64) -> Result<()> {
        let call = "hipMemPoolSetAttribute";
        let mut st = self.dev.mempools.lock();
        let p = st.pool(self.slot, call)?;
        match attr {
            PoolAttr::ReleaseThreshold => p.release_threshold = value,
            PoolAttr::ReuseFollowEventDependencies => p.follow = value != 0,
            PoolAttr::ReuseAllowOpportunistic => p.opportunistic = value != 0,
            PoolAttr::ReuseAllowInternalDependencies => p.internal = value != 0,
            PoolAttr::ReservedMemHigh | PoolAttr::UsedMemHigh if value != 0 => {
                return Err(err(
                    ErrorKind::InvalidValue,
                    call,
                    "high-water marks can only be reset (to 0)",
                ))
            }
            PoolAttr::ReservedMemHigh => p.reserved_high = p.reserved_now(),
            PoolAttr::UsedMemHigh => p.used_high = p.used,
            PoolAttr::ReservedMemCurrent | PoolAttr::UsedMemCurrent => {
                return Err(err(ErrorKind::InvalidValue, call, "read-only attribute"))
            }
        }
        self.dev.mempools.dirty.store(true, Ordering::Relaxed);
        Ok(())
    }

    /// `hipMemPoolGetAttribute`.
    pub fn attribute(&self, attr: PoolAttr) -> Result<u64> {
        let mut st = self.dev.mempools.lock();
        let p = st.pool(self.slot, "hipMemPoolGetAttribute")?;
        Ok(match attr {
            PoolAttr::ReleaseThreshold => p.release_threshold,
            PoolAttr::ReuseFollowEventDependencies => p.follow.into(),
            PoolAttr::ReuseAllowOpportunistic => p.opportunistic.into(),
            PoolAttr::ReuseAllowInternalDependencies => p.internal.into(),
            PoolAttr::ReservedMemCurrent => p.reserved_now(),
            PoolAttr::ReservedMemHigh => p.reserved_high,
            PoolAttr::UsedMemCurrent => p.used,
            PoolAttr::UsedMemHigh => p.used_high,
        })
    }

    /// `hipMemPoolTrimTo`: release unused backing chunks to the OS while at least
    /// `min_bytes_to_hold` bytes stay reserved. Chunks holding live allocations or frees
    /// that have not completed are kept.
    pub fn trim_to(&self, min_bytes_to_hold: usize) -> Result<()> {
        let mut st = self.dev.mempools.lock();
        let p = st.pool(self.slot, "hipMemPoolTrimTo")?;
        if p.ipc.is_none() && p.import.is_none() {
            p.release(Some(min_bytes_to_hold as u64));
        }
        Ok(())
    }

    /// `hipMemPoolSetAccess`: map (ReadWrite) or unmap (None) the pool's memory on other
    /// GPUs of the device, now and for chunks created later. The owner GPU keeps access.
    pub fn set_access(&self, descs: &[AccessDesc]) -> Result<()> {
        let call = "hipMemPoolSetAccess";
        let ngpus = self.dev.gpus.len();
        let mut st = self.dev.mempools.lock();
        let p = st.pool(self.slot, call)?;
        if p.import.is_some() {
            return Err(err(
                ErrorKind::NotSupported,
                call,
                "access of imported pools is fixed to the importing GPU",
            ));
        }
        for d in descs {
            let g = match d.location {
                Location::Gpu(g) if g < ngpus => g,
                _ => return Err(err(ErrorKind::InvalidValue, call, "location is not a GPU")),
            };
            let on = match d.flags {
                AccessFlags::ReadWrite => true,
                AccessFlags::None => false,
                AccessFlags::Read => {
                    return Err(err(
                        ErrorKind::NotSupported,
                        call,
                        "read-only access: KFD maps a buffer object read-write on every GPU",
                    ))
                }
            };
            if g == p.gpu {
                if !on {
                    return Err(err(
                        ErrorKind::InvalidValue,
                        call,
                        "the owning GPU cannot lose access to its pool",
                    ));
                }
                continue;
            }
            if p.peers[g] == on {
                continue;
            }
            if let Some(ipc) = &mut p.ipc {
                if on {
                    ipc.buf.map_on(g)?
                } else {
                    ipc.buf.unmap_from(g)?
                }
            }
            for c in p.chunks.iter_mut().flatten() {
                if let ChunkMem::Bo(b) = &mut c.mem {
                    if on {
                        b.map_on(g)?
                    } else {
                        b.unmap_from(g)?
                    }
                }
            }
            p.peers[g] = on;
        }
        Ok(())
    }

    /// `hipMemPoolGetAccess`: ReadWrite for the owner and for GPUs given access, else
    /// None.
    pub fn access(&self, location: Location) -> Result<AccessFlags> {
        let call = "hipMemPoolGetAccess";
        let mut st = self.dev.mempools.lock();
        let p = st.pool(self.slot, call)?;
        match location {
            Location::Gpu(g) if g < p.peers.len() => Ok(if g == p.gpu || p.peers[g] {
                AccessFlags::ReadWrite
            } else {
                AccessFlags::None
            }),
            _ => Err(err(ErrorKind::InvalidValue, call, "location is not a GPU")),
        }
    }

    /// `hipMemPoolExportToShareableHandle`: a dmabuf fd (close-on-exec) of the pool's
    /// backing, for [`Device::import_mem_pool`] in another process. The pool must have been
    /// created with [`HandleType::PosixFileDescriptor`]; `flags` must be 0.
    pub fn export_to_shareable_handle(
        &self,
        handle_type: HandleType,
        flags: u32,
    ) -> Result<OwnedFd> {
        let call = "hipMemPoolExportToShareableHandle";
        let mut st = self.dev.mempools.lock();
        let p = st.pool(self.slot, call)?;
        if flags != 0 || handle_type != HandleType::PosixFileDescriptor {
            return Err(err(
                ErrorKind::InvalidValue,
                call,
                "handle type must be PosixFileDescriptor and flags 0",
            ));
        }
        let Some(ipc) = &p.ipc else {
            return Err(err(
                ErrorKind::InvalidValue,
                call,
                "pool was not created with an IPC handle type",
            ));
        };
        const O_CLOEXEC: u32 = 0o2000000;
        let fd = kfd::ioctl::export_dmabuf(self.dev.backend.as_ref(), ipc.buf.handle(), O_CLOEXEC)
            .map_err(|e| Error::from_kfd(call, e))?;
        // SAFETY: EXPORT_DMABUF returned a new fd that nothing else owns.
        Ok(unsafe { OwnedFd::from_raw_fd(fd) })
    }

    /// `hipMemPoolImportPointer`: the address in this process of an allocation exported
    /// with [`Device::mem_pool_export_pointer`]. Fails with InvalidValue when the
    /// exporter freed it (or never exported it). Free it ([`PoolAlloc::free_async`] or
    /// drop) before the exporter frees it; importing the same pointer twice gives the same
    /// address, freed by the first free.
    pub fn import_pointer(&self, data: &PtrExportData) -> Result<PoolAlloc> {
        let call = "hipMemPoolImportPointer";
        let mut guard = self.dev.mempools.lock();
        let st = &mut *guard;
        let va = {
            let p = st.pool(self.slot, call)?;
            let Some(imp) = &p.import else {
                return Err(err(ErrorKind::InvalidValue, call, "pool was not imported"));
            };
            imp.lookup(data)?
        };
        let (va, len) = (va.0, va.1 as usize);
        let alloc = PoolAlloc {
            dev: self.dev.clone(),
            va,
            len,
            stream: Weak::new(),
        };
        if st.imported.contains_key(&va) || st.find_block(va).is_some() {
            return Ok(alloc);
        }
        st.pool(self.slot, call)?.live += 1;
        st.imported.insert(va, self.slot);
        Ok(alloc)
    }
}
