//! IPC of memory pools: a pool created with [`HandleType::PosixFileDescriptor`] has one
//! fixed backing buffer object (its `max_size`, or [`IPC_DEFAULT_BYTES`]) from which all
//! of its chunks are carved, so one dmabuf file descriptor (EXPORT_DMABUF) shares the
//! whole pool. The first [`LEDGER_BYTES`] of the backing hold a *ledger*: a header
//! (magic, pool id) and one slot per exported pointer (tag, offset, size). The exporter
//! fills a slot at `hipMemPoolExportPointer` and clears it at `hipFreeAsync`; the importer
//! reads the slot through its own mapping of the same memory, so importing a pointer that
//! was freed (or never exported) fails with InvalidValue instead of aliasing reused memory.
//!
//! [`HandleType::PosixFileDescriptor`]: crate::HandleType::PosixFileDescriptor

use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use rustix::mm::{MapFlags, ProtFlags};

use crate::device::DeviceCore;
use crate::error::{Error, ErrorKind, Result};
use crate::memory::{Buffer, MemoryKind};
use crate::va::{VaReservation, HUGE};

use super::suballoc::RangeAlloc;

/// Backing size of an IPC pool created with `max_size == 0`.
pub const IPC_DEFAULT_BYTES: usize = 64 << 20;
/// Bytes at the start of an IPC pool's backing used by the export ledger.
pub const LEDGER_BYTES: usize = 64 << 10;
const LEDGER_MAGIC: u64 = u64::from_le_bytes(*b"KFDRTIPC");
const PTR_MAGIC: u64 = u64::from_le_bytes(*b"KFDRTPTR");
const SLOT_BYTES: usize = 32;
const HEADER_BYTES: usize = 64;
const NSLOTS: usize = (LEDGER_BYTES - HEADER_BYTES) / SLOT_BYTES;

/// `hipMemPoolPtrExportData`: 64 opaque bytes that identify one allocation of an
/// exported pool (pool id, offset, size, ledger slot, tag). Not a handle: send it over
/// any IPC mechanism.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PtrExportData {
    /// The raw bytes (`reserved[64]` in HIP).
    pub reserved: [u8; 64],
}

impl PtrExportData {
    fn new(fields: [u64; 6]) -> Self {
        let mut reserved = [0u8; 64];
        for (i, f) in fields.iter().enumerate() {
            reserved[i * 8..i * 8 + 8].copy_from_slice(&f.to_le_bytes());
        }
        PtrExportData { reserved }
    }
    fn field(&self, i: usize) -> u64 {
        let mut b = [0u8; 8];
        b.copy_from_slice(&self.reserved[i * 8..i * 8 + 8]);
        u64::from_le_bytes(b)
    }
}

fn slot_off(slot: usize) -> usize {
    HEADER_BYTES + slot * SLOT_BYTES
}

/// The exporter's side: the pool's single backing BO, carved into chunks.
pub(crate) struct IpcBacking {
    pub(crate) buf: Buffer,
    pub(crate) ranges: RangeAlloc,
    uid: u64,
    free_slots: Vec<u32>,
    next_tag: u64,
}

impl IpcBacking {
    pub(crate) fn new(
        core: &Arc<DeviceCore>,
        gpu: usize,
        size: usize,
        map_gpus: &[usize],
    ) -> Result<Self> {
        let size = size.next_multiple_of(HUGE).max(HUGE);
        let buf = Buffer::alloc_on(core, MemoryKind::Device, gpu, size, map_gpus, None)?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        let uid = (u64::from(std::process::id()) << 40) ^ now ^ buf.va();
        let zero = vec![0u8; LEDGER_BYTES];
        buf.write(0, &zero)?;
        buf.atomic_u64(8)?.store(uid, Ordering::Relaxed);
        buf.atomic_u64(16)?.store(NSLOTS as u64, Ordering::Relaxed);
        buf.atomic_u64(0)?.store(LEDGER_MAGIC, Ordering::Release);
        Ok(IpcBacking {
            ranges: RangeAlloc::new(LEDGER_BYTES as u64, size as u64),
            buf,
            uid,
            free_slots: (0..NSLOTS as u32).rev().collect(),
            next_tag: 1,
        })
    }

    pub(crate) fn va(&self) -> u64 {
        self.buf.va()
    }

    /// Fill a ledger slot for the allocation at `va` (`size` bytes).
    pub(crate) fn export(&mut self, va: u64, size: u64) -> Result<(u32, PtrExportData)> {
        let slot = self.free_slots.pop().ok_or_else(|| {
            Error::new(
                ErrorKind::OutOfMemory,
                "hipMemPoolExportPointer",
                format!("all {NSLOTS} export slots of the pool are in use"),
            )
        })?;
        let tag = self.next_tag;
        self.next_tag += 1;
        let off = va - self.va();
        let o = slot_off(slot as usize);
        self.buf.atomic_u64(o + 8)?.store(off, Ordering::Relaxed);
        self.buf.atomic_u64(o + 16)?.store(size, Ordering::Relaxed);
        self.buf.atomic_u64(o)?.store(tag, Ordering::Release);
        Ok((
            slot,
            PtrExportData::new([PTR_MAGIC, self.uid, off, size, slot as u64, tag]),
        ))
    }

