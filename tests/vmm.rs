//! Virtual memory management (seed 003) on the emulated device.

mod common;

use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

use common::emu;
use kfdrt::{
    AccessDesc, AccessFlags, AllocationType, Device, ErrorKind, GranularityOption, HandleType,
    Location, MemAllocFlags, MemAllocationProp, MemoryKind,
};

const MIB: usize = 1 << 20;
const G2: usize = 2 * MIB;

fn prop(gpu: usize) -> MemAllocationProp {
    MemAllocationProp::device(gpu, HandleType::PosixFileDescriptor)
}

fn rw(gpu: usize) -> AccessDesc {
    AccessDesc::new(Location::Gpu(gpu), AccessFlags::ReadWrite)
}

fn kind<T: std::fmt::Debug>(r: kfdrt::Result<T>) -> ErrorKind {
    r.unwrap_err().kind()
}

fn read(addr: u64, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    // SAFETY: the caller passes a live CPU-mapped VMM range of at least n bytes.
    unsafe { core::ptr::copy_nonoverlapping(addr as *const u8, v.as_mut_ptr(), n) };
    v
}

fn write(addr: u64, data: &[u8]) {
    // SAFETY: as in `read`.
    unsafe { core::ptr::copy_nonoverlapping(data.as_ptr(), addr as *mut u8, data.len()) };
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(13).wrapping_add(seed))
        .collect()
}

#[test]
fn granularity() {
    let d = emu("emu:mi300x");
    let p = prop(0);
    assert_eq!(
        d.mem_get_allocation_granularity(&p, GranularityOption::Minimum)
            .unwrap(),
        4096
    );
    assert_eq!(
        d.mem_get_allocation_granularity(&p, GranularityOption::Recommended)
            .unwrap(),
        G2
    );
    // Values HIP does not define have no Rust value (the C ABI reports InvalidValue).
    assert_eq!(GranularityOption::from_raw(2), None);
    assert_eq!(AllocationType::from_raw(0), None); // hipMemAllocationTypeInvalid
    assert_eq!(Location::from_raw(Location::TYPE_INVALID, 0), None);
    assert_eq!(Location::from_raw(Location::TYPE_DEVICE, -1), None);
    for loc in [Location::Host, Location::Gpu(1)] {
        let mut bad = p;
        bad.location = loc;
        assert_eq!(
            kind(d.mem_get_allocation_granularity(&bad, GranularityOption::Minimum)),
            ErrorKind::InvalidValue,
            "{loc:?}"
        );
    }
}

#[test]
fn address_reserve_and_free() {
    let d = emu("emu:mi300x");
    assert_eq!(
        kind(d.mem_address_reserve(G2, 0, 0, 1)),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        kind(d.mem_address_reserve(0, 0, 0, 0)),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        kind(d.mem_address_reserve(4097, 0, 0, 0)),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        kind(d.mem_address_reserve(G2, 3 << 20, 0, 0)),
        ErrorKind::InvalidValue
    );
    let a = d.mem_address_reserve(G2, 0, 0, 0).unwrap();
    assert_eq!(
        a % G2 as u64,
        0,
        "default alignment of a 2 MiB range is 2 MiB"
    );
    let b = d.mem_address_reserve(4096, 1 << 30, 0, 0).unwrap();
    assert_eq!(b % (1 << 30), 0);
    let c = d.mem_address_reserve(8192, 0, 0, 0).unwrap();
    assert_eq!(c % 4096, 0);
    // The reservation is inaccessible address space: mincore-style probe via msync works
    // (mapped), and the range is ours until freed.
    // Fixed-address requests: a free address is honoured, a taken one is not.
    d.mem_address_free(a, G2).unwrap();
    let a2 = d.mem_address_reserve(G2, 0, a, 0).unwrap();
    assert_eq!(a2, a, "free requested address used");
    let a3 = d.mem_address_reserve(G2, 0, a, 0).unwrap();
    assert_ne!(a3, a, "taken address: another one");
    // Free errors.
    assert_eq!(kind(d.mem_address_free(0, G2)), ErrorKind::InvalidValue);
    assert_eq!(kind(d.mem_address_free(a2, 0)), ErrorKind::InvalidValue);
    assert_eq!(kind(d.mem_address_free(a2, 4096)), ErrorKind::InvalidValue);
    assert_eq!(
        kind(d.mem_address_free(a2 + 4096, G2 - 4096)),
        ErrorKind::InvalidValue
    );
    let h = d.mem_create(G2, &prop(0), 0).unwrap();
    d.mem_map(a2, G2, 0, h, 0).unwrap();
    assert_eq!(
        kind(d.mem_address_free(a2, G2)),
        ErrorKind::InvalidValue,
        "mapped"
    );
    d.mem_unmap(a2, G2).unwrap();
    d.mem_release(h).unwrap();
    for (p, n) in [(a2, G2), (a3, G2), (b, 4096), (c, 8192)] {
        d.mem_address_free(p, n).unwrap();
    }
    assert_eq!(
        kind(d.mem_address_free(b, 4096)),
        ErrorKind::InvalidValue,
        "twice"
    );
}

