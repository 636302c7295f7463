//! vmm: virtual memory management (address reservations, physical allocations, mappings,
//! access, shareable handles) built on VRAM BOs, dmabuf export/import and GPU mappings.

use std::os::fd::AsFd;

use kfdrt::{
    AccessDesc, AccessFlags, ErrorKind, GranularityOption, HandleType, Location, MemAllocationProp,
    MemoryKind,
};

use super::{
    ensure, pass, pass_with, read_via_gpu, write_via_gpu, Check, CheckResult, Ctx, Drain, OrFail,
};

const G2: usize = 2 << 20;

/// The VMM checks.
pub fn checks() -> Vec<Check> {
    vec![
        Check {
            name: "vmm.alias_two_mappings",
            what: "one physical allocation mapped at two reserved addresses shows the same bytes to the CPU and the GPU",
            run: alias_two_mappings,
        },
        Check {
            name: "vmm.access_roundtrip",
            what: "setAccess read-write / none reads back through getAccess; granularity 4 KiB min, 2 MiB recommended",
            run: access_roundtrip,
        },
        Check {
            name: "vmm.errors",
            what: "documented errors: flags, offset, partial map, unreserved address, unknown handle, mapArrayAsync",
            run: errors,
        },
        Check {
            name: "vmm.export_import",
            what: "a dmabuf exported from a handle and imported again maps to the same bytes",
            run: export_import,
        },
    ]
}

fn prop() -> MemAllocationProp {
    MemAllocationProp::device(0, HandleType::PosixFileDescriptor)
}

fn rw() -> [AccessDesc; 1] {
    [AccessDesc::new(Location::Gpu(0), AccessFlags::ReadWrite)]
}

fn alias_two_mappings(ctx: &Ctx) -> CheckResult {
    let d = &ctx.dev;
    let h = d.mem_create(G2, &prop(), 0).or_fail("memCreate")?;
    let a = d
        .mem_address_reserve(G2, 0, 0, 0)
        .or_fail("addressReserve")?;
    let b = d
        .mem_address_reserve(G2, 0, 0, 0)
        .or_fail("addressReserve")?;
    d.mem_map(a, G2, 0, h, 0).or_fail("memMap a")?;
    d.mem_map(b, G2, 0, h, 0).or_fail("memMap b")?;
    d.mem_set_access(a, G2, &rw()).or_fail("setAccess a")?;
    d.mem_set_access(b, G2, &rw()).or_fail("setAccess b")?;
    let v = d.alloc(MemoryKind::Device, 0, 4096).or_fail("alloc")?;
    let s = d.create_stream(0).or_fail("create_stream")?;
    // The VMM mappings are unmapped only after the synchronize; an early exit leaks them.
    let _drain = Drain::streams(&[&s]);
    write_via_gpu(d, 0, v.va(), &[0x5a; 4096])?;
    s.memcpy(a + 8192, v.va(), 4096).or_fail("memcpy into a")?;
    s.memset(b + 4096, 0x77, 64).or_fail("memset b")?;
    s.synchronize().or_fail("synchronize")?;
    // Read each alias through the GPU: VMM memory is CPU-visible only on large BAR.
    let mut got = read_via_gpu(d, 0, b + 8192, 2)?;
    got.extend(read_via_gpu(d, 0, a + 4096, 2)?);
    d.mem_unmap(a, G2).or_fail("unmap a")?;
    d.mem_unmap(b, G2).or_fail("unmap b")?;
    d.mem_release(h).or_fail("release")?;
    d.mem_address_free(a, G2).or_fail("free a")?;
    d.mem_address_free(b, G2).or_fail("free b")?;
    ensure!(
        got == [0x5a, 0x5a, 0x77, 0x77],
        "bytes through the other mapping: {got:x?}"
    );
    pass()
}

