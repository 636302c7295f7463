//! The enqueue path of an uncontended stream allocates nothing and makes no KFD call
//! (ioctl/mmap: the syscalls of the hardware backend): a counting global
//! allocator sees zero allocations on this thread across a warmed-up burst of stream
//! memory ops, event records and queries.

mod common;

use kfdrt::{Event, EventFlags, Stream, StreamFlags, WaitCompare, WriteValueFlags};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The global allocator: the system's, counting this thread's allocations.
struct CountingAlloc;

thread_local! {
    static ALLOCS: Cell<u64> = const { Cell::new(0) };
}

// SAFETY: forwards to the system allocator; only counts.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as the caller's.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: same contract as the caller's.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        let _ = ALLOCS.try_with(|c| c.set(c.get() + 1));
        // SAFETY: same contract as the caller's.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static A: CountingAlloc = CountingAlloc;

/// Warm up: the stream's queue, pools and any lazy state exist after this.
fn warm_up(s: &Stream, va: u64, ev: &Event) {
    for i in 0..64 {
        s.write_value32(va, i, WriteValueFlags::DEFAULT).unwrap();
        s.wait_value32(va, 0, WaitCompare::Gte, 0).unwrap();
        ev.record(s).unwrap();
    }
    s.synchronize().unwrap();
}

/// The measured burst: stream memory ops, event records and queries.
fn burst(s: &Stream, va: u64, ev: &Event) {
    for i in 0..500u32 {
        s.write_value32(va, i, WriteValueFlags::DEFAULT).unwrap();
        s.write_value64(va + 8, i as u64, WriteValueFlags::DEFAULT)
            .unwrap();
        s.wait_value32(va + 8, 0, WaitCompare::Gte, u32::MAX)
            .unwrap();
        ev.record(s).unwrap();
        let _ = s.query();
    }
}

#[test]
fn enqueue_path_does_not_allocate() {
    let dev = common::emu("emu:mi300x");
    let mem = common::signal_mem(&dev, 4096);
    let s = dev
        .create_stream_with_flags(0, StreamFlags::NON_BLOCKING)
        .unwrap();
    let ev = dev.create_event(EventFlags::DISABLE_TIMING).unwrap();
    warm_up(&s, mem.va(), &ev);
    let before = ALLOCS.with(|c| c.get());
    burst(&s, mem.va(), &ev);
    let after = ALLOCS.with(|c| c.get());
    assert_eq!(after - before, 0, "allocations on the enqueue path");
    s.synchronize().unwrap();
}

/// A backend that forwards to the emulator and counts the calls that would be syscalls on
/// hardware (ioctl, mmap, munmap, render-node open).
struct CountingBackend {
    inner: kfd_emu::EmuBackend,
    calls: AtomicU64,
}

impl CountingBackend {
    /// A device on emulator `spec` through a counting backend.
    fn open(spec: &str) -> (Arc<CountingBackend>, kfdrt::Device) {
        let b = Arc::new(CountingBackend {
            inner: kfd_emu::EmuBackend::from_spec(spec).unwrap(),
            calls: AtomicU64::new(0),
        });
        let dev = kfdrt::Device::with_backend(b.clone()).unwrap();
        (b, dev)
    }

    /// Calls so far.
    fn calls(&self) -> u64 {
        self.calls.load(Ordering::Relaxed)
    }

    fn tally(&self) {
        self.calls.fetch_add(1, Ordering::Relaxed);
    }
}

