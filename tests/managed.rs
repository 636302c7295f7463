//! Managed memory (seed 002) and stream attachment (seed 004) on the emulated device.

mod common;

use std::sync::Arc;

use common::{emu, settle, signal_mem, wait_until};
use kfdrt::managed::{Attachment, CoherencyMode, RangeAttributes};
use kfdrt::{
    AttachFlags, Device, ErrorKind, Location, MemRangeAttribute, MemoryAdvise, MemoryKind,
    WaitCompare,
};

const MIB: usize = 1 << 20;

/// A device on an emulator we keep a concrete handle to (for residency introspection).
fn emu_with_backend(spec: &str) -> (Device, Arc<kfd_emu::EmuBackend>) {
    let b = Arc::new(kfd_emu::EmuBackend::from_spec(spec).expect("emu spec"));
    let d = Device::with_backend(b.clone()).expect("open");
    (d, b)
}

fn pattern(n: usize, seed: u8) -> Vec<u8> {
    (0..n)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn attrs(d: &Device, ptr: u64, len: usize) -> RangeAttributes {
    d.mem_range_attributes(ptr, len).expect("attributes")
}

#[test]
fn malloc_managed_rules_and_bytes() {
    let d = emu("emu:mi300x");
    for (size, flags) in [
        (0, AttachFlags::GLOBAL),
        (4096, AttachFlags::empty()),
        (4096, AttachFlags::SINGLE),
        (4096, AttachFlags::GLOBAL | AttachFlags::HOST),
    ] {
        let e = d.malloc_managed(size, flags).unwrap_err();
        assert_eq!(
            e.kind(),
            ErrorKind::InvalidValue,
            "size {size} flags {flags:?}"
        );
    }
    let m = d.malloc_managed(10_000, AttachFlags::GLOBAL).unwrap();
    assert_eq!(m.len(), 10_000);
    assert_eq!(m.ptr() % 4096, 0);
    let mut z = vec![1u8; 10_000];
    m.read(0, &mut z).unwrap();
    assert!(z.iter().all(|&b| b == 0), "managed memory starts zeroed");
    let p = pattern(10_000, 7);
    m.write(0, &p).unwrap();
    m.read(0, &mut z).unwrap();
    assert_eq!(z, p);
    assert_eq!(
        m.write(9_999, &[1, 2]).unwrap_err().kind(),
        ErrorKind::InvalidValue
    );
    // Defaults: nothing advised, never prefetched, fine grained, GPUs accessible but not
    // "accessed by" (CLR's AGENT_ACCESSIBLE, not IN_PLACE).
    let a = attrs(&d, m.ptr(), m.len());
    assert_eq!(
        a,
        RangeAttributes {
            read_mostly: false,
            preferred_location: None,
            accessed_by: vec![],
            last_prefetch_location: None,
            coherency: CoherencyMode::FineGrain,
        }
    );
    assert_eq!(d.mem_attachment(m.ptr()).unwrap(), Attachment::Global);
    let h = d.malloc_managed(4096, AttachFlags::HOST).unwrap();
    assert_eq!(d.mem_attachment(h.ptr()).unwrap(), Attachment::Host);
}

#[test]
fn prefetch_migrates_and_preserves_bytes() {
    let (d, b) = emu_with_backend("emu:mi300x");
    let gpu_id = d.gpus()[0].gpu_id;
    let n = 4 * MIB;
    let m = d.malloc_managed(n, AttachFlags::GLOBAL).unwrap();
    let p = pattern(n, 3);
    m.write(0, &p).unwrap();
    let s = d.create_stream(0).unwrap();
    let avail0 = kfd::ioctl::available_memory(d.backend().as_ref(), gpu_id).unwrap();
    assert_eq!(b.svm_location(m.ptr()), Some(0));

    d.mem_prefetch_async(m.ptr(), n, Location::Gpu(0), &s)
        .unwrap();
    s.synchronize().unwrap();
    assert_eq!(b.svm_location(m.ptr()), Some(gpu_id), "resident in VRAM");
    assert_eq!(b.svm_location(m.ptr() + n as u64 - 1), Some(gpu_id));
    let avail1 = kfd::ioctl::available_memory(d.backend().as_ref(), gpu_id).unwrap();
    assert!(
        avail0 - avail1 >= n as u64,
        "VRAM charged: {avail0} -> {avail1}"
    );
    assert_eq!(
        attrs(&d, m.ptr(), n).last_prefetch_location,
        Some(Location::Gpu(0))
    );

    // The GPU reads the migrated bytes (copy into a VRAM buffer), and writes into them.
    let v = d.alloc(MemoryKind::Device, 0, n).unwrap();
    s.memcpy(v.va(), m.ptr(), n as u64).unwrap();
    s.memset(m.ptr() + 4096, 0xAB, 100).unwrap();
    s.synchronize().unwrap();
    let mut got = vec![0u8; n];
    v.read(0, &mut got).unwrap();
    assert_eq!(got, p, "GPU saw the bytes after migration");
    drop(v);

    d.mem_prefetch_async(m.ptr(), n, Location::Host, &s)
        .unwrap();
    s.synchronize().unwrap();
    assert_eq!(b.svm_location(m.ptr()), Some(0), "back in system memory");
    let avail2 = kfd::ioctl::available_memory(d.backend().as_ref(), gpu_id).unwrap();
    assert_eq!(avail2, avail0, "VRAM returned");
    assert_eq!(
        attrs(&d, m.ptr(), n).last_prefetch_location,
        Some(Location::Host)
    );
    m.read(0, &mut got).unwrap();
    let mut want = p.clone();
    want[4096..4196].fill(0xAB);
    assert_eq!(got, want, "bytes survive GPU -> host");
}

#[test]
fn prefetch_is_stream_ordered() {
    let d = emu("emu:mi300x");
    let m = d.malloc_managed(64 * 1024, AttachFlags::GLOBAL).unwrap();
    let flag = signal_mem(&d, 4096);
    let s = d.create_stream(0).unwrap();
    s.wait_value32(flag.va(), 1, WaitCompare::Gte, u32::MAX)
        .unwrap(); // GEQ 1: blocks
    d.mem_prefetch_async(m.ptr(), m.len(), Location::Gpu(0), &s)
        .unwrap();
    settle();
    assert_eq!(
        attrs(&d, m.ptr(), m.len()).last_prefetch_location,
        None,
        "the prefetch waits for the stream's earlier work"
    );
    flag.atomic_u32(0)
        .unwrap()
        .store(1, std::sync::atomic::Ordering::Release);
    s.synchronize().unwrap();
    assert_eq!(
        attrs(&d, m.ptr(), m.len()).last_prefetch_location,
        Some(Location::Gpu(0))
    );
}

#[test]
fn prefetch_errors() {
    let d = emu("emu:mi300x");
    let m = d.malloc_managed(8192, AttachFlags::GLOBAL).unwrap();
    let s = d.create_stream(0).unwrap();
    let k = |r: kfdrt::Result<()>| r.unwrap_err().kind();
    assert_eq!(
        k(d.mem_prefetch_async(0, 4096, Location::Gpu(0), &s)),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        k(d.mem_prefetch_async(m.ptr(), 0, Location::Gpu(0), &s)),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        k(d.mem_prefetch_async(m.ptr(), 8193, Location::Gpu(0), &s)),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        k(d.mem_prefetch_async(m.ptr() + 4096, 4097, Location::Gpu(0), &s)),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        k(d.mem_prefetch_async(m.ptr(), 4096, Location::Gpu(1), &s)),
        ErrorKind::InvalidDevice
    );
    assert_eq!(
        k(d.mem_prefetch_async(m.ptr(), 4096, Location::Gpu(3), &s)),
        ErrorKind::InvalidDevice
    );
    assert_eq!(Location::from_device_id(-3), None); // the C ABI's InvalidDevice
    let heap = vec![0u8; 3 * 4096];
    assert!(!d.xnack_enabled());
    assert_eq!(
        k(d.mem_prefetch_async(heap.as_ptr() as u64, 4096, Location::Gpu(0), &s)),
        ErrorKind::NotSupported,
        "pageable memory needs XNACK"
    );
    assert_eq!(attrs(&d, m.ptr(), 8192).last_prefetch_location, None);
}

#[test]
fn advice_reads_back() {
    let d = emu("emu:mi300x*2");
    let m = d.malloc_managed(4 * 4096, AttachFlags::GLOBAL).unwrap();
    let (p, n) = (m.ptr(), m.len());
    let adv = |a, dev| d.mem_advise(p, n, a, dev).unwrap();

    adv(MemoryAdvise::SetReadMostly, Location::Gpu(0));
    assert!(attrs(&d, p, n).read_mostly);
    adv(MemoryAdvise::UnsetReadMostly, Location::Gpu(7)); // device ignored for read-mostly (CLR)
    assert!(!attrs(&d, p, n).read_mostly);

    adv(MemoryAdvise::SetPreferredLocation, Location::Gpu(1));
    assert_eq!(attrs(&d, p, n).preferred_location, Some(Location::Gpu(1)));
    adv(MemoryAdvise::SetPreferredLocation, Location::Host);
    assert_eq!(attrs(&d, p, n).preferred_location, Some(Location::Host));
    adv(MemoryAdvise::UnsetPreferredLocation, Location::Gpu(0));
    assert_eq!(attrs(&d, p, n).preferred_location, None);

    adv(MemoryAdvise::SetAccessedBy, Location::Gpu(1));
    assert_eq!(attrs(&d, p, n).accessed_by, vec![Location::Gpu(1)]);
    adv(MemoryAdvise::SetAccessedBy, Location::Host);
    adv(MemoryAdvise::SetAccessedBy, Location::Gpu(0));
    assert_eq!(
        attrs(&d, p, n).accessed_by,
        vec![Location::Gpu(0), Location::Gpu(1), Location::Host]
    );
    adv(MemoryAdvise::UnsetAccessedBy, Location::Gpu(1));
    assert_eq!(
        attrs(&d, p, n).accessed_by,
        vec![Location::Gpu(0), Location::Host]
    );
    adv(MemoryAdvise::UnsetAccessedBy, Location::Host);
    adv(MemoryAdvise::UnsetAccessedBy, Location::Gpu(0));
    assert_eq!(attrs(&d, p, n).accessed_by, Vec::<Location>::new());

    adv(MemoryAdvise::SetCoarseGrain, Location::Gpu(0));
    assert_eq!(attrs(&d, p, n).coherency, CoherencyMode::CoarseGrain);
    adv(MemoryAdvise::UnsetCoarseGrain, Location::Gpu(0));
    assert_eq!(attrs(&d, p, n).coherency, CoherencyMode::FineGrain);

    // Prefetch to GPU 1 reads back too.
    let s = d.create_stream(1).unwrap();
    d.mem_prefetch_async(p, n, Location::Gpu(1), &s).unwrap();
    s.synchronize().unwrap();
    assert_eq!(
        attrs(&d, p, n).last_prefetch_location,
        Some(Location::Gpu(1))
    );
}

#[test]
fn mixed_ranges_give_undefined_values() {
    let d = emu("emu:mi300x");
    let m = d.malloc_managed(4 * 4096, AttachFlags::GLOBAL).unwrap();
    let (p, n) = (m.ptr(), m.len());
    let half = n / 2;
    d.mem_advise(
        p,
        half,
        MemoryAdvise::SetPreferredLocation,
        Location::Gpu(0),
    )
    .unwrap();
    d.mem_advise(p, half, MemoryAdvise::SetReadMostly, Location::Gpu(0))
        .unwrap();
    d.mem_advise(p, half, MemoryAdvise::SetCoarseGrain, Location::Gpu(0))
        .unwrap();
    d.mem_advise(p, half, MemoryAdvise::SetAccessedBy, Location::Gpu(0))
        .unwrap();
    d.mem_advise(p, half, MemoryAdvise::SetAccessedBy, Location::Host)
        .unwrap();
    let s = d.create_stream(0).unwrap();
    d.mem_prefetch_async(p + half as u64, half, Location::Gpu(0), &s)
        .unwrap();
    s.synchronize().unwrap();

    let first = attrs(&d, p, half);
    assert_eq!(
        first,
        RangeAttributes {
            read_mostly: true,
            preferred_location: Some(Location::Gpu(0)),
            accessed_by: vec![Location::Gpu(0), Location::Host],
            last_prefetch_location: None,
            coherency: CoherencyMode::CoarseGrain,
        }
    );
    let second = attrs(&d, p + half as u64, half);
    assert_eq!(second.last_prefetch_location, Some(Location::Gpu(0)));
    assert_eq!(second.preferred_location, None);
    let whole = attrs(&d, p, n);
    assert_eq!(
        whole,
        RangeAttributes {
            read_mostly: false,
            preferred_location: None,
            accessed_by: vec![],
            last_prefetch_location: None,
            coherency: CoherencyMode::Indeterminate,
        }
    );
    // The same through the HIP-shaped call: AccessedBy padded with hipInvalidDeviceId.
    let mut acc = [0u8; 12];
    d.mem_range_get_attribute(&mut acc, MemRangeAttribute::AccessedBy, p, half)
        .unwrap();
    let v: Vec<i32> = acc
        .chunks(4)
        .map(|c| i32::from_ne_bytes(c.try_into().unwrap()))
        .collect();
    assert_eq!(
        v,
        vec![0, Location::CPU_DEVICE_ID, Location::INVALID_DEVICE_ID]
    );
    let mut one = [0u8; 4];
    d.mem_range_get_attribute(&mut one, MemRangeAttribute::AccessedBy, p, half)
        .unwrap();
    assert_eq!(
        i32::from_ne_bytes(one),
        0,
        "devices beyond the array are left out"
    );
}

#[test]
fn advice_rounds_to_cpu_pages() {
    let d = emu("emu:mi300x");
    let m = d.malloc_managed(3 * 4096, AttachFlags::GLOBAL).unwrap();
    let p = m.ptr();
    // 10 bytes inside page 1: the whole page 1 gets the advice, pages 0 and 2 do not.
    d.mem_advise(
        p + 4096 + 100,
        10,
        MemoryAdvise::SetPreferredLocation,
        Location::Gpu(0),
    )
    .unwrap();
    assert_eq!(
        attrs(&d, p + 4096, 4096).preferred_location,
        Some(Location::Gpu(0))
    );
    assert_eq!(
        attrs(&d, p + 4096 + 4000, 1).preferred_location,
        Some(Location::Gpu(0))
    );
    assert_eq!(attrs(&d, p, 4096).preferred_location, None);
    assert_eq!(attrs(&d, p + 8192, 4096).preferred_location, None);
    // A range straddling pages 0 and 1 covers both.
    d.mem_advise(p + 4000, 200, MemoryAdvise::SetReadMostly, Location::Gpu(0))
        .unwrap();
    assert!(attrs(&d, p, 8192).read_mostly);
    assert!(!attrs(&d, p, 3 * 4096).read_mostly);
}

#[test]
fn advise_errors() {
    let d = emu("emu:mi300x");
    let m = d.malloc_managed(8192, AttachFlags::GLOBAL).unwrap();
    let k = |r: kfdrt::Result<()>| r.unwrap_err().kind();
    let a = MemoryAdvise::SetPreferredLocation;
    assert_eq!(
        k(d.mem_advise(0, 4096, a, Location::Gpu(0))),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        k(d.mem_advise(m.ptr(), 0, a, Location::Gpu(0))),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        k(d.mem_advise(m.ptr(), 8193, a, Location::Gpu(0))),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        k(d.mem_advise(m.ptr(), 4096, a, Location::Gpu(1))),
        ErrorKind::InvalidDevice
    );
    assert_eq!(
        k(d.mem_advise(m.ptr(), 4096, MemoryAdvise::SetAccessedBy, Location::Gpu(5))),
        ErrorKind::InvalidDevice
    );
    let heap = vec![0u8; 3 * 4096];
    assert_eq!(
        k(d.mem_advise(heap.as_ptr() as u64, 4096, a, Location::Gpu(0))),
        ErrorKind::InvalidValue
    );
    for v in [0u32, 7, 99, 102] {
        assert_eq!(
            MemoryAdvise::from_raw(v).unwrap_err().kind(),
            ErrorKind::InvalidValue
        );
    }
    for a in MemoryAdvise::ALL {
        assert_eq!(MemoryAdvise::from_raw(a as u32).unwrap(), a);
    }
    assert_eq!(attrs(&d, m.ptr(), 8192).preferred_location, None);
}

#[test]
fn range_attribute_sizes_and_errors() {
    let d = emu("emu:mi300x");
    let m = d.malloc_managed(8192, AttachFlags::GLOBAL).unwrap();
    let p = m.ptr();
    let k = |r: kfdrt::Result<()>| r.unwrap_err().kind();
    use MemRangeAttribute::*;
    for a in [
        ReadMostly,
        PreferredLocation,
        LastPrefetchLocation,
        CoherencyMode,
    ] {
        let mut ok = [0xffu8; 4];
        d.mem_range_get_attribute(&mut ok, a, p, 8192).unwrap();
        for bad in [0usize, 1, 3, 8] {
            let mut b = vec![0u8; bad];
            assert_eq!(
                k(d.mem_range_get_attribute(&mut b, a, p, 8192)),
                ErrorKind::InvalidValue,
                "{a:?} {bad}"
            );
        }
    }
    let mut rm = [0xffu8; 4];
    d.mem_range_get_attribute(&mut rm, ReadMostly, p, 8192)
        .unwrap();
    assert_eq!(i32::from_ne_bytes(rm), 0);
    let mut coh = [0xffu8; 4];
    d.mem_range_get_attribute(&mut coh, CoherencyMode, p, 8192)
        .unwrap();
    assert_eq!(
        u32::from_ne_bytes(coh),
        kfdrt::CoherencyMode::FineGrain.raw()
    );
    for bad in [0usize, 2, 6] {
        let mut b = vec![0u8; bad];
        assert_eq!(
            k(d.mem_range_get_attribute(&mut b, AccessedBy, p, 8192)),
            ErrorKind::InvalidValue
        );
    }
    let mut x = [0u8; 4];
    assert_eq!(
        k(d.mem_range_get_attribute(&mut x, ReadMostly, 0, 8192)),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        k(d.mem_range_get_attribute(&mut x, ReadMostly, p, 0)),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        k(d.mem_range_get_attribute(&mut x, ReadMostly, p, 8193)),
        ErrorKind::InvalidValue
    );
    let heap = vec![0u8; 3 * 4096];
    assert_eq!(
        k(d.mem_range_get_attribute(&mut x, ReadMostly, heap.as_ptr() as u64, 4096)),
        ErrorKind::InvalidValue
    );
    for v in [0u32, 5, 99, 101] {
        assert_eq!(
            MemRangeAttribute::from_raw(v).unwrap_err().kind(),
            ErrorKind::InvalidValue
        );
    }
    assert_eq!(MemRangeAttribute::from_raw(100).unwrap(), CoherencyMode);

    // hipMemRangeGetAttributes: several at once; count mismatches are errors.
    d.mem_advise(p, 8192, MemoryAdvise::SetPreferredLocation, Location::Host)
        .unwrap();
    let (mut a, mut b, mut c) = ([0u8; 4], [0u8; 8], [0u8; 4]);
    d.mem_range_get_attributes(
        &mut [&mut a[..], &mut b[..], &mut c[..]],
        &[PreferredLocation, AccessedBy, LastPrefetchLocation],
        p,
        8192,
    )
    .unwrap();
    assert_eq!(i32::from_ne_bytes(a), Location::CPU_DEVICE_ID);
    assert_eq!(
        b,
        [(-2i32).to_ne_bytes(), (-2i32).to_ne_bytes()].concat()[..]
    );
    assert_eq!(i32::from_ne_bytes(c), Location::INVALID_DEVICE_ID);
    assert_eq!(
        k(d.mem_range_get_attributes(&mut [], &[], p, 8192)),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        k(d.mem_range_get_attributes(&mut [&mut a[..]], &[ReadMostly, AccessedBy], p, 8192)),
        ErrorKind::InvalidValue
    );
}

#[test]
fn pageable_memory_with_xnack_on() {
    let d = emu("emu:mi300x[xnack=on]");
    assert!(d.xnack_enabled());
    // SAFETY-free pageable memory: a page-aligned region inside a Vec.
    let v = vec![0x5Au8; 6 * 4096];
    let p = (v.as_ptr() as u64).next_multiple_of(4096);
    d.mem_advise(
        p,
        4096,
        MemoryAdvise::SetPreferredLocation,
        Location::Gpu(0),
    )
    .unwrap();
    assert_eq!(
        attrs(&d, p, 4096).preferred_location,
        Some(Location::Gpu(0))
    );
    let s = d.create_stream(0).unwrap();
    d.mem_prefetch_async(p, 4096, Location::Gpu(0), &s).unwrap();
    s.synchronize().unwrap();
    assert_eq!(
        attrs(&d, p, 4096).last_prefetch_location,
        Some(Location::Gpu(0))
    );
    assert!(v.iter().all(|&b| b == 0x5A), "bytes preserved");
    // Attach: pageable memory needs a length.
    assert_eq!(
        s.attach_mem_async(p, 0, AttachFlags::SINGLE)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidValue
    );
    s.attach_mem_async(p, 4096, AttachFlags::SINGLE).unwrap();
    assert_eq!(d.mem_attachment(p).unwrap(), Attachment::Single);
    assert!(d.mem_attached_to(p + 100, &s).unwrap());
    // XNACK on: managed memory prefetched to the one GPU lands in VRAM too.
    let m = d.malloc_managed(4096, AttachFlags::GLOBAL).unwrap();
    d.mem_prefetch_async(m.ptr(), 4096, Location::Gpu(0), &s)
        .unwrap();
    s.synchronize().unwrap();
    assert_eq!(
        attrs(&d, m.ptr(), 4096).last_prefetch_location,
        Some(Location::Gpu(0))
    );
    drop(v);
}

#[test]
fn xnack_off_multi_gpu_keeps_shared_range_in_system_memory() {
    // XNACK off: both GPUs hold ACCESS, so the kernel keeps a range the other GPU may use
    // in system memory; the last prefetch location still reads back the request.
    let (d, b) = emu_with_backend("emu:mi300x*2");
    let m = d.malloc_managed(64 * 1024, AttachFlags::GLOBAL).unwrap();
    let s = d.create_stream(0).unwrap();
    d.mem_prefetch_async(m.ptr(), m.len(), Location::Gpu(0), &s)
        .unwrap();
    s.synchronize().unwrap();
    assert_eq!(
        attrs(&d, m.ptr(), m.len()).last_prefetch_location,
        Some(Location::Gpu(0))
    );
    assert_eq!(b.svm_location(m.ptr()), Some(0));
    // With XNACK on only in-place users pin it: the same prefetch migrates.
    let (d2, b2) = emu_with_backend("emu:mi300x[xnack=on]*2");
    let m2 = d2.malloc_managed(64 * 1024, AttachFlags::GLOBAL).unwrap();
    let s2 = d2.create_stream(0).unwrap();
    d2.mem_prefetch_async(m2.ptr(), m2.len(), Location::Gpu(0), &s2)
        .unwrap();
    s2.synchronize().unwrap();
    assert_eq!(b2.svm_location(m2.ptr()), Some(d2.gpus()[0].gpu_id));
}

#[test]
fn attach_rules() {
    let d = emu("emu:mi300x");
    let m = d.malloc_managed(3 * 4096, AttachFlags::GLOBAL).unwrap();
    let s = d.create_stream(0).unwrap();
    let null = d.null_stream(0).unwrap();
    let k = |r: kfdrt::Result<()>| r.unwrap_err().kind();
    assert_eq!(
        k(s.attach_mem_async(0, 0, AttachFlags::GLOBAL)),
        ErrorKind::InvalidValue
    );
    assert_eq!(AttachFlags::from_bits(8), None);
    for f in [
        AttachFlags::empty(),
        AttachFlags::GLOBAL | AttachFlags::HOST,
        AttachFlags::SINGLE | AttachFlags::HOST,
    ] {
        assert_eq!(
            k(s.attach_mem_async(m.ptr(), 0, f)),
            ErrorKind::InvalidValue,
            "flags {f:?}"
        );
    }
    assert_eq!(
        k(null.attach_mem_async(m.ptr(), 0, AttachFlags::SINGLE)),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        k(s.attach_mem_async(m.ptr(), 4096, AttachFlags::SINGLE)),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        k(s.attach_mem_async(m.ptr() + 4096, m.len(), AttachFlags::SINGLE)),
        ErrorKind::InvalidValue
    );
    let heap = vec![0u8; 8192];
    assert_eq!(
        k(s.attach_mem_async(heap.as_ptr() as u64, 4096, AttachFlags::SINGLE)),
        ErrorKind::InvalidValue,
        "pageable memory needs XNACK"
    );
    assert_eq!(
        d.mem_attachment(m.ptr()).unwrap(),
        Attachment::Global,
        "errors change nothing"
    );

    // Length 0 or the whole size; a pointer inside the allocation with length 0.
    s.attach_mem_async(m.ptr(), m.len(), AttachFlags::SINGLE)
        .unwrap();
    assert_eq!(
        d.mem_attachment(m.ptr() + 5000).unwrap(),
        Attachment::Single
    );
    assert!(d.mem_attached_to(m.ptr(), &s).unwrap());
    let s2 = d.create_stream(0).unwrap();
    assert!(!d.mem_attached_to(m.ptr(), &s2).unwrap());
    s2.attach_mem_async(m.ptr() + 4096, 0, AttachFlags::SINGLE)
        .unwrap();
    assert!(d.mem_attached_to(m.ptr(), &s2).unwrap(), "replaced");
    assert!(!d.mem_attached_to(m.ptr(), &s).unwrap());
    null.attach_mem_async(m.ptr(), 0, AttachFlags::HOST)
        .unwrap();
    assert_eq!(d.mem_attachment(m.ptr()).unwrap(), Attachment::Host);
    null.attach_mem_async(m.ptr(), 0, AttachFlags::GLOBAL)
        .unwrap();
    assert_eq!(d.mem_attachment(m.ptr()).unwrap(), Attachment::Global);
    assert_eq!(
        d.mem_attachment(heap.as_ptr() as u64).unwrap_err().kind(),
        ErrorKind::InvalidValue
    );
}

#[test]
fn attach_is_stream_ordered_and_reverts_when_the_stream_goes() {
    let d = emu("emu:mi300x");
    let m = d.malloc_managed(4096, AttachFlags::HOST).unwrap();
    let flag = signal_mem(&d, 4096);
    let cell = flag.atomic_u32(0).unwrap();
    let s = d.create_stream(0).unwrap();
    s.wait_value32(flag.va(), 1, WaitCompare::Gte, u32::MAX)
        .unwrap();
    s.attach_mem_async(m.ptr(), 0, AttachFlags::SINGLE).unwrap();
    settle();
    assert_eq!(
        d.mem_attachment(m.ptr()).unwrap(),
        Attachment::Host,
        "not before earlier work"
    );
    cell.store(1, std::sync::atomic::Ordering::Release);
    s.synchronize().unwrap();
    assert_eq!(d.mem_attachment(m.ptr()).unwrap(), Attachment::Single);

    // Destroyed while busy: the association stays until the stream's work is done, then
    // reverts to the allocation's default (Host here).
    s.wait_value32(flag.va(), 2, WaitCompare::Gte, u32::MAX)
        .unwrap();
    drop(s);
    settle();
    assert_eq!(d.mem_attachment(m.ptr()).unwrap(), Attachment::Single);
    cell.store(2, std::sync::atomic::Ordering::Release);
    wait_until("association reverts", || {
        d.mem_attachment(m.ptr()).unwrap() == Attachment::Host
    });

    // Destroyed idle: reverts at once.
    let s3 = d.create_stream(0).unwrap();
    s3.attach_mem_async(m.ptr(), 0, AttachFlags::SINGLE)
        .unwrap();
    assert_eq!(d.mem_attachment(m.ptr()).unwrap(), Attachment::Single);
    drop(s3);
    assert_eq!(d.mem_attachment(m.ptr()).unwrap(), Attachment::Host);
}

#[test]
fn freed_managed_memory_leaves_no_stale_range() {
    let d = emu("emu:mi300x[vram=64M]");
    for _ in 0..4 {
        let m = d.malloc_managed(8 * MIB, AttachFlags::GLOBAL).unwrap();
        let s = d.create_stream(0).unwrap();
        d.mem_prefetch_async(m.ptr(), m.len(), Location::Gpu(0), &s)
            .unwrap();
        s.synchronize().unwrap();
        drop(m);
        // A BO right after: no EADDRINUSE from a stale SVM range, VRAM returned.
        let b = d.alloc(MemoryKind::Device, 0, 48 * MIB).unwrap();
        b.write(0, &[1, 2, 3]).unwrap();
        let mut r = [0u8; 3];
        b.read(0, &mut r).unwrap();
        assert_eq!(r, [1, 2, 3]);
    }
}

/// Managed memory on a small-BAR board (and the large-BAR one for contrast): prefetched to
/// VRAM the CPU cannot see, copied by the GPU, freed while resident in VRAM; then a new
/// range's prefetch ordered behind a stream wait runs without a GPU fault (the
/// `managed.prefetch_stream_order` check's fault on small BAR came from an earlier check
/// freeing buffers under a held stream, not from SVM migration).
#[test]
fn prefetch_after_freeing_a_vram_resident_range() {
    for spec in ["emu:mi210", "emu:mi210[smallbar]"] {
        let d = Device::open_spec(&kfdrt::DeviceSpec::parse(spec).unwrap()).unwrap();
        let n = 4 << 20;
        {
            let m = d.malloc_managed(n, AttachFlags::GLOBAL).unwrap();
            m.write(0, &vec![5u8; n]).unwrap();
            let s = d.create_stream(0).unwrap();
            d.mem_prefetch_async(m.ptr(), n, Location::Gpu(0), &s)
                .unwrap();
            let v = d.alloc(MemoryKind::Device, 0, n).unwrap();
            s.memcpy(v.va(), m.ptr(), n as u64).unwrap();
            let host = d.alloc(MemoryKind::HostPinned, 0, 4096).unwrap();
            s.memcpy(host.va(), v.va() + (n as u64 - 4096), 4096)
                .unwrap();
            s.synchronize().unwrap();
            let mut got = vec![0u8; 4096];
            host.read(0, &mut got).unwrap();
            assert!(got.iter().all(|&b| b == 5), "{spec}: prefetched bytes");
            assert_eq!(
                d.mem_range_attributes(m.ptr(), n)
                    .unwrap()
                    .last_prefetch_location,
                Some(Location::Gpu(0))
            );
        }
        let m = d.malloc_managed(65536, AttachFlags::GLOBAL).unwrap();
        let flag = d.alloc(MemoryKind::Signal, 0, 4096).unwrap();
        let s = d.create_stream(0).unwrap();
        s.wait_value32(flag.va(), 1, kfdrt::WaitCompare::Gte, u32::MAX)
            .unwrap();
        d.mem_prefetch_async(m.ptr(), m.len(), Location::Gpu(0), &s)
            .unwrap();
        flag.atomic_u32(0)
            .unwrap()
            .store(1, std::sync::atomic::Ordering::Release);
        s.synchronize().unwrap_or_else(|e| panic!("{spec}: {e}"));
    }
}
