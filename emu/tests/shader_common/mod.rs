//! Shared harness of the shader-core tests and benchmarks: an emulated gfx9 GPU over heap
//! memory with raw AQL queues; code objects built by clang-19 are placed in its memory and
//! dispatched with hand-written kernel arguments (explicit + code object v5 hidden ones).
#![allow(dead_code)]

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use kfd_emu::engine::{
    EngineConfig, GpuEngines, Interrupts, QueueDesc, QueueFault, QueueKind, QueueStatus,
};
use kfd_emu::gpumem::{HeapMemory, MemWindow};
use object::{Object, ObjectSegment, ObjectSymbol};
use pm4::aql::{self, AqlPacket, KernelDispatch, PacketControl};
use pm4::{GfxFamily, SdmaVersion};

const LONG: Duration = Duration::from_secs(300);
static NEXT_GPU: AtomicU32 = AtomicU32::new(0x5000);
static NEXT_Q: AtomicU32 = AtomicU32::new(1);

#[derive(Default)]
struct Rec {
    faults: Mutex<Vec<QueueFault>>,
}

impl Interrupts for Rec {
    fn event_interrupt(&self, _gpu_id: u32, _context_id: Option<u32>) {}
    fn queue_fault(&self, _gpu_id: u32, fault: &QueueFault) {
        self.faults.lock().unwrap().push(fault.clone());
    }
}

pub const TARGETS: [(&str, u32); 2] = [("gfx942", 90402), ("gfx90a", 90010)];

pub struct Dev {
    pub id: u32,
    pub mem: Arc<HeapMemory>,
    pub eng: GpuEngines,
    pub next_va: Mutex<u64>,
    pub target: &'static str,
    /// XCCs in the partition (the work-groups spread over them, each with its scratch
    /// slice).
    pub num_xcc: u32,
}

pub struct Queue {
    id: u32,
    ring: MemWindow,
    ptrs: MemWindow,
    db: MemWindow,
    wptr: u64,
    /// The queue's scratch and its bytes per wave, once a kernel needed it.
    scratch: Option<(MemWindow, u64)>,
}

pub struct Module {
    image: MemWindow,
    syms: Vec<(String, u64)>,
}

impl Module {
    pub fn kd(&self, name: &str) -> u64 {
        let want = format!("{name}.kd");
        self.syms
            .iter()
            .find(|(n, _)| *n == want)
            .map(|(_, a)| self.image.va() + a)
            .unwrap_or_else(|| panic!("no kernel {name}"))
    }

    /// Rewrites kernel `name`'s COMPUTE_PGM_RSRC1 (kernel descriptor offset 48, LLVM
    /// AMDGPUUsage "Kernel Descriptor") with `f`.
    pub fn patch_rsrc1(&self, name: &str, f: impl FnOnce(u32) -> u32) {
        let at = self.kd(name) + 48;
        let mut w = [0u8; 4];
        self.image.read(at, &mut w).unwrap();
        let v = f(u32::from_le_bytes(w));
        self.image.write(at, &v.to_le_bytes()).unwrap();
    }
}

impl Dev {
    pub fn new(target: &'static str, version: u32) -> Dev {
        Dev::with_xcc(target, version, 1)
    }

    /// A device whose partition has `num_xcc` XCCs (MI300X in SPX mode: 8).
    pub fn with_xcc(target: &'static str, version: u32, num_xcc: u32) -> Dev {
        Dev::with_config(target, version, num_xcc, true)
    }

    /// A device with SRAM ECC `sramecc` (the gfx90a/gfx942 presets are `sramecc+`).
    pub fn with_config(target: &'static str, version: u32, num_xcc: u32, sramecc: bool) -> Dev {
        let id = NEXT_GPU.fetch_add(1, Ordering::Relaxed);
        let mem = Arc::new(HeapMemory::new());
        let cfg = EngineConfig {
            gpu_id: id,
            family: GfxFamily::Gfx9,
            sdma_version: SdmaVersion::V4,
            num_sdma_engines: 1,
            clock_hz: 0,
            gfx_target_version: version,
            num_xcc,
            sramecc,
        };
        let eng = GpuEngines::new(cfg, mem.clone(), Arc::new(Rec::default()));
        Dev {
            id,
            mem,
            eng,
            next_va: Mutex::new(0x1_0000_0000),
            target,
            num_xcc,
        }
    }

