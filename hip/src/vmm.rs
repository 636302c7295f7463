//! Virtual memory management (`hipMemCreate`, `hipMemAddressReserve`, `hipMemMap`, ...)
//! over kfdrt's `vmm` API. Allocation handles are registry tokens.

use crate::api::{arg, device, out, ret, Hip};
use crate::error::*;
use crate::handles::Registry;
use crate::types::*;
use kfdrt::{AccessDesc, AccessFlags, AllocationType, GranularityOption, HandleType, Location};
use kfdrt::{MemAllocationProp, MemHandle};
use std::ffi::{c_int, c_ulonglong, c_void};
use std::os::fd::{BorrowedFd, IntoRawFd};
use std::sync::atomic::{AtomicUsize, Ordering};

/// A `hipMemGenericAllocationHandle_t`: kfdrt's handle and the references the program
/// holds through this token (create/import/retain take one, `hipMemRelease` drops one;
/// the token dies with the last). Mappings hold their own references inside kfdrt.
struct VmmHandle {
    mh: MemHandle,
    refs: AtomicUsize,
}

static HANDLES: Registry<VmmHandle> = Registry::new(7);

fn handle(h: *mut c_void) -> Result<MemHandle, hipError_t> {
    HANDLES
        .get(h as usize)
        .map(|h| h.mh)
        .ok_or(hipErrorInvalidValue)
}

/// A new token for `mh` with one reference.
fn register(mh: MemHandle) -> Result<*mut c_void, hipError_t> {
    crate::api::register(
        &HANDLES,
        VmmHandle {
            mh,
            refs: AtomicUsize::new(1),
        },
    )
}

fn location(l: &hipMemLocation) -> Result<Location, hipError_t> {
    arg(Location::from_raw(l.type_ as u32, l.id))
}

/// The 5.2 struct as kfdrt's; fields kfdrt does not model must be 0 (kfdrt checks).
fn prop(p: *const hipMemAllocationProp) -> Result<MemAllocationProp, hipError_t> {
    if p.is_null() {
        return Err(hipErrorInvalidValue);
    }
    // SAFETY: non-null, the caller's hipMemAllocationProp.
    let p = unsafe { &*p };
    let mut m =
        MemAllocationProp::device(0, arg(HandleType::from_raw(p.requestedHandleType as u32))?);
    m.alloc_type = arg(AllocationType::from_raw(p.type_ as u32))?;
    m.location = location(&p.location)?;
    m.alloc_flags.compression_type = p.compressionType;
    m.alloc_flags.usage = p.usage;
    Ok(m)
}

/// `hipMemGetAllocationGranularity`.
#[no_mangle]
pub unsafe extern "C" fn hipMemGetAllocationGranularity(
    g: *mut usize,
    p: *const hipMemAllocationProp,
    option: u32,
) -> hipError_t {
    ret((|| {
        let v = device()?
            .mem_get_allocation_granularity(&prop(p)?, arg(GranularityOption::from_raw(option))?)
            .hip()?;
        out(g, v)
    })())
}

/// `hipMemAddressReserve`.
#[no_mangle]
pub unsafe extern "C" fn hipMemAddressReserve(
    ptr: *mut *mut c_void,
    size: usize,
    alignment: usize,
    addr: *mut c_void,
    flags: c_ulonglong,
) -> hipError_t {
    ret((|| {
        if ptr.is_null() {
            return Err(hipErrorInvalidValue);
        }
        let va = device()?
            .mem_address_reserve(size, alignment, addr as u64, flags)
            .hip()?;
        out(ptr, va as *mut c_void)
    })())
}

/// `hipMemAddressFree`.
#[no_mangle]
pub extern "C" fn hipMemAddressFree(ptr: *mut c_void, size: usize) -> hipError_t {
    ret((|| device()?.mem_address_free(ptr as u64, size).hip())())
}

