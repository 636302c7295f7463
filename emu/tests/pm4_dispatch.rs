//! PM4 DISPATCH_DIRECT as a PM4-only client (tinygrad's style) uses it: SET_SH_REG programs
//! COMPUTE_PGM_LO/HI, COMPUTE_PGM_RSRC1/2/3, COMPUTE_TMPRING_SIZE, COMPUTE_NUM_THREAD_X/Y/Z
//! and COMPUTE_USER_DATA_* from a clang-19 kernel's descriptor, then DISPATCH_DIRECT
//! launches the grid (in work-groups). A WRITE_DATA after the dispatch must land only after
//! the kernel's results; bad registers and packets fault the queue, naming the cause, and
//! the device stays usable. Register offsets: `firmware-notes/firmware-rules.md`.

mod shader_common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use kfd_emu::engine::{QueueDesc, QueueFault, QueueKind, QueueStatus};
use kfd_emu::gpumem::{GpuMemory, MemWindow};
use pm4::kd::{code_props, KernelDescriptor};
use pm4::pkt3::{self, CachePolicy, Pm4Packet};
use pm4::GfxFamily;
use shader_common::{rand_u32, Dev, TARGETS};

static NEXT_Q: AtomicU32 = AtomicU32::new(500);
const WAIT: Duration = Duration::from_secs(120);

// SET_SH_REG offsets (dwords from SH_REG_START 0x2C00 = byte 0xB000; Mesa R_00Bxxx).
const NUM_THREAD_X: u16 = 0x207; // 0xB81C
const PGM_LO: u16 = 0x20C; // 0xB830
const DISPATCH_SCRATCH_BASE_LO: u16 = 0x210; // 0xB840
const PGM_RSRC1: u16 = 0x212; // 0xB848
const TMPRING_SIZE: u16 = 0x218; // 0xB860
const PGM_RSRC3: u16 = 0x228; // 0xB8A0
const USER_DATA_0: u16 = 0x240; // 0xB900
/// COMPUTE_SHADER_EN | FORCE_START_AT_000.
const INITIATOR: u32 = 1 | 1 << 2;

struct Pm4Queue {
    id: u32,
    ring: MemWindow,
    ptrs: MemWindow,
    db: MemWindow,
    wptr: u64,
}

impl Pm4Queue {
    fn new(dev: &Dev) -> Pm4Queue {
        let ring = dev.alloc(4096);
        let ptrs = dev.alloc(64);
        let db = dev.alloc(8);
        let id = NEXT_Q.fetch_add(1, Ordering::Relaxed);
        dev.eng.add_queue(QueueDesc {
            queue_id: id,
            gpu_id: dev.id,
            kind: QueueKind::Pm4,
            ring_va: ring.va(),
            ring_size: 4096,
            rptr_va: ptrs.va(),
            wptr_va: ptrs.va() + 8,
            doorbell: db.clone(),
            priority: 7,
            percentage: 100,
            eop_va: 0,
            ctx_save_va: 0,
        });
        Pm4Queue {
            id,
            ring,
            ptrs,
            db,
            wptr: 0,
        }
    }