    pub fn alloc(&self, len: usize) -> MemWindow {
        let mut n = self.next_va.lock().unwrap();
        let va = *n;
        *n += (len as u64).div_ceil(2 << 20) * (2 << 20) + (2 << 20);
        self.mem.add_region(va, len.max(8))
    }

    pub fn upload<T: bytemuck::Pod>(&self, data: &[T]) -> MemWindow {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let w = self.alloc(bytes.len());
        w.write(w.va(), bytes).unwrap();
        w
    }

    pub fn download<T: bytemuck::Pod + Default + Clone>(&self, w: &MemWindow, n: usize) -> Vec<T> {
        let mut out = vec![T::default(); n];
        w.read(w.va(), bytemuck::cast_slice_mut(&mut out)).unwrap();
        out
    }

    /// Builds `src` for this device's target and places its loadable segments.
    pub fn load(&self, src: &str) -> Module {
        let elf = test_kernels::build(src, self.target).expect("clang-19 builds the kernel");
        let file = object::File::parse(&*elf).expect("ELF");
        let end = file
            .segments()
            .map(|s| s.address() + s.size())
            .max()
            .unwrap_or(0);
        let image = self.alloc(end as usize);
        for s in file.segments() {
            let data = s.data().unwrap();
            image.write(image.va() + s.address(), data).unwrap();
        }
        let syms = file
            .symbols()
            .filter_map(|s| Some((s.name().ok()?.to_string(), s.address())))
            .collect();
        Module { image, syms }
    }

    pub fn queue(&self) -> Queue {
        let ring_size = 16 * 64;
        let ring = self.alloc(ring_size);
        let ptrs = self.alloc(256);
        let db = self.alloc(8);
        for s in 0..16u64 {
            ring.store_u32(ring.va() + s * 64, aql::packet_type::INVALID as u32)
                .unwrap();
        }
        let id = NEXT_Q.fetch_add(1, Ordering::Relaxed);
        self.eng.add_queue(QueueDesc {
            queue_id: id,
            gpu_id: self.id,
            kind: QueueKind::Aql,
            ring_va: ring.va(),
            ring_size: ring_size as u32,
            rptr_va: ptrs.va() + 128,
            wptr_va: ptrs.va() + 56,
            doorbell: db.clone(),
            priority: 7,
            percentage: 100,
            eop_va: 0,
            ctx_save_va: 0,
        });
        Queue {
            id,
            ring,
            ptrs,
            db,
            wptr: 0,
            scratch: None,
        }
    }