/// `hipMemCreate`.
#[no_mangle]
pub unsafe extern "C" fn hipMemCreate(
    h: *mut *mut c_void,
    size: usize,
    p: *const hipMemAllocationProp,
    flags: c_ulonglong,
) -> hipError_t {
    ret((|| {
        if h.is_null() {
            return Err(hipErrorInvalidValue);
        }
        let mh = device()?.mem_create(size, &prop(p)?, flags).hip()?;
        out(h, register(mh)?)
    })())
}

/// `hipMemRelease`.
#[no_mangle]
pub extern "C" fn hipMemRelease(h: *mut c_void) -> hipError_t {
    ret((|| {
        let v = HANDLES.get(h as usize).ok_or(hipErrorInvalidValue)?;
        // Take one of the program's references first: a concurrent double release of the
        // last one fails here instead of reaching kfdrt twice.
        let n = v
            .refs
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1))
            .map_err(|_| hipErrorInvalidValue)?;
        if let Err(e) = device().and_then(|d| d.mem_release(v.mh).hip()) {
            v.refs.fetch_add(1, Ordering::AcqRel);
            return Err(e);
        }
        if n == 1 {
            HANDLES.remove(h as usize);
        }
        Ok(())
    })())
}

/// `hipMemMap`.
#[no_mangle]
pub extern "C" fn hipMemMap(
    ptr: *mut c_void,
    size: usize,
    offset: usize,
    h: *mut c_void,
    flags: c_ulonglong,
) -> hipError_t {
    ret((|| {
        device()?
            .mem_map(ptr as u64, size, offset, handle(h)?, flags)
            .hip()
    })())
}

/// `hipMemUnmap`.
#[no_mangle]
pub extern "C" fn hipMemUnmap(ptr: *mut c_void, size: usize) -> hipError_t {
    ret((|| device()?.mem_unmap(ptr as u64, size).hip())())
}

/// `hipMemSetAccess`.
#[no_mangle]
pub unsafe extern "C" fn hipMemSetAccess(
    ptr: *mut c_void,
    size: usize,
    desc: *const hipMemAccessDesc,
    count: usize,
) -> hipError_t {
    ret((|| {
        if desc.is_null() || count == 0 {
            return Err(hipErrorInvalidValue);
        }
        // SAFETY: the caller passes `count` descriptors at `desc`.
        let d = unsafe { std::slice::from_raw_parts(desc, count) };
        let d = d
            .iter()
            .map(|d| {
                Ok(AccessDesc::new(
                    location(&d.location)?,
                    arg(AccessFlags::from_raw(d.flags as u64))?,
                ))
            })
            .collect::<Result<Vec<_>, hipError_t>>()?;
        device()?.mem_set_access(ptr as u64, size, &d).hip()
    })())
}

/// `hipMemGetAccess`.
#[no_mangle]
pub unsafe extern "C" fn hipMemGetAccess(
    flags: *mut c_ulonglong,
    loc: *const hipMemLocation,
    ptr: *mut c_void,
) -> hipError_t {
    ret((|| {
        if loc.is_null() {
            return Err(hipErrorInvalidValue);
        }
        // SAFETY: non-null, the caller's hipMemLocation.
        let l = location(unsafe { &*loc })?;
        let f = device()?.mem_get_access(l, ptr as u64).hip()?;
        out(flags, f.raw())
    })())
}

/// `hipMemExportToShareableHandle`: a new dmabuf fd of the allocation (kfdrt
/// `Device::mem_export_to_shareable_handle`, close-on-exec), written to the `int` that
/// `shareable` points to; the caller owns it. The allocation must have been created with
/// `hipMemHandleTypePosixFileDescriptor`; Win32 types are NotSupported.
#[no_mangle]
pub unsafe extern "C" fn hipMemExportToShareableHandle(
    shareable: *mut c_void,
    h: *mut c_void,
    handle_type: u32,
    flags: c_ulonglong,
) -> hipError_t {
    ret((|| {
        if shareable.is_null() {
            return Err(hipErrorInvalidValue);
        }
        let fd = device()?
            .mem_export_to_shareable_handle(
                handle(h)?,
                arg(HandleType::from_raw(handle_type))?,
                flags,
            )
            .hip()?;
        out(shareable as *mut c_int, fd.into_raw_fd())
    })())
}

