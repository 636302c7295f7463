//! `/dev/kfd` ioctls from the program: decoded as kfd_chardev.c `kfd_ioctl` does and
//! answered by the emulator.
//!
//! The kernel picks the handler by the request's number only, copies `_IOC_SIZE(cmd)`
//! bytes of the caller's struct in (zero-filling a longer kernel struct), and copies the
//! same number of bytes back out for `_IOR` requests even when the handler failed; a bad
//! pointer is `EFAULT`, an unknown number `EINVAL`. Pointers inside the struct (event
//! arrays, gpu_id arrays, CU masks, apertures, SVM attributes) are copied here into the
//! slices `kfd::Ioctl` carries.

use core::mem::size_of;

use kfd::abi::{self, *};
use kfd::{Backend, Ioctl};
use rustix::io::Errno;
use zerocopy::{FromBytes, FromZeros, Immutable, IntoBytes, KnownLayout};

use crate::state::State;
use crate::uaccess::{copy_from_user, copy_to_user, read_array};

/// More array entries than any real caller passes: refused with `ENOMEM` (the kernel's
/// `kmalloc_array` would fail long before) rather than allocating without bound.
const MAX_ARRAY: u32 = 1 << 16;

/// kfd_chardev.c: the kernel's `cmd` (from its table) decides the copy directions; the
/// caller's decides the size.
fn call<T>(
    kernel_cmd: u32,
    user_cmd: u32,
    arg: u64,
    f: impl FnOnce(&mut T) -> Result<(), Errno>,
) -> Result<(), Errno>
where
    T: FromBytes + IntoBytes + Immutable + KnownLayout,
{
    let usize_ = abi::ioc_size(user_cmd) as usize;
    let n = usize_.min(size_of::<T>());
    let mut t = T::new_zeroed();
    if kernel_cmd & (1 << 30) != 0 {
        copy_from_user(arg, &mut t.as_mut_bytes()[..n])?;
    }
    let r = f(&mut t);
    if kernel_cmd & (2 << 30) != 0 {
        copy_to_user(arg, &t.as_bytes()[..n])?;
    }
    r
}

fn check_len(n: u32) -> Result<usize, Errno> {
    if n > MAX_ARRAY {
        Err(Errno::NOMEM)
    } else {
        Ok(n as usize)
    }
}

/// The ioctls whose argument struct is the whole story (no user pointers inside): copied
/// in, handed to the emulator, copied out. One row each: request number, the kernel's
/// request code, the `Ioctl` variant.
macro_rules! plain_ioctls {
    ($nr:expr, $req:expr, $arg:expr, $emu:expr; $($n:literal => $cmd:ident $variant:ident,)*) => {
        match $nr {
            $($n => return call($cmd, $req, $arg, |a| $emu.ioctl(Ioctl::$variant(a))),)*
            _ => {}
        }
    };
}

/// MAP/UNMAP_MEMORY_TO/FROM_GPU: the header plus the array of gpu_ids it points at.
macro_rules! with_gpu_ids {
    ($cmd:ident, $req:expr, $arg:expr, $emu:expr, $variant:ident, $args:ty) => {
        call($cmd, $req, $arg, |a: &mut $args| {
            let ids: Vec<u32> = read_array(a.device_ids_array_ptr, check_len(a.n_devices)?)?;
            $emu.ioctl(Ioctl::$variant {
                args: a,
                gpu_ids: &ids,
            })
        })
    };
}

