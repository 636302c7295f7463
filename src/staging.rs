//! Copies from and to pageable host memory (plain `malloc`/stack memory the GPU cannot
//! reach), as `hipMemcpy`/`hipMemcpyAsync` accept them: the host side is moved through
//! pinned staging buffers in chunks, two buffers in flight so the CPU's copy of one chunk
//! overlaps the GPU's copy of the other.
//!
//! HIP's semantics (ROCm/clr `hipamd/src/hip_memory.cpp` `ihipMemcpy`: a pageable host
//! side makes even the async form wait; `rocclr/device/rocm/rocblit.cpp`
//! `DmaBlitManager::writeMemoryStaged` / `readMemoryStaged`: chunked through pinned
//! staging buffers): a staged copy is synchronous with respect to the host: it returns
//! once the data has arrived, so the pageable buffer may be reused or read at once.
//! Copies whose both sides are GPU-mapped are the ordinary asynchronous
//! [`Stream::memcpy`].
//!
//! "Pageable" is decided by kfdrt's own bookkeeping: an address in no buffer object,
//! managed allocation or VMM reservation of the device is host memory the GPU has no
//! mapping for (kfdrt never enables XNACK, so the GPU cannot fault such pages in).

use std::sync::{Arc, Mutex, Weak};

use crate::device::{Device, DeviceInner};
use crate::error::{Error, ErrorKind, Result};
use crate::memory::{Buffer, MemoryKind};
use crate::stream::Stream;

/// Bytes of one staging buffer (one chunk of a staged copy).
pub const STAGING_CHUNK: usize = 1 << 21;
/// Staging buffers kept per device and GPU between copies.
const KEEP: usize = 4;

/// Idle staging buffers: (device, GPU index, buffers). Keyed weakly so a dropped device's
/// entry is pruned at the next staged copy.
type Cache = Vec<(Weak<DeviceInner>, usize, Vec<Buffer>)>;
static CACHE: Mutex<Cache> = Mutex::new(Vec::new());

fn cache() -> std::sync::MutexGuard<'static, Cache> {
    CACHE.lock().unwrap_or_else(|e| e.into_inner())
}

/// Two staging buffers for one copy, returned to the cache on drop.
struct Staging {
    dev: Weak<DeviceInner>,
    gpu: usize,
    bufs: Vec<Buffer>,
}

impl Staging {
    fn take(s: &Stream) -> Result<Staging> {
        let dev = &s.inner.dev;
        let gpu = s.inner.gpu_index;
        let mut bufs = {
            let mut c = cache();
            c.retain(|(d, _, _)| d.strong_count() > 0);
            c.iter_mut()
                .find(|(d, g, _)| *g == gpu && std::ptr::eq(d.as_ptr(), Arc::as_ptr(dev)))
                .map(|(_, _, b)| {
                    let n = b.len().saturating_sub(2);
                    b.split_off(n)
                })
                .unwrap_or_default()
        };
        while bufs.len() < 2 {
            bufs.push(Buffer::alloc(
                &dev.core,
                MemoryKind::HostPinned,
                gpu,
                STAGING_CHUNK,
            )?);
        }
        Ok(Staging {
            dev: Arc::downgrade(dev),
            gpu,
            bufs,
        })
    }
}

impl Drop for Staging {
    fn drop(&mut self) {
        let mut c = cache();
        let bufs = std::mem::take(&mut self.bufs);
        match c
            .iter_mut()
            .find(|(d, g, _)| *g == self.gpu && Weak::ptr_eq(d, &self.dev))
        {
            Some((_, _, b)) => {
                b.extend(bufs);
                b.truncate(KEEP);
            }
            None => c.push((self.dev.clone(), self.gpu, bufs)),
        }
    }
}

impl Stream {
    /// Whether `addr` is host memory the device has no mapping for: in no allocation of
    /// the device ([`Device::allocation_at`]).
    pub fn is_pageable(&self, addr: u64) -> bool {
        self.inner.dev.allocation_at(addr).is_none()
    }

    /// Waits for the stream's work submitted so far.
    fn wait_submitted(&self) -> Result<()> {
        let p = self.point_now();
        self.inner
            .dev
            .wait_point(&p, Some(&self.inner), self.inner.dev.wait_spin())
    }

    /// Copies `bytes` (any host memory) to the GPU address `dst` through the pinned
    /// staging buffers ([`Stream::memcpy_staged`]) and waits for the copy: the code-object
    /// loader's upload into VRAM the CPU cannot see.
    pub(crate) fn upload(&self, dst: u64, bytes: &[u8]) -> Result<()> {
        // SAFETY: `bytes` is `bytes.len()` readable bytes borrowed for the whole call, and
        // nothing writes them meanwhile (a shared borrow).
        unsafe { self.memcpy_staged(dst, bytes.as_ptr() as u64, bytes.len() as u64) }?;
        // A source the device maps (not staged) was an asynchronous copy: wait for it too.
        self.wait_submitted()
    }