    fn submit(&mut self, dev: &Dev, packets: &[Pm4Packet<'_>]) {
        for p in packets {
            let mut v = vec![0; p.dwords(GfxFamily::Gfx9)];
            p.encode(GfxFamily::Gfx9, &mut v).unwrap();
            for d in v {
                let at = self.ring.va() + (self.wptr % 1024) * 4;
                self.ring.store_u32(at, d).unwrap();
                self.wptr += 1;
            }
        }
        self.ptrs.store_u64(self.ptrs.va() + 8, self.wptr).unwrap();
        self.db.store_u64(self.db.va(), self.wptr).unwrap();
        dev.eng.doorbell(self.id);
    }

    /// Waits until the ring is consumed (Ok) or the queue faulted (Err).
    fn wait(&self, dev: &Dev) -> Result<(), QueueFault> {
        let t0 = Instant::now();
        loop {
            if let Some(QueueStatus::Faulted(f)) = dev.eng.queue_status(self.id) {
                return Err(f);
            }
            if self.ptrs.load_u64(self.ptrs.va()).unwrap() == self.wptr {
                return Ok(());
            }
            assert!(t0.elapsed() < WAIT, "PM4 queue {} did not drain", self.id);
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

fn set(reg: u16, values: &[u32]) -> Pm4Packet<'_> {
    Pm4Packet::SetShReg(pkt3::SetShReg {
        reg_offset: reg,
        values,
    })
}

fn write(addr: u64, data: &[u32]) -> Pm4Packet<'_> {
    Pm4Packet::WriteData(pkt3::WriteData::memory(addr, data))
}

fn kernel_descriptor(dev: &Dev, kd_va: u64) -> KernelDescriptor {
    let w = dev.mem.resolve(dev.id, kd_va, 64).unwrap();
    let mut b = [0u8; 64];
    w.read(kd_va, &mut b).unwrap();
    KernelDescriptor::from_bytes(&b)
}

/// A kernel of a clang-19 code object as a PM4 client programs it: its descriptor and the
/// COMPUTE_PGM_LO/HI (entry >> 8), COMPUTE_PGM_RSRC1/2 and COMPUTE_PGM_RSRC3 values.
struct Kernel {
    kd: KernelDescriptor,
    pgm: [u32; 2],
    rsrc: [u32; 2],
    rsrc3: [u32; 1],
}

impl Kernel {
    fn new(dev: &Dev, kd_va: u64) -> Kernel {
        let kd = kernel_descriptor(dev, kd_va);
        let entry = kd_va.wrapping_add(kd.kernel_code_entry_byte_offset as u64);
        assert_eq!(entry % 256, 0, "COMPUTE_PGM_LO holds address >> 8");
        let pgm = entry >> 8;
        Kernel {
            kd,
            pgm: [pgm as u32, (pgm >> 32) as u32],
            rsrc: [kd.compute_pgm_rsrc1, kd.compute_pgm_rsrc2],
            rsrc3: [kd.compute_pgm_rsrc3],
        }
    }

    /// SET_SH_REGs of the program address and resource registers.
    fn program(&self) -> [Pm4Packet<'_>; 3] {
        [
            set(PGM_LO, &self.pgm),
            set(PGM_RSRC1, &self.rsrc),
            set(PGM_RSRC3, &self.rsrc3),
        ]
    }
}

/// A kernel argument segment: 64-bit pointers, then 32-bit values.
fn kernarg(ptrs: &[u64], values: &[u32]) -> Vec<u8> {
    let mut k = Vec::new();
    for p in ptrs {
        k.extend_from_slice(&p.to_le_bytes());
    }
    for v in values {
        k.extend_from_slice(&v.to_le_bytes());
    }
    k
}

/// The user SGPRs the kernel's descriptor enables, in the order the CP loads them for AQL
/// (what tinygrad fills from the same bits): this kernel reads only the kernarg segment
/// pointer, so the others (private segment buffer, dispatch and queue pointers) are 0.
fn user_data(kd: &KernelDescriptor, kernarg: u64) -> Vec<u32> {
    assert!(kd.has(code_props::ENABLE_SGPR_KERNARG_SEGMENT_PTR));
    assert_eq!(kd.kernarg_preload_length(), 0);
    let mut v = Vec::new();
    for (p, n) in [
        (code_props::ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER, 4),
        (code_props::ENABLE_SGPR_DISPATCH_PTR, 2),
        (code_props::ENABLE_SGPR_QUEUE_PTR, 2),
    ] {
        if kd.has(p) {
            v.extend(std::iter::repeat_n(0, n));
        }
    }
    v.extend([kernarg as u32, (kernarg >> 32) as u32]);
    v.resize(kd.user_sgpr_count() as usize, 0);
    v
}

#[test]
fn dispatch_direct_runs_a_clang_kernel_from_sh_registers() {
    for (target, version) in TARGETS {
        let dev = Dev::new(target, version);
        let m = dev.load("cl/pm4_scale.cl");
        let kern = Kernel::new(&dev, m.kd("pm4_scale"));
        let kd = kern.kd;
        let (gx, gy) = (16u32, 3u32);
        let n = (gx * gy * 64) as usize;
        let input = rand_u32(n, 5);
        let (win, wout) = (dev.upload(&input), dev.alloc(n * 4));
        let mul = 7u32;
        let karg = kernarg(&[win.va(), wout.va()], &[mul]);
        let wk = dev.upload(&karg);
        let fence = dev.alloc(8);
        let ud = user_data(&kd, wk.va());
        let mut q = Pm4Queue::new(&dev);
        let mut packets = kern.program().to_vec();
        packets.extend([
            set(TMPRING_SIZE, &[0]),
            set(NUM_THREAD_X, &[64, 1, 1]),
            set(USER_DATA_0, &ud),
            Pm4Packet::DispatchDirect(pkt3::DispatchDirect {
                dim_x: gx,
                dim_y: gy,
                dim_z: 1,
                dispatch_initiator: INITIATOR,
            }),
            // Ordered after the dispatch: lands only once every work-group finished.
            write(fence.va(), &[0xF00D]),
        ]);
        q.submit(&dev, &packets);
        q.wait(&dev)
            .unwrap_or_else(|f| panic!("{target}: {}", f.reason));
        assert_eq!(fence.load_u32(fence.va()).unwrap(), 0xF00D);
        let out: Vec<u32> = dev.download(&wout, n);
        for i in 0..n {
            let y = (i / 64) as u32 / gx;
            assert_eq!(
                out[i],
                input[i].wrapping_mul(mul).wrapping_add(y),
                "{target} out[{i}]"
            );
        }

        // The same registers stay programmed: a second dispatch needs only new user data.
        let wk2 = dev.upload(&{
            let mut k = karg.clone();
            k[16..20].copy_from_slice(&3u32.to_le_bytes());
            k
        });
        let ud2 = user_data(&kd, wk2.va());
        q.submit(
            &dev,
            &[
                set(USER_DATA_0, &ud2),
                Pm4Packet::DispatchDirect(pkt3::DispatchDirect {
                    dim_x: gx,
                    dim_y: 1,
                    dim_z: 1,
                    dispatch_initiator: INITIATOR,
                }),
            ],
        );
        q.wait(&dev)
            .unwrap_or_else(|f| panic!("{target}: {}", f.reason));
        let out: Vec<u32> = dev.download(&wout, n);
        assert_eq!(out[5], input[5].wrapping_mul(3), "{target}");
        assert_eq!(
            out[(gx * 64) as usize],
            input[(gx * 64) as usize].wrapping_mul(mul).wrapping_add(1),
            "{target}: row 1 was not dispatched again"
        );
    }
}

#[test]
fn bad_sh_registers_and_dispatches_fault_cleanly() {
    let dev = Dev::new("gfx942", 90402);
    let m = dev.load("cl/pm4_scale.cl");
    let kern = Kernel::new(&dev, m.kd("pm4_scale"));
    let kd = kern.kd;
    let dd = Pm4Packet::DispatchDirect(pkt3::DispatchDirect {
        dim_x: 1,
        dim_y: 1,
        dim_z: 1,
        dispatch_initiator: INITIATOR,
    });
    let faulted = |packets: &[Pm4Packet<'_>]| -> String {
        let mut q = Pm4Queue::new(&dev);
        q.submit(&dev, packets);
        match q.wait(&dev) {
            Err(f) => f.reason,
            Ok(()) => panic!("queue did not fault"),
        }
    };
    // Past the end of the SH register space (0x2C00..0x3000).
    let r = faulted(&[set(0x3F8, &[0; 16])]);
    assert!(r.contains("outside the SH register space"), "{r}");
    // No program address.
    let r = faulted(&[set(NUM_THREAD_X, &[64, 1, 1]), dd]);
    assert!(r.contains("no program address"), "{r}");
    // No work-group size.
    let r = faulted(&[set(PGM_LO, &[0x100, 0]), dd]);
    assert!(r.contains("a work-group dimension is 0"), "{r}");
    // A work-group of 2048 work-items (NUM_THREAD_FULL is 10 bits).
    let r = faulted(&[
        set(PGM_LO, &[0x100, 0]),
        set(NUM_THREAD_X, &[512, 4, 1]),
        dd,
    ]);
    assert!(r.contains("exceeds 1024"), "{r}");
    // COMPUTE_SHADER_EN clear.
    let r = faulted(&[
        set(PGM_LO, &[0x100, 0]),
        set(NUM_THREAD_X, &[64, 1, 1]),
        Pm4Packet::DispatchDirect(pkt3::DispatchDirect {
            dim_x: 1,
            dim_y: 1,
            dim_z: 1,
            dispatch_initiator: 0,
        }),
    ]);
    assert!(r.contains("COMPUTE_SHADER_EN"), "{r}");
    // A program address with nothing mapped: the fetch faults, naming the address.
    let r = faulted(&[
        set(PGM_LO, &[0x7_0000, 0]),
        set(PGM_RSRC1, &[kd.compute_pgm_rsrc1, kd.compute_pgm_rsrc2]),
        set(NUM_THREAD_X, &[64, 1, 1]),
        dd,
    ]);
    assert!(r.contains("0x7000000"), "{r}");

    // The device stays usable: a good dispatch on a new queue runs.
    let input: Vec<u32> = (0..64).collect();
    let (win, wout) = (dev.upload(&input), dev.alloc(256));
    let wk = dev.upload(&kernarg(&[win.va(), wout.va()], &[2]));
    let ud = user_data(&kd, wk.va());
    let mut q = Pm4Queue::new(&dev);
    let mut packets = kern.program().to_vec();
    packets.extend([set(NUM_THREAD_X, &[64, 1, 1]), set(USER_DATA_0, &ud), dd]);
    q.submit(&dev, &packets);
    q.wait(&dev).unwrap_or_else(|f| panic!("{}", f.reason));
    let out: Vec<u32> = dev.download(&wout, 64);
    assert_eq!(out, (0..64).map(|i| i * 2).collect::<Vec<u32>>());
}

#[test]
fn an_indirect_buffer_on_every_xcc_dispatches_once() {
    // MI300X-like: 8 XCCs each execute the PM4 of an indirect buffer; a DISPATCH_DIRECT in
    // it is one dispatch whose work-groups the XCCs share, so every work-item runs once.
    let dev = Dev::with_xcc("gfx942", 90402, 8);
    let m = dev.load("cl/pm4_scale.cl");
    let kern = Kernel::new(&dev, m.kd("pm4_count"));
    let count = dev.alloc(8);
    let wk = dev.upload(&kernarg(&[count.va()], &[]));
    let ud = user_data(&kern.kd, wk.va());
    let mut body = kern.program().to_vec();
    body.extend([
        set(NUM_THREAD_X, &[64, 1, 1]),
        set(USER_DATA_0, &ud),
        Pm4Packet::DispatchDirect(pkt3::DispatchDirect {
            dim_x: 5,
            dim_y: 1,
            dim_z: 1,
            dispatch_initiator: INITIATOR,
        }),
    ]);
    let mut words = Vec::new();
    for p in &body {
        let mut v = vec![0; p.dwords(GfxFamily::Gfx9)];
        p.encode(GfxFamily::Gfx9, &mut v).unwrap();
        words.extend(v);
    }
    let ib = dev.upload(&words);
    let mut q = Pm4Queue::new(&dev);
    q.submit(
        &dev,
        &[
            Pm4Packet::IndirectBuffer(pkt3::IndirectBuffer {
                addr: ib.va(),
                size_dw: words.len() as u32,
                chain: false,
                offload_polling: false,
                volatile: false,
                valid: true,
                vmid: 0,
                cache_policy: CachePolicy::Lru,
                pre_resume: false,
                priv_: false,
            }),
            // The ring's read pointer passes the INDIRECT_BUFFER packet when the IB starts:
            // this write lands after the IB ran on every XCC.
            write(count.va() + 4, &[1]),
        ],
    );
    q.wait(&dev).unwrap_or_else(|f| panic!("{}", f.reason));
    assert_eq!(count.load_u32(count.va() + 4).unwrap(), 1);
    assert_eq!(count.load_u32(count.va()).unwrap(), 5 * 64);
}

/// PM4 DISPATCH_DIRECT with scratch: COMPUTE_TMPRING_SIZE gives the wave slots and wave
/// size, the client's scratch V# and (gfx90a) flat scratch init come in USER_DATA, and on
/// gfx942 (architected flat scratch) COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI gives the wave
/// scratch base, as tinygrad programs them. Each lane's private array lands in the
/// client's scratch memory at slot x wave bytes + element x 256 + lane x 4. On gfx942 a
/// dispatch without COMPUTE_DISPATCH_SCRATCH_BASE faults the queue, naming the register.
#[test]
fn dispatch_direct_with_scratch_uses_the_tmpring_slots_and_the_scratch_base() {
    for (target, version) in TARGETS {
        let dev = Dev::new(target, version);
        let m = dev.load("cl/scratch_layout.cl");
        let kern = Kernel::new(&dev, m.kd("scratch_layout"));
        let kd = kern.kd;
        let private = kd.private_segment_fixed_size.next_multiple_of(16);
        let wave_bytes = (private as u64 * 64).next_multiple_of(1024);
        let waves = 4u64;
        let scratch = dev.alloc((waves * wave_bytes) as usize);
        let base = scratch.va();
        let n = 128usize;
        let wout = dev.alloc(n * 4);
        let sel = 3u32;
        let mut karg = kernarg(&[wout.va()], &[sel]);
        // Code object v5 hidden arguments from offset 16: block counts (u32 x3), group
        // sizes (u16 x3).
        karg.resize(256, 0);
        for d in 0..3 {
            karg[16 + 4 * d..20 + 4 * d].copy_from_slice(&1u32.to_le_bytes());
            let g: u16 = if d == 0 { 128 } else { 1 };
            karg[28 + 2 * d..30 + 2 * d].copy_from_slice(&g.to_le_bytes());
        }
        let wk = dev.upload(&karg);
        let mut ud = Vec::new();
        for (p, words) in [
            (
                code_props::ENABLE_SGPR_PRIVATE_SEGMENT_BUFFER,
                vec![
                    base as u32,
                    ((base >> 32) as u32 & 0xFFFF) | 1 << 31,
                    (waves * wave_bytes) as u32,
                    0x00EA_4FAC,
                ],
            ),
            (code_props::ENABLE_SGPR_DISPATCH_PTR, vec![0, 0]),
            (code_props::ENABLE_SGPR_QUEUE_PTR, vec![0, 0]),
            (
                code_props::ENABLE_SGPR_KERNARG_SEGMENT_PTR,
                vec![wk.va() as u32, (wk.va() >> 32) as u32],
            ),
            (code_props::ENABLE_SGPR_DISPATCH_ID, vec![0, 0]),
            (
                code_props::ENABLE_SGPR_FLAT_SCRATCH_INIT,
                vec![base as u32, (base >> 32) as u32],
            ),
        ] {
            if kd.has(p) {
                ud.extend(words);
            }
        }
        ud.resize(kd.user_sgpr_count() as usize, 0);
        let tmpring = [waves as u32 | ((wave_bytes / 1024) as u32) << 12];
        // Mesa `radv_emit_compute_scratch`: LO = address >> 8, HI = address >> 40.
        let scratch_base = [(base >> 8) as u32, (base >> 40) as u32];
        let dd = Pm4Packet::DispatchDirect(pkt3::DispatchDirect {
            dim_x: 1,
            dim_y: 1,
            dim_z: 1,
            dispatch_initiator: INITIATOR,
        });
        let fence = dev.alloc(8);
        let mut packets = kern.program().to_vec();
        packets.extend([
            set(TMPRING_SIZE, &tmpring),
            set(NUM_THREAD_X, &[128, 1, 1]),
            set(USER_DATA_0, &ud),
        ]);
        if target == "gfx942" {
            // Without the architected flat scratch base the waves have no scratch.
            let mut q = Pm4Queue::new(&dev);
            let mut no_base = packets.clone();
            no_base.push(dd);
            q.submit(&dev, &no_base);
            let f = q.wait(&dev).expect_err("gfx942 PM4 scratch without a base");
            assert!(
                f.reason.contains("COMPUTE_DISPATCH_SCRATCH_BASE_LO/HI"),
                "{}",
                f.reason
            );
            packets.push(set(DISPATCH_SCRATCH_BASE_LO, &scratch_base));
        }
        packets.extend([dd, write(fence.va(), &[0xF00D])]);
        let mut q = Pm4Queue::new(&dev);
        q.submit(&dev, &packets);
        q.wait(&dev)
            .unwrap_or_else(|f| panic!("{target}: {}", f.reason));
        assert_eq!(fence.load_u32(fence.va()).unwrap(), 0xF00D);
        let out: Vec<u32> = dev.download(&wout, n);
        for id in 0..n as u32 {
            assert_eq!(out[id as usize], id * 16 + ((id + sel) & 15) + 0x1000);
        }
        let words: Vec<u32> = dev.download(&scratch, (2 * wave_bytes / 4) as usize);
        let first = (0..(wave_bytes / 256) as usize)
            .find(|d| words[d * 64] == 0x1000)
            .expect("a[0] of work-item 0 in the client's scratch");
        for id in 0..n {
            let (slot, lane) = (id / 64, id % 64);
            for k in 0..16 {
                let at = slot * (wave_bytes as usize / 4) + (first + k) * 64 + lane;
                assert_eq!(
                    words[at],
                    (id * 16 + k) as u32 + 0x1000,
                    "{target} {id} a[{k}]"
                );
            }
        }
    }
}