impl kfd::Backend for CountingBackend {
    fn kind(&self) -> kfd::BackendKind {
        self.inner.kind()
    }
    fn topology(&self) -> &kfd::topology::Topology {
        self.inner.topology()
    }
    fn ioctl(&self, req: kfd::Ioctl<'_>) -> Result<(), kfd::Errno> {
        // The device's fault watcher sleeps in WAIT_EVENTS on its own thread: not a call
        // of the enqueue path.
        if std::thread::current().name() != Some("kfdrt-faults") {
            self.tally();
        }
        self.inner.ioctl(req)
    }
    fn open_render_node(&self, minor: u32) -> Result<std::os::fd::OwnedFd, kfd::Errno> {
        self.tally();
        self.inner.open_render_node(minor)
    }
    unsafe fn mmap(
        &self,
        file: kfd::MmapFile<'_>,
        offset: u64,
        len: usize,
        fixed: Option<core::ptr::NonNull<core::ffi::c_void>>,
        prot: kfd::Prot,
    ) -> Result<core::ptr::NonNull<core::ffi::c_void>, kfd::Errno> {
        self.tally();
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { self.inner.mmap(file, offset, len, fixed, prot) }
    }
    unsafe fn munmap(
        &self,
        addr: core::ptr::NonNull<core::ffi::c_void>,
        len: usize,
    ) -> Result<(), kfd::Errno> {
        self.tally();
        // SAFETY: forwarded with the caller's guarantees.
        unsafe { self.inner.munmap(addr, len) }
    }
    fn doorbell_written(&self, queue_id: u32) {
        // On hardware this is the doorbell store itself, not a syscall.
        self.inner.doorbell_written(queue_id)
    }
    fn host_signal_written(&self, queue_id: u32) {
        self.inner.host_signal_written(queue_id)
    }
    unsafe fn release_svm_mapping(
        &self,
        addr: core::ptr::NonNull<core::ffi::c_void>,
        len: usize,
    ) -> Result<(), kfd::Errno> {
        // SAFETY: forwarded with the caller's guarantee.
        unsafe { self.inner.release_svm_mapping(addr, len) }
    }
}

#[test]
fn enqueue_path_makes_no_kfd_call() {
    let (backend, dev) = CountingBackend::open("emu:mi210");
    let mem = dev.alloc(kfdrt::MemoryKind::Signal, 0, 4096).unwrap();
    let s = dev
        .create_stream_with_flags(0, StreamFlags::NON_BLOCKING)
        .unwrap();
    let ev = dev.create_event(EventFlags::DISABLE_TIMING).unwrap();
    warm_up(&s, mem.va(), &ev);
    let before = backend.calls();
    burst(&s, mem.va(), &ev);
    assert_eq!(backend.calls() - before, 0, "KFD calls on the enqueue path");
    s.synchronize().unwrap();
}

#[test]
fn kernel_launch_path_makes_no_kfd_call_and_allocates_nothing() {
    let (backend, dev) = CountingBackend::open("emu:mi300x");
    let elf = test_kernels::build("cl/store.cl", "gfx942").unwrap();
    let m = dev.load_module(0, &elf).unwrap();
    let k = m.kernel("store").unwrap();
    let out = dev.alloc(kfdrt::MemoryKind::HostPinned, 0, 4096).unwrap();
    let s = dev
        .create_stream_with_flags(0, StreamFlags::NON_BLOCKING)
        .unwrap();
    let mut args = k.args();
    args.buffer(&out)
        .unwrap()
        .arg(&0u32)
        .unwrap()
        .arg(&0u32)
        .unwrap();
    // Warm up: the kernarg ring is created with the first launch.
    for _ in 0..8 {
        s.launch(&k, 1, 64, 0, &args).unwrap();
    }
    s.synchronize().unwrap();
    let before = backend.calls();
    let a0 = ALLOCS.with(|c| c.get());
    for _ in 0..300 {
        s.launch(&k, 1, 64, 0, &args).unwrap();
    }
    let allocs = ALLOCS.with(|c| c.get()) - a0;
    assert_eq!(backend.calls() - before, 0, "KFD calls on the launch path");
    assert_eq!(allocs, 0, "allocations on the launch path");
    s.synchronize().unwrap();
    // The same through HIP's kernelParams (Stream::launch_params: the copy plan).
    let (va, zero) = (out.va(), 0u32);
    let params: [*const std::ffi::c_void; 3] = [
        (&va as *const u64).cast(),
        (&zero as *const u32).cast(),
        (&zero as *const u32).cast(),
    ];
    let before = backend.calls();
    let a0 = ALLOCS.with(|c| c.get());
    for _ in 0..300 {
        // SAFETY: one pointer per explicit argument of `store`, each to its size in bytes.
        unsafe { s.launch_params(&k, 1, 64, 0, params.as_ptr()) }.unwrap();
    }
    let allocs = ALLOCS.with(|c| c.get()) - a0;
    assert_eq!(
        backend.calls() - before,
        0,
        "KFD calls on the launch_params path"
    );
    assert_eq!(allocs, 0, "allocations on the launch_params path");
    s.synchronize().unwrap();
}
