//! kfdrt: a userspace AMD GPU runtime on the Linux KFD ioctls, with HIP's stream, event,
//! stream-memory-op, allocator, managed-memory and virtual-memory semantics, on real
//! hardware or on the emulated device (`kfd-emu`).
//!
//! Everything starts from a [`Device`]: [`Device::open`] opens the device that
//! `KFDRT_DEVICE` names (`auto` by default: `/dev/kfd` when it can be opened, else the
//! emulator, which executes the same packet bytes in software). Streams, events, memory
//! and pools are created from it and keep it alive. Every call returns
//! [`Result`]; an [`Error`] has a HIP-like [`ErrorKind`] and prints as
//! `hipCall: Kind: what went wrong`.
//!
//! The emulator is the default cargo feature `emulator`; `--no-default-features` builds a
//! hardware-only runtime without `kfd-emu` (see [`DeviceSpec`] and [`open_backend`]).
//!
//! # Quickstart
//!
//! Two streams that synchronise in the GPU's command processor, an event, a callback,
//! the stream-ordered allocator, and results read back on the host. This runs as a test
//! on the emulator (`cargo test --doc`), and unchanged on a GPU.
//!
//! ```
//! use std::sync::atomic::{AtomicU32, Ordering};
//! use std::sync::Arc;
//!
//! use kfdrt::{Device, Event, EventFlags, MemoryKind, WaitCompare, WriteValueFlags};
//!
//! # fn main() -> kfdrt::Result<()> {
//! let dev = Device::open()?; // KFDRT_DEVICE, else auto
//! let gpu = &dev.gpus()[0];
//! assert!(gpu.cu_count() > 0 && gpu.gfx_name().starts_with("gfx"));
//!
//! // Signal memory (hipMallocSignalMemory): what waitValue/writeValue operate on.
//! let flags = dev.alloc(MemoryKind::Signal, 0, 4096)?;
//! let producer = dev.create_stream(0)?;
//! let consumer = dev.create_stream(0)?;
//!
//! // The consumer waits in the command processor until the producer writes 1 ...
//! consumer.wait_value32(flags.va(), 1, WaitCompare::Gte, u32::MAX)?;
//! consumer.write_value32(flags.va() + 4, 42, WriteValueFlags::DEFAULT)?;
//! // ... then records an event and runs a callback on a host thread.
//! let done = dev.create_event(EventFlags::DEFAULT)?;
//! done.record(&consumer)?;
//! let ran = Arc::new(AtomicU32::new(0));
//! let r = ran.clone();
//! consumer.add_callback(move |status| {
//!     assert!(status.is_ok());
//!     r.fetch_add(1, Ordering::AcqRel);
//! }, 0)?;
//!
//! // Nothing has run yet: the consumer is blocked on the flag.
//! assert!(done.query().is_err()); // NotReady
//! assert_eq!(flags.atomic_u32(4)?.load(Ordering::Acquire), 0);
//!
//! // The producer releases it.
//! producer.write_value32(flags.va(), 1, WriteValueFlags::DEFAULT)?;
//! done.synchronize()?;
//! consumer.synchronize()?;
//! assert_eq!(flags.atomic_u32(4)?.load(Ordering::Acquire), 42);
//! assert_eq!(ran.load(Ordering::Acquire), 1);
//!
//! // hipMallocAsync / hipMemsetAsync / hipMemcpyAsync / hipFreeAsync, in stream order.
//! // The allocation is owned: free_async on any stream, or drop it (freed on `producer`).
//! let scratch = producer.malloc_async(1 << 20)?;
//! producer.memset(scratch.va(), 0x5a, 1 << 20)?;
//! let host = dev.alloc(MemoryKind::HostPinned, 0, 4096)?;
//! producer.memcpy(host.va(), scratch.va() + 4096, 4096)?;
//! scratch.free_async(&producer)?;
//! producer.synchronize()?;
//! let mut back = [0u8; 4096];
//! host.read(0, &mut back)?;
//! assert!(back.iter().all(|&b| b == 0x5a));
//!
//! // GPU time between two timing events, from the CP's timestamps.
//! let (a, b) = (dev.create_event(EventFlags::DEFAULT)?, dev.create_event(EventFlags::DEFAULT)?);
//! a.record(&producer)?;
//! producer.memset(host.va(), 0, 4096)?;
//! b.record(&producer)?;
//! b.synchronize()?;
//! assert!(Event::elapsed_ms(&a, &b)? >= 0.0);
//! # Ok(())
//! # }
//! ```
//!
//! Errors are values with a kind and a readable message:
//!
//! ```
//! use kfdrt::{DeviceSpec, ErrorKind};
//!
//! let e = DeviceSpec::parse("gpu0").unwrap_err();
//! assert_eq!(e.kind(), ErrorKind::InvalidDevice);
//! assert!(e.to_string().contains("unknown device spec \"gpu0\""));
//! ```
//!
//! More: `examples/streams.rs`, `examples/mempool.rs`, `examples/managed.rs`
//! (`cargo run --example streams`), and the `kfdrt` command (`cargo install --path
//! tools`; `kfdrt check`, `kfdrt info`, `kfdrt trace`, `kfdrt disasm`).
//!
//! # Types
//!
//! Every flag or enumerated argument of a HIP call has a Rust type with HIP's values,
//! convertible from the raw C value (`from_bits` / `from_raw`, `None` when HIP does not
//! define it) for a C ABI: [`StreamFlags`], [`EventFlags`], [`WaitCompare`],
//! [`WriteValueFlags`], [`AttachFlags`], [`MemoryAdvise`], [`MemRangeAttribute`],
//! [`GranularityOption`], [`AllocationType`]. One [`Location`] (the host or GPU `n`), one
//! [`AccessFlags`] / [`AccessDesc`] and one [`HandleType`] serve memory pools, virtual
//! memory and managed memory alike.
//!
//! # From HIP to kfdrt
//!
//! Pointers are `u64` GPU virtual addresses (the same address on the CPU). `d` is a
//! [`Device`], `s` a [`Stream`], `e` an [`Event`], `p` a [`MemPool`]. Destroy and free
//! calls are `drop` unless named otherwise. Every function of the API documents
//! (`shared/seeds/`) is listed; the README's coverage table gives each one's status.
//!
//! | HIP | kfdrt |
//! |---|---|
//! | `hipMalloc` | [`d.alloc(MemoryKind::Device, gpu, size)`](Device::alloc) -> [`Buffer`] (`Buffer::va`) |
//! | `hipHostMalloc` | [`d.alloc(MemoryKind::HostPinned, gpu, size)`](Device::alloc) |
//! | `hipMallocSignalMemory`, `hipExtMallocWithFlags(hipMallocSignalMemory)` | [`d.alloc(MemoryKind::Signal, gpu, size)`](Device::alloc) |
//! | `hipHostRegister` | [`MemoryKind::Userptr`] |
//! | `hipFree` | `drop(buffer)` / `drop(managed)` |
//! | `hipMemcpy(Async)`, `hipMemset(Async)`, `hipMemsetD32(Async)` | [`Stream::memcpy`], [`Stream::memset`], [`Stream::memset_d32`]; [`Device::memcpy`] / [`Device::memset`] (synchronous) |
//! | `hipStreamCreate`, `hipStreamCreateWithFlags`, `hipStreamCreateWithPriority` | [`Device::create_stream`], [`Device::create_stream_with_flags`] ([`StreamFlags`]), [`Device::create_stream_with_priority`] |
//! | `hipExtStreamCreateWithCUMask`, `hipExtStreamGetCUMask` | [`Device::create_stream_with_cu_mask`], [`Stream::cu_mask`] |
//! | null stream (`0`) | [`Device::null_stream`] |
//! | `hipStreamDestroy` | `drop(stream)` (returns at once; resources go when the work is done) |
//! | `hipStreamQuery`, `hipStreamSynchronize` | [`Stream::query`] (NotReady while busy), [`Stream::synchronize`] |
//! | `hipStreamGetFlags`, `hipStreamGetPriority` | [`Stream::flags`], [`Stream::priority`] |
//! | `hipDeviceGetStreamPriorityRange` | [`Device::stream_priority_range`] |
//! | `hipStreamWaitEvent` | [`Stream::wait_event`] |
//! | `hipStreamAddCallback` | [`Stream::add_callback`] (a closure getting the stream's status) |
//! | `hipStreamWaitValue32/64` (`hipStreamWaitValueGte/Eq/And/Nor`) | [`Stream::wait_value32`], [`Stream::wait_value64`] ([`WaitCompare`]) |
//! | `hipStreamWriteValue32/64` | [`Stream::write_value32`], [`Stream::write_value64`] ([`WriteValueFlags`]) |
//! | `hipEventCreate(WithFlags)`, `hipEventDestroy` | [`Device::create_event`] ([`EventFlags`]), `drop` |
//! | `hipEventRecord`, `hipEventQuery`, `hipEventSynchronize`, `hipEventElapsedTime` | [`Event::record`], [`Event::query`], [`Event::synchronize`], [`Event::elapsed_ms`] |
//! | `hipMallocAsync`, `hipMallocFromPoolAsync` | [`Stream::malloc_async`], [`Stream::malloc_from_pool_async`] -> [`PoolAlloc`] (owned; `drop` frees it on its stream) |
//! | `hipFreeAsync` | [`PoolAlloc::free_async`] (any stream); [`Stream::free_ptr_async`] for a bare address ([`PoolAlloc::into_raw`]) |
//! | `hipMemPoolCreate`, `hipMemPoolDestroy` | [`Device::create_mem_pool`] ([`PoolProps`]), [`MemPool::destroy`] |
//! | `hipDeviceGetDefaultMemPool`, `hipDeviceGetMemPool`, `hipDeviceSetMemPool` | [`Device::default_mem_pool`], [`Device::mem_pool`], [`Device::set_mem_pool`] |
//! | `hipMemPoolSetAttribute`, `hipMemPoolGetAttribute`, `hipMemPoolTrimTo` | [`MemPool::set_attribute`], [`MemPool::attribute`] ([`PoolAttr`]), [`MemPool::trim_to`] |
//! | `hipMemPoolSetAccess`, `hipMemPoolGetAccess` | [`MemPool::set_access`] ([`AccessDesc`]), [`MemPool::access`] ([`AccessFlags`]) |
//! | `hipMemPoolExportToShareableHandle`, `hipMemPoolImportFromShareableHandle` | [`MemPool::export_to_shareable_handle`] ([`HandleType`]), [`Device::import_mem_pool`] |
//! | `hipMemPoolExportPointer`, `hipMemPoolImportPointer` | [`Device::mem_pool_export_pointer`], [`MemPool::import_pointer`] -> [`PoolAlloc`] |
//! | `hipMallocManaged` (`cuMemAllocManaged`) | [`Device::malloc_managed`] ([`AttachFlags`]) -> [`ManagedMemory`] |
//! | `hipMemPrefetchAsync` | [`Device::mem_prefetch_async`] ([`Location::Host`] for `hipCpuDeviceId`) |
//! | `hipMemAdvise` | [`Device::mem_advise`] ([`MemoryAdvise`], [`Location`]) |
//! | `hipMemRangeGetAttribute(s)` | [`Device::mem_range_get_attribute`], [`Device::mem_range_get_attributes`] ([`MemRangeAttribute`]); typed: [`Device::mem_range_attributes`] |
//! | `hipStreamAttachMemAsync` (`cuStreamAttachMemAsync`) | [`Stream::attach_mem_async`] ([`AttachFlags`]) |
//! | `hipMemAddressReserve`, `hipMemAddressFree` | [`Device::mem_address_reserve`], [`Device::mem_address_free`] |
//! | `hipMemCreate`, `hipMemRelease` | [`Device::mem_create`] ([`MemAllocationProp`]) -> [`MemHandle`], [`Device::mem_release`] |
//! | `hipMemMap`, `hipMemUnmap` | [`Device::mem_map`], [`Device::mem_unmap`] |
//! | `hipMemSetAccess`, `hipMemGetAccess` | [`Device::mem_set_access`] ([`AccessDesc`], [`Location`]), [`Device::mem_get_access`] ([`AccessFlags`]) |
//! | `hipMemGetAllocationGranularity`, `hipMemGetAllocationPropertiesFromHandle`, `hipMemRetainAllocationHandle` | [`Device::mem_get_allocation_granularity`] ([`GranularityOption`]), [`Device::mem_get_allocation_properties_from_handle`], [`Device::mem_retain_allocation_handle`] |
//! | `hipMemExportToShareableHandle`, `hipMemImportFromShareableHandle` | [`Device::mem_export_to_shareable_handle`], [`Device::mem_import_from_shareable_handle`] ([`HandleType`]) |
//! | `hipMemMapArrayAsync` | [`Device::mem_map_array_async`] (NotSupported, as the seed says) |
//! | `hipDeviceGetAttribute`, `hipDeviceLaunchBlocking` | not provided (the seeds mention them; kfdrt has no device-attribute query yet) |
//! | `hipError_t` | [`Error`] with [`ErrorKind`] (`hipErrorNotReady` = [`ErrorKind::NotReady`], ...) |
//!
//! # Layering
//!
//! The modules of `src/` form layers. A module of the lower layers uses only modules
//! listed before it (so they have no cycles); they take the parts of the device they
//! need (`&DeviceCore`, a signal pool), never the runtime's `DeviceInner`. Only the top
//! layer, the runtime proper, may use any module, and its modules use each other.
//! `tests/layering.rs` reads this list and checks every `crate::` path of `src/`
//! against it, so a reference from a lower layer upwards (a new cycle) fails CI.
//!
//! 1. Foundations: `error`, `sync`, `types`, `va`, `device_select`, `queue_error`,
//!    `hdp`, `cmd`.
//! 2. The KFD connection and GPU agents: `devcore` (`DeviceCore`, [`Gpu`], doorbell
//!    pages, peer access, buffer extents), `hsa` (CP-visible layouts).
//! 3. Memory and command encoding: `memory` ([`Buffer`] on `&DeviceCore`), `cmdbuf`.
//! 4. Rings and signals: `ring` (the user-mode queue), `signal` (signals and their
//!    pool, which owns the event page).
//!
//! Top layer (the runtime: device, streams and what is built on them): `device`
//! (`DeviceInner`, the per-device state that owns the pools), `stream`, `queue`, `sdma`,
//! `event`, `callback`, `wait`, `copy`, `staging`, `launch`, `module`, `waitkernel`,
//! `mempool`, `managed`, `vmm`, `ipc`, `soak`, `raw`.
#![deny(missing_docs)]

