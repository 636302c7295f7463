//! kfdrt: a userspace AMD GPU runtime on the Linux KFD ioctls, with HIP's stream, event,
//! stream-memory-op, allocator, managed-memory and virtual-memory semantics, on real
//! hardware or on the emulated device (`kfd-emu`).
#![deny(missing_docs)]

pub mod device_select;
pub mod error;

pub use device_select::{open_backend, DeviceSpec, DEVICE_ENV};
pub use error::{Error, ErrorKind, Result};
pub use kfd;
pub mod callback;
pub mod cmd;
pub mod copy;
pub mod device;
pub mod event;
pub mod hsa;
pub mod managed;
pub mod memory;
pub mod mempool;
pub mod queue;
pub mod sdma;
pub mod signal;
#[doc(hidden)]
pub mod soak;
pub mod stream;
pub mod va;
pub mod vmm;

pub use device::{Device, Gpu};
pub use event::Event;
pub use managed::{ManagedMemory, MemRangeAttribute, MemoryAdvise};
pub use memory::{Buffer, MemoryKind};
pub use mempool::{MemPool, PoolAttr, PoolProps};
pub use signal::Signal;
pub use stream::Stream;
pub use vmm::{MemAccessDesc, MemAllocationProp, MemHandle, MemLocation};