#[test]
fn create_rules_and_vram_accounting() {
    let d = emu("emu:mi300x[vram=64M]");
    let gpu_id = d.gpus()[0].gpu_id;
    let avail = || kfdrt::kfd::ioctl::available_memory(d.backend().as_ref(), gpu_id).unwrap();
    let p = prop(0);
    assert_eq!(kind(d.mem_create(G2, &p, 1)), ErrorKind::InvalidValue);
    assert_eq!(kind(d.mem_create(0, &p, 0)), ErrorKind::InvalidValue);
    assert_eq!(kind(d.mem_create(G2 + 1, &p, 0)), ErrorKind::InvalidValue);
    let mut q = p;
    q.location = Location::Gpu(1);
    assert_eq!(kind(d.mem_create(G2, &q, 0)), ErrorKind::InvalidValue);
    let mut q = p;
    q.location = Location::Host;
    assert_eq!(kind(d.mem_create(G2, &q, 0)), ErrorKind::InvalidValue);
    for t in [HandleType::Win32, HandleType::Win32Kmt] {
        let mut q = p;
        q.requested_handle_type = t;
        assert_eq!(kind(d.mem_create(G2, &q, 0)), ErrorKind::NotSupported);
    }
    assert_eq!(HandleType::from_raw(8), None);
    let mut q = p;
    q.alloc_flags = MemAllocFlags {
        compression_type: 1,
        ..Default::default()
    };
    assert_eq!(kind(d.mem_create(G2, &q, 0)), ErrorKind::NotSupported);
    let mut q = p;
    q.alloc_flags = MemAllocFlags {
        usage: 1,
        ..Default::default()
    };
    assert_eq!(kind(d.mem_create(G2, &q, 0)), ErrorKind::InvalidValue);
    let mut q = p;
    q.alloc_flags = MemAllocFlags {
        gpu_direct_rdma_capable: 1,
        ..Default::default()
    };
    let r = d.mem_create(G2, &q, 0).unwrap();
    assert_eq!(d.mem_get_allocation_properties_from_handle(r).unwrap(), q);
    d.mem_release(r).unwrap();

    let before = avail();
    let h = d.mem_create(8 * MIB, &p, 0).unwrap();
    assert_eq!(before - avail(), 8 * MIB as u64, "VRAM charged at create");
    assert_eq!(kind(d.mem_create(128 * MIB, &p, 0)), ErrorKind::OutOfMemory);
    d.mem_release(h).unwrap();
    assert_eq!(avail(), before, "freed at release");
    assert_eq!(
        kind(d.mem_release(h)),
        ErrorKind::InvalidValue,
        "released twice"
    );
    assert_eq!(
        kind(d.mem_get_allocation_properties_from_handle(h)),
        ErrorKind::InvalidValue
    );
}

