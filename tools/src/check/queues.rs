//! queues: CREATE_QUEUE argument checks with the kernel's errno, queue ids, stream
//! priorities and CU masks.

use kfd::abi::{self, CreateQueueArgs};
use kfd::Errno;
use kfdrt::{Buffer, ErrorKind, MemoryKind, StreamFlags};

use super::raw::{RawAql, RawSdma};
use super::{ensure, pass, pass_with, Check, CheckResult, Ctx, OrFail};

/// The queue checks.
pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "queues.ring_not_pow2_einval",
            what: "CREATE_QUEUE with a ring size that is not a power of two fails with EINVAL",
            run: ring_not_pow2,
        },
        Check {
            name: "queues.bad_priority_percentage_einval",
            what: "CREATE_QUEUE with priority 16 or percentage 101 fails with EINVAL",
            run: bad_priority,
        },
        Check {
            name: "queues.cwsr_size_checked",
            what: "an AQL queue with a wrong control-stack size is rejected (EINVAL); the kernel's sizes work",
            run: cwsr_size_checked,
        },
        Check {
            name: "queues.ids_unique_destroy_once",
            what: "queue ids are distinct; DESTROY_QUEUE works once, then fails with EINVAL",
            run: ids_unique,
        },
        Check {
            name: "queues.stream_priority_clamp",
            what: "priority range is (1, -1); out-of-range stream priorities are clamped",
            run: priority_clamp,
        },
        Check {
            name: "queues.cu_mask_roundtrip",
            what: "a stream's CU mask reads back as set (bits beyond the CU count dropped); an empty mask is rejected",
            run: cu_mask_roundtrip,
        },
    ]
}

struct Bufs {
    ring: Buffer,
    ptrs: Buffer,
}

fn bufs(ctx: &Ctx) -> Result<Bufs, String> {
    Ok(Bufs {
        ring: ctx
            .dev
            .alloc(MemoryKind::HostPinned, 0, 8192)
            .or_fail("ring")?,
        ptrs: ctx
            .dev
            .alloc(MemoryKind::Signal, 0, 4096)
            .or_fail("pointers")?,
    })
}

fn sdma_args(ctx: &Ctx, b: &Bufs) -> CreateQueueArgs {
    CreateQueueArgs {
        ring_base_address: b.ring.va(),
        read_pointer_address: b.ptrs.va(),
        write_pointer_address: b.ptrs.va() + 8,
        ring_size: 8192,
        gpu_id: ctx.gpu_id(0),
        queue_type: abi::KFD_IOC_QUEUE_TYPE_SDMA,
        queue_percentage: 100,
        queue_priority: 7,
        ..Default::default()
    }
}

fn expect_einval(ctx: &Ctx, mut a: CreateQueueArgs, what: &str) -> Result<(), String> {
    match kfd::ioctl::create_queue(ctx.backend(), &mut a) {
        Ok(()) => {
            let _ = kfd::ioctl::destroy_queue(ctx.backend(), a.queue_id);
            Err(format!("{what}: CREATE_QUEUE succeeded"))
        }
        Err(e) if e.errno == Errno::INVAL => Ok(()),
        Err(e) => Err(format!("{what}: want EINVAL, got {e}")),
    }
}

fn ring_not_pow2(ctx: &Ctx) -> CheckResult {
    let b = bufs(ctx)?;
    let mut a = sdma_args(ctx, &b);
    a.ring_size = 6144;
    expect_einval(ctx, a, "ring_size 6144")?;
    pass()
}

fn bad_priority(ctx: &Ctx) -> CheckResult {
    let b = bufs(ctx)?;
    let mut a = sdma_args(ctx, &b);
    a.queue_priority = 16;
    expect_einval(ctx, a, "priority 16")?;
    let mut a = sdma_args(ctx, &b);
    a.queue_percentage = 101;
    expect_einval(ctx, a, "percentage 101")?;
    pass()
}