fn access_roundtrip(ctx: &Ctx) -> CheckResult {
    let d = &ctx.dev;
    let p = prop();
    let min = d
        .mem_get_allocation_granularity(&p, GranularityOption::Minimum)
        .or_fail("granularity")?;
    let rec = d
        .mem_get_allocation_granularity(&p, GranularityOption::Recommended)
        .or_fail("granularity")?;
    ensure!(
        min == 4096 && rec == G2,
        "granularity min {min} recommended {rec}"
    );
    let h = d.mem_create(G2, &p, 0).or_fail("memCreate")?;
    let r = d
        .mem_address_reserve(G2, 0, 0, 0)
        .or_fail("addressReserve")?;
    d.mem_map(r, G2, 0, h, 0).or_fail("memMap")?;
    let loc = Location::Gpu(0);
    let g0 = d.mem_get_access(loc, r).or_fail("getAccess")?;
    d.mem_set_access(r, G2, &rw()).or_fail("setAccess rw")?;
    let g1 = d.mem_get_access(loc, r + 100).or_fail("getAccess")?;
    let none = [AccessDesc::new(loc, AccessFlags::None)];
    d.mem_set_access(r, G2, &none).or_fail("setAccess none")?;
    let g2 = d.mem_get_access(loc, r).or_fail("getAccess")?;
    d.mem_unmap(r, G2).or_fail("unmap")?;
    d.mem_release(h).or_fail("release")?;
    d.mem_address_free(r, G2).or_fail("free")?;
    ensure!(
        (g0, g1, g2) == (AccessFlags::None, AccessFlags::ReadWrite, AccessFlags::None),
        "access read back {g0:?}, {g1:?}, {g2:?}"
    );
    pass_with(format!("granularity {min} / {rec}"))
}

fn errors(ctx: &Ctx) -> CheckResult {
    let d = &ctx.dev;
    let h = d.mem_create(G2, &prop(), 0).or_fail("memCreate")?;
    let r = d
        .mem_address_reserve(G2, 0, 0, 0)
        .or_fail("addressReserve")?;
    let s = d.create_stream(0).or_fail("create_stream")?;
    let cases: [(&str, kfdrt::Result<()>, ErrorKind); 6] = [
        (
            "reserve flags",
            d.mem_address_reserve(G2, 0, 0, 1).map(|_| ()),
            ErrorKind::InvalidValue,
        ),
        (
            "map offset",
            d.mem_map(r, G2, 4096, h, 0),
            ErrorKind::InvalidValue,
        ),
        (
            "map flags",
            d.mem_map(r, G2, 0, h, 1),
            ErrorKind::InvalidValue,
        ),
        (
            "partial map",
            d.mem_map(r, 4096, 0, h, 0),
            ErrorKind::NotSupported,
        ),
        (
            "unmap unmapped",
            d.mem_unmap(r, G2),
            ErrorKind::InvalidValue,
        ),
        (
            "mapArrayAsync",
            d.mem_map_array_async(1, &s),
            ErrorKind::NotSupported,
        ),
    ];
    let _ = d.mem_release(h);
    let _ = d.mem_address_free(r, G2);
    for (what, res, want) in cases {
        ensure!(
            res.as_ref().is_err_and(|e| e.kind() == want),
            "{what}: {res:?}, expected {want:?}"
        );
    }
    let e = d.mem_release(h);
    ensure!(
        e.as_ref()
            .is_err_and(|e| e.kind() == ErrorKind::InvalidValue),
        "release of a freed handle: {e:?}"
    );
    pass()
}

fn export_import(ctx: &Ctx) -> CheckResult {
    let d = &ctx.dev;
    let h = d.mem_create(G2, &prop(), 0).or_fail("memCreate")?;
    let fd = d
        .mem_export_to_shareable_handle(h, HandleType::PosixFileDescriptor, 0)
        .or_fail("export")?;
    let h2 = d
        .mem_import_from_shareable_handle(fd.as_fd(), HandleType::PosixFileDescriptor)
        .or_fail("import")?;
    let r = d
        .mem_address_reserve(2 * G2, 0, 0, 0)
        .or_fail("addressReserve")?;
    d.mem_map(r, G2, 0, h, 0).or_fail("map")?;
    d.mem_map(r + G2 as u64, G2, 0, h2, 0)
        .or_fail("map imported")?;
    d.mem_set_access(r, 2 * G2, &rw()).or_fail("setAccess")?;
    // Through the GPU: VMM memory is CPU-visible only on large-BAR boards.
    let got =
        write_via_gpu(d, 0, r, b"dmabuf!!").and_then(|()| read_via_gpu(d, 0, r + G2 as u64, 8));
    d.mem_unmap(r, 2 * G2).or_fail("unmap")?;
    d.mem_release(h).or_fail("release")?;
    d.mem_release(h2).or_fail("release imported")?;
    d.mem_address_free(r, 2 * G2).or_fail("free")?;
    let got = got?;
    ensure!(got == b"dmabuf!!", "imported mapping shows {got:x?}");
    pass()
}
