//! Stream-ordered memory pools (`hipMemPool*`, `hipMallocFromPoolAsync`) over
//! [`kfdrt::MemPool`].

use crate::api::{device, out, ret, stream, Hip};
use crate::error::*;
use crate::handles::Registry;
use crate::types::*;
use kfdrt::{AccessDesc, AccessFlags, HandleType, Location};
use kfdrt::{MemPool, PoolAttr, PoolProps};
use std::collections::HashMap;
use std::ffi::{c_int, c_uint, c_void};
use std::os::fd::{BorrowedFd, IntoRawFd};
use std::sync::{Arc, Mutex};

static POOLS: Registry<MemPool> = Registry::new(6);
/// The default pool's handle per GPU: HIP hands out the same handle every time.
static DEFAULT_POOLS: Mutex<Option<HashMap<usize, usize>>> = Mutex::new(None);

fn pool(p: *mut c_void) -> Result<Arc<MemPool>, hipError_t> {
    POOLS.get(p as usize).ok_or(hipErrorInvalidHandle)
}

/// The pool argument of the attribute and trim calls: a null pool is InvalidValue (the
/// header's documented code and CLR 5.2's), a stale or foreign one InvalidHandle.
fn pool_arg(p: *mut c_void) -> Result<Arc<MemPool>, hipError_t> {
    if p.is_null() {
        return Err(hipErrorInvalidValue);
    }
    pool(p)
}

fn location(l: &hipMemLocation) -> Result<Location, hipError_t> {
    match (l.type_, usize::try_from(l.id)) {
        (hipMemLocationTypeDevice, Ok(id)) => Ok(Location::Gpu(id)),
        _ => Err(hipErrorInvalidValue),
    }
}

/// A `hipMemPoolAttr`.
fn attr(a: hipMemPoolAttr) -> Result<(PoolAttr, bool), hipError_t> {
    // (attribute, value is a C int rather than uint64_t)
    Ok(match a {
        hipMemPoolReuseFollowEventDependencies => (PoolAttr::ReuseFollowEventDependencies, true),
        hipMemPoolReuseAllowOpportunistic => (PoolAttr::ReuseAllowOpportunistic, true),
        hipMemPoolReuseAllowInternalDependencies => {
            (PoolAttr::ReuseAllowInternalDependencies, true)
        }
        hipMemPoolAttrReleaseThreshold => (PoolAttr::ReleaseThreshold, false),
        hipMemPoolAttrReservedMemCurrent => (PoolAttr::ReservedMemCurrent, false),
        hipMemPoolAttrReservedMemHigh => (PoolAttr::ReservedMemHigh, false),
        hipMemPoolAttrUsedMemCurrent => (PoolAttr::UsedMemCurrent, false),
        hipMemPoolAttrUsedMemHigh => (PoolAttr::UsedMemHigh, false),
        _ => return Err(hipErrorInvalidValue),
    })
}

/// `hipMemPoolCreate`.
#[no_mangle]
pub unsafe extern "C" fn hipMemPoolCreate(
    p: *mut *mut c_void,
    props: *const hipMemPoolProps,
) -> hipError_t {
    ret((|| {
        if p.is_null() || props.is_null() {
            return Err(hipErrorInvalidValue);
        }
        // SAFETY: non-null, points to the caller's hipMemPoolProps.
        let pr = unsafe { &*props };
        if pr.allocType != hipMemAllocationTypePinned {
            return Err(hipErrorInvalidValue);
        }
        let handle_type = match pr.handleTypes {
            hipMemHandleTypeNone => HandleType::None,
            hipMemHandleTypePosixFileDescriptor => HandleType::PosixFileDescriptor,
            _ => return Err(hipErrorNotSupported),
        };
        let props = PoolProps {
            location: location(&pr.location)?,
            handle_type,
            max_size: 0,
        };
        let mp = device()?.create_mem_pool(&props).hip()?;
        out(p, crate::api::register(&POOLS, mp)?)
    })())
}

/// `hipMemPoolDestroy`.
#[no_mangle]
pub extern "C" fn hipMemPoolDestroy(p: *mut c_void) -> hipError_t {
    ret((|| {
        pool(p)?.destroy().hip()?;
        POOLS.remove(p as usize);
        Ok(())
    })())
}

/// `hipMemPoolSetAttribute`: `value` points to an `int` (reuse flags) or `uint64_t`.
#[no_mangle]
pub unsafe extern "C" fn hipMemPoolSetAttribute(
    p: *mut c_void,
    a: c_int,
    value: *mut c_void,
) -> hipError_t {
    ret((|| {
        if p.is_null() {
            return Err(hipErrorInvalidValue);
        }
        let (a, is_int) = attr(a)?;
        if value.is_null() {
            return Err(hipErrorInvalidValue);
        }
        // SAFETY: non-null; the attribute decides the pointee type (HIP/CUDA contract).
        let v = unsafe {
            if is_int {
                *(value as *const c_int) as u64
            } else {
                *(value as *const u64)
            }
        };
        pool_arg(p)?.set_attribute(a, v).hip()
    })())
}