#[test]
fn two_mappings_alias_on_cpu_and_gpu() {
    let d = emu("emu:mi300x");
    let h = d.mem_create(G2, &prop(0), 0).unwrap();
    let a = d.mem_address_reserve(G2, 0, 0, 0).unwrap();
    let b = d.mem_address_reserve(2 * G2, 0, 0, 0).unwrap();
    d.mem_map(a, G2, 0, h, 0).unwrap();
    d.mem_map(b + G2 as u64, G2, 0, h, 0).unwrap();
    let b = b + G2 as u64;
    let p = pattern(G2, 1);
    write(a, &p);
    assert_eq!(read(b, G2), p, "same bytes at both addresses");
    write(b + 100, &[9, 9, 9]);
    assert_eq!(read(a + 100, 3), vec![9, 9, 9]);

    // GPU: copy out of one mapping into VRAM and from VRAM into the other mapping.
    d.mem_set_access(a, G2, &[rw(0)]).unwrap();
    d.mem_set_access(b, G2, &[rw(0)]).unwrap();
    let v = d.alloc(MemoryKind::Device, 0, G2).unwrap();
    let s = d.create_stream(0).unwrap();
    s.memcpy(v.va(), b, G2 as u64).unwrap();
    s.synchronize().unwrap();
    let mut got = vec![0u8; G2];
    v.read(0, &mut got).unwrap();
    let mut want = p.clone();
    want[100..103].fill(9);
    assert_eq!(got, want, "GPU read through the second mapping");
    let q = pattern(G2, 77);
    v.write(0, &q).unwrap();
    s.memcpy(a, v.va(), G2 as u64).unwrap();
    s.synchronize().unwrap();
    assert_eq!(
        read(b, G2),
        q,
        "GPU write through the first mapping seen at the second"
    );

    // Retain from an address inside either mapping gives the same handle.
    let r1 = d.mem_retain_allocation_handle(a + 12345).unwrap();
    let r2 = d.mem_retain_allocation_handle(b).unwrap();
    assert_eq!(r1, h);
    assert_eq!(r2, h);
    assert_eq!(
        kind(d.mem_retain_allocation_handle(a + G2 as u64 + 8)),
        ErrorKind::InvalidValue
    );
    for _ in 0..3 {
        d.mem_release(h).unwrap();
    }
    // Released, but still mapped twice: the memory lives.
    assert_eq!(read(a, 4), q[..4].to_vec());
    d.mem_unmap(a, G2).unwrap();
    assert_eq!(read(b, 4), q[..4].to_vec());
    assert!(d.mem_get_allocation_properties_from_handle(h).is_ok());
    d.mem_unmap(b, G2).unwrap();
    assert_eq!(
        kind(d.mem_get_allocation_properties_from_handle(h)),
        ErrorKind::InvalidValue,
        "freed with its last mapping"
    );
}

#[test]
fn map_and_unmap_rules() {
    let d = emu("emu:mi300x");
    let h = d.mem_create(G2, &prop(0), 0).unwrap();
    let small = d.mem_create(4096, &prop(0), 0).unwrap();
    let r = d.mem_address_reserve(2 * G2, 0, 0, 0).unwrap();
    let k = kind::<()>;
    assert_eq!(k(d.mem_map(0, G2, 0, h, 0)), ErrorKind::InvalidValue);
    assert_eq!(k(d.mem_map(r, 0, 0, h, 0)), ErrorKind::InvalidValue);
    assert_eq!(
        k(d.mem_map(r, G2, 4096, h, 0)),
        ErrorKind::InvalidValue,
        "offset"
    );
    assert_eq!(
        k(d.mem_map(r, G2, 0, h, 1)),
        ErrorKind::InvalidValue,
        "flags"
    );
    assert_eq!(
        k(d.mem_map(r + 1, G2, 0, h, 0)),
        ErrorKind::InvalidValue,
        "alignment"
    );
    assert_eq!(
        k(d.mem_map(r, G2 - 4096, 0, h, 0)),
        ErrorKind::NotSupported,
        "partial"
    );
    assert_eq!(
        k(d.mem_map(r, 2 * G2, 0, h, 0)),
        ErrorKind::InvalidValue,
        "beyond the allocation"
    );
    assert_eq!(
        k(d.mem_map(r + G2 as u64 + 4096, G2, 0, h, 0)),
        ErrorKind::InvalidValue,
        "outside the reservation"
    );
    let outside = d.alloc(MemoryKind::HostPinned, 0, G2).unwrap();
    assert_eq!(
        k(d.mem_map(outside.va(), G2, 0, h, 0)),
        ErrorKind::InvalidValue,
        "not reserved"
    );
    let bogus = d.mem_create(4096, &prop(0), 0).unwrap();
    d.mem_release(bogus).unwrap();
    assert_eq!(
        k(d.mem_map(r, 4096, 0, bogus, 0)),
        ErrorKind::InvalidValue,
        "released handle"
    );
    d.mem_map(r, G2, 0, h, 0).unwrap();
    assert_eq!(
        k(d.mem_map(r, G2, 0, h, 0)),
        ErrorKind::InvalidValue,
        "overlap"
    );
    assert_eq!(
        k(d.mem_map(r + 4096, 4096, 0, small, 0)),
        ErrorKind::InvalidValue,
        "overlap inside"
    );
    d.mem_map(r + G2 as u64, 4096, 0, small, 0).unwrap();
    // Unmap must cover whole mappings.
    assert_eq!(k(d.mem_unmap(0, G2)), ErrorKind::InvalidValue);
    assert_eq!(k(d.mem_unmap(r, 0)), ErrorKind::InvalidValue);
    assert_eq!(
        k(d.mem_unmap(r, 4096)),
        ErrorKind::InvalidValue,
        "part of a mapping"
    );
    assert_eq!(k(d.mem_unmap(r + 4096, G2)), ErrorKind::InvalidValue);
    assert_eq!(
        k(d.mem_unmap(r, 2 * G2)),
        ErrorKind::InvalidValue,
        "gap after the small mapping"
    );
    write(r, &[5; 16]);
    d.mem_unmap(r, G2 + 4096).unwrap(); // two whole mappings at once
    assert_eq!(
        k(d.mem_unmap(r, G2)),
        ErrorKind::InvalidValue,
        "already unmapped"
    );
    // Remap: the bytes are still the allocation's.
    d.mem_map(r + G2 as u64, G2, 0, h, 0).unwrap();
    assert_eq!(read(r + G2 as u64, 16), vec![5; 16]);
    d.mem_unmap(r + G2 as u64, G2).unwrap();
    d.mem_release(h).unwrap();
    d.mem_release(small).unwrap();
    d.mem_address_free(r, 2 * G2).unwrap();
}