    /// Dispatches `kernel` and waits for its completion signal or a queue fault.
    #[allow(clippy::too_many_arguments)]
    pub fn run(
        &self,
        q: &mut Queue,
        m: &Module,
        kernel: &str,
        grid: [u32; 3],
        wg: [u16; 3],
        lds: u32,
        explicit: &[u8],
    ) -> Result<(), QueueFault> {
        let kd = m.kd(kernel);
        let mut kdb = [0u8; 64];
        m.image.read(kd, &mut kdb).unwrap();
        let kdesc = pm4::kd::KernelDescriptor::from_bytes(&kdb);
        self.ensure_scratch(q, kdesc.private_segment_fixed_size);
        let size = (kdesc.kernarg_size as usize).max(explicit.len()).max(256);
        let mut args = vec![0u8; size];
        args[..explicit.len()].copy_from_slice(explicit);
        // Code object v5 hidden arguments right after the explicit ones (8-aligned):
        // block counts (u32 x3), group sizes (u16 x3), remainders (u16 x3), grid dims at +64.
        let h = explicit.len().div_ceil(8) * 8;
        for d in 0..3 {
            let bc = grid[d].div_ceil(wg[d] as u32);
            args[h + 4 * d..h + 4 * d + 4].copy_from_slice(&bc.to_le_bytes());
            args[h + 12 + 2 * d..h + 14 + 2 * d].copy_from_slice(&wg[d].to_le_bytes());
            let rem = (grid[d] % wg[d] as u32) as u16;
            args[h + 18 + 2 * d..h + 20 + 2 * d].copy_from_slice(&rem.to_le_bytes());
        }
        let dims = if grid[2] > 1 {
            3u16
        } else if grid[1] > 1 {
            2
        } else {
            1
        };
        if h + 66 <= args.len() {
            args[h + 64..h + 66].copy_from_slice(&dims.to_le_bytes());
        }
        let karg = self.upload(&args);
        let sig = self.alloc(64);
        sig.store_u64(sig.va() + 8, 1).unwrap();
        let k = KernelDispatch {
            control: PacketControl::SYSTEM_BARRIER,
            dimensions: dims as u8,
            workgroup_size: wg,
            grid_size: grid,
            private_segment_size: 0,
            group_segment_size: lds,
            kernel_object: kd,
            kernarg_address: karg.va(),
            completion_signal: sig.va(),
        };
        let slots = 16u64;
        let va = q.ring.va() + (q.wptr % slots) * 64;
        let w = AqlPacket::KernelDispatch(k).encode();
        for (i, d) in w.iter().enumerate().skip(1) {
            q.ring.store_u32(va + 4 * i as u64, *d).unwrap();
        }
        q.ptrs.store_u64(q.ptrs.va() + 56, q.wptr + 1).unwrap();
        q.ring.store_u32(va, w[0]).unwrap();
        q.db.store_u64(q.db.va(), q.wptr).unwrap();
        self.eng.doorbell(q.id);
        q.wptr += 1;
        let start = Instant::now();
        loop {
            if let Some(QueueStatus::Faulted(f)) = self.eng.queue_status(q.id) {
                return Err(f);
            }
            if sig.load_u64(sig.va() + 8).unwrap() == 0 {
                return Ok(());
            }
            assert!(
                start.elapsed() < LONG,
                "dispatch of {kernel} did not complete"
            );
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

impl Queue {
    /// The queue's scratch backing memory and bytes per wave (once a kernel needed it).
    pub fn scratch(&self) -> Option<&(MemWindow, u64)> {
        self.scratch.as_ref()
    }

    /// Overwrite `amd_queue_t.scratch_backing_memory_byte_size` (the per-XCC slice size) and
    /// keep it: later runs do not grow the scratch again.
    pub fn set_scratch_slice_bytes(&mut self, v: u64) {
        self.ptrs.store_u64(self.ptrs.va() + 168, v).unwrap();
        if let Some((_, wb)) = self.scratch.as_mut() {
            *wb = u64::MAX;
        }
    }

    /// Overwrite `amd_queue_t.compute_tmpring_size` (and keep it: later runs do not grow
    /// the scratch again).
    pub fn set_tmpring_size(&mut self, v: u32) {
        self.ptrs.store_u32(self.ptrs.va() + 140, v).unwrap();
        if let Some((_, wb)) = self.scratch.as_mut() {
            *wb = u64::MAX;
        }
    }
}

impl Dev {
    /// Scratch for `private` bytes per work-item in the queue's `amd_queue_t`, as the
    /// runtime sets it up (kfdrt `launch::QueueScratch::ensure`; firmware-notes/kernels.md):
    /// the gfx9 scratch V#, the backing memory location and COMPUTE_TMPRING_SIZE (64 waves
    /// of WAVESIZE KiB per XCC; the memory holds one such slice per XCC and NUM_RECORDS /
    /// `scratch_backing_memory_byte_size` give the slice's size, as ROCr reports them).
    pub fn ensure_scratch(&self, q: &mut Queue, private: u32) {
        if private == 0 {
            return;
        }
        let wave_bytes = (private.next_multiple_of(16) as u64 * 64).next_multiple_of(1024);
        if q.scratch.as_ref().is_some_and(|(_, wb)| *wb >= wave_bytes) {
            return;
        }
        let waves = 64u64;
        let mem = self.alloc((waves * wave_bytes) as usize * self.num_xcc as usize);
        let base = mem.va();
        let aq = q.ptrs.va();
        let srd = [
            base as u32,
            ((base >> 32) as u32 & 0xFFFF) | 1 << 31,
            (waves * wave_bytes) as u32,
            0x00EA_4FAC,
        ];
        for (i, w) in srd.iter().enumerate() {
            q.ptrs.store_u32(aq + 144 + 4 * i as u64, *w).unwrap();
        }
        q.ptrs.store_u64(aq + 160, base).unwrap();
        q.ptrs.store_u64(aq + 168, waves * wave_bytes).unwrap();
        q.ptrs
            .store_u32(aq + 176, private.next_multiple_of(16))
            .unwrap();
        q.ptrs
            .store_u32(aq + 140, waves as u32 | ((wave_bytes / 1024) as u32) << 12)
            .unwrap();
        q.scratch = Some((mem, wave_bytes));
    }
}

/// Explicit kernel arguments, each aligned to its size.
#[derive(Default)]
pub struct Args(pub Vec<u8>);
impl Args {
    pub fn put(mut self, b: &[u8]) -> Self {
        let a = b.len();
        while self.0.len() % a != 0 {
            self.0.push(0);
        }
        self.0.extend_from_slice(b);
        self
    }
    pub fn ptr(self, w: &MemWindow) -> Self {
        self.put(&w.va().to_le_bytes())
    }
    pub fn u32(self, v: u32) -> Self {
        self.put(&v.to_le_bytes())
    }
    pub fn f32(self, v: f32) -> Self {
        self.put(&v.to_le_bytes())
    }
}

/// A deterministic pseudo-random sequence (xorshift).
pub fn rand_u32(n: usize, seed: u32) -> Vec<u32> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x
        })
        .collect()
}