/// Serve one KFD ioctl.
pub(crate) fn ioctl(st: &State, req: u32, arg: u64) -> Result<(), Errno> {
    // Doorbells rung before this call (e.g. before a WAIT_EVENTS) are found now.
    st.doorbells.scan(st);
    let emu = &st.emu;
    let nr = abi::ioc_nr(req);
    plain_ioctls!(nr, req, arg, emu;
        0x01 => AMDKFD_IOC_GET_VERSION GetVersion,
        0x04 => AMDKFD_IOC_SET_MEMORY_POLICY SetMemoryPolicy,
        0x05 => AMDKFD_IOC_GET_CLOCK_COUNTERS GetClockCounters,
        0x06 => AMDKFD_IOC_GET_PROCESS_APERTURES GetProcessApertures,
        0x07 => AMDKFD_IOC_UPDATE_QUEUE UpdateQueue,
        0x08 => AMDKFD_IOC_CREATE_EVENT CreateEvent,
        0x09 => AMDKFD_IOC_DESTROY_EVENT DestroyEvent,
        0x0A => AMDKFD_IOC_SET_EVENT SetEvent,
        0x0B => AMDKFD_IOC_RESET_EVENT ResetEvent,
        0x11 => AMDKFD_IOC_SET_SCRATCH_BACKING_VA SetScratchBackingVa,
        0x13 => AMDKFD_IOC_SET_TRAP_HANDLER SetTrapHandler,
        0x15 => AMDKFD_IOC_ACQUIRE_VM AcquireVm,
        0x1B => AMDKFD_IOC_GET_QUEUE_WAVE_STATE GetQueueWaveState,
        0x1C => AMDKFD_IOC_GET_DMABUF_INFO GetDmabufInfo,
        0x1D => AMDKFD_IOC_IMPORT_DMABUF ImportDmabuf,
        0x21 => AMDKFD_IOC_SET_XNACK_MODE SetXnackMode,
        0x23 => AMDKFD_IOC_AVAILABLE_MEMORY AvailableMemory,
        0x24 => AMDKFD_IOC_EXPORT_DMABUF ExportDmabuf,
        0x25 => AMDKFD_IOC_RUNTIME_ENABLE RuntimeEnable,
    );
    match nr {
        0x02 => call(
            AMDKFD_IOC_CREATE_QUEUE,
            req,
            arg,
            |a: &mut CreateQueueArgs| {
                emu.ioctl(Ioctl::CreateQueue(a))?;
                crate::trace(format_args!(
                    "CREATE_QUEUE type {} gpu {:#x} ring {:#x}/{:#x} -> queue {} doorbell {:#x}",
                    a.queue_type,
                    a.gpu_id,
                    a.ring_base_address,
                    a.ring_size,
                    a.queue_id,
                    a.doorbell_offset
                ));
                if let Some(idx) = st.gpu_idx(a.gpu_id) {
                    st.doorbells.add(st, idx, a.queue_id, a.doorbell_offset);
                }
                Ok(())
            },
        ),
        0x03 => call(
            AMDKFD_IOC_DESTROY_QUEUE,
            req,
            arg,
            |a: &mut DestroyQueueArgs| {
                emu.ioctl(Ioctl::DestroyQueue(a))?;
                st.doorbells.remove(a.queue_id);
                Ok(())
            },
        ),
        0x0C => call(
            AMDKFD_IOC_WAIT_EVENTS,
            req,
            arg,
            |a: &mut WaitEventsArgs| {
                let n = check_len(a.num_events)?;
                let mut events: Vec<EventData> = read_array(a.events_ptr, n)?;
                let r = emu.ioctl(Ioctl::WaitEvents {
                    args: a,
                    events: &mut events,
                });
                copy_to_user(a.events_ptr, events.as_bytes())?;
                r
            },
        ),
        0x12 => call(
            AMDKFD_IOC_GET_TILE_CONFIG,
            req,
            arg,
            |a: &mut GetTileConfigArgs| tile_config(st, a),
        ),
        0x14 => call(
            AMDKFD_IOC_GET_PROCESS_APERTURES_NEW,
            req,
            arg,
            |a: &mut GetProcessAperturesNewArgs| {
                let n = check_len(a.num_of_nodes)?;
                let mut ap = vec![ProcessDeviceApertures::default(); n];
                let r = emu.ioctl(Ioctl::GetProcessAperturesNew {
                    args: a,
                    apertures: &mut ap,
                });
                if r.is_ok() && n > 0 {
                    let filled = (a.num_of_nodes as usize).min(n);
                    copy_to_user(a.kfd_process_device_apertures_ptr, ap[..filled].as_bytes())?;
                }
                r
            },
        ),
        0x16 => call(
            AMDKFD_IOC_ALLOC_MEMORY_OF_GPU,
            req,
            arg,
            |a: &mut AllocMemoryOfGpuArgs| {
                let r = emu.ioctl(Ioctl::AllocMemoryOfGpu(a));
                crate::trace(format_args!(
                "ALLOC_MEMORY_OF_GPU va {:#x} size {:#x} flags {:#x} -> handle {:#x} mmap_offset {:#x}",
                a.va_addr, a.size, a.flags, a.handle, a.mmap_offset
            ));
                r
            },
        ),
        0x17 => call(
            AMDKFD_IOC_FREE_MEMORY_OF_GPU,
            req,
            arg,
            |a: &mut FreeMemoryOfGpuArgs| {
                emu.ioctl(Ioctl::FreeMemoryOfGpu(a))?;
                st.ipc.bo_freed(a.handle);
                Ok(())
            },
        ),
        0x18 => with_gpu_ids!(
            AMDKFD_IOC_MAP_MEMORY_TO_GPU,
            req,
            arg,
            emu,
            MapMemoryToGpu,
            MapMemoryToGpuArgs
        ),
        0x19 => with_gpu_ids!(
            AMDKFD_IOC_UNMAP_MEMORY_FROM_GPU,
            req,
            arg,
            emu,
            UnmapMemoryFromGpu,
            UnmapMemoryFromGpuArgs
        ),
        0x1A => call(AMDKFD_IOC_SET_CU_MASK, req, arg, |a: &mut SetCuMaskArgs| {
            // kfd_ioctl_set_cu_mask: 0 or a non-multiple of 32 is EINVAL; more than 1024
            // bits is truncated to 1024 (with a debug message).
            if a.num_cu_mask == 0 || a.num_cu_mask % 32 != 0 {
                return Err(Errno::INVAL);
            }
            let bits = a.num_cu_mask.min(1024);
            let mask: Vec<u32> = read_array(a.cu_mask_ptr, bits as usize / 32)?;
            a.num_cu_mask = bits;
            emu.ioctl(Ioctl::SetCuMask {
                args: a,
                mask: &mask,
            })
        }),
        0x20 => svm(st, req, arg),
        0x26 => call(AMDKFD_IOC_DBG_TRAP, req, arg, |a: &mut DbgTrapArgs| {
            // The emulated KFD answers as the kernel does for a process nobody debugs:
            // every operation is refused before its buffer (runtime info, queue ids,
            // snapshots) is touched, so none is copied from the program.
            emu.ioctl(Ioctl::DbgTrap {
                args: a,
                buf: &mut [],
            })
        }),
        0x27 => {
            // AMDKFD_IOC_CREATE_PROCESS: _IO, no argument to copy.
            emu.ioctl(Ioctl::CreateProcess)
        }
        // ROCm's out-of-tree IPC ioctls (libhsakmt 5.2's hsa_amd_ipc_memory_*).
        0x80 => call(crate::ipc::AMDKFD_IOC_IPC_IMPORT_HANDLE, req, arg, |a| {
            crate::ipc::import(st, a)
        }),
        0x81 => call(crate::ipc::AMDKFD_IOC_IPC_EXPORT_HANDLE, req, arg, |a| {
            crate::ipc::export(st, a)
        }),
        nr => {
            // GWS (0x1E), SMI events (0x1F), CRIU (0x22): not modelled by the emulator.
            crate::trace(format_args!(
                "kfd ioctl nr {nr:#x} (req {req:#x}) is not modelled by kfd-emu: EINVAL"
            ));
            Err(Errno::INVAL)
        }
    }
}