mod callback;
mod cmd;
mod cmdbuf;
mod copy;
mod devcore;
mod device;
mod device_select;
mod error;
pub mod event;
mod hdp;
mod hsa;
mod ipc;
mod launch;
pub mod managed;
mod memory;
pub mod mempool;
mod module;
mod queue;
mod queue_error;
#[doc(hidden)]
pub mod raw;
mod ring;
mod sdma;
mod signal;
mod soak;
pub mod staging;
pub mod stream;
mod sync;
mod types;
mod va;
pub mod vmm;
mod wait;
mod waitkernel;

pub use codeobj;
pub use kfd;

pub use callback::Callback;
pub use devcore::Gpu;
pub use device::Device;
pub use device_select::{open_backend, DeviceSpec, DEVICE_ENV};
pub use error::{Error, ErrorKind, Result};
pub use event::{Event, GPU_TIMESTAMP_HZ};
pub use ipc::{IpcEvent, IpcExport, IpcMapping, IpcMemHandle};
pub use launch::{Dim3, KernelArgs, LaunchShape};
pub use managed::{Attachment, CoherencyMode, ManagedMemory, MemRangeAttribute, MemoryAdvise};
pub use memory::{Allocation, AllocationKind, Buffer, MemoryKind};
pub use mempool::{MemPool, PoolAlloc, PoolAttr, PoolProps, PtrExportData};
pub use module::{Kernel, KernelAttributes, Module};
pub use stream::Stream;
pub use types::{
    AccessDesc, AccessFlags, AllocationType, AttachFlags, EventFlags, GranularityOption,
    HandleType, Location, StreamFlags, WaitCompare, WriteValueFlags,
};
pub use vmm::{MemAllocFlags, MemAllocationProp, MemHandle};