/// `hipMemPoolGetAttribute`.
#[no_mangle]
pub unsafe extern "C" fn hipMemPoolGetAttribute(
    p: *mut c_void,
    a: c_int,
    value: *mut c_void,
) -> hipError_t {
    ret((|| {
        let (a, is_int) = attr(a)?;
        let v = pool_arg(p)?.attribute(a).hip()?;
        if is_int {
            out(value as *mut c_int, v as c_int)
        } else {
            out(value as *mut u64, v)
        }
    })())
}

/// `hipMemPoolTrimTo`.
#[no_mangle]
pub extern "C" fn hipMemPoolTrimTo(p: *mut c_void, min_bytes: usize) -> hipError_t {
    ret((|| pool_arg(p)?.trim_to(min_bytes).hip())())
}

fn access_flags(f: hipMemAccessFlags) -> Result<AccessFlags, hipError_t> {
    match f {
        hipMemAccessFlagsProtNone => Ok(AccessFlags::None),
        hipMemAccessFlagsProtRead => Ok(AccessFlags::Read),
        hipMemAccessFlagsProtReadWrite => Ok(AccessFlags::ReadWrite),
        _ => Err(hipErrorInvalidValue),
    }
}

/// `hipMemPoolSetAccess`.
#[no_mangle]
pub unsafe extern "C" fn hipMemPoolSetAccess(
    p: *mut c_void,
    list: *const hipMemAccessDesc,
    count: usize,
) -> hipError_t {
    ret((|| {
        if list.is_null() && count != 0 {
            return Err(hipErrorInvalidValue);
        }
        let descs = if count == 0 {
            &[][..]
        } else {
            // SAFETY: the caller passes `count` descriptors at `list`.
            unsafe { std::slice::from_raw_parts(list, count) }
        };
        let descs = descs
            .iter()
            .map(|d| {
                Ok(AccessDesc {
                    location: location(&d.location)?,
                    flags: access_flags(d.flags)?,
                })
            })
            .collect::<Result<Vec<_>, hipError_t>>()?;
        pool(p)?.set_access(&descs).hip()
    })())
}

/// `hipMemPoolGetAccess`.
#[no_mangle]
pub unsafe extern "C" fn hipMemPoolGetAccess(
    flags: *mut hipMemAccessFlags,
    p: *mut c_void,
    loc: *mut hipMemLocation,
) -> hipError_t {
    ret((|| {
        if loc.is_null() {
            return Err(hipErrorInvalidValue);
        }
        // SAFETY: non-null, the caller's hipMemLocation.
        let l = location(unsafe { &*loc })?;
        let f = match pool(p)?.access(l).hip()? {
            AccessFlags::None => hipMemAccessFlagsProtNone,
            AccessFlags::Read => hipMemAccessFlagsProtRead,
            AccessFlags::ReadWrite => hipMemAccessFlagsProtReadWrite,
        };
        out(flags, f)
    })())
}

/// `hipDeviceGetDefaultMemPool`: the same handle for a GPU every time.
#[no_mangle]
pub unsafe extern "C" fn hipDeviceGetDefaultMemPool(p: *mut *mut c_void, dev: c_int) -> hipError_t {
    ret((|| {
        let gpu = usize::try_from(dev).map_err(|_| hipErrorInvalidDevice)?;
        if gpu >= device()?.gpus().len() {
            return Err(hipErrorInvalidDevice);
        }
        let mut m = DEFAULT_POOLS.lock().unwrap_or_else(|e| e.into_inner());
        let m = m.get_or_insert_with(HashMap::new);
        let t = match m.get(&gpu) {
            Some(t) => *t,
            None => {
                let t =
                    crate::api::register(&POOLS, device()?.default_mem_pool(gpu).hip()?)? as usize;
                m.insert(gpu, t);
                t
            }
        };
        out(p, t as *mut c_void)
    })())
}

/// The handle given to `hipDeviceSetMemPool` per GPU (HIP hands the same handle back).
static CURRENT_POOLS: Mutex<Option<HashMap<usize, usize>>> = Mutex::new(None);

/// `hipDeviceSetMemPool`.
#[no_mangle]
pub extern "C" fn hipDeviceSetMemPool(dev: c_int, p: *mut c_void) -> hipError_t {
    ret((|| {
        let gpu = usize::try_from(dev).map_err(|_| hipErrorInvalidDevice)?;
        device()?.set_mem_pool(gpu, &*pool(p)?).hip()?;
        CURRENT_POOLS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert_with(HashMap::new)
            .insert(gpu, p as usize);
        Ok(())
    })())
}

/// `hipDeviceGetMemPool`: the GPU's current pool (kfdrt `Device::mem_pool`): the handle
/// last given to `hipDeviceSetMemPool` while that pool is current, else the default pool's.
#[no_mangle]
pub unsafe extern "C" fn hipDeviceGetMemPool(p: *mut *mut c_void, dev: c_int) -> hipError_t {
    ret((|| {
        if p.is_null() {
            return Err(hipErrorInvalidValue);
        }
        let gpu = usize::try_from(dev).map_err(|_| hipErrorInvalidDevice)?;
        if gpu >= device()?.gpus().len() {
            return Err(hipErrorInvalidDevice);
        }
        let current = device()?.mem_pool(gpu).hip()?;
        let set = CURRENT_POOLS
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|m| m.get(&gpu).copied());
        if let Some(t) = set {
            if pool(t as *mut c_void).is_ok_and(|mp| *mp == current) {
                return out(p, t as *mut c_void);
            }
        }
        // SAFETY: `p` checked non-null above.
        match unsafe { hipDeviceGetDefaultMemPool(p, dev) } {
            hipSuccess => Ok(()),
            e => Err(e),
        }
    })())
}

