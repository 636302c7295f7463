//! [`HwBackend`]: the real device, `/dev/kfd` plus the DRM render nodes, through rustix.

use core::ffi::c_void;
use core::ptr::NonNull;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags};
use rustix::io::Errno;
use rustix::mm::MapFlags;
use zerocopy::IntoBytes;

use crate::abi;
use crate::backend::{Backend, BackendKind, Ioctl, MmapFile, Prot};
use crate::error::KfdError;
use crate::topology::{Topology, TopologyError};

/// Where the kernel publishes the KFD topology.
pub const SYSFS_TOPOLOGY: &str = "/sys/devices/virtual/kfd/kfd/topology";
/// The KFD character device.
pub const KFD_DEVICE: &str = "/dev/kfd";

/// Why the hardware device could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Opening `/dev/kfd` or a KFD call failed.
    #[error(transparent)]
    Kfd(#[from] KfdError),
    /// The sysfs topology could not be read.
    #[error(transparent)]
    Topology(#[from] TopologyError),
}

/// The hardware backend: ioctls on `/dev/kfd`, mmaps of `/dev/kfd` and render nodes.
#[derive(Debug)]
pub struct HwBackend {
    kfd: OwnedFd,
    topology: Topology,
}

impl HwBackend {
    /// Open `/dev/kfd` and read the topology from sysfs.
    pub fn open() -> Result<Self, OpenError> {
        Self::open_with(Path::new(KFD_DEVICE), Path::new(SYSFS_TOPOLOGY))
    }

    /// Open a KFD device file and a topology tree at the given paths.
    pub fn open_with(device: &Path, topology_root: &Path) -> Result<Self, OpenError> {
        let kfd = rustix::fs::open(device, OFlags::RDWR | OFlags::CLOEXEC, Mode::empty()).map_err(|e| {
            let why = match e {
                Errno::NOENT => "the device does not exist: is the amdgpu driver loaded with KFD support (CONFIG_HSA_AMD)?",
                Errno::ACCESS | Errno::PERM => "permission denied: add the user to the 'render' (and 'video') group",
                _ => "could not open the KFD device",
            };
            KfdError::new("open", e, format!("path={} ({why})", device.display()))
        })?;
        let topology = Topology::from_sysfs(topology_root)?;
        Ok(HwBackend { kfd, topology })
    }

    /// True when `/dev/kfd` exists and can be opened read-write (what `auto` device
    /// selection asks).
    pub fn available() -> bool {
        rustix::fs::open(KFD_DEVICE, OFlags::RDWR | OFlags::CLOEXEC, Mode::empty()).is_ok()
    }
}

/// An ioctl with a request code chosen at run time and a pointer to its argument.
struct RawIoctl {
    code: u32,
    arg: *mut c_void,
}

// SAFETY: `RawIoctl` is only built in `HwBackend::ioctl`, from a request code this crate
// computed for the argument type behind `arg`, whose storage outlives the call and is
// at least `_IOC_SIZE(code)` bytes long.
unsafe impl rustix::ioctl::Ioctl for RawIoctl {
    type Output = ();
    const IS_MUTATING: bool = true;
    fn opcode(&self) -> rustix::ioctl::Opcode {
        self.code as rustix::ioctl::Opcode
    }
    fn as_ptr(&mut self) -> *mut c_void {
        self.arg
    }
    unsafe fn output_from_ptr(
        _: rustix::ioctl::IoctlOutput,
        _: *mut c_void,
    ) -> rustix::io::Result<()> {
        Ok(())
    }
}

fn check_len(declared: u32, have: usize) -> Result<(), Errno> {
    if declared as usize > have {
        Err(Errno::INVAL)
    } else {
        Ok(())
    }
}

impl HwBackend {
    fn raw<T: IntoBytes + zerocopy::FromBytes>(&self, code: u32, arg: &mut T) -> Result<(), Errno> {
        debug_assert_eq!(abi::ioc_size(code) as usize, core::mem::size_of::<T>());
        let req = RawIoctl {
            code,
            arg: (arg as *mut T).cast(),
        };
        // SAFETY: `arg` is a live, exclusively borrowed `#[repr(C)]` struct of exactly the
        // size encoded in `code`; the pointer fields inside it were set from slices that
        // outlive this call (see `ioctl`).
        unsafe { rustix::ioctl::ioctl(&self.kfd, req) }
    }
}

impl Backend for HwBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Hardware
    }

    fn topology(&self) -> &Topology {
        &self.topology
    }

    fn ioctl(&self, req: Ioctl<'_>) -> Result<(), Errno> {
        let code = req.request_code().ok_or(Errno::INVAL)?;
        // Pointer fields are always re-derived from the slices, so a caller cannot hand
        // the kernel a pointer that disagrees with the memory it lent us.
        match req {
            Ioctl::GetVersion(a) => self.raw(code, a),
            Ioctl::CreateQueue(a) => self.raw(code, a),
            Ioctl::DestroyQueue(a) => self.raw(code, a),
            Ioctl::UpdateQueue(a) => self.raw(code, a),
            Ioctl::SetCuMask { args, mask } => {
                check_len(args.num_cu_mask.div_ceil(32), mask.len())?;
                args.cu_mask_ptr = mask.as_ptr() as u64;
                self.raw(code, args)
            }
            Ioctl::GetQueueWaveState(a) => self.raw(code, a),
            Ioctl::SetMemoryPolicy(a) => self.raw(code, a),
            Ioctl::GetClockCounters(a) => self.raw(code, a),
            Ioctl::GetProcessApertures(a) => self.raw(code, a),
            Ioctl::GetProcessAperturesNew { args, apertures } => {
                check_len(args.num_of_nodes, apertures.len())?;
                args.kfd_process_device_apertures_ptr = apertures.as_mut_ptr() as u64;
                self.raw(code, args)
            }
            Ioctl::CreateEvent(a) => self.raw(code, a),
            Ioctl::DestroyEvent(a) => self.raw(code, a),
            Ioctl::SetEvent(a) => self.raw(code, a),
            Ioctl::ResetEvent(a) => self.raw(code, a),
            Ioctl::WaitEvents { args, events } => {
                check_len(args.num_events, events.len())?;
                args.events_ptr = events.as_mut_ptr() as u64;
                self.raw(code, args)
            }
            Ioctl::SetScratchBackingVa(a) => self.raw(code, a),
            Ioctl::SetTrapHandler(a) => self.raw(code, a),
            Ioctl::AcquireVm(a) => self.raw(code, a),
            Ioctl::AllocMemoryOfGpu(a) => self.raw(code, a),
            Ioctl::FreeMemoryOfGpu(a) => self.raw(code, a),
            Ioctl::MapMemoryToGpu { args, gpu_ids } => {
                check_len(args.n_devices, gpu_ids.len())?;
                args.device_ids_array_ptr = gpu_ids.as_ptr() as u64;
                self.raw(code, args)
            }
            Ioctl::UnmapMemoryFromGpu { args, gpu_ids } => {
                check_len(args.n_devices, gpu_ids.len())?;
                args.device_ids_array_ptr = gpu_ids.as_ptr() as u64;
                self.raw(code, args)
            }
            Ioctl::GetDmabufInfo(a) => self.raw(code, a),
            Ioctl::ImportDmabuf(a) => self.raw(code, a),
            Ioctl::ExportDmabuf(a) => self.raw(code, a),
            Ioctl::Svm { args, attrs } => {
                if args.nattr as usize != attrs.len() {
                    return Err(Errno::INVAL);
                }
                // The kernel reads header and attributes as one block of _IOC_SIZE bytes.
                let hdr = core::mem::size_of::<abi::SvmArgs>();
                let attr_len = core::mem::size_of_val(attrs);
                let mut buf = vec![0u64; (abi::ioc_size(code) as usize).div_ceil(8)];
                let bytes = buf.as_mut_bytes();
                bytes[..hdr].copy_from_slice(args.as_bytes());
                bytes[hdr..hdr + attr_len].copy_from_slice(attrs.as_bytes());
                let req = RawIoctl {
                    code,
                    arg: buf.as_mut_ptr().cast(),
                };
                // SAFETY: `buf` holds at least `_IOC_SIZE(code)` bytes laid out as
                // `struct kfd_ioctl_svm_args` followed by `nattr` attributes.
                let r = unsafe { rustix::ioctl::ioctl(&self.kfd, req) };
                let bytes = buf.as_bytes();
                args.as_mut_bytes().copy_from_slice(&bytes[..hdr]);
                attrs
                    .as_mut_bytes()
                    .copy_from_slice(&bytes[hdr..hdr + attr_len]);
                r
            }
            Ioctl::SetXnackMode(a) => self.raw(code, a),
            Ioctl::AvailableMemory(a) => self.raw(code, a),
            Ioctl::RuntimeEnable(a) => self.raw(code, a),
            Ioctl::DbgTrap { args, buf } => {
                // The union's pointer (if the operation has one) is re-derived from `buf`,
                // which must cover every byte KFD may touch through it.
                if let Some(len) = args.user_buffer_len() {
                    if len > buf.len() as u64 {
                        return Err(Errno::INVAL);
                    }
                    args.set_user_buffer_ptr(buf.as_mut_ptr() as u64);
                }
                self.raw(code, args)
            }
            Ioctl::CreateProcess => {
                let req = RawIoctl {
                    code,
                    arg: core::ptr::null_mut(),
                };
                // SAFETY: an `_IO` request: the kernel reads and writes no argument.
                unsafe { rustix::ioctl::ioctl(&self.kfd, req) }
            }
        }
    }

    fn open_render_node(&self, minor: u32) -> Result<OwnedFd, Errno> {
        let path = PathBuf::from(format!("/dev/dri/renderD{minor}"));
        rustix::fs::open(&path, OFlags::RDWR | OFlags::CLOEXEC, Mode::empty())
    }

    unsafe fn mmap(
        &self,
        file: MmapFile<'_>,
        offset: u64,
        len: usize,
        fixed_addr: Option<NonNull<c_void>>,
        prot: Prot,
    ) -> Result<NonNull<c_void>, Errno> {
        let p = prot.to_mmap();
        let mut flags = MapFlags::SHARED;
        let addr = match fixed_addr {
            Some(a) => {
                flags |= MapFlags::FIXED;
                a.as_ptr()
            }
            None => core::ptr::null_mut(),
        };
        let fd = match file {
            MmapFile::Kfd => self.kfd.as_fd(),
            MmapFile::Render(fd) => fd,
        };
        // SAFETY: the caller guarantees a fixed range is theirs to replace (trait contract).
        let r = unsafe { rustix::mm::mmap(addr, len, p, flags, fd, offset)? };
        NonNull::new(r).ok_or(Errno::NOMEM)
    }

    unsafe fn munmap(&self, addr: NonNull<c_void>, len: usize) -> Result<(), Errno> {
        // SAFETY: the caller guarantees nothing references the range any more.
        unsafe { rustix::mm::munmap(addr.as_ptr(), len) }
    }

    fn doorbell_written(&self, _queue_id: u32) {}

    fn host_signal_written(&self, _queue_id: u32) {}

    unsafe fn release_svm_mapping(&self, addr: NonNull<c_void>, len: usize) -> Result<(), Errno> {
        // SAFETY: the caller's own mapping, referenced by nothing afterwards (trait
        // contract).
        unsafe { rustix::mm::munmap(addr.as_ptr(), len) }
    }
}