/// `hipMemImportFromShareableHandle`: a handle of the allocation behind a dmabuf fd
/// passed by value in `os_handle` (`(void*)(uintptr_t)fd`, as CUDA and CLR); the fd stays
/// the caller's. A null `os_handle` or an fd that is not a GPU dmabuf of this device is
/// InvalidValue (CLR's code for a failed import); Win32 types are NotSupported.
#[no_mangle]
pub unsafe extern "C" fn hipMemImportFromShareableHandle(
    h: *mut *mut c_void,
    os_handle: *mut c_void,
    handle_type: u32,
) -> hipError_t {
    ret((|| {
        if h.is_null() || os_handle.is_null() {
            return Err(hipErrorInvalidValue);
        }
        let fd = c_int::try_from(os_handle as usize).map_err(|_| hipErrorInvalidValue)?;
        // SAFETY: the caller passes an open fd it keeps open during the call (HIP's
        // contract); kfdrt only queries and duplicates it, so a closed number fails with
        // EBADF (InvalidValue) rather than touching another object.
        let fd = unsafe { BorrowedFd::borrow_raw(fd) };
        let mh = device()?
            .mem_import_from_shareable_handle(fd, arg(HandleType::from_raw(handle_type))?)
            .hip()?;
        out(h, register(mh)?)
    })())
}

/// `hipMemGetAllocationPropertiesFromHandle`: the properties given to `hipMemCreate`; for
/// an imported handle, Pinned on the exporting GPU, PosixFileDescriptor.
#[no_mangle]
pub unsafe extern "C" fn hipMemGetAllocationPropertiesFromHandle(
    p: *mut hipMemAllocationProp,
    h: *mut c_void,
) -> hipError_t {
    ret((|| {
        if p.is_null() {
            return Err(hipErrorInvalidValue);
        }
        let m = device()?
            .mem_get_allocation_properties_from_handle(handle(h)?)
            .hip()?;
        let (ltype, lid) = m.location.raw();
        // SAFETY: hipMemAllocationProp is integers and a pointer: all-zero is valid.
        let mut v: hipMemAllocationProp = unsafe { std::mem::zeroed() };
        v.type_ = m.alloc_type.raw() as _;
        v.requestedHandleType = m.requested_handle_type.raw() as _;
        v.location.type_ = ltype as _;
        v.location.id = lid;
        v.compressionType = m.alloc_flags.compression_type;
        v.usage = m.alloc_flags.usage;
        out(p, v)
    })())
}

/// `hipMemRetainAllocationHandle`: the handle of the allocation mapped at `addr` (anywhere
/// inside a mapping), with a new reference to release with `hipMemRelease`; the same
/// `hipMemGenericAllocationHandle_t` while the program holds one. Nothing mapped there is
/// InvalidValue.
#[no_mangle]
pub unsafe extern "C" fn hipMemRetainAllocationHandle(
    h: *mut *mut c_void,
    addr: *mut c_void,
) -> hipError_t {
    ret((|| {
        if h.is_null() {
            return Err(hipErrorInvalidValue);
        }
        let dev = device()?;
        let mh = dev.mem_retain_allocation_handle(addr as u64).hip()?;
        let token = HANDLES.find(|v| {
            v.mh == mh && {
                // Joins a token only while the program still holds it.
                let mut n = v.refs.load(Ordering::Acquire);
                loop {
                    if n == 0 {
                        break false;
                    }
                    match v
                        .refs
                        .compare_exchange(n, n + 1, Ordering::AcqRel, Ordering::Acquire)
                    {
                        Ok(_) => break true,
                        Err(x) => n = x,
                    }
                }
            }
        });
        let t = match token {
            Some(t) => t as *mut c_void,
            None => match register(mh) {
                Ok(t) => t,
                Err(e) => {
                    let _ = dev.mem_release(mh);
                    return Err(e);
                }
            },
        };
        out(h, t)
    })())
}
