//! The emulated GPU clock: a counter at a fixed rate (100 MHz by default, the rate of
//! gfx9's GPU clock counter that RELEASE_MEM / COPY_DATA / SDMA TIMESTAMP report), counted
//! from engine creation on the host's monotonic clock.

use std::time::Instant;

/// Default counter rate: 100 MHz.
pub(crate) const DEFAULT_HZ: u64 = 100_000_000;

/// A monotonic counter at `hz`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct GpuClock {
    start: Instant,
    hz: u64,
}

impl GpuClock {
    /// A clock at `hz` (0 = [`DEFAULT_HZ`]) starting at 0 now.
    pub(crate) fn new(hz: u64) -> Self {
        GpuClock {
            start: Instant::now(),
            hz: if hz == 0 { DEFAULT_HZ } else { hz },
        }
    }
    /// Counter rate in Hz.
    pub(crate) fn hz(&self) -> u64 {
        self.hz
    }
    /// Ticks since creation.
    pub(crate) fn now(&self) -> u64 {
        let ns = self.start.elapsed().as_nanos();
        (ns * self.hz as u128 / 1_000_000_000) as u64
    }
}