/// `hipMallocFromPoolAsync`.
#[no_mangle]
pub unsafe extern "C" fn hipMallocFromPoolAsync(
    ptr: *mut *mut c_void,
    size: usize,
    p: *mut c_void,
    s: *mut c_void,
) -> hipError_t {
    ret((|| {
        if ptr.is_null() {
            return Err(hipErrorInvalidValue);
        }
        let va = stream(s)?
            .malloc_from_pool_async(size, &*pool(p)?)
            .hip()?
            .into_raw();
        out(ptr, va as *mut c_void)
    })())
}

fn handle_type(t: hipMemAllocationHandleType) -> Result<HandleType, hipError_t> {
    match t {
        hipMemHandleTypePosixFileDescriptor => Ok(HandleType::PosixFileDescriptor),
        _ => Err(hipErrorInvalidValue),
    }
}

/// `hipMemPoolExportToShareableHandle`: for `hipMemHandleTypePosixFileDescriptor`, a
/// dmabuf fd of the pool's backing (kfdrt `MemPool::export_to_shareable_handle`) is
/// written to the `int` at `shared_handle`; the caller owns and closes it.
#[no_mangle]
pub unsafe extern "C" fn hipMemPoolExportToShareableHandle(
    shared_handle: *mut c_void,
    p: *mut c_void,
    t: hipMemAllocationHandleType,
    flags: c_uint,
) -> hipError_t {
    ret((|| {
        if shared_handle.is_null() {
            return Err(hipErrorInvalidValue);
        }
        let fd = pool(p)?
            .export_to_shareable_handle(handle_type(t)?, flags)
            .hip()?;
        out(shared_handle as *mut c_int, fd.into_raw_fd())
    })())
}

/// `hipMemPoolImportFromShareableHandle`: for `hipMemHandleTypePosixFileDescriptor`,
/// `shared_handle` is the fd itself (`(void *)(uintptr_t)fd`, as CUDA); the fd is not
/// consumed. The imported pool cannot allocate; it maps the exporter's pointers
/// (`hipMemPoolImportPointer`).
#[no_mangle]
pub unsafe extern "C" fn hipMemPoolImportFromShareableHandle(
    p: *mut *mut c_void,
    shared_handle: *mut c_void,
    t: hipMemAllocationHandleType,
    flags: c_uint,
) -> hipError_t {
    ret((|| {
        if p.is_null() {
            return Err(hipErrorInvalidValue);
        }
        let fd = i32::try_from(shared_handle as usize).map_err(|_| hipErrorInvalidValue)?;
        // A closed fd would be another file's by the time it is used: check it is open.
        if rustix::io::fcntl_getfd(
            // SAFETY: borrowed only for the check, which fails cleanly on a closed fd.
            unsafe { BorrowedFd::borrow_raw(fd) },
        )
        .is_err()
        {
            return Err(hipErrorInvalidValue);
        }
        // SAFETY: an open fd of the caller's, borrowed for the import (not consumed).
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let mp = device()?
            .import_mem_pool(fd, handle_type(t)?, flags)
            .hip()?;
        out(p, crate::api::register(&POOLS, mp)?)
    })())
}

/// `hipMemPoolExportPointer`: export data of a live allocation of a pool created with a
/// POSIX fd handle type.
#[no_mangle]
pub unsafe extern "C" fn hipMemPoolExportPointer(
    data: *mut hipMemPoolPtrExportData,
    ptr: *mut c_void,
) -> hipError_t {
    ret((|| {
        let d = device()?.mem_pool_export_pointer(ptr as u64).hip()?;
        out(
            data,
            hipMemPoolPtrExportData {
                reserved: d.reserved,
            },
        )
    })())
}

/// `hipMemPoolImportPointer`: the address here of an allocation the exporter exported
/// (`hipErrorInvalidValue` once the exporter freed it). Free it with `hipFreeAsync` or
/// `hipFree` before the exporter frees it.
#[no_mangle]
pub unsafe extern "C" fn hipMemPoolImportPointer(
    ptr: *mut *mut c_void,
    p: *mut c_void,
    data: *mut hipMemPoolPtrExportData,
) -> hipError_t {
    ret((|| {
        if ptr.is_null() || data.is_null() {
            return Err(hipErrorInvalidValue);
        }
        // SAFETY: non-null, the caller's export data.
        let d = kfdrt::PtrExportData {
            reserved: unsafe { (*data).reserved },
        };
        let va = pool(p)?.import_pointer(&d).hip()?.into_raw();
        out(ptr, va as *mut c_void)
    })())
}
