//! Memory IPC of single buffers (`hipIpcGetMemHandle` / `hipIpcOpenMemHandle` /
//! `hipIpcCloseMemHandle`): one process exports a buffer object as a dmabuf
//! (`AMDKFD_IOC_EXPORT_DMABUF`), another imports it (`AMDKFD_IOC_IMPORT_DMABUF`) at an
//! address of its own and maps it on its GPU and its CPU.
//!
//! HIP's handle is 64 opaque bytes ([`IpcMemHandle`]) that the program sends by any means
//! (a pipe, shared memory, a file), so it cannot carry a file descriptor. It names the
//! exporter's open dmabuf fd instead: `[magic, pid | fd << 32, inode, device, size,
//! offset]`. The importer duplicates that fd with `pidfd_getfd(2)` (Linux 5.6; needs
//! ptrace access to the exporter, as ROCm's own IPC of HSA needs the exporter alive) or,
//! where that is refused, reopens it through `/proc/PID/fd/FD`; then it checks the file's
//! inode and device against the handle, so a handle whose fd number was closed and reused
//! for another file, or a forged one, is an InvalidValue rather than a mapping of
//! something else. The handle is valid while the exporter keeps its [`IpcExport`] (in
//! HIP: until it frees the allocation) and lives; a mapping, once open, keeps the memory
//! (the dmabuf holds the pages) after the exporter is gone.
//!
//! The offset in the handle is the exported pointer's offset in its buffer: HIP's
//! `hipIpcOpenMemHandle` returns the same position (ROCm/clr `hip_memory.cpp`
//! `ihipIpcGetMemHandle` stores `poffset`, the open adds it back).

use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use rustix::fs::{Mode, OFlags};
use rustix::mm::{MapFlags, ProtFlags};

use crate::device::{Device, DeviceCore, DeviceInner};
use crate::error::{Error, ErrorKind, Result};
use crate::memory::Buffer;
use crate::stream::StreamInner;
use crate::sync::lock;
use crate::va::{VaReservation, HUGE};

/// First word of every handle ("KFDRTIPM").
const MAGIC: u64 = u64::from_le_bytes(*b"KFDRTIPM");
const O_CLOEXEC: u32 = 0o2000000;

/// `hipIpcMemHandle_t`: 64 opaque bytes naming an exported buffer and an offset in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IpcMemHandle {
    /// The raw bytes (`reserved[64]` in HIP).
    pub reserved: [u8; 64],
}

impl IpcMemHandle {
    /// The offset in the exported buffer of the address the handle was made for.
    pub fn offset(&self) -> u64 {
        self.field(5)
    }

    fn field(&self, i: usize) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.reserved[i * 8..i * 8 + 8]);
        u64::from_le_bytes(b)
    }
}

/// The exporter's side: the buffer's dmabuf fd, open for as long as importers may open
/// handles to it. Drop it when the buffer is freed.
#[derive(Debug)]
pub struct IpcExport {
    fd: OwnedFd,
    va: u64,
    size: u64,
    ino: u64,
    dev: u64,
}

impl IpcExport {
    /// The handle of address `ptr` of the exported buffer (its base or any address
    /// inside it). InvalidValue outside the buffer.
    pub fn handle(&self, ptr: u64) -> Result<IpcMemHandle> {
        let off = ptr.wrapping_sub(self.va);
        if ptr < self.va || off >= self.size {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                "hipIpcGetMemHandle",
                format!("{ptr:#x} is not inside the exported buffer"),
            ));
        }
        let pid = u64::from(std::process::id());
        let fd = self.fd.as_raw_fd() as u64;
        let fields = [MAGIC, pid | fd << 32, self.ino, self.dev, self.size, off];
        let mut reserved = [0u8; 64];
        for (i, f) in fields.iter().enumerate() {
            reserved[i * 8..i * 8 + 8].copy_from_slice(&f.to_le_bytes());
        }
        Ok(IpcMemHandle { reserved })
    }

    /// The exported buffer's address.
    pub fn va(&self) -> u64 {
        self.va
    }
}

/// The importer's side: the exporter's buffer mapped at an address of this process, on
/// the CPU and on one GPU. Unmapped on drop (`hipIpcCloseMemHandle`).
pub struct IpcMapping {
    core: Arc<DeviceCore>,
    handle: u64,
    gpu_id: u32,
    reservation: VaReservation,
    size: u64,
    offset: u64,
}