    /// The export data of an already exported allocation.
    pub(crate) fn data_of(&self, slot: u32) -> Result<PtrExportData> {
        let o = slot_off(slot as usize);
        let tag = self.buf.atomic_u64(o)?.load(Ordering::Acquire);
        let off = self.buf.atomic_u64(o + 8)?.load(Ordering::Relaxed);
        let size = self.buf.atomic_u64(o + 16)?.load(Ordering::Relaxed);
        Ok(PtrExportData::new([
            PTR_MAGIC,
            self.uid,
            off,
            size,
            slot as u64,
            tag,
        ]))
    }

    /// The allocation in `slot` was freed: importers can no longer import it.
    pub(crate) fn clear(&mut self, slot: u32) {
        if let Ok(a) = self.buf.atomic_u64(slot_off(slot as usize)) {
            a.store(0, Ordering::Release);
        }
        self.free_slots.push(slot);
    }
}

/// The importer's side: the exporter's backing imported (IMPORT_DMABUF), CPU-mapped
/// through the dmabuf fd and GPU-mapped on the importing GPU, at a VA of our own.
pub(crate) struct ImportedBacking {
    core: Arc<DeviceCore>,
    handle: u64,
    gpu_id: u32,
    reservation: VaReservation,
    uid: u64,
}

impl ImportedBacking {
    pub(crate) fn import(core: &Arc<DeviceCore>, gpu: usize, fd: BorrowedFd<'_>) -> Result<Self> {
        let call = "hipMemPoolImportFromShareableHandle";
        let b = core.backend.as_ref();
        let info =
            kfd::ioctl::get_dmabuf_info(b, fd.as_raw_fd()).map_err(|e| Error::from_kfd(call, e))?;
        let size = info.size as usize;
        if size < LEDGER_BYTES {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                call,
                "the handle is not an exported kfdrt memory pool",
            ));
        }
        let gpu_id = core.gpu(gpu)?.gpu_id;
        let reservation = VaReservation::new(size, HUGE)?;
        let handle = kfd::ioctl::import_dmabuf(b, gpu_id, fd.as_raw_fd(), reservation.addr())
            .map_err(|e| Error::from_kfd(call, e))?;
        let mut me = ImportedBacking {
            core: core.clone(),
            handle,
            gpu_id: 0,
            reservation,
            uid: 0,
        };
        // CPU mapping: the dmabuf itself, placed over our reservation.
        // SAFETY: the fixed range is our own reservation, which nothing references; the
        // mapping is replaced by PROT_NONE again in Drop.
        unsafe {
            rustix::mm::mmap(
                me.reservation.ptr().as_ptr(),
                size,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED | MapFlags::FIXED,
                fd.as_fd(),
                0,
            )
        }
        .map_err(|e| Error::new(ErrorKind::Driver, call, format!("mmap of dmabuf: {e}")))?;
        let mut n = 0u32;
        kfd::ioctl::map_memory_to_gpu(b, handle, &[gpu_id], &mut n)
            .map_err(|e| Error::from_kfd(call, e))?;
        me.gpu_id = gpu_id;
        // An allocation of this device from now on (`Device::allocation_at`): the imported
        // pointers lie in it.
        let extent = crate::devcore::Extent {
            len: size as u64,
            kind: crate::memory::AllocationKind::IpcImport,
            gpu,
        };
        core.extents.insert(me.va(), handle, extent);
        if me.cell(0).load(Ordering::Acquire) != LEDGER_MAGIC {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                call,
                "the handle is not an exported kfdrt memory pool (no ledger)",
            ));
        }
        me.uid = me.cell(8).load(Ordering::Relaxed);
        Ok(me)
    }

    fn cell(&self, off: usize) -> &AtomicU64 {
        // SAFETY: `off` is 8-aligned and inside the ledger, which lies in our CPU mapping
        // of the imported backing; the mapping lives as long as `self`.
        unsafe { AtomicU64::from_ptr((self.reservation.addr() as usize + off) as *mut u64) }
    }

    pub(crate) fn va(&self) -> u64 {
        self.reservation.addr()
    }

    /// Check `data` against the exporter's ledger; the imported address on success.
    pub(crate) fn lookup(&self, data: &PtrExportData) -> Result<(u64, u64)> {
        let call = "hipMemPoolImportPointer";
        if data.field(0) != PTR_MAGIC || data.field(1) != self.uid {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                call,
                "export data does not belong to this pool",
            ));
        }
        let (off, size, slot, tag) = (data.field(2), data.field(3), data.field(4), data.field(5));
        if slot as usize >= NSLOTS || off.checked_add(size).is_none_or(|e| e > self.len()) {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                call,
                "corrupt export data",
            ));
        }
        let o = slot_off(slot as usize);
        let ok = self.cell(o).load(Ordering::Acquire) == tag
            && self.cell(o + 8).load(Ordering::Relaxed) == off
            && self.cell(o + 16).load(Ordering::Relaxed) == size
            && self.cell(o).load(Ordering::Acquire) == tag;
        if !ok {
            return Err(Error::new(
                ErrorKind::InvalidValue,
                call,
                "the allocation was freed in the exporting process",
            ));
        }
        Ok((self.va() + off, size))
    }

    fn len(&self) -> u64 {
        self.reservation.len() as u64
    }
}

impl Drop for ImportedBacking {
    fn drop(&mut self) {
        if self.gpu_id != 0 {
            self.core.extents.remove(self.va(), self.handle);
        }
        crate::devcore::release_import(
            self.core.backend.as_ref(),
            &self.reservation,
            self.handle,
            self.gpu_id,
        );
    }
}