    /// `hipMemcpyAsync` with HIP's rule for pageable host memory: when `src` or `dst` is
    /// pageable ([`Stream::is_pageable`]) the copy is staged through pinned buffers after
    /// the stream's earlier work and has completed when this returns; otherwise it is
    /// [`Stream::memcpy`] (asynchronous). Both sides pageable is a host copy after the
    /// stream's earlier work.
    ///
    /// # Safety
    /// A pageable side must be `len` readable (`src`) or writable (`dst`) bytes of this
    /// process, not accessed by other threads during the call.
    pub unsafe fn memcpy_staged(&self, dst: u64, src: u64, len: u64) -> Result<()> {
        let call = "hipMemcpyAsync";
        if len == 0 {
            return Ok(());
        }
        if dst == 0 || src == 0 {
            return Err(Error::new(ErrorKind::InvalidValue, call, "null address"));
        }
        let n = usize::try_from(len)
            .map_err(|_| Error::new(ErrorKind::InvalidValue, call, "length exceeds usize"))?;
        match (self.is_pageable(src), self.is_pageable(dst)) {
            (false, false) => self.memcpy(dst, src, len),
            (true, true) => {
                self.wait_submitted()?;
                // SAFETY: both sides are the caller's host memory of `n` bytes (contract);
                // overlapping ranges are allowed by `copy`.
                unsafe { std::ptr::copy(src as *const u8, dst as *mut u8, n) };
                Ok(())
            }
            (true, false) => {
                // The device side first: nothing is read from the host beyond what the
                // destination can take.
                self.inner.dev.check_gpu_range(call, dst, len)?;
                let st = Staging::take(self)?;
                let mut last = [None, None];
                let mut off = 0usize;
                let mut k = 0usize;
                while off < n {
                    let chunk = (n - off).min(STAGING_CHUNK);
                    let b = &st.bufs[k % 2];
                    // The buffer's previous copy must have read it before it is refilled.
                    if let Some(p) = last[k % 2].take() {
                        self.inner.dev.wait_point(
                            &p,
                            Some(&self.inner),
                            self.inner.dev.wait_spin(),
                        )?;
                    }
                    // SAFETY: `src + off .. + chunk` lies in the caller's pageable source
                    // (contract); the staging buffer is CPU-mapped pinned memory of
                    // STAGING_CHUNK bytes no GPU command reads now (waited above).
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            (src as *const u8).add(off),
                            b.as_ptr(),
                            chunk,
                        )
                    };
                    self.memcpy(dst + off as u64, b.va(), chunk as u64)?;
                    last[k % 2] = Some(self.inner.point());
                    off += chunk;
                    k += 1;
                }
                self.wait_submitted()
            }
            (false, true) => {
                self.inner.dev.check_gpu_range(call, src, len)?;
                let st = Staging::take(self)?;
                let chunks = n.div_ceil(STAGING_CHUNK);
                let range = |k: usize| {
                    let off = k * STAGING_CHUNK;
                    (off, (n - off).min(STAGING_CHUNK))
                };
                let enqueue = |k: usize| -> Result<crate::stream::Point> {
                    let (off, chunk) = range(k);
                    self.memcpy(st.bufs[k % 2].va(), src + off as u64, chunk as u64)?;
                    Ok(self.inner.point())
                };
                let mut next = Some(enqueue(0)?);
                for k in 0..chunks {
                    let p = next.take();
                    // Chunk k+1 goes into the other buffer, drained at step k-1.
                    if k + 1 < chunks {
                        next = Some(enqueue(k + 1)?);
                    }
                    if let Some(p) = p {
                        self.inner.dev.wait_point(
                            &p,
                            Some(&self.inner),
                            self.inner.dev.wait_spin(),
                        )?;
                    }
                    let (off, chunk) = range(k);
                    // SAFETY: the chunk's copy into the staging buffer completed (waited
                    // above); `dst + off .. + chunk` lies in the caller's pageable
                    // destination (contract).
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            st.bufs[k % 2].as_ptr(),
                            (dst as *mut u8).add(off),
                            chunk,
                        )
                    };
                }
                Ok(())
            }
        }
    }
}

impl Device {
    /// `hipMemcpy` from or to any host memory: [`Stream::memcpy_staged`] on GPU `gpu`'s null
    /// stream, then a wait for it.
    ///
    /// # Safety
    /// As [`Stream::memcpy_staged`].
    pub unsafe fn memcpy_staged(&self, gpu: usize, dst: u64, src: u64, len: u64) -> Result<()> {
        let s = self.null_stream(gpu)?;
        // SAFETY: forwarded contract.
        unsafe { s.memcpy_staged(dst, src, len) }?;
        s.synchronize()
    }
}