/// `AMDKFD_IOC_SVM`: the attributes follow the header and are counted in the request's
/// size field (libhsakmt svm.c); `nattr` must fit in what the size says was passed.
fn svm(st: &State, req: u32, arg: u64) -> Result<(), Errno> {
    let usize_ = abi::ioc_size(req) as usize;
    let base = size_of::<SvmArgs>();
    if usize_ < base {
        return Err(Errno::INVAL);
    }
    let mut a = SvmArgs::new_zeroed();
    copy_from_user(arg, a.as_mut_bytes())?;
    let nattr = a.nattr as usize;
    if base + nattr * size_of::<SvmAttribute>() > usize_ {
        return Err(Errno::INVAL);
    }
    let mut attrs: Vec<SvmAttribute> = read_array(arg + base as u64, nattr)?;
    let r = st.emu.ioctl(Ioctl::Svm {
        args: &mut a,
        attrs: &mut attrs,
    });
    copy_to_user(arg, a.as_bytes())?;
    copy_to_user(arg + base as u64, attrs.as_bytes())?;
    r
}

/// `AMDKFD_IOC_GET_TILE_CONFIG` (kfd_chardev.c `kfd_ioctl_get_tile_config` with
/// amdgpu_amdkfd.c `amdgpu_amdkfd_get_tile_config`): 32 tile and 16 macro-tile words, all
/// zero on gfx9 and later (they have no tiling tables), counts clamped to those.
fn tile_config(st: &State, a: &mut GetTileConfigArgs) -> Result<(), Errno> {
    st.gpu_idx(a.gpu_id).ok_or(Errno::INVAL)?;
    a.gb_addr_config = 0;
    a.num_banks = 0;
    a.num_ranks = 0;
    // Each table: clamp the count, write that many zero words; a bad pointer zeroes the
    // count and is EFAULT.
    let zero_words = |ptr: u64, count: &mut u32, max: u32| {
        *count = (*count).min(max);
        if copy_to_user(ptr, &vec![0u8; *count as usize * 4]).is_err() {
            *count = 0;
            return Err(Errno::FAULT);
        }
        Ok(())
    };
    zero_words(a.tile_config_ptr, &mut a.num_tile_configs, 32)?;
    zero_words(a.macro_tile_config_ptr, &mut a.num_macro_tile_configs, 16)?;
    Ok(())
}
