//! Shader-core tests: kernels compiled from source by clang-19 for gfx942 and gfx90a run on
//! the emulated CP through raw AQL queues (the code object's segments are placed in
//! emulated GPU memory by the test itself) and must give exactly the CPU reference result.

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

const LONG: Duration = Duration::from_secs(60);
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

const TARGETS: [(&str, u32); 2] = [("gfx942", 90402), ("gfx90a", 90010)];

struct Dev {
    id: u32,
    mem: Arc<HeapMemory>,
    eng: GpuEngines,
    next_va: Mutex<u64>,
    target: &'static str,
}

struct Queue {
    id: u32,
    ring: MemWindow,
    ptrs: MemWindow,
    db: MemWindow,
    wptr: u64,
}

struct Module {
    image: MemWindow,
    syms: Vec<(String, u64)>,
}

impl Module {
    fn kd(&self, name: &str) -> u64 {
        let want = format!("{name}.kd");
        self.syms
            .iter()
            .find(|(n, _)| *n == want)
            .map(|(_, a)| self.image.va() + a)
            .unwrap_or_else(|| panic!("no kernel {name}"))
    }
}

impl Dev {
    fn new(target: &'static str, version: u32) -> Dev {
        let id = NEXT_GPU.fetch_add(1, Ordering::Relaxed);
        let mem = Arc::new(HeapMemory::new());
        let cfg = EngineConfig {
            gpu_id: id,
            family: GfxFamily::Gfx9,
            sdma_version: SdmaVersion::V4,
            num_sdma_engines: 1,
            clock_hz: 0,
            gfx_target_version: version,
        };
        let eng = GpuEngines::new(cfg, mem.clone(), Arc::new(Rec::default()));
        Dev {
            id,
            mem,
            eng,
            next_va: Mutex::new(0x1_0000_0000),
            target,
        }
    }

    fn alloc(&self, len: usize) -> MemWindow {
        let mut n = self.next_va.lock().unwrap();
        let va = *n;
        *n += (len as u64).div_ceil(2 << 20) * (2 << 20) + (2 << 20);
        self.mem.add_region(va, len.max(8))
    }

    fn upload<T: bytemuck::Pod>(&self, data: &[T]) -> MemWindow {
        let bytes: &[u8] = bytemuck::cast_slice(data);
        let w = self.alloc(bytes.len());
        w.write(w.va(), bytes).unwrap();
        w
    }

    fn download<T: bytemuck::Pod + Default + Clone>(&self, w: &MemWindow, n: usize) -> Vec<T> {
        let mut out = vec![T::default(); n];
        w.read(w.va(), bytemuck::cast_slice_mut(&mut out)).unwrap();
        out
    }

