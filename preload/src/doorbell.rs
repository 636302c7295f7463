//! Finding doorbell writes nobody announces.
//!
//! A foreign runtime (ROCr) rings a queue by storing the new write index into the
//! doorbell page it mmapped from `/dev/kfd`; on hardware the store itself reaches the CP.
//! Here the store lands in the emulator's doorbell memfd and nothing else happens, so the
//! preload watches every live queue's doorbell:
//! - a poller thread reads all watched doorbells, sleeping with exponential back-off from
//!   [`MIN_SLEEP`] (after a change) to [`MAX_SLEEP`] (idle), so an idle program costs
//!   ~1000 wake-ups a second at most;
//! - every KFD ioctl first scans the doorbells ([`Doorbells::scan`]), so a program that
//!   rings and then blocks in `AMDKFD_IOC_WAIT_EVENTS` (an interrupt signal wait) is
//!   served at once, without waiting for the poller.
//!
//! A changed value calls `EmuBackend::doorbell_written`, the same path kfdrt uses.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, Once};
use std::time::Duration;

use kfd::Backend;

use crate::state;

/// Poll interval right after a doorbell changed.
pub(crate) const MIN_SLEEP: Duration = Duration::from_micros(20);
/// Poll interval when idle (default; `$KFDRT_DOORBELL_POLL_MAX_US` overrides it). Measured
/// on a loaded 2-core VM with an idle queue: 1 ms costs ~2.7% of a core and gives a
/// median doorbell-to-completion latency of ~2-3 ms after idleness; 200 us costs ~7% of
/// a core for ~0.5 ms.
pub(crate) const MAX_SLEEP: Duration = Duration::from_millis(1);

fn max_sleep() -> Duration {
    std::env::var("KFDRT_DOORBELL_POLL_MAX_US")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map(|us| Duration::from_micros(us.clamp(MIN_SLEEP.as_micros() as u64, 1_000_000)))
        .unwrap_or(MAX_SLEEP)
}

/// What a doorbell holds until its queue is first rung.
const UNRUNG: u64 = u64::MAX;

struct Watch {
    queue_id: u32,
    /// Our own mapping of the queue's doorbell (8 bytes).
    addr: usize,
    last: u64,
}

/// The watched doorbells of one device.
pub(crate) struct Doorbells {
    watches: Mutex<Vec<Watch>>,
    /// (gpu index, page mmap offset) -> our mapping of the doorbell page.
    pages: Mutex<Vec<(usize, u64, usize)>>,
    poller: Once,
}

impl Default for Doorbells {
    fn default() -> Self {
        Doorbells {
            watches: Mutex::new(Vec::new()),
            pages: Mutex::new(Vec::new()),
            poller: Once::new(),
        }
    }
}

impl Doorbells {
    /// Start watching `queue_id`, whose doorbell is at mmap offset `offset` of GPU `idx`.
    pub(crate) fn add(&self, st: &state::State, idx: usize, queue_id: u32, offset: u64) {
        let page_off = state::doorbell_page(offset);
        let in_page = (offset - page_off) as usize;
        let base = {
            let mut pages = self.pages.lock().unwrap_or_else(|e| e.into_inner());
            match pages.iter().find(|p| p.0 == idx && p.1 == page_off) {
                Some(p) => p.2,
                None => {
                    // SAFETY: a fresh shared mapping chosen by the kernel (no fixed
                    // address); it is never unmapped, so the poller's reads stay valid.
                    let m = unsafe {
                        st.emu.mmap(
                            kfd::MmapFile::Kfd,
                            page_off,
                            state::DOORBELL_PAGE as usize,
                            None,
                            kfd::Prot::READ | kfd::Prot::WRITE,
                        )
                    };
                    let Ok(m) = m else {
                        return;
                    };
                    pages.push((idx, page_off, m.as_ptr() as usize));
                    m.as_ptr() as usize
                }
            }
        };
        let addr = base + (in_page & !7);
        // The first ring of a queue stores write index 0 (ROCr rings with the packet's
        // index) into a doorbell that reads 0: invisible to a poller. A fresh doorbell is
        // therefore set to a value no ring stores; the engine ignores the doorbell's
        // value until it is told of the first ring.
        // SAFETY: `addr` is 8-byte aligned in our writable mapping of the doorbell page;
        // the queue was just created, so the program has not rung it yet.
        unsafe { (*(addr as *const AtomicU64)).store(UNRUNG, Ordering::Release) };
        let mut w = self.watches.lock().unwrap_or_else(|e| e.into_inner());
        w.retain(|x| x.queue_id != queue_id);
        w.push(Watch {
            queue_id,
            addr,
            last: UNRUNG,
        });
        drop(w);
        self.poller.call_once(|| {
            let _ = std::thread::Builder::new()
                .name("kfdrt-doorbells".into())
                .spawn(poll_loop);
        });
    }

    /// The watched queues.
    pub(crate) fn queues(&self) -> Vec<u32> {
        self.watches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
            .map(|x| x.queue_id)
            .collect()
    }

    /// Stop watching `queue_id`.
    pub(crate) fn remove(&self, queue_id: u32) {
        self.watches
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .retain(|x| x.queue_id != queue_id);
    }

    /// Read every watched doorbell; notify the engines of each that changed. Returns the
    /// number of changed doorbells.
    pub(crate) fn scan(&self, st: &state::State) -> usize {
        let mut rung = [0u32; 16];
        let mut n = 0;
        let mut more = false;
        {
            let Ok(mut w) = self.watches.try_lock() else {
                return 0;
            };
            for x in w.iter_mut() {
                let v = load(x.addr);
                if v != x.last {
                    x.last = v;
                    if n < rung.len() {
                        rung[n] = x.queue_id;
                        n += 1;
                    } else {
                        more = true;
                    }
                }
            }
        }
        for q in &rung[..n] {
            crate::trace(format_args!("doorbell of queue {q} rung"));
            st.emu.doorbell_written(*q);
        }
        if more {
            // Rare: more than 16 rang at once; the next scan sees them unchanged, so wake
            // every watched queue now rather than lose a ring.
            let ids: Vec<u32> = self
                .watches
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .iter()
                .map(|x| x.queue_id)
                .collect();
            for q in ids {
                st.emu.doorbell_written(q);
            }
        }
        n
    }
}

fn load(addr: usize) -> u64 {
    // SAFETY: `addr` is 8-byte aligned inside a doorbell page we mapped ourselves and
    // never unmap; the program stores to the same memory, hence the atomic load.
    unsafe { (*(addr as *const AtomicU64)).load(Ordering::Acquire) }
}

fn poll_loop() {
    let max = max_sleep();
    let mut sleep = MIN_SLEEP;
    loop {
        let Some(st) = state::current() else {
            // Forked child without its own device: this thread does not exist there, and
            // in the parent the device never goes away.
            return;
        };
        if st.doorbells.scan(st) > 0 {
            sleep = MIN_SLEEP;
        } else {
            sleep = (sleep * 2).min(max);
        }
        std::thread::sleep(sleep);
    }
}
