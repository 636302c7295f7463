//! managed: managed memory on KFD SVM (hipMallocManaged, memPrefetchAsync, memAdvise,
//! memRangeGetAttribute, streamAttachMemAsync) through the runtime.

use std::sync::atomic::Ordering;

use kfdrt::managed::{Attachment, CoherencyMode};
use kfdrt::{AttachFlags, ErrorKind, Location, MemoryAdvise, MemoryKind};

use super::{
    ensure, hold, pass, pass_with, pattern, read_via_gpu, Check, CheckResult, Ctx, Drain, OrFail,
};

/// The managed-memory checks.
pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "managed.prefetch_roundtrip",
            what: "bytes survive prefetch to the GPU (which reads them) and back to the host; last prefetch location reads back",
            run: prefetch_roundtrip,
        },
        Check {
            name: "managed.prefetch_stream_order",
            what: "a prefetch behind a blocked wait-value takes effect only after the wait is released",
            run: prefetch_stream_order,
        },
        Check {
            name: "managed.advise_readback",
            what: "every memAdvise reads back through memRangeGetAttribute; mixed ranges give the undefined values",
            run: advise_readback,
        },
        Check {
            name: "managed.attach_rules",
            what: "streamAttachMemAsync: length, null-stream and flag rules; association replaced and reverted on stream destroy",
            run: attach_rules,
        },
    ]
}

fn prefetch_roundtrip(ctx: &Ctx) -> CheckResult {
    let d = &ctx.dev;
    let n = 4 << 20;
    let m = d
        .malloc_managed(n, AttachFlags::GLOBAL)
        .or_fail("malloc_managed")?;
    let p = pattern(n, 5);
    m.write(0, &p).or_fail("write")?;
    let v = d.alloc(MemoryKind::Device, 0, n).or_fail("alloc VRAM")?;
    let s = d.create_stream(0).or_fail("create_stream")?;
    let _drain = Drain::streams(&[&s]);
    d.mem_prefetch_async(m.ptr(), n, Location::Gpu(0), &s)
        .or_fail("prefetch to GPU 0")?;
    s.memcpy(v.va(), m.ptr(), n as u64).or_fail("memcpy")?;
    s.synchronize().or_fail("synchronize")?;
    let a = d.mem_range_attributes(m.ptr(), n).or_fail("attributes")?;
    ensure!(
        a.last_prefetch_location == Some(Location::Gpu(0)),
        "last prefetch location {:?} after prefetch to GPU 0",
        a.last_prefetch_location
    );
    let mut got = read_via_gpu(d, 0, v.va(), n)?;
    ensure!(got == p, "the GPU read different bytes after the prefetch");
    d.mem_prefetch_async(m.ptr(), n, Location::Host, &s)
        .or_fail("prefetch to host")?;
    s.synchronize().or_fail("synchronize")?;
    m.read(0, &mut got).or_fail("read")?;
    ensure!(got == p, "bytes changed across GPU -> host prefetch");
    let a = d.mem_range_attributes(m.ptr(), n).or_fail("attributes")?;
    ensure!(
        a.last_prefetch_location == Some(Location::Host),
        "last prefetch location {:?} after prefetch to host",
        a.last_prefetch_location
    );
    pass_with(format!(
        "{} MiB, XNACK {}",
        n >> 20,
        if d.xnack_enabled() { "on" } else { "off" }
    ))
}

fn prefetch_stream_order(ctx: &Ctx) -> CheckResult {
    let d = &ctx.dev;
    let m = d
        .malloc_managed(65536, AttachFlags::GLOBAL)
        .or_fail("malloc_managed")?;
    let flag = d
        .alloc(MemoryKind::Signal, 0, 4096)
        .or_fail("alloc signal memory")?;
    let cell = flag.atomic_u32(0).or_fail("atomic")?;
    let s = d.create_stream(0).or_fail("create_stream")?;
    let _drain = Drain::streams(&[&s]).open(|| cell.store(1, Ordering::Release));
    hold(&s, flag.va())?;
    d.mem_prefetch_async(m.ptr(), m.len(), Location::Gpu(0), &s)
        .or_fail("prefetch")?;
    std::thread::sleep(std::time::Duration::from_millis(20));
    let before = d
        .mem_range_attributes(m.ptr(), m.len())
        .or_fail("attributes")?;
    ensure!(
        before.last_prefetch_location.is_none(),
        "prefetch took effect before the stream's earlier work ({:?})",
        before.last_prefetch_location
    );
    cell.store(1, Ordering::Release);
    s.synchronize().or_fail("synchronize")?;
    let after = d
        .mem_range_attributes(m.ptr(), m.len())
        .or_fail("attributes")?;
    ensure!(
        after.last_prefetch_location == Some(Location::Gpu(0)),
        "prefetch did not take effect after the wait ({:?})",
        after.last_prefetch_location
    );
    pass()
}

