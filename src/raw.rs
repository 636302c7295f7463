//! Internals that kfdrt's own tools use (`#[doc(hidden)]`, not a stable API): raw
//! user-mode queues for packet-level conformance checks (`kfdrt check`): the runtime's one
//! [`UserQueue`] (reserve, publish, doorbell) over queues whose CREATE_QUEUE arguments the
//! caller chooses; the CP-visible layouts; and the knobs `kfdrt bench`, `kfdrt soak` and
//! the tests reach.

pub use crate::ring::{Reservation, UserQueue, WptrUnit};

use crate::error::Result;
use crate::memory::Buffer;
use crate::Device;

/// CREATE_QUEUE over `ring` with pointer cells at `ptrs + wptr_off` / `ptrs + rptr_off`.
/// `args` brings the queue type, priority and EOP/CWSR fields (their buffers must outlive
/// the returned queue); ring, pointer and GPU fields are filled in.
#[allow(clippy::too_many_arguments)]
pub fn create_queue(
    dev: &Device,
    gpu: usize,
    unit: WptrUnit,
    ring: Buffer,
    ptrs: Buffer,
    wptr_off: u64,
    rptr_off: u64,
    args: kfd::abi::CreateQueueArgs,
) -> Result<UserQueue> {
    UserQueue::create(
        &dev.inner.core,
        gpu,
        unit,
        ring,
        ptrs,
        wptr_off,
        rptr_off,
        args,
        "raw::create_queue",
    )
}

/// Write SDMA packets into `q` (never straddling the ring end) and publish.
pub fn sdma_submit(
    q: &UserQueue,
    version: pm4::SdmaVersion,
    pkts: &[pm4::sdma::SdmaPacket<'_>],
) -> Result<()> {
    crate::sdma::sdma_submit(q, version, pkts, &|| None)
}

/// The floor of a submission (measurements only): one 64-byte packet written at ring
/// index `index`, a release store of the write pointer and the doorbell store, with
/// nothing else (no lock, space check, HDP flush or backend notification).
#[inline(never)]
pub fn bare_publish(q: &UserQueue, index: u64, packet: &[u32; 16]) {
    q.bare_publish(index, packet)
}

pub use crate::cmd::condition_holds;
pub use crate::cmdbuf::{barrier_value_for, Target, POLL_INTERVAL};
pub use crate::copy::CHUNK;
pub use crate::device::MIN_KFD_MINOR;
pub use crate::mempool::suballoc::rounded_size;
pub use crate::queue::AqlQueue;
pub use crate::signal::Signal;
pub use crate::stream::max_hw_queues;
pub use crate::va::VaReservation;

/// The CP-visible layouts (`amd_signal_t`, `amd_queue_t`).
pub mod hsa {
    pub use crate::hsa::*;
}

/// The soak test's workload (`kfdrt soak`, `tests/soak.rs`).
pub mod soak {
    pub use crate::soak::*;
}

/// The gfx9 64-bit wait kernel's code objects (`tests/wait64_gfx9.rs` runs it directly).
pub mod waitkernel {
    pub use crate::waitkernel::{code_object, KERNEL_NAME};
}
