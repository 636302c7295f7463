//! Virtual memory management (`hipMemCreate`, `hipMemAddressReserve`, `hipMemMap`, ...)
//! over kfdrt's `vmm` API. Allocation handles are registry tokens.

use crate::api::{arg, device, out, ret, Hip};
use crate::error::*;
use crate::handles::Registry;
use crate::types::*;
use kfdrt::{AccessDesc, AccessFlags, AllocationType, GranularityOption, HandleType, Location};
use kfdrt::{MemAllocationProp, MemHandle};
use std::ffi::{c_ulonglong, c_void};

static HANDLES: Registry<MemHandle> = Registry::new(7);

fn handle(h: *mut c_void) -> Result<MemHandle, hipError_t> {
    HANDLES
        .get(h as usize)
        .map(|h| *h)
        .ok_or(hipErrorInvalidValue)
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
        out(h, crate::api::register(&HANDLES, mh)?)
    })())
}

/// `hipMemRelease`.
#[no_mangle]
pub extern "C" fn hipMemRelease(h: *mut c_void) -> hipError_t {
    ret((|| {
        device()?.mem_release(handle(h)?).hip()?;
        HANDLES.remove(h as usize);
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
