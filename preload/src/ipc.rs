//! ROCm's out-of-tree KFD IPC ioctls, which Debian's libhsakmt 5.2 uses for
//! `hsa_amd_ipc_memory_create/attach` (fmm.c `fmm_share_memory`,
//! `fmm_register_shared_memory`): `AMDKFD_IOC_IPC_IMPORT_HANDLE` (0x80) and
//! `AMDKFD_IOC_IPC_EXPORT_HANDLE` (0x81), defined in ROCm's copy of `kfd_ioctl.h` and
//! implemented by the amdgpu-dkms driver (ROCK-Kernel-Driver `kfd_ipc.c`); upstream Linux
//! never had them (`kfd_ioctl` answers EINVAL).
//!
//! Served here over the emulator's dmabuf export/import, which is what `kfd_ipc.c` does
//! inside the kernel: the exporter's BO becomes a dmabuf (its memfd), the 128-bit share
//! handle names it, and the importer gets a BO of its own on the same pages plus a
//! render-node mmap offset. The kernel keeps exported objects in a global table; each
//! process here has its own in-process device, so the handle names the exporter's open
//! dmabuf fd (`[magic, pid, fd, flags]`) and the importer reopens it through
//! `/proc/PID/fd/FD` (which needs the same access as reading the exporter's fd table: same
//! user, no ptrace restriction on reads). A handle therefore works while the exporting
//! process lives and has not freed the BO; the kernel's outlive the exporter.

use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::Mutex;

use kfd::abi::{self, ExportDmabufArgs, ImportDmabufArgs};
use kfd::{Backend, Ioctl};
use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use zerocopy::{FromBytes, Immutable, IntoBytes, KnownLayout};

use crate::state::State;

/// `struct kfd_ioctl_ipc_export_handle_args` (ROCm `kfd_ioctl.h`).
#[repr(C)]
#[derive(Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct IpcExportHandleArgs {
    /// To KFD: the BO.
    pub(crate) handle: u64,
    /// From KFD.
    pub(crate) share_handle: [u32; 4],
    /// To KFD.
    pub(crate) gpu_id: u32,
    /// To KFD: the thunk's memory flags, given back to the importer.
    pub(crate) flags: u32,
}

/// `struct kfd_ioctl_ipc_import_handle_args` (ROCm `kfd_ioctl.h`).
#[repr(C)]
#[derive(Debug, Default, FromBytes, IntoBytes, Immutable, KnownLayout)]
pub(crate) struct IpcImportHandleArgs {
    /// From KFD: the importer's new BO.
    pub(crate) handle: u64,
    /// To KFD: where the importer placed it.
    pub(crate) va_addr: u64,
    /// From KFD: render-node offset to mmap it at.
    pub(crate) mmap_offset: u64,
    /// To KFD.
    pub(crate) share_handle: [u32; 4],
    /// To KFD.
    pub(crate) gpu_id: u32,
    /// From KFD: the exporter's flags.
    pub(crate) flags: u32,
}

/// `AMDKFD_IOC_IPC_IMPORT_HANDLE`: `_IOWR('K', 0x80, 48 bytes)`.
pub(crate) const AMDKFD_IOC_IPC_IMPORT_HANDLE: u32 =
    abi::ioc(3, b'K', 0x80, core::mem::size_of::<IpcImportHandleArgs>());
/// `AMDKFD_IOC_IPC_EXPORT_HANDLE`: `_IOWR('K', 0x81, 32 bytes)`.
pub(crate) const AMDKFD_IOC_IPC_EXPORT_HANDLE: u32 =
    abi::ioc(3, b'K', 0x81, core::mem::size_of::<IpcExportHandleArgs>());

/// First word of every share handle this library makes ("KIPC").
const MAGIC: u32 = 0x4350_494b;
const O_CLOEXEC: u32 = 0o2000000;

/// The dmabuf fds this process exported, by BO handle: open while the BO lives.
#[derive(Default)]
pub(crate) struct Exports(Mutex<Vec<(u64, OwnedFd)>>);

impl Exports {
    /// The BO `handle` was freed: its exports close (importers keep their own references).
    pub(crate) fn bo_freed(&self, handle: u64) {
        self.0
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|(h, _)| *h != handle);
    }
}

/// `kfd_ipc.c kfd_ioctl_ipc_export_handle`: an unknown GPU or BO is EINVAL.
pub(crate) fn export(st: &State, a: &mut IpcExportHandleArgs) -> Result<(), Errno> {
    st.gpu_idx(a.gpu_id).ok_or(Errno::INVAL)?;
    let mut e = ExportDmabufArgs {
        handle: a.handle,
        flags: O_CLOEXEC,
        dmabuf_fd: 0,
    };
    st.emu.ioctl(Ioctl::ExportDmabuf(&mut e))?;
    // SAFETY: EXPORT_DMABUF just returned this fd; nothing else owns it.
    let fd: OwnedFd = unsafe { std::os::fd::FromRawFd::from_raw_fd(e.dmabuf_fd as i32) };
    a.share_handle = [MAGIC, std::process::id(), fd.as_raw_fd() as u32, a.flags];
    st.ipc
        .0
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .push((a.handle, fd));
    Ok(())
}

/// `kfd_ipc.c kfd_ioctl_ipc_import_handle`: a handle that names no exported buffer is
/// EINVAL.
pub(crate) fn import(st: &State, a: &mut IpcImportHandleArgs) -> Result<(), Errno> {
    let [magic, pid, fd, flags] = a.share_handle;
    if magic != MAGIC {
        return Err(Errno::INVAL);
    }
    let path = format!("/proc/{pid}/fd/{fd}");
    let dmabuf = rustix::fs::open(path.as_str(), OFlags::RDWR | OFlags::CLOEXEC, Mode::empty())
        .map_err(|_| Errno::INVAL)?;
    let mut i = ImportDmabufArgs {
        va_addr: a.va_addr,
        handle: 0,
        gpu_id: a.gpu_id,
        dmabuf_fd: dmabuf.as_raw_fd() as u32,
    };
    // The emulator keeps its own reference to the pages; this fd closes on return.
    st.emu.ioctl(Ioctl::ImportDmabuf(&mut i))?;
    a.handle = i.handle;
    a.mmap_offset = st.emu.bo_mmap_offset(i.handle).ok_or(Errno::INVAL)?;
    a.flags = flags;
    crate::trace(format_args!(
        "IPC import of pid {pid} fd {fd} at va {:#x} -> handle {:#x} mmap_offset {:#x}",
        a.va_addr, a.handle, a.mmap_offset
    ));
    Ok(())
}