    /// Builds `src` for this device's target and places its loadable segments.
    fn load(&self, src: &str) -> Module {
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

    fn queue(&self) -> Queue {
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
        });
        Queue {
            id,
            ring,
            ptrs,
            db,
            wptr: 0,
        }
    }

    /// Dispatches `kernel` and waits for its completion signal or a queue fault.
    #[allow(clippy::too_many_arguments)]
    fn run(
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

/// Explicit kernel arguments, each aligned to its size.
#[derive(Default)]
struct Args(Vec<u8>);
impl Args {
    fn put(mut self, b: &[u8]) -> Self {
        let a = b.len();
        while self.0.len() % a != 0 {
            self.0.push(0);
        }
        self.0.extend_from_slice(b);
        self
    }
    fn ptr(self, w: &MemWindow) -> Self {
        self.put(&w.va().to_le_bytes())
    }
    fn u32(self, v: u32) -> Self {
        self.put(&v.to_le_bytes())
    }
    fn f32(self, v: f32) -> Self {
        self.put(&v.to_le_bytes())
    }
}

/// A deterministic pseudo-random sequence (xorshift).
fn rand_u32(n: usize, seed: u32) -> Vec<u32> {
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

fn devices() -> Vec<Dev> {
    assert!(
        test_kernels::toolchain_available(),
        "clang-19 and ld.lld-19 are needed (Debian packages clang-19, lld-19)"
    );
    TARGETS.iter().map(|&(t, v)| Dev::new(t, v)).collect()
}

#[test]
fn vadd_and_saxpy_match_the_cpu() {
    for dev in devices() {
        let mut q = dev.queue();
        let n = 10_000usize; // not a multiple of the work-group: a partial group
        let a: Vec<f32> = rand_u32(n, 1)
            .iter()
            .map(|&x| (x % 1000) as f32 * 0.25)
            .collect();
        let b: Vec<f32> = rand_u32(n, 2)
            .iter()
            .map(|&x| (x % 777) as f32 * 0.5)
            .collect();
        let (wa, wb, wc) = (dev.upload(&a), dev.upload(&b), dev.alloc(n * 4));
        let m = dev.load("cl/vadd.cl");
        let args = Args::default().ptr(&wa).ptr(&wb).ptr(&wc).u32(n as u32);
        dev.run(
            &mut q,
            &m,
            "vadd",
            [n as u32, 1, 1],
            [256, 1, 1],
            0,
            &args.0,
        )
        .unwrap_or_else(|f| panic!("{}: {}", dev.target, f.reason));
        let c: Vec<f32> = dev.download(&wc, n);
        for i in 0..n {
            assert_eq!(
                c[i].to_bits(),
                (a[i] + b[i]).to_bits(),
                "{} vadd[{i}]",
                dev.target
            );
        }

        let m = dev.load("cl/isa/saxpy.cl");
        let alpha = 1.75f32;
        let args = Args::default().f32(alpha).ptr(&wa).ptr(&wb).u32(n as u32);
        dev.run(
            &mut q,
            &m,
            "saxpy",
            [n as u32, 1, 1],
            [128, 1, 1],
            0,
            &args.0,
        )
        .unwrap_or_else(|f| panic!("{}: {}", dev.target, f.reason));
        let y: Vec<f32> = dev.download(&wb, n);
        for i in 0..n {
            let want = alpha.mul_add(a[i], b[i]);
            let want2 = alpha * a[i] + b[i];
            assert!(
                y[i].to_bits() == want.to_bits() || y[i].to_bits() == want2.to_bits(),
                "{} saxpy[{i}]: {} vs {}",
                dev.target,
                y[i],
                want
            );
        }
    }
}

#[test]
fn lds_reduction_with_barriers() {
    for dev in devices() {
        let mut q = dev.queue();
        let groups = 64usize;
        let n = groups * 256;
        let input: Vec<u32> = rand_u32(n, 7).iter().map(|x| x % 100_000).collect();
        let (wi, wo) = (dev.upload(&input), dev.alloc(groups * 4));
        let m = dev.load("cl/isa/reduce.cl");
        let args = Args::default().ptr(&wi).ptr(&wo);
        dev.run(
            &mut q,
            &m,
            "reduce",
            [n as u32, 1, 1],
            [256, 1, 1],
            0,
            &args.0,
        )
        .unwrap_or_else(|f| panic!("{}: {}", dev.target, f.reason));
        let out: Vec<u32> = dev.download(&wo, groups);
        for g in 0..groups {
            let want: u32 = input[g * 256..(g + 1) * 256].iter().sum();
            assert_eq!(out[g], want, "{} group {g}", dev.target);
        }
    }
}

#[test]
fn global_atomic_histogram() {
    for dev in devices() {
        let mut q = dev.queue();
        let n = 50_000usize;
        let input = rand_u32(n, 11);
        let (wi, wb) = (dev.upload(&input), dev.alloc(64 * 4));
        let m = dev.load("cl/isa/histogram.cl");
        let args = Args::default().ptr(&wi).ptr(&wb).u32(n as u32);
        dev.run(
            &mut q,
            &m,
            "histogram",
            [n as u32, 1, 1],
            [256, 1, 1],
            0,
            &args.0,
        )
        .unwrap_or_else(|f| panic!("{}: {}", dev.target, f.reason));
        let bins: Vec<u32> = dev.download(&wb, 64);
        let mut want = [0u32; 64];
        for x in &input {
            want[(x & 63) as usize] += 1;
        }
        assert_eq!(bins, want.to_vec(), "{}", dev.target);
    }
}

#[test]
fn tiled_matmul() {
    for dev in devices() {
        let mut q = dev.queue();
        let n = 64usize;
        let a: Vec<f32> = rand_u32(n * n, 3)
            .iter()
            .map(|&x| (x % 17) as f32 - 8.0)
            .collect();
        let b: Vec<f32> = rand_u32(n * n, 5)
            .iter()
            .map(|&x| (x % 13) as f32 * 0.5)
            .collect();
        let (wa, wb, wc) = (dev.upload(&a), dev.upload(&b), dev.alloc(n * n * 4));
        let m = dev.load("cl/isa/matmul.cl");
        let args = Args::default().ptr(&wa).ptr(&wb).ptr(&wc).u32(n as u32);
        dev.run(
            &mut q,
            &m,
            "matmul",
            [n as u32, n as u32, 1],
            [16, 16, 1],
            0,
            &args.0,
        )
        .unwrap_or_else(|f| panic!("{}: {}", dev.target, f.reason));
        let c: Vec<f32> = dev.download(&wc, n * n);
        for r in 0..n {
            for col in 0..n {
                let mut acc = 0f32;
                for k in 0..n {
                    acc = a[r * n + k].mul_add(b[k * n + col], acc);
                }
                assert_eq!(
                    c[r * n + col].to_bits(),
                    acc.to_bits(),
                    "{} c[{r}][{col}]",
                    dev.target
                );
            }
        }
    }
}

#[test]
fn divergent_loops_and_integer_division() {
    for dev in devices() {
        let mut q = dev.queue();
        let n = 4096usize;
        let input: Vec<u32> = rand_u32(n, 13).iter().map(|x| x % 3_000_000).collect();
        let (wi, wo, wq) = (dev.upload(&input), dev.alloc(n * 4), dev.alloc(n * 4));
        let m = dev.load("cl/isa/divergent.cl");
        let args = Args::default().ptr(&wi).ptr(&wo).ptr(&wq);
        dev.run(
            &mut q,
            &m,
            "divergent",
            [n as u32, 1, 1],
            [64, 1, 1],
            0,
            &args.0,
        )
        .unwrap_or_else(|f| panic!("{}: {}", dev.target, f.reason));
        let out: Vec<u32> = dev.download(&wo, n);
        let qo: Vec<i32> = dev.download(&wq, n);
        for i in 0..n {
            let v = input[i];
            let mut acc = 0u32;
            for k in 0..(v & 31) {
                acc = acc.wrapping_mul(3).wrapping_add(k);
            }
            if v & 1 != 0 {
                acc ^= 0x5555;
            } else {
                acc = acc.wrapping_add(v / 7 + v % 13);
            }
            assert_eq!(out[i], acc, "{} out[{i}] (v={v})", dev.target);
            let s = v as i32 - 1_000_000;
            let d = (i % 5) as i32 - 2;
            let d = if d == 0 { 3 } else { d };
            assert_eq!(qo[i], s / d + s % 17, "{} q[{i}]", dev.target);
        }
    }
}

#[test]
fn unimplemented_instruction_and_bad_store_fault_and_the_device_stays_usable() {
    for dev in devices() {
        let n = 256usize;
        let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let (wa, wb, wc) = (dev.upload(&a), dev.upload(&a), dev.alloc(n * 4));

        // An instruction the shader core does not model faults the queue, naming it.
        let mut q = dev.queue();
        let m = dev.load("cl/isa/sendmsg.cl");
        let args = Args::default().ptr(&wa).ptr(&wb).ptr(&wc);
        let f = dev
            .run(
                &mut q,
                &m,
                "sendmsg",
                [n as u32, 1, 1],
                [64, 1, 1],
                0,
                &args.0,
            )
            .expect_err("sendmsg must fault");
        assert!(
            f.reason.contains("not implemented") && f.reason.contains(" at 0x"),
            "{}: {}",
            dev.target,
            f.reason
        );
        assert_eq!(f.packet_offset, 0);

        // A store to an unmapped address faults with the VM fault and the instruction.
        let mut q2 = dev.queue();
        let m = dev.load("cl/vadd.cl");
        let bad = 0x7f00_0000_0000u64;
        let args = Args::default()
            .ptr(&wa)
            .ptr(&wb)
            .put(&bad.to_le_bytes())
            .u32(n as u32);
        let f = dev
            .run(
                &mut q2,
                &m,
                "vadd",
                [n as u32, 1, 1],
                [64, 1, 1],
                0,
                &args.0,
            )
            .expect_err("the store must fault");
        let fault = f.fault.expect("a memory fault");
        assert!(fault.write, "{}: {}", dev.target, f.reason);
        assert!(
            fault.va >= bad && fault.va < bad + 4 * n as u64,
            "{:#x}",
            fault.va
        );
        assert!(
            f.reason.contains("global_store_dword"),
            "{}: {}",
            dev.target,
            f.reason
        );

        // The device still runs kernels on a new queue.
        let mut q3 = dev.queue();
        let args = Args::default().ptr(&wa).ptr(&wb).ptr(&wc).u32(n as u32);
        dev.run(
            &mut q3,
            &m,
            "vadd",
            [n as u32, 1, 1],
            [64, 1, 1],
            0,
            &args.0,
        )
        .unwrap_or_else(|f| panic!("{}: {}", dev.target, f.reason));
        let c: Vec<f32> = dev.download(&wc, n);
        assert!((0..n).all(|i| c[i] == 2.0 * i as f32), "{}", dev.target);
    }
}