#[test]
fn set_and_get_access() {
    let d = emu("emu:mi300x*2");
    let h = d.mem_create(G2, &prop(1), 0).unwrap();
    assert_eq!(
        d.mem_get_allocation_properties_from_handle(h)
            .unwrap()
            .location,
        Location::Gpu(1)
    );
    let r = d.mem_address_reserve(G2, 0, 0, 0).unwrap();
    d.mem_map(r, G2, 0, h, 0).unwrap();
    let get = |g: usize| d.mem_get_access(Location::Gpu(g), r + 4096).unwrap();
    assert_eq!((get(0), get(1)), (AccessFlags::None, AccessFlags::None));
    let desc = |g: usize, f: AccessFlags| AccessDesc::new(Location::Gpu(g), f);
    d.mem_set_access(
        r,
        G2,
        &[desc(0, AccessFlags::ReadWrite), desc(1, AccessFlags::Read)],
    )
    .unwrap();
    assert_eq!(
        (get(0), get(1)),
        (AccessFlags::ReadWrite, AccessFlags::Read)
    );

    // Both GPUs reach the memory: GPU 1 (read access) copies out of it.
    write(r, &pattern(4096, 4));
    let v = d.alloc(MemoryKind::Device, 1, 4096).unwrap();
    d.memcpy(1, v.va(), r, 4096).unwrap();
    let mut got = vec![0u8; 4096];
    v.read(0, &mut got).unwrap();
    assert_eq!(got, pattern(4096, 4));

    d.mem_set_access(r, G2, &[desc(1, AccessFlags::None)])
        .unwrap();
    assert_eq!(
        (get(0), get(1)),
        (AccessFlags::ReadWrite, AccessFlags::None)
    );
    // Errors change nothing.
    let k = kind::<()>;
    assert_eq!(k(d.mem_set_access(r, G2, &[])), ErrorKind::InvalidValue);
    assert_eq!(
        k(d.mem_set_access(0, G2, &[rw(0)])),
        ErrorKind::InvalidValue
    );
    assert_eq!(k(d.mem_set_access(r, 0, &[rw(0)])), ErrorKind::InvalidValue);
    assert_eq!(AccessFlags::from_raw(2), None);
    assert_eq!(
        k(d.mem_set_access(
            r,
            G2,
            &[
                desc(1, AccessFlags::ReadWrite),
                desc(2, AccessFlags::ReadWrite)
            ]
        )),
        ErrorKind::InvalidValue
    );
    assert_eq!(get(1), AccessFlags::None, "nothing applied on error");
    let host = AccessDesc::new(Location::Host, AccessFlags::ReadWrite);
    assert_eq!(k(d.mem_set_access(r, G2, &[host])), ErrorKind::InvalidValue);
    assert_eq!(
        k(d.mem_set_access(r, 4096, &[rw(0)])),
        ErrorKind::InvalidValue,
        "part of a mapping"
    );
    let unmapped = d.mem_address_reserve(G2, 0, 0, 0).unwrap();
    assert_eq!(
        k(d.mem_set_access(unmapped, G2, &[rw(0)])),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        kind(d.mem_get_access(Location::Gpu(0), unmapped)),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        kind(d.mem_get_access(Location::Gpu(2), r)),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        kind(d.mem_get_access(Location::Host, r)),
        ErrorKind::InvalidValue
    );
    // Unmap drops the access; a new mapping starts with none.
    d.mem_unmap(r, G2).unwrap();
    d.mem_map(r, G2, 0, h, 0).unwrap();
    assert_eq!(get(0), AccessFlags::None);
    d.mem_unmap(r, G2).unwrap();
    d.mem_release(h).unwrap();
}

