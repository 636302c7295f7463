//! The launch harness the kernel tests share: an emulated device per target (and its
//! backend, to read a faulted queue's reason), kernels built from source by clang-19,
//! buffers in and out, and a launch that waits (bounded) and returns the fault's reason.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use kfd_emu::engine::QueueStatus;
use kfd_emu::EmuBackend;
use kfdrt::KernelArgs;
use kfdrt::{Buffer, Device, Kernel, MemoryKind, Module, Stream};

/// (device spec, target) pairs every execution test runs on.
pub const DEVICES: [(&str, &str); 2] = [("emu:mi300x", "gfx942"), ("emu:mi250x", "gfx90a")];

/// Longest a test waits for one kernel (the interpreter on a loaded 2-core machine).
pub const KERNEL_WAIT: Duration = Duration::from_secs(300);

/// An emulated device of one target.
pub struct Rig {
    pub dev: Device,
    pub eb: Arc<EmuBackend>,
    pub target: &'static str,
}

impl Rig {
    pub fn new(spec: &str, target: &'static str) -> Rig {
        let eb = Arc::new(EmuBackend::from_spec(spec).expect("emu spec"));
        let dev = Device::with_backend(eb.clone()).expect("open");
        Rig { dev, eb, target }
    }

    /// One rig per entry of [`DEVICES`].
    pub fn all() -> Vec<Rig> {
        DEVICES.iter().map(|&(s, t)| Rig::new(s, t)).collect()
    }

    /// `src` (under test-kernels/) built for this target and loaded.
    pub fn module(&self, src: &str) -> Module {
        let elf = test_kernels::build(src, self.target).unwrap_or_else(|e| panic!("{src}: {e}"));
        self.dev
            .load_module(0, &elf)
            .unwrap_or_else(|e| panic!("load {src} for {}: {e}", self.target))
    }

    /// A host-pinned buffer holding `data`.
    pub fn buf<T: zerocopy::IntoBytes + zerocopy::Immutable>(&self, data: &[T]) -> Buffer {
        Rig::pinned(&self.dev, data)
    }

    /// A host-pinned buffer of `dev` holding `data`.
    pub fn pinned<T: zerocopy::IntoBytes + zerocopy::Immutable>(
        dev: &Device,
        data: &[T],
    ) -> Buffer {
        let bytes = zerocopy::IntoBytes::as_bytes(data);
        let b = dev
            .alloc(MemoryKind::HostPinned, 0, bytes.len().max(4))
            .unwrap();
        b.write(0, bytes).unwrap();
        b
    }

    /// A zeroed host-pinned buffer of `bytes`.
    pub fn zeros(&self, bytes: usize) -> Buffer {
        self.buf(&vec![0u8; bytes])
    }

    /// Waits (bounded) for `s`; on a fault, the faulted queue's reason.
    pub fn wait(&self, s: &Stream) -> Result<(), String> {
        match s.synchronize_timeout(KERNEL_WAIT) {
            Ok(()) => Ok(()),
            Err(e) => Err(match self.eb.queue_status(s.hw_queue_id()) {
                Some(QueueStatus::Faulted(f)) => f.reason,
                _ => e.to_string(),
            }),
        }
    }

    /// Launches `name` from `m` on a new stream with the arguments `args` pushes, waits,
    /// and returns the fault's reason if the queue faulted.
    pub fn run(
        &self,
        m: &Module,
        name: &str,
        grid: impl Into<kfdrt::Dim3>,
        block: impl Into<kfdrt::Dim3>,
        dynamic_lds: u32,
        args: impl FnOnce(&mut KernelArgs) -> kfdrt::Result<()>,
    ) -> Result<(), String> {
        let k = m.kernel(name).unwrap_or_else(|e| panic!("{name}: {e}"));
        let s = self.dev.create_stream(0).unwrap();
        self.launch(&s, &k, grid, block, dynamic_lds, args);
        self.wait(&s)
    }

    /// Pushes the arguments and launches `k` on `s` (panics on a launch error).
    pub fn launch(
        &self,
        s: &Stream,
        k: &Kernel,
        grid: impl Into<kfdrt::Dim3>,
        block: impl Into<kfdrt::Dim3>,
        dynamic_lds: u32,
        args: impl FnOnce(&mut KernelArgs) -> kfdrt::Result<()>,
    ) {
        let mut a = k.args();
        args(&mut a).unwrap_or_else(|e| panic!("{} arguments: {e}", k.name()));
        s.launch(k, grid, block, dynamic_lds, &a)
            .unwrap_or_else(|e| panic!("launch {}: {e}", k.name()));
    }
}

/// The first `n` elements of `b`.
pub fn read<T: zerocopy::FromBytes + zerocopy::IntoBytes + Clone>(b: &Buffer, n: usize) -> Vec<T> {
    let mut out = vec![T::new_zeroed(); n];
    b.read(0, zerocopy::IntoBytes::as_mut_bytes(&mut out[..]))
        .unwrap();
    out
}

/// A deterministic pseudo-random sequence.
pub fn lcg(seed: &mut u64) -> u32 {
    *seed = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    (*seed >> 33) as u32
}

/// `n` values of [`lcg`] from `seed`.
pub fn rand(n: usize, seed: u64) -> Vec<u32> {
    let mut s = seed;
    (0..n).map(|_| lcg(&mut s)).collect()
}