impl std::fmt::Debug for IpcMapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "IpcMapping({:#x}+{:#x}, {:#x} bytes)",
            self.base(),
            self.offset,
            self.size
        )
    }
}

impl IpcMapping {
    /// The address of the exported pointer in this process (the mapping's base plus the
    /// handle's offset).
    pub fn ptr(&self) -> u64 {
        self.reservation.addr() + self.offset
    }

    /// The base of the whole imported buffer.
    pub fn base(&self) -> u64 {
        self.reservation.addr()
    }

    /// Bytes of the imported buffer.
    pub fn len(&self) -> usize {
        self.size as usize
    }

    /// Whether the imported buffer is empty (never: buffers are at least a page).
    pub fn is_empty(&self) -> bool {
        self.size == 0
    }
}

fn file_id(fd: impl AsFd) -> Result<(u64, u64)> {
    let st = rustix::fs::fstat(fd).map_err(|e| {
        Error::new(
            ErrorKind::Driver,
            "hipIpcGetMemHandle",
            format!("fstat of a dmabuf: {e}"),
        )
    })?;
    Ok((st.st_ino, st.st_dev))
}

/// The exporter's fd `fd` of process `pid`, duplicated into this process.
fn fetch_fd(pid: u32, fd: u32) -> std::result::Result<OwnedFd, String> {
    let pid_ = rustix::process::Pid::from_raw(pid as i32).ok_or("pid 0")?;
    let dup =
        rustix::process::pidfd_open(pid_, rustix::process::PidfdFlags::empty()).and_then(|p| {
            rustix::process::pidfd_getfd(p, fd as i32, rustix::process::PidfdGetfdFlags::empty())
        });
    match dup {
        Ok(f) => Ok(f),
        Err(e1) => {
            let path = format!("/proc/{pid}/fd/{fd}");
            rustix::fs::open(path.as_str(), OFlags::RDWR | OFlags::CLOEXEC, Mode::empty()).map_err(
                |e2| format!("process {pid} fd {fd}: pidfd_getfd: {e1}; open {path}: {e2}"),
            )
        }
    }
}

impl Device {
    /// `hipIpcGetMemHandle` (first half): export `buf` as a dmabuf whose fd this process
    /// keeps open in the returned [`IpcExport`]; [`IpcExport::handle`] gives the handle
    /// of any address in the buffer. Device and host buffers of this device can be
    /// exported.
    pub fn ipc_export(&self, buf: &Buffer) -> Result<IpcExport> {
        let call = "hipIpcGetMemHandle";
        let fd = kfd::ioctl::export_dmabuf(self.inner.backend.as_ref(), buf.handle(), O_CLOEXEC)
            .map_err(|e| Error::from_kfd(call, e))?;
        // SAFETY: EXPORT_DMABUF returned a new fd that nothing else owns.
        let fd = unsafe { <OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(fd) };
        let (ino, dev) = file_id(&fd)?;
        Ok(IpcExport {
            fd,
            va: buf.va(),
            size: buf.len() as u64,
            ino,
            dev,
        })
    }