impl Dev {
    /// [`Dev::run`] that must succeed: panics naming the target and the fault.
    #[allow(clippy::too_many_arguments)]
    pub fn run_ok(
        &self,
        q: &mut Queue,
        m: &Module,
        kernel: &str,
        grid: [u32; 3],
        wg: [u16; 3],
        lds: u32,
        explicit: &[u8],
    ) {
        if let Err(f) = self.run(q, m, kernel, grid, wg, lds, explicit) {
            panic!("{} {kernel}: {}", self.target, f.reason);
        }
    }

    /// cl/vadd.cl's `vadd` (`m`): `c[i] = a[i] + b[i]` over a 1-D grid of `n` work-items
    /// in work-groups of `wg`, which must succeed (the dispatch many tests start from).
    pub fn run_vadd(
        &self,
        q: &mut Queue,
        m: &Module,
        [a, b, c]: [&MemWindow; 3],
        n: usize,
        wg: u16,
    ) {
        let args = Args::default().ptr(a).ptr(b).ptr(c).u32(n as u32);
        self.run_ok(q, m, "vadd", [n as u32, 1, 1], [wg, 1, 1], 0, &args.0);
    }

    /// Drains the trace and returns the first DISPATCH line of the CP track.
    pub fn take_dispatch_line(&self) -> String {
        self.eng
            .take_trace()
            .iter()
            .find_map(|e| match &e.kind {
                kfd_emu::trace::TraceKind::Packet {
                    name: "DISPATCH",
                    disasm,
                    ..
                } => Some(disasm.clone()),
                _ => None,
            })
            .expect("a DISPATCH event on the CP track")
    }
}

/// The numeric `key=` field (key given with its `=`) of a trace line.
pub fn trace_field(line: &str, key: &str) -> u64 {
    line.split_whitespace()
        .find_map(|f| f.strip_prefix(key))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key} in {line}"))
}

pub fn devices() -> Vec<Dev> {
    assert!(
        test_kernels::toolchain_available(),
        "clang-19 and ld.lld-19 are needed (Debian packages clang-19, lld-19)"
    );
    TARGETS.iter().map(|&(t, v)| Dev::new(t, v)).collect()
}
