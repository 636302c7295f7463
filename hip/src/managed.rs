//! Managed memory (`hipMallocManaged`, prefetch, advise, range attributes, attach) over
//! [`kfdrt::ManagedMemory`]. Allocations are kept by address until `hipFree`.

use crate::api::{arg, device, out, ret, stream, Hip};
use crate::error::*;
use kfdrt::{AttachFlags, Location, ManagedMemory, MemRangeAttribute, MemoryAdvise};
use std::collections::BTreeMap;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::{Mutex, MutexGuard};

/// Managed allocations by address, with the device current when each was made (what
/// `hipPointerGetAttributes` reports, as CLR).
static MANAGED: Mutex<BTreeMap<u64, (ManagedMemory, c_int)>> = Mutex::new(BTreeMap::new());

fn managed() -> MutexGuard<'static, BTreeMap<u64, (ManagedMemory, c_int)>> {
    MANAGED.lock().unwrap_or_else(|e| e.into_inner())
}

/// `hipFree` of a managed allocation: `Some(result)` when `p` is one. The device's
/// streams are waited for first, as every `hipFree` (see
/// [`crate::api::synchronize_all_streams`]).
pub(crate) fn free(p: u64) -> Option<Result<(), hipError_t>> {
    if !managed().contains_key(&p) {
        return None;
    }
    crate::api::synchronize_all_streams();
    managed().remove(&p).map(|_| Ok(()))
}

/// The device a managed allocation holding `p` was made on, or `None`.
pub(crate) fn device_of(p: u64) -> Option<c_int> {
    managed()
        .range(..=p)
        .next_back()
        .filter(|(va, (m, _))| p < **va + m.len() as u64)
        .map(|(_, (_, dev))| *dev)
}

/// A HIP device number as a location. A number that is neither a device nor
/// `hipCpuDeviceId` becomes a GPU that does not exist, so kfdrt reports InvalidDevice where
/// the device matters and ignores it where it does not (read-mostly advice), as CLR.
fn location(dev: c_int) -> Location {
    Location::from_device_id(dev).unwrap_or(Location::Gpu(usize::MAX))
}

/// `hipMallocManaged`.
#[no_mangle]
pub unsafe extern "C" fn hipMallocManaged(
    p: *mut *mut c_void,
    size: usize,
    flags: c_uint,
) -> hipError_t {
    ret((|| {
        if p.is_null() {
            return Err(hipErrorInvalidValue);
        }
        let m = device()?
            .malloc_managed(size, arg(AttachFlags::from_bits(flags))?)
            .hip()?;
        let va = m.ptr();
        managed().insert(va, (m, crate::api::current_gpu() as c_int));
        out(p, va as *mut c_void)
    })())
}

/// `hipMemPrefetchAsync`.
#[no_mangle]
pub extern "C" fn hipMemPrefetchAsync(
    p: *const c_void,
    count: usize,
    dev: c_int,
    s: *mut c_void,
) -> hipError_t {
    ret((|| {
        let st = stream(s)?;
        device()?
            .mem_prefetch_async(p as u64, count, location(dev), &st)
            .hip()
    })())
}

/// `hipMemAdvise`.
#[no_mangle]
pub extern "C" fn hipMemAdvise(
    p: *const c_void,
    count: usize,
    advice: c_int,
    dev: c_int,
) -> hipError_t {
    ret((|| {
        let a = MemoryAdvise::from_raw(advice as u32).hip()?;
        device()?
            .mem_advise(p as u64, count, a, location(dev))
            .hip()
    })())
}

/// `hipMemRangeGetAttribute`.
#[no_mangle]
pub unsafe extern "C" fn hipMemRangeGetAttribute(
    data: *mut c_void,
    size: usize,
    attribute: c_int,
    p: *const c_void,
    count: usize,
) -> hipError_t {
    ret((|| {
        if data.is_null() || size == 0 {
            return Err(hipErrorInvalidValue);
        }
        let a = MemRangeAttribute::from_raw(attribute as u32).hip()?;
        // SAFETY: the caller passes `size` writable bytes at `data`.
        let buf = unsafe { std::slice::from_raw_parts_mut(data as *mut u8, size) };
        device()?
            .mem_range_get_attribute(buf, a, p as u64, count)
            .hip()
    })())
}

/// `hipMemRangeGetAttributes`.
#[no_mangle]
pub unsafe extern "C" fn hipMemRangeGetAttributes(
    data: *mut *mut c_void,
    sizes: *mut usize,
    attributes: *mut c_int,
    n: usize,
    p: *const c_void,
    count: usize,
) -> hipError_t {
    ret((|| {
        if n == 0 || data.is_null() || sizes.is_null() || attributes.is_null() {
            return Err(hipErrorInvalidValue);
        }
        // SAFETY: the caller passes `n` entries in each array.
        let (ds, ss, as_) = unsafe {
            (
                std::slice::from_raw_parts(data, n),
                std::slice::from_raw_parts(sizes, n),
                std::slice::from_raw_parts(attributes, n),
            )
        };
        let attrs = as_
            .iter()
            .map(|a| MemRangeAttribute::from_raw(*a as u32).hip())
            .collect::<Result<Vec<_>, _>>()?;
        let mut bufs = Vec::with_capacity(n);
        for (d, s) in ds.iter().zip(ss) {
            if d.is_null() || *s == 0 {
                return Err(hipErrorInvalidValue);
            }
            // SAFETY: entry i has `sizes[i]` writable bytes; entries must not overlap.
            bufs.push(unsafe { std::slice::from_raw_parts_mut(*d as *mut u8, *s) });
        }
        device()?
            .mem_range_get_attributes(&mut bufs, &attrs, p as u64, count)
            .hip()
    })())
}

/// `hipStreamAttachMemAsync`.
#[no_mangle]
pub extern "C" fn hipStreamAttachMemAsync(
    s: *mut c_void,
    p: *mut c_void,
    length: usize,
    flags: c_uint,
) -> hipError_t {
    ret((|| {
        stream(s)?
            .attach_mem_async(p as u64, length, arg(AttachFlags::from_bits(flags))?)
            .hip()
    })())
}