    /// `hipIpcOpenMemHandle`: map the buffer a handle from another process (or this
    /// one) names on GPU `gpu` and the CPU. InvalidValue for a handle that names no
    /// live export (forged, corrupt, its exporter gone or its buffer freed).
    pub fn ipc_open(&self, gpu: usize, h: &IpcMemHandle) -> Result<IpcMapping> {
        let call = "hipIpcOpenMemHandle";
        let bad = |why: String| Error::new(ErrorKind::InvalidValue, call, why);
        if h.field(0) != MAGIC {
            return Err(bad("not an IPC memory handle of kfdrt".into()));
        }
        let (pid, fd) = (h.field(1) as u32, (h.field(1) >> 32) as u32);
        let (ino, dev, size, offset) = (h.field(2), h.field(3), h.field(4), h.field(5));
        if h.reserved[48..].iter().any(|&b| b != 0) || offset >= size {
            return Err(bad("corrupt IPC memory handle".into()));
        }
        let file =
            fetch_fd(pid, fd).map_err(|e| bad(format!("the exported buffer is gone ({e})")))?;
        if file_id(&file)? != (ino, dev) {
            return Err(bad(format!(
                "process {pid} fd {fd} is no longer the exported buffer"
            )));
        }
        let core = &self.inner.core;
        let b = core.backend.as_ref();
        let info = kfd::ioctl::get_dmabuf_info(b, file.as_raw_fd())
            .map_err(|e| Error::from_kfd(call, e))?;
        if info.size != size {
            return Err(bad(format!(
                "the dmabuf holds {:#x} bytes, the handle says {size:#x}",
                info.size
            )));
        }
        let gpu_id = core.gpu(gpu)?.gpu_id;
        let reservation = VaReservation::new(size as usize, HUGE)?;
        let handle = kfd::ioctl::import_dmabuf(b, gpu_id, file.as_raw_fd(), reservation.addr())
            .map_err(|e| Error::from_kfd(call, e))?;
        let mut m = IpcMapping {
            core: core.clone(),
            handle,
            gpu_id: 0,
            reservation,
            size,
            offset,
        };
        // CPU mapping: the dmabuf itself, placed over our reservation.
        // SAFETY: the fixed range is our own reservation, which nothing references; Drop
        // puts PROT_NONE back over it.
        unsafe {
            rustix::mm::mmap(
                m.reservation.ptr().as_ptr(),
                size as usize,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED | MapFlags::FIXED,
                file.as_fd(),
                0,
            )
        }
        .map_err(|e| Error::new(ErrorKind::Driver, call, format!("mmap of dmabuf: {e}")))?;
        let mut n = 0u32;
        kfd::ioctl::map_memory_to_gpu(b, handle, &[gpu_id], &mut n)
            .map_err(|e| Error::from_kfd(call, e))?;
        m.gpu_id = gpu_id;
        let extent = crate::devcore::Extent {
            len: size,
            kind: crate::memory::AllocationKind::IpcImport,
            gpu,
        };
        core.extents.insert(m.base(), handle, extent);
        Ok(m)
    }
}

impl Drop for IpcMapping {
    fn drop(&mut self) {
        if self.gpu_id != 0 {
            self.core.extents.remove(self.base(), self.handle);
        }
        crate::devcore::release_import(
            self.core.backend.as_ref(),
            &self.reservation,
            self.handle,
            self.gpu_id,
        );
    }
}

/// First word of an interprocess event's block ("KFDRTIPE").
const EVENT_MAGIC: u64 = u64::from_le_bytes(*b"KFDRTIPE");
/// Completion slots of an interprocess event: record `n` writes `n` into slot `n % SLOTS`,
/// so records on different streams never overwrite one another's completion.
const EVENT_SLOTS: u64 = 64;
/// Block layout: magic, records issued, then the slots.
const EVENT_BYTES: usize = 16 + 8 * EVENT_SLOTS as usize;

/// The memory of an [`IpcEvent`]: this process's buffer and its export, or another
/// process's buffer mapped here.
enum EventMemory {
    Own { _buf: Buffer, export: IpcExport },
    Opened { _mapping: IpcMapping },
}

/// Streams whose slots of [`EventUsers::slots`] are looked up without a lock.
const USER_SLOTS: usize = 4;

/// The streams of this process that queued a packet naming an [`IpcEvent`]'s block (a
/// record's write, a wait): when the event is dropped, the block is kept (allocated and
/// mapped) until each one's timeline reaches its packet count then, since those packets
/// read or write the block by address whenever the CP gets to them (freed, the next
/// allocation at that address would take the write, or satisfy the wait).
struct EventUsers {
    /// Timeline serials of up to [`USER_SLOTS`] streams in `all` (0: free): a record or
    /// wait on one of them takes no lock. A slot's serial stays while its stream lives
    /// (its entry is pruned only once the stream is gone, and a serial is never reused).
    slots: [AtomicU64; USER_SLOTS],
    /// Each user: its timeline's serial and the stream (weakly: the event must not keep
    /// streams alive; a stream destroyed while busy lives on until its work completes).
    all: Mutex<Vec<(u64, Weak<StreamInner>)>>,
}

/// An interprocess event (`hipEventInterprocess`, timing disabled): a block of shared
/// memory holding how many records were issued and, per record, a completion word the
/// recording stream's CP writes (`hipStreamWriteValue64`). Like a HIP event it tracks its
/// latest record: [`IpcEvent::query`] and the waits test that record's completion word,
/// in whichever process records or waits. Made by [`Device::create_ipc_event`], shared
/// with [`IpcEvent::handle`] and [`Device::ipc_open_event`]. Dropped (`hipEventDestroy`)
/// while records or waits of this process on it are queued, its memory stays allocated
/// and mapped until they have run.
pub struct IpcEvent {
    dev: Arc<DeviceInner>,
    /// Shared with the device's kept memory once dropped with packets pending.
    mem: Arc<EventMemory>,
    va: u64,
    users: EventUsers,
}