#[test]
fn export_import_in_process() {
    let d = emu("emu:mi300x");
    let h = d.mem_create(G2, &prop(0), 0).unwrap();
    let none = d
        .mem_create(G2, &MemAllocationProp::device(0, HandleType::None), 0)
        .unwrap();
    assert_eq!(
        kind(d.mem_export_to_shareable_handle(h, HandleType::PosixFileDescriptor, 1)),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        kind(d.mem_export_to_shareable_handle(h, HandleType::Win32, 0)),
        ErrorKind::NotSupported
    );
    assert_eq!(HandleType::from_raw(9), None);
    assert_eq!(
        kind(d.mem_export_to_shareable_handle(none, HandleType::PosixFileDescriptor, 0)),
        ErrorKind::InvalidValue,
        "not exportable"
    );
    let fd = d
        .mem_export_to_shareable_handle(h, HandleType::PosixFileDescriptor, 0)
        .unwrap();
    assert_eq!(
        kind(d.mem_import_from_shareable_handle(fd.as_fd(), HandleType::Win32Kmt)),
        ErrorKind::NotSupported
    );
    let devnull = std::fs::File::open("/dev/null").unwrap();
    assert_eq!(
        kind(d.mem_import_from_shareable_handle(devnull.as_fd(), HandleType::PosixFileDescriptor)),
        ErrorKind::InvalidValue
    );
    let h2 = d
        .mem_import_from_shareable_handle(fd.as_fd(), HandleType::PosixFileDescriptor)
        .unwrap();
    drop(fd);
    assert_ne!(h2, h);
    assert_eq!(
        d.mem_get_allocation_properties_from_handle(h2).unwrap(),
        prop(0)
    );
    let r = d.mem_address_reserve(2 * G2, 0, 0, 0).unwrap();
    d.mem_map(r, G2, 0, h, 0).unwrap();
    d.mem_map(r + G2 as u64, G2, 0, h2, 0).unwrap();
    write(r, b"exported");
    assert_eq!(read(r + G2 as u64, 8), b"exported".to_vec());
    d.mem_unmap(r, 2 * G2).unwrap();
    for x in [h, h2, none] {
        d.mem_release(x).unwrap();
    }
    let s = d.create_stream(0).unwrap();
    assert_eq!(kind(d.mem_map_array_async(0, &s)), ErrorKind::InvalidValue);
    assert_eq!(kind(d.mem_map_array_async(1, &s)), ErrorKind::NotSupported);
}

const CHILD_ENV: &str = "KFDRT_VMM_CHILD_FD";

/// Two processes: the parent exports a dmabuf fd, the child (this test binary, re-run in
/// child mode with the fd inherited) imports, maps, checks and writes; the parent sees it.
#[test]
fn export_import_across_processes() {
    if let Ok(v) = std::env::var(CHILD_ENV) {
        child(v.parse().unwrap());
        return;
    }
    let d = emu("emu:mi300x");
    let h = d.mem_create(G2, &prop(0), 0).unwrap();
    let r = d.mem_address_reserve(G2, 0, 0, 0).unwrap();
    d.mem_map(r, G2, 0, h, 0).unwrap();
    write(r, &pattern(G2, 42));
    let fd: OwnedFd = d
        .mem_export_to_shareable_handle(h, HandleType::PosixFileDescriptor, 0)
        .unwrap();
    // Inherit it: clear close-on-exec.
    rustix::io::fcntl_setfd(&fd, rustix::io::FdFlags::empty()).unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "export_import_across_processes",
            "--exact",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, fd.as_raw_fd().to_string())
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "child failed:\n{text}");
    assert!(
        text.contains("child: verified"),
        "child did not run its checks:\n{text}"
    );
    let mut want = pattern(G2, 42);
    want[..11].copy_from_slice(b"from child!");
    assert_eq!(read(r, G2), want, "child's write visible in the parent");
    d.mem_unmap(r, G2).unwrap();
    d.mem_release(h).unwrap();
    d.mem_address_free(r, G2).unwrap();
}