fn cwsr_size_checked(ctx: &Ctx) -> CheckResult {
    let g = &ctx.dev.gpus()[0];
    let sizes = kfd::cwsr::queue_sizes(&g.node.properties)
        .ok_or_else(|| format!("GPU {:#x} has no CWSR sizes", g.gpu_id))?;
    let ring = ctx
        .dev
        .alloc(MemoryKind::HostPinned, 0, 4096)
        .or_fail("ring")?;
    let ptrs = ctx
        .dev
        .alloc(MemoryKind::Signal, 0, 4096)
        .or_fail("pointers")?;
    let cwsr = ctx
        .dev
        .alloc(
            MemoryKind::HostPinned,
            0,
            sizes.cwsr_bo_size(sizes.cwsr_size) as usize,
        )
        .or_fail("CWSR")?;
    let a = CreateQueueArgs {
        ring_base_address: ring.va(),
        read_pointer_address: ptrs.va() + 128,
        write_pointer_address: ptrs.va() + 56,
        ring_size: 4096,
        gpu_id: g.gpu_id,
        queue_type: abi::KFD_IOC_QUEUE_TYPE_COMPUTE_AQL,
        queue_percentage: 100,
        queue_priority: 7,
        ctx_save_restore_address: cwsr.va(),
        ctx_save_restore_size: sizes.cwsr_size,
        ctl_stack_size: sizes.ctl_stack_size + 4096,
        ..Default::default()
    };
    expect_einval(ctx, a, "ctl_stack_size + 4096")?;
    // The kernel's own sizes (RawAql) are accepted.
    let q = RawAql::new(&ctx.dev, 0, 64).or_fail("AQL queue with the kernel's sizes")?;
    ensure!(
        q.read_index() == 0,
        "fresh queue read index {}",
        q.read_index()
    );
    pass_with(format!(
        "ctl_stack {:#x}, cwsr {:#x}",
        sizes.ctl_stack_size, sizes.cwsr_size
    ))
}

fn ids_unique(ctx: &Ctx) -> CheckResult {
    let qs = (0..3)
        .map(|_| RawSdma::new(&ctx.dev, 0, 4096))
        .collect::<Result<Vec<_>, _>>()?;
    let mut ids: Vec<u32> = qs.iter().map(|q| q.queue_id).collect();
    ids.sort_unstable();
    ids.dedup();
    ensure!(ids.len() == 3, "queue ids not distinct: {:?}", ids);
    let id = qs[1].queue_id;
    kfd::ioctl::destroy_queue(ctx.backend(), id).or_fail("DESTROY_QUEUE")?;
    match kfd::ioctl::destroy_queue(ctx.backend(), id) {
        Ok(()) => Err(format!("second DESTROY_QUEUE of {id} succeeded")),
        Err(e) if e.errno == Errno::INVAL => pass_with(format!("ids {ids:?}")),
        Err(e) => Err(format!("want EINVAL, got {e}")),
    }
}

fn priority_clamp(ctx: &Ctx) -> CheckResult {
    let (least, greatest) = ctx.dev.stream_priority_range();
    ensure!(
        (least, greatest) == (1, -1),
        "priority range ({least}, {greatest}), want (1, -1)"
    );
    for (asked, want) in [(5, 1), (1, 1), (0, 0), (-1, -1), (-9, -1)] {
        let s = ctx
            .dev
            .create_stream_with_priority(0, StreamFlags::DEFAULT, asked)
            .or_fail("create_stream_with_priority")?;
        ensure!(
            s.priority() == want,
            "priority {asked} reads back {}, want {want}",
            s.priority()
        );
    }
    pass()
}

fn cu_mask_roundtrip(ctx: &Ctx) -> CheckResult {
    let cus = ctx.dev.gpus()[0].cu_count() as usize;
    let words = cus.div_ceil(32);
    let mask: Vec<u32> = (0..words + 1).map(|_| 0x5555_5555).collect();
    let s = ctx
        .dev
        .create_stream_with_cu_mask(0, &mask)
        .or_fail("create_stream_with_cu_mask")?;
    let mut out = vec![0u32; words];
    s.cu_mask(&mut out).or_fail("cu_mask")?;
    for (i, w) in out.iter().enumerate() {
        let bits = (cus - i * 32).min(32);
        let valid = if bits == 32 {
            u32::MAX
        } else {
            (1 << bits) - 1
        };
        ensure!(
            *w == 0x5555_5555 & valid,
            "word {i} reads {w:#x}, want {:#x}",
            0x5555_5555 & valid
        );
    }
    match ctx.dev.create_stream_with_cu_mask(0, &[]) {
        Ok(_) => Err("an empty CU mask was accepted".into()),
        Err(e) if e.kind() == ErrorKind::InvalidValue => pass_with(format!("{cus} CUs")),
        Err(e) => Err(format!("empty mask: want InvalidValue, got {e}")),
    }
}