impl std::fmt::Debug for IpcEvent {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "IpcEvent({:#x}, {} records)",
            self.va,
            self.issued().load(Ordering::Relaxed)
        )
    }
}

impl IpcEvent {
    fn word(&self, off: u64) -> &AtomicU64 {
        // SAFETY: `off` is 8-aligned and inside the event's block, which is CPU-mapped
        // (an own host buffer or an IPC mapping) as long as `self` lives.
        unsafe { AtomicU64::from_ptr((self.va + off) as *mut u64) }
    }

    fn issued(&self) -> &AtomicU64 {
        self.word(8)
    }

    fn slot_addr(&self, n: u64) -> u64 {
        self.va + 16 + 8 * (n % EVENT_SLOTS)
    }

    /// The latest record (0: never recorded).
    fn latest(&self) -> u64 {
        self.issued().load(Ordering::Acquire)
    }

    /// Note `stream` as a user of the block (see [`EventUsers`]) before it queues a
    /// packet naming it; InvalidHandle for a stream of another device.
    #[inline]
    fn note_user(&self, stream: &crate::Stream, call: &'static str) -> Result<()> {
        let s = &stream.inner;
        if !Arc::ptr_eq(&self.dev, &s.dev) {
            return Err(Error::new(
                ErrorKind::InvalidHandle,
                call,
                "event and stream belong to different devices",
            ));
        }
        let id = s.timeline.serial();
        if self
            .users
            .slots
            .iter()
            .any(|t| t.load(Ordering::Acquire) == id)
        {
            return Ok(());
        }
        self.note_user_slow(s, id);
        Ok(())
    }

    #[cold]
    #[inline(never)]
    fn note_user_slow(&self, s: &Arc<StreamInner>, id: u64) {
        let mut all = lock(&self.users.all);
        if all.iter().any(|&(t, _)| t == id) {
            return;
        }
        if all.len() >= 2 * USER_SLOTS {
            // A gone stream's packets have completed, unless a fault failed it.
            all.retain(|(t, w)| w.strong_count() > 0 || self.dev.pools.kept_point(*t).is_some());
        }
        all.push((id, Arc::downgrade(s)));
        // A free slot, or one whose stream's entry was pruned (no live stream has its
        // serial). The entry is in `all` before the serial is published.
        let free = self.users.slots.iter().find(|t| {
            let v = t.load(Ordering::Relaxed);
            v == 0 || !all.iter().any(|&(u, _)| u == v)
        });
        if let Some(t) = free {
            t.store(id, Ordering::Release);
        }
    }

    /// `hipEventRecord`: a new record behind `stream`'s work; the event now tracks it.
    /// InvalidHandle for a stream of another device.
    pub fn record(&self, stream: &crate::Stream) -> Result<()> {
        self.note_user(stream, "hipEventRecord")?;
        // The slot holds an older record's number (< n) until this write lands.
        let n = self.issued().fetch_add(1, Ordering::AcqRel) + 1;
        stream.write_value64(self.slot_addr(n), n, crate::WriteValueFlags::DEFAULT)
    }

    /// `hipEventQuery`: Ok when the latest record has completed (or there is none),
    /// NotReady otherwise.
    pub fn query(&self) -> Result<()> {
        let n = self.latest();
        if n == 0
            || self
                .word(self.slot_addr(n) - self.va)
                .load(Ordering::Acquire)
                >= n
        {
            Ok(())
        } else {
            Err(Error::new(
                ErrorKind::NotReady,
                "hipEventQuery",
                "the latest record has not completed",
            ))
        }
    }

    /// `hipEventSynchronize`: wait until the latest record at the time of the call has
    /// completed (spinning briefly, then sleeping in growing steps up to 1 ms).
    pub fn synchronize(&self) -> Result<()> {
        let n = self.latest();
        if n == 0 {
            return Ok(());
        }
        let slot = self.word(self.slot_addr(n) - self.va);
        let mut nap = std::time::Duration::from_micros(1);
        for i in 0u32.. {
            if slot.load(Ordering::Acquire) >= n {
                return Ok(());
            }
            if i < 1000 {
                std::hint::spin_loop();
            } else {
                std::thread::sleep(nap);
                nap = (nap * 2).min(std::time::Duration::from_millis(1));
            }
        }
        Ok(())
    }