fn advise_readback(ctx: &Ctx) -> CheckResult {
    let d = &ctx.dev;
    let m = d
        .malloc_managed(4 * 4096, AttachFlags::GLOBAL)
        .or_fail("malloc_managed")?;
    let (p, n) = (m.ptr(), m.len());
    let adv = |a: MemoryAdvise, dev: Location, len: usize| {
        d.mem_advise(p, len, a, dev)
            .or_fail(&format!("{a:?}({dev:?})"))
    };
    let get = |len: usize| d.mem_range_attributes(p, len).or_fail("attributes");
    adv(MemoryAdvise::SetReadMostly, Location::Gpu(0), n)?;
    ensure!(get(n)?.read_mostly, "read mostly not set");
    adv(MemoryAdvise::UnsetReadMostly, Location::Gpu(0), n)?;
    ensure!(!get(n)?.read_mostly, "read mostly not cleared");
    adv(MemoryAdvise::SetPreferredLocation, Location::Gpu(0), n)?;
    ensure!(
        get(n)?.preferred_location == Some(Location::Gpu(0)),
        "preferred location not GPU 0"
    );
    adv(MemoryAdvise::SetPreferredLocation, Location::Host, n)?;
    ensure!(
        get(n)?.preferred_location == Some(Location::Host),
        "preferred location not the CPU"
    );
    adv(MemoryAdvise::UnsetPreferredLocation, Location::Gpu(0), n)?;
    ensure!(
        get(n)?.preferred_location.is_none(),
        "preferred location not unset"
    );
    adv(MemoryAdvise::SetAccessedBy, Location::Gpu(0), n)?;
    adv(MemoryAdvise::SetAccessedBy, Location::Host, n)?;
    let a = get(n)?.accessed_by;
    ensure!(
        a == vec![Location::Gpu(0), Location::Host],
        "accessed by {a:?}, expected [0, -1]"
    );
    adv(MemoryAdvise::UnsetAccessedBy, Location::Gpu(0), n)?;
    adv(MemoryAdvise::UnsetAccessedBy, Location::Host, n)?;
    let a = get(n)?.accessed_by;
    ensure!(a.is_empty(), "accessed by {a:?} after unset");
    adv(MemoryAdvise::SetCoarseGrain, Location::Gpu(0), n)?;
    ensure!(
        get(n)?.coherency == CoherencyMode::CoarseGrain,
        "not coarse grained"
    );
    adv(MemoryAdvise::UnsetCoarseGrain, Location::Gpu(0), n)?;
    ensure!(
        get(n)?.coherency == CoherencyMode::FineGrain,
        "not fine grained"
    );
    // Mixed: the first half advised.
    adv(MemoryAdvise::SetPreferredLocation, Location::Gpu(0), n / 2)?;
    adv(MemoryAdvise::SetCoarseGrain, Location::Gpu(0), n / 2)?;
    adv(MemoryAdvise::SetReadMostly, Location::Gpu(0), n / 2)?;
    let w = get(n)?;
    ensure!(
        w.preferred_location.is_none()
            && w.coherency == CoherencyMode::Indeterminate
            && !w.read_mostly,
        "mixed range read back {w:?}"
    );
    let e = d.mem_advise(
        p,
        n,
        MemoryAdvise::SetPreferredLocation,
        Location::Gpu(d.gpus().len()),
    );
    ensure!(
        e.as_ref()
            .is_err_and(|e| e.kind() == ErrorKind::InvalidDevice),
        "bad device: {e:?}"
    );
    pass()
}

fn attach_rules(ctx: &Ctx) -> CheckResult {
    let d = &ctx.dev;
    let m = d
        .malloc_managed(8192, AttachFlags::GLOBAL)
        .or_fail("malloc_managed")?;
    // No drain: nothing is queued before the synchronize below (the refused calls
    // enqueue nothing), and the stream is destroyed after it.
    let s = d.create_stream(0).or_fail("create_stream")?;
    let null = d.null_stream(0).or_fail("null_stream")?;
    let bad = [
        (
            "single on the null stream",
            null.attach_mem_async(m.ptr(), 0, AttachFlags::SINGLE),
        ),
        (
            "partial length",
            s.attach_mem_async(m.ptr(), 4096, AttachFlags::SINGLE),
        ),
        (
            "flags 0",
            s.attach_mem_async(m.ptr(), 0, AttachFlags::empty()),
        ),
        (
            "null pointer",
            s.attach_mem_async(0, 0, AttachFlags::GLOBAL),
        ),
    ];
    for (what, r) in bad {
        ensure!(
            r.as_ref()
                .is_err_and(|e| e.kind() == ErrorKind::InvalidValue),
            "{what}: {r:?}"
        );
    }
    s.attach_mem_async(m.ptr(), m.len(), AttachFlags::SINGLE)
        .or_fail("attach single")?;
    s.synchronize().or_fail("synchronize")?;
    ensure!(
        d.mem_attached_to(m.ptr(), &s).or_fail("attached_to")?,
        "not attached to the stream"
    );
    drop(s);
    let a = d.mem_attachment(m.ptr()).or_fail("attachment")?;
    ensure!(
        a == Attachment::Global,
        "association {a:?} after the stream was destroyed"
    );
    pass()
}