fn child(raw: i32) {
    // SAFETY: the parent passed this fd number, inherited across exec; we own our copy.
    let fd = unsafe { OwnedFd::from_raw_fd(raw) };
    let d: Device = emu("emu:mi300x");
    let h = d
        .mem_import_from_shareable_handle(
            unsafe { BorrowedFd::borrow_raw(fd.as_raw_fd()) },
            HandleType::PosixFileDescriptor,
        )
        .unwrap();
    let p = d.mem_get_allocation_properties_from_handle(h).unwrap();
    assert_eq!(p.location, Location::Gpu(0));
    let r = d.mem_address_reserve(G2, 0, 0, 0).unwrap();
    d.mem_map(r, G2, 0, h, 0).unwrap();
    d.mem_set_access(r, G2, &[rw(0)]).unwrap();
    assert_eq!(read(r, G2), pattern(G2, 42), "parent's bytes in the child");
    // The GPU of the child's device reads them too.
    let v = d.alloc(MemoryKind::Device, 0, 4096).unwrap();
    d.memcpy(0, v.va(), r, 4096).unwrap();
    let mut got = vec![0u8; 4096];
    v.read(0, &mut got).unwrap();
    assert_eq!(got, pattern(4096, 42));
    write(r, b"from child!");
    d.mem_unmap(r, G2).unwrap();
    d.mem_release(h).unwrap();
    println!("child: verified");
}

/// VMM memory on a small-BAR board (`emu:mi210[smallbar]`: VRAM heap FRAME_BUFFER_PRIVATE,
/// KFD refuses CPU-visible VRAM): memCreate asks for VRAM without PUBLIC and memMap leaves
/// the reservation CPU-inaccessible, so the memory is GPU-only — and the GPU uses it.
#[test]
fn small_bar_vmm_memory_is_gpu_only_and_works() {
    let spec = kfdrt::DeviceSpec::parse("emu:mi210[smallbar]").unwrap();
    let d = Device::open_spec(&spec).unwrap();
    assert!(d
        .gpu(0)
        .unwrap()
        .node
        .mem_banks
        .iter()
        .all(|b| b.heap_type == kfd::topology::HEAP_TYPE_FB_PRIVATE));
    let h = d.mem_create(G2, &prop(0), 0).unwrap();
    let a = d.mem_address_reserve(G2, 0, 0, 0).unwrap();
    d.mem_map(a, G2, 0, h, 0).unwrap();
    d.mem_set_access(a, G2, &[rw(0)]).unwrap();
    assert_eq!(
        d.mem_get_access(Location::Gpu(0), a).unwrap(),
        AccessFlags::ReadWrite
    );

    // Host -> VMM -> GPU store -> VMM -> host, all on the GPU.
    let host = d.alloc(MemoryKind::HostPinned, 0, 8192).unwrap();
    let src = pattern(4096, 7);
    host.write(0, &src).unwrap();
    let s = d.create_stream(0).unwrap();
    s.memcpy(a + 4096, host.va(), 4096).unwrap();
    s.write_value32(a + 4096 + 64, 0xfeed_beef, kfdrt::WriteValueFlags::DEFAULT)
        .unwrap();
    s.memcpy(host.va() + 4096, a + 4096, 4096).unwrap();
    s.synchronize().unwrap();
    let mut want = src.clone();
    want[64..68].copy_from_slice(&0xfeed_beefu32.to_le_bytes());
    let mut got = vec![0u8; 4096];
    host.read(4096, &mut got).unwrap();
    assert_eq!(got, want);

    // A second mapping of the same allocation reaches the same bytes (GPU side).
    let b = d.mem_address_reserve(G2, 0, 0, 0).unwrap();
    d.mem_map(b, G2, 0, h, 0).unwrap();
    d.mem_set_access(b, G2, &[rw(0)]).unwrap();
    s.memcpy(host.va(), b + 4096 + 64, 4).unwrap();
    s.synchronize().unwrap();
    let mut w = [0u8; 4];
    host.read(0, &mut w).unwrap();
    assert_eq!(u32::from_le_bytes(w), 0xfeed_beef);

    d.mem_unmap(b, G2).unwrap();
    d.mem_unmap(a, G2).unwrap();
    d.mem_release(h).unwrap();
    d.mem_address_free(b, G2).unwrap();
    d.mem_address_free(a, G2).unwrap();
}