    /// `hipStreamWaitEvent`: later work on `stream` waits (in the CP) for the latest
    /// record at the time of the call; nothing when the event was never recorded.
    /// InvalidHandle for a stream of another device.
    pub fn stream_wait(&self, stream: &crate::Stream) -> Result<()> {
        self.note_user(stream, "hipStreamWaitEvent")?;
        let n = self.latest();
        if n == 0 {
            return Ok(());
        }
        // Bits 0..62: a GEQ with bit 63 in the mask needs gfx9's wait kernel.
        stream.wait_value64(self.slot_addr(n), n, crate::WaitCompare::Gte, u64::MAX >> 1)
    }

    /// `hipIpcGetEventHandle`: the handle another process opens with
    /// [`Device::ipc_open_event`].
    pub fn handle(&self) -> Result<IpcMemHandle> {
        match &*self.mem {
            EventMemory::Own { export, .. } => export.handle(self.va),
            EventMemory::Opened { .. } => Err(Error::new(
                ErrorKind::InvalidValue,
                "hipIpcGetEventHandle",
                "the event was opened from another process's handle",
            )),
        }
    }
}

impl Device {
    /// `hipEventCreateWithFlags(hipEventInterprocess | hipEventDisableTiming)`: an
    /// interprocess event in host memory mapped on GPU `gpu`, exported for
    /// [`IpcEvent::handle`].
    pub fn create_ipc_event(&self, gpu: usize) -> Result<IpcEvent> {
        let buf = self.alloc(crate::MemoryKind::HostPinned, gpu, EVENT_BYTES)?;
        let ex = self.ipc_export(&buf)?;
        let va = buf.va();
        let e = IpcEvent {
            dev: self.inner.clone(),
            mem: Arc::new(EventMemory::Own {
                _buf: buf,
                export: ex,
            }),
            va,
            users: EventUsers::new(),
        };
        e.word(0).store(EVENT_MAGIC, Ordering::Release);
        Ok(e)
    }

    /// `hipIpcOpenEventHandle`: the interprocess event of another process's
    /// [`IpcEvent::handle`], mapped on GPU `gpu`. InvalidValue for a handle that names no
    /// live interprocess event.
    pub fn ipc_open_event(&self, gpu: usize, h: &IpcMemHandle) -> Result<IpcEvent> {
        let m = self.ipc_open(gpu, h)?;
        if m.ptr() != m.base() || m.len() < EVENT_BYTES {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                "hipIpcOpenEventHandle",
                "not an interprocess event's handle",
            ));
        }
        let e = IpcEvent {
            dev: self.inner.clone(),
            va: m.ptr(),
            mem: Arc::new(EventMemory::Opened { _mapping: m }),
            users: EventUsers::new(),
        };
        if e.word(0).load(Ordering::Acquire) != EVENT_MAGIC {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                "hipIpcOpenEventHandle",
                "not an interprocess event's handle",
            ));
        }
        Ok(e)
    }
}

impl EventUsers {
    fn new() -> Self {
        EventUsers {
            slots: std::array::from_fn(|_| AtomicU64::new(0)),
            all: Mutex::new(Vec::new()),
        }
    }
}

impl Drop for IpcEvent {
    /// `hipEventDestroy`: the block outlives the packets that name it (see
    /// `EventUsers`); freed here when none is pending.
    fn drop(&mut self) {
        let all = std::mem::take(self.users.all.get_mut().unwrap_or_else(|e| e.into_inner()));
        // Every record and wait on the event returned before its drop: each user's count
        // now covers its packets that name the block.
        let pending = all.into_iter().filter_map(|(id, w)| match w.upgrade() {
            Some(s) => Some(s.point()),
            None => self.dev.pools.kept_point(id),
        });
        for p in pending {
            self.dev.pools.keep_until(p, self.mem.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MemoryKind, WaitCompare};
    use std::time::Duration;

    const SYNC: Duration = Duration::from_secs(20);

    /// A closed gate and a stream held behind it.
    fn gated(dev: &Device) -> (Buffer, crate::Stream) {
        let gate = dev.alloc(MemoryKind::Signal, 0, 4096).unwrap();
        let s = dev.create_stream(0).unwrap();
        s.wait_value32(gate.va(), 1, WaitCompare::Gte, u32::MAX)
            .unwrap();
        (gate, s)
    }

    fn open(gate: &Buffer) {
        gate.atomic_u32(0).unwrap().store(1, Ordering::Release);
    }

    /// A dropped event's block stays allocated while a record's write naming it is queued,
    /// and is freed once that has run; with nothing pending it goes at once.
    #[test]
    fn a_dropped_event_frees_its_block_once_its_packets_ran() {
        let dev = Device::open_for_test("emu:mi210");
        let (gate, a) = gated(&dev);
        let ev = dev.create_ipc_event(0).unwrap();
        let va = ev.va;
        ev.record(&a).unwrap();
        drop(ev);
        assert!(
            dev.allocation_at(va).is_some(),
            "kept while the record's write is queued"
        );
        open(&gate);
        // The busy synchronize reaps what is kept (no stream created or dropped here).
        a.synchronize_timeout(SYNC).unwrap();
        assert_eq!(dev.allocation_at(va), None, "freed once the write ran");
        let ev = dev.create_ipc_event(0).unwrap();
        let va = ev.va;
        ev.record(&a).unwrap();
        a.synchronize_timeout(SYNC).unwrap();
        drop(ev);
        assert_eq!(
            dev.allocation_at(va),
            None,
            "nothing pending: freed at once"
        );
    }

    /// A stream failed by a GPU fault elsewhere and destroyed with a record still queued
    /// on its shared queue is gone (not kept: its work may never complete), but its queue
    /// still runs the record's write: the event dropped then keeps its block until the
    /// point the device keeps that stream's timeline for.
    #[test]
    #[cfg(feature = "emulator")]
    fn a_failed_and_destroyed_recorder_still_keeps_the_block() {
        let emu = Arc::new(kfd_emu::EmuBackend::from_spec("emu:mi210*2").unwrap());
        let dev = Device::with_backend(emu.clone()).unwrap();
        // GPU 1's VRAM, not mapped on GPU 0: a write to it from GPU 0 faults on the GPU.
        let far = dev.alloc(MemoryKind::Device, 1, 4096).unwrap();
        let (x, f) = (dev.create_stream(0).unwrap(), dev.create_stream(0).unwrap());
        assert_ne!(x.hw_queue_id(), f.hw_queue_id());
        f.write_value32(far.va(), 1, crate::WriteValueFlags::DEFAULT)
            .unwrap();
        let t0 = std::time::Instant::now();
        while !matches!(f.query(), Err(e) if e.kind() == ErrorKind::LaunchFailure) {
            assert!(t0.elapsed() < SYNC, "the fault was never seen");
            std::thread::sleep(Duration::from_micros(200));
        }
        // The record stays queued on x's (shared, not faulted) queue while paused.
        emu.pause_engines();
        let ev = dev.create_ipc_event(0).unwrap();
        ev.record(&x).unwrap();
        assert!(!x.has_dedicated_queue());
        assert_eq!(x.query().unwrap_err().kind(), ErrorKind::LaunchFailure);
        let va = ev.va;
        drop(x);
        drop(ev);
        assert!(
            dev.allocation_at(va).is_some(),
            "kept while the failed stream's record is queued"
        );
        emu.resume_engines();
        let t0 = std::time::Instant::now();
        while dev.allocation_at(va).is_some() {
            assert!(t0.elapsed() < SYNC, "the block was never freed");
            dev.inner.pools.reap();
            std::thread::sleep(Duration::from_micros(200));
        }
    }

    /// Streams beyond the lock-free slots are tracked too, gone streams are pruned, and
    /// a slot of a pruned stream goes to a new one: after many short-lived streams
    /// recorded the event, a gated stream's queued record still keeps the block.
    #[test]
    fn users_past_the_slots_and_after_gone_streams_are_tracked() {
        let dev = Device::open_for_test("emu:mi210");
        let ev = dev.create_ipc_event(0).unwrap();
        for _ in 0..4 * USER_SLOTS {
            let s = dev.create_stream(0).unwrap();
            ev.record(&s).unwrap();
            s.synchronize_timeout(SYNC).unwrap();
        }
        let (gate, a) = gated(&dev);
        ev.record(&a).unwrap();
        let n = lock(&ev.users.all).len();
        assert!(n <= 2 * USER_SLOTS + 1, "gone streams pruned: {n} entries");
        let id = a.inner.timeline.serial();
        assert!(
            ev.users
                .slots
                .iter()
                .any(|t| t.load(Ordering::Relaxed) == id),
            "a pruned stream's slot was reused"
        );
        let va = ev.va;
        drop(ev);
        assert!(dev.allocation_at(va).is_some(), "kept for the gated record");
        open(&gate);
        a.synchronize_timeout(SYNC).unwrap();
        dev.inner.pools.reap();
        assert_eq!(dev.allocation_at(va), None);
    }
}
