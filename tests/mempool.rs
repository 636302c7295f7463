//! Stream-ordered allocator and memory pools: reuse rules, attributes, trim/threshold,
//! destroy, current pool, peer access.

mod common;

use std::sync::atomic::{AtomicU32, Ordering};

use common::{emu, non_blocking, settle, signal_mem, Gate};
use kfdrt::{
    AccessDesc, AccessFlags, Device, ErrorKind, EventFlags, Location, PoolAttr, PoolProps, Stream,
    WriteValueFlags,
};

const MIB: u64 = 1 << 20;

fn cell(addr: u64) -> &'static AtomicU32 {
    // SAFETY: `addr` is a live, CPU-mapped, 4-byte aligned pool allocation (pools use
    // CPU-visible VRAM) that the test keeps allocated while it reads it.
    unsafe { AtomicU32::from_ptr(addr as *mut u32) }
}

/// A pool with the reuse policies set as given.
fn pool(dev: &Device, follow: bool, opp: bool, internal: bool) -> kfdrt::MemPool {
    let p = dev.create_mem_pool(&PoolProps::device(0)).unwrap();
    p.set_attribute(PoolAttr::ReuseFollowEventDependencies, follow.into())
        .unwrap();
    p.set_attribute(PoolAttr::ReuseAllowOpportunistic, opp.into())
        .unwrap();
    p.set_attribute(PoolAttr::ReuseAllowInternalDependencies, internal.into())
        .unwrap();
    p
}

/// What most tests start from: an emulated MI210 with two non-blocking streams on GPU 0
/// and a closed gate.
struct Rig {
    s1: Stream,
    s2: Stream,
    gate: Gate,
    dev: Device,
}

fn rig() -> Rig {
    let dev = emu("emu:mi210");
    Rig {
        s1: non_blocking(&dev, 0),
        s2: non_blocking(&dev, 0),
        gate: Gate::new(&dev),
        dev,
    }
}

#[test]
fn defaults_and_attribute_rules() {
    let dev = emu("emu:mi210");
    let p = dev.default_mem_pool(0).unwrap();
    assert_eq!(dev.mem_pool(0).unwrap(), p);
    assert_eq!(p.attribute(PoolAttr::ReleaseThreshold).unwrap(), 0);
    assert_eq!(
        p.attribute(PoolAttr::ReuseFollowEventDependencies).unwrap(),
        1
    );
    assert_eq!(p.attribute(PoolAttr::ReuseAllowOpportunistic).unwrap(), 1);
    assert_eq!(
        p.attribute(PoolAttr::ReuseAllowInternalDependencies)
            .unwrap(),
        1
    );
    for a in [
        PoolAttr::ReservedMemCurrent,
        PoolAttr::ReservedMemHigh,
        PoolAttr::UsedMemCurrent,
        PoolAttr::UsedMemHigh,
    ] {
        assert_eq!(p.attribute(a).unwrap(), 0, "{a:?}");
    }
    assert_eq!(
        p.set_attribute(PoolAttr::UsedMemCurrent, 0)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        p.set_attribute(PoolAttr::UsedMemHigh, 5)
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidValue
    );
    p.set_attribute(PoolAttr::ReuseAllowOpportunistic, 0)
        .unwrap();
    assert_eq!(p.attribute(PoolAttr::ReuseAllowOpportunistic).unwrap(), 0);
    p.set_attribute(PoolAttr::ReleaseThreshold, 123).unwrap();
    assert_eq!(p.attribute(PoolAttr::ReleaseThreshold).unwrap(), 123);
    assert_eq!(p.destroy().unwrap_err().kind(), ErrorKind::InvalidValue);
    let s = dev.create_stream(0).unwrap();
    assert_eq!(
        s.malloc_async(0).unwrap_err().kind(),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        s.free_ptr_async(0).unwrap_err().kind(),
        ErrorKind::InvalidValue
    );
    assert_eq!(
        s.free_ptr_async(0x1234_0000).unwrap_err().kind(),
        ErrorKind::InvalidValue
    );
    let a = s.malloc_async(100).unwrap().into_raw();
    assert_eq!(a % 256, 0);
    s.free_ptr_async(a).unwrap();
    assert_eq!(
        s.free_ptr_async(a).unwrap_err().kind(),
        ErrorKind::InvalidValue,
        "double free"
    );
    assert_eq!(
        dev.create_mem_pool(&PoolProps {
            location: Location::Host,
            ..PoolProps::device(0)
        })
        .unwrap_err()
        .kind(),
        ErrorKind::NotSupported
    );
    assert_eq!(
        dev.create_mem_pool(&PoolProps::device(3))
            .unwrap_err()
            .kind(),
        ErrorKind::InvalidValue
    );
}

#[test]
fn stats_high_water_and_exact_sizes() {
    let dev = emu("emu:mi210");
    let s = dev.create_stream(0).unwrap();
    let p = dev.create_mem_pool(&PoolProps::device(0)).unwrap();
    let a = s.malloc_from_pool_async(100, &p).unwrap().into_raw();
    assert_eq!(p.attribute(PoolAttr::UsedMemCurrent).unwrap(), 256);
    assert_eq!(
        p.attribute(PoolAttr::ReservedMemCurrent).unwrap(),
        2 * MIB,
        "2 MiB slab"
    );
    let b = s.malloc_from_pool_async(1 << 20, &p).unwrap().into_raw();
    assert_eq!(p.attribute(PoolAttr::UsedMemCurrent).unwrap(), 256 + MIB);
    assert_eq!(
        p.attribute(PoolAttr::ReservedMemCurrent).unwrap(),
        6 * MIB,
        "+4 MiB slab"
    );
    let c = s.malloc_from_pool_async(3 << 20, &p).unwrap().into_raw();
    assert_eq!(
        p.attribute(PoolAttr::ReservedMemCurrent).unwrap(),
        9 * MIB,
        "+3 MiB chunk"
    );
    assert_eq!(
        p.attribute(PoolAttr::UsedMemCurrent).unwrap(),
        256 + 4 * MIB
    );
    for x in [a, b, c] {
        s.free_ptr_async(x).unwrap();
    }
    assert_eq!(p.attribute(PoolAttr::UsedMemCurrent).unwrap(), 0);
    assert_eq!(p.attribute(PoolAttr::UsedMemHigh).unwrap(), 256 + 4 * MIB);
    assert_eq!(p.attribute(PoolAttr::ReservedMemHigh).unwrap(), 9 * MIB);
    // Threshold 0 (default): synchronize gives everything back.
    s.synchronize().unwrap();
    assert_eq!(p.attribute(PoolAttr::ReservedMemCurrent).unwrap(), 0);
    assert_eq!(p.attribute(PoolAttr::ReservedMemHigh).unwrap(), 9 * MIB);
    p.set_attribute(PoolAttr::ReservedMemHigh, 0).unwrap();
    p.set_attribute(PoolAttr::UsedMemHigh, 0).unwrap();
    assert_eq!(p.attribute(PoolAttr::ReservedMemHigh).unwrap(), 0);
    assert_eq!(p.attribute(PoolAttr::UsedMemHigh).unwrap(), 0);
    let d = s.malloc_from_pool_async(4096, &p).unwrap().into_raw();
    p.set_attribute(PoolAttr::UsedMemHigh, 0).unwrap();
    assert_eq!(
        p.attribute(PoolAttr::UsedMemHigh).unwrap(),
        4096,
        "reset to current"
    );
    s.free_ptr_async(d).unwrap();
}

/// An owned allocation frees itself on its own stream when dropped: the free is ordered
/// after the stream's earlier work (an unrelated stream cannot take the block while that
/// work is held), and the same stream can reuse it at once.
#[test]
fn pool_alloc_drop_frees_in_stream_order() {
    let Rig {
        s1: s,
        s2: other,
        gate,
        dev,
    } = rig();
    let p = pool(&dev, false, false, false);
    gate.hold(&s);
    let a = s.malloc_from_pool_async(1 << 20, &p).unwrap();
    assert_eq!(a.len(), 1 << 20);
    let va = a.va();
    drop(a);
    assert_eq!(p.attribute(PoolAttr::UsedMemCurrent).unwrap(), 0, "freed");
    let b = other.malloc_from_pool_async(1 << 20, &p).unwrap();
    assert_ne!(b.va(), va, "reused before the allocating stream's work ran");
    let c = s.malloc_from_pool_async(1 << 20, &p).unwrap();
    assert_eq!(c.va(), va, "same-stream reuse after a drop");
    gate.open();
    drop((b, c));
    s.synchronize().unwrap();
    other.synchronize().unwrap();
}

/// `free_async(&stream)` frees on the stream given, not the allocating one.
#[test]
fn pool_alloc_free_on_another_stream() {
    let Rig { s1, s2, gate, dev } = rig();
    let p = pool(&dev, false, false, false);
    let a = s1.malloc_from_pool_async(4096, &p).unwrap();
    let va = a.va();
    gate.hold(&s2);
    a.free_async(&s2).unwrap();
    let b = s1.malloc_from_pool_async(4096, &p).unwrap();
    assert_ne!(b.va(), va, "s1 took a block whose free waits on s2");
    let c = s2.malloc_from_pool_async(4096, &p).unwrap();
    assert_eq!(c.va(), va, "s2 reuses its own free in stream order");
    gate.open();
    b.free_async(&s1).unwrap();
    // A stream of another Device cannot order the free: InvalidValue, and the allocation
    // is then freed by its drop on its own stream.
    let dev2 = emu("emu:mi210");
    let foreign = dev2.create_stream(0).unwrap();
    assert_eq!(
        c.free_async(&foreign).unwrap_err().kind(),
        ErrorKind::InvalidValue
    );
    s1.synchronize().unwrap();
    s2.synchronize().unwrap();
    assert_eq!(p.attribute(PoolAttr::UsedMemCurrent).unwrap(), 0);
}

/// An allocation outliving its stream: when the destroyed stream is still busy, the drop
/// frees after its work; when its work is done, the memory is free at once for anyone.
#[test]
fn pool_alloc_outlives_its_stream() {
    let Rig {
        s1: other,
        s2: s,
        gate,
        dev,
    } = rig();
    let p = pool(&dev, false, false, false);
    // Busy stream destroyed first, then the allocation dropped.
    gate.hold(&s);
    let a = s.malloc_from_pool_async(4096, &p).unwrap();
    let busy_va = a.va();
    drop(s);
    drop(a);
    let b = other.malloc_from_pool_async(4096, &p).unwrap();
    assert_ne!(
        b.va(),
        busy_va,
        "reused before the destroyed stream's work ran"
    );
    gate.open();
    // Idle stream destroyed: nothing can use the memory any more.
    let s = non_blocking(&dev, 0);
    let c = s.malloc_from_pool_async(1 << 20, &p).unwrap();
    let idle_va = c.va();
    s.synchronize().unwrap();
    drop(s);
    drop(c);
    let d = other.malloc_from_pool_async(1 << 20, &p).unwrap();
    assert_eq!(d.va(), idle_va, "a finished stream's drop-free is complete");
    drop((b, d));
    other.synchronize().unwrap();
    assert_eq!(p.attribute(PoolAttr::UsedMemCurrent).unwrap(), 0);
}

#[test]
fn same_stream_reuse_is_immediate() {
    let dev = emu("emu:mi210");
    let s = dev.create_stream(0).unwrap();
    let gate = Gate::new(&dev);
    let p = pool(&dev, false, false, false);
    gate.hold(&s);
    let a = s.malloc_from_pool_async(1 << 20, &p).unwrap().into_raw();
    s.free_ptr_async(a).unwrap();
    // The free is pending (the stream is blocked), but stream order makes reuse safe.
    let b = s.malloc_from_pool_async(1 << 20, &p).unwrap().into_raw();
    assert_eq!(a, b);
    gate.open();
    s.free_ptr_async(b).unwrap();
    s.synchronize().unwrap();
}

#[test]
fn no_reuse_across_unrelated_streams_until_event_dependency() {
    let Rig { s1, s2, gate, dev } = rig();
    let p = pool(&dev, true, true, false);
    gate.hold(&s1);
    let a = s1.malloc_from_pool_async(4096, &p).unwrap().into_raw();
    s1.free_ptr_async(a).unwrap();
    // Unrelated stream, free pending: new memory.
    let b = s2.malloc_from_pool_async(4096, &p).unwrap().into_raw();
    assert_ne!(a, b);
    s2.free_ptr_async(b).unwrap();
    // s2 waits for an event recorded after the free: the dependency exists.
    let e = dev.create_event(EventFlags::DEFAULT).unwrap();
    e.record(&s1).unwrap();
    s2.wait_event(&e, 0).unwrap();
    let c = s2.malloc_from_pool_async(4096, &p).unwrap().into_raw();
    assert!(c == a || c == b);
    let d = s2.malloc_from_pool_async(4096, &p).unwrap().into_raw();
    assert!(d == a || d == b);
    assert_ne!(c, d);
    assert!(
        s1.query().is_err(),
        "s1 still blocked: reuse came from the dependency"
    );
    gate.open();
    s2.free_ptr_async(c).unwrap();
    s2.free_ptr_async(d).unwrap();
    s2.synchronize().unwrap();
    s1.synchronize().unwrap();
}

#[test]
fn follow_event_dependencies_off_ignores_the_event() {
    let Rig { s1, s2, gate, dev } = rig();
    let p = pool(&dev, false, false, false);
    gate.hold(&s1);
    let a = s1.malloc_from_pool_async(4096, &p).unwrap().into_raw();
    s1.free_ptr_async(a).unwrap();
    let e = dev.create_event(EventFlags::DEFAULT).unwrap();
    e.record(&s1).unwrap();
    s2.wait_event(&e, 0).unwrap();
    let b = s2.malloc_from_pool_async(4096, &p).unwrap().into_raw();
    assert_ne!(a, b, "FollowEventDependencies off");
    gate.open();
    s2.free_ptr_async(b).unwrap();
    s1.synchronize().unwrap();
    s2.synchronize().unwrap();
}

#[test]
fn opportunistic_reuse_needs_a_completed_free() {
    for opp in [true, false] {
        let Rig { s1, s2, dev, .. } = rig();
        let p = pool(&dev, false, opp, false);
        let a = s1.malloc_from_pool_async(4096, &p).unwrap().into_raw();
        s1.write_value32(a, 7, WriteValueFlags::DEFAULT).unwrap();
        s1.free_ptr_async(a).unwrap();
        // Wait for completion without a synchronize (no host observation hook).
        common::wait_until("s1 idle", || s1.query().is_ok());
        let b = s2.malloc_from_pool_async(4096, &p).unwrap().into_raw();
        assert_eq!(a == b, opp, "opportunistic={opp}");
        s2.free_ptr_async(b).unwrap();
        // After a synchronize observed the free, any stream may reuse it.
        s1.synchronize().unwrap();
    }
}

#[test]
fn host_observed_free_is_reusable_by_any_stream() {
    let Rig { s1, s2, dev, .. } = rig();
    let p = pool(&dev, false, false, false);
    p.set_attribute(PoolAttr::ReleaseThreshold, u64::MAX)
        .unwrap();
    let a = s1.malloc_from_pool_async(4096, &p).unwrap().into_raw();
    s1.free_ptr_async(a).unwrap();
    s1.synchronize().unwrap();
    assert_eq!(
        p.attribute(PoolAttr::ReservedMemCurrent).unwrap(),
        2 * MIB,
        "kept"
    );
    let b = s2.malloc_from_pool_async(4096, &p).unwrap().into_raw();
    assert_eq!(a, b);
    s2.free_ptr_async(b).unwrap();
}

#[test]
fn internal_dependency_is_inserted_as_ordering() {
    let Rig { s1, s2, gate, dev } = rig();
    let p = dev
        .create_mem_pool(&PoolProps {
            max_size: 2 << 20,
            ..PoolProps::device(0)
        })
        .unwrap();
    p.set_attribute(PoolAttr::ReuseAllowOpportunistic, 0)
        .unwrap();
    p.set_attribute(PoolAttr::ReuseFollowEventDependencies, 0)
        .unwrap();
    // Fill the pool (one 2 MiB slab of 512 KiB blocks) on s1, free it behind a gate.
    gate.hold(&s1);
    let blocks: Vec<u64> = (0..4)
        .map(|_| s1.malloc_from_pool_async(512 << 10, &p).unwrap().into_raw())
        .collect();
    for &b in &blocks {
        s1.free_ptr_async(b).unwrap();
    }
    // Internal dependencies off: the pool is full, nothing is safe: OutOfMemory.
    p.set_attribute(PoolAttr::ReuseAllowInternalDependencies, 0)
        .unwrap();
    assert_eq!(
        s2.malloc_from_pool_async(512 << 10, &p).unwrap_err().kind(),
        ErrorKind::OutOfMemory
    );
    p.set_attribute(PoolAttr::ReuseAllowInternalDependencies, 1)
        .unwrap();
    let r = s2.malloc_from_pool_async(512 << 10, &p).unwrap().into_raw();
    assert!(blocks.contains(&r));
    // s2's later work is now ordered after s1's free: it must not run before the gate.
    let flag = signal_mem(&dev, 4096);
    s2.write_value32(flag.va(), 1, WriteValueFlags::DEFAULT)
        .unwrap();
    settle();
    assert_eq!(
        flag.atomic_u32(0).unwrap().load(Ordering::Acquire),
        0,
        "held by the dependency"
    );
    gate.open();
    s2.synchronize().unwrap();
    assert_eq!(flag.atomic_u32(0).unwrap().load(Ordering::Acquire), 1);
    s2.free_ptr_async(r).unwrap();
    s2.synchronize().unwrap();
}

#[test]
fn trim_to_and_threshold_exact_bytes() {
    let Rig {
        s1: s, gate, dev, ..
    } = rig();
    let p = dev.create_mem_pool(&PoolProps::device(0)).unwrap();
    p.set_attribute(PoolAttr::ReleaseThreshold, 5 * MIB)
        .unwrap();
    // Three 2 MiB allocations (a class above 1 MiB gets a dedicated chunk of its size).
    let xs: Vec<u64> = (0..3)
        .map(|_| s.malloc_from_pool_async(2 << 20, &p).unwrap().into_raw())
        .collect();
    let live = s.malloc_from_pool_async(4 << 20, &p).unwrap().into_raw();
    assert_eq!(p.attribute(PoolAttr::ReservedMemCurrent).unwrap(), 10 * MIB);
    // Outstanding allocations are never trimmed.
    p.trim_to(0).unwrap();
    assert_eq!(p.attribute(PoolAttr::ReservedMemCurrent).unwrap(), 10 * MIB);
    // Frees not yet completed are kept.
    gate.hold(&s);
    for &x in &xs {
        s.free_ptr_async(x).unwrap();
    }
    p.trim_to(0).unwrap();
    assert_eq!(p.attribute(PoolAttr::ReservedMemCurrent).unwrap(), 10 * MIB);
    gate.open();
    // Synchronize with threshold 5 MiB: release 2 MiB chunks while >= 5 MiB stay:
    // 10 -> 8 -> 6 (4 would be below 5).
    s.synchronize().unwrap();
    assert_eq!(p.attribute(PoolAttr::ReservedMemCurrent).unwrap(), 6 * MIB);
    // TrimTo keeps at least the given bytes: 6 -> 4 (>= 3), not 2.
    p.trim_to(3 << 20).unwrap();
    assert_eq!(p.attribute(PoolAttr::ReservedMemCurrent).unwrap(), 4 * MIB);
    p.trim_to(0).unwrap();
    assert_eq!(
        p.attribute(PoolAttr::ReservedMemCurrent).unwrap(),
        4 * MIB,
        "live 4 MiB"
    );
    s.free_ptr_async(live).unwrap();
    s.synchronize().unwrap();
    assert_eq!(
        p.attribute(PoolAttr::ReservedMemCurrent).unwrap(),
        4 * MIB,
        "under threshold"
    );
    p.trim_to(0).unwrap();
    assert_eq!(p.attribute(PoolAttr::ReservedMemCurrent).unwrap(), 0);
    assert_eq!(p.attribute(PoolAttr::ReservedMemHigh).unwrap(), 10 * MIB);
}

#[test]
fn destroy_with_outstanding_allocations_and_current_pool() {
    let dev = emu("emu:mi210");
    let s = dev.create_stream(0).unwrap();
    let p = dev.create_mem_pool(&PoolProps::device(0)).unwrap();
    let def = dev.default_mem_pool(0).unwrap();
    dev.set_mem_pool(0, &p).unwrap();
    assert_eq!(dev.mem_pool(0).unwrap(), p);
    let a = s.malloc_async(8192).unwrap().into_raw();
    assert_eq!(
        p.attribute(PoolAttr::UsedMemCurrent).unwrap(),
        8192,
        "from the current pool"
    );
    p.destroy().unwrap();
    assert_eq!(dev.mem_pool(0).unwrap(), def, "default is current again");
    assert_eq!(
        p.attribute(PoolAttr::UsedMemCurrent).unwrap_err().kind(),
        ErrorKind::InvalidHandle
    );
    assert_eq!(
        s.malloc_from_pool_async(64, &p).unwrap_err().kind(),
        ErrorKind::InvalidHandle
    );
    // The allocation stays usable.
    s.write_value32(a, 0x55, WriteValueFlags::DEFAULT).unwrap();
    s.synchronize().unwrap();
    assert_eq!(cell(a).load(Ordering::Acquire), 0x55);
    assert_eq!(dev.mem_pool_backing_bytes(), 2 * MIB);
    s.free_ptr_async(a).unwrap();
    s.synchronize().unwrap();
    assert_eq!(
        dev.mem_pool_backing_bytes(),
        0,
        "released after the last free"
    );
    let b = s.malloc_async(8192).unwrap().into_raw();
    assert_eq!(def.attribute(PoolAttr::UsedMemCurrent).unwrap(), 8192);
    s.free_ptr_async(b).unwrap();
    assert_eq!(p.destroy().unwrap_err().kind(), ErrorKind::InvalidHandle);
}

#[test]
fn set_mem_pool_rules() {
    let dev = emu("emu:mi210*2");
    let p1 = dev.create_mem_pool(&PoolProps::device(1)).unwrap();
    assert_eq!(
        dev.set_mem_pool(0, &p1).unwrap_err().kind(),
        ErrorKind::InvalidValue
    );
    dev.set_mem_pool(1, &p1).unwrap();
    assert_eq!(dev.mem_pool(1).unwrap(), p1);
    assert_ne!(dev.mem_pool(0).unwrap(), p1);
    // A pool on GPU 1 used from a stream on GPU 0.
    let s0 = dev.create_stream(0).unwrap();
    let a = s0.malloc_from_pool_async(4096, &p1).unwrap().into_raw();
    assert_eq!(p1.location().unwrap(), Location::Gpu(1));
    s0.free_ptr_async(a).unwrap();
    s0.synchronize().unwrap();
}

#[test]
fn peer_access_maps_pool_memory_on_a_second_gpu() {
    let dev = emu("emu:mi210*2");
    let s0 = dev.create_stream(0).unwrap();
    let s1 = dev.create_stream(1).unwrap();
    let p = dev.create_mem_pool(&PoolProps::device(0)).unwrap();
    assert_eq!(p.access(Location::Gpu(0)).unwrap(), AccessFlags::ReadWrite);
    assert_eq!(p.access(Location::Gpu(1)).unwrap(), AccessFlags::None);
    assert_eq!(
        p.access(Location::Gpu(2)).unwrap_err().kind(),
        ErrorKind::InvalidValue
    );
    let a = s0.malloc_from_pool_async(4096, &p).unwrap().into_raw();
    let rw1 = AccessDesc {
        location: Location::Gpu(1),
        flags: AccessFlags::ReadWrite,
    };
    p.set_access(&[rw1]).unwrap();
    assert_eq!(p.access(Location::Gpu(1)).unwrap(), AccessFlags::ReadWrite);
    // Existing chunk is now mapped on GPU 1; a chunk created later too.
    let b = s0.malloc_from_pool_async(8 << 20, &p).unwrap().into_raw();
    s1.write_value32(a, 0xa1, WriteValueFlags::DEFAULT).unwrap();
    s1.write_value32(b + 4, 0xb1, WriteValueFlags::DEFAULT)
        .unwrap();
    s1.synchronize().unwrap();
    assert_eq!(cell(a).load(Ordering::Acquire), 0xa1);
    assert_eq!(cell(b + 4).load(Ordering::Acquire), 0xb1);
    for (f, k) in [
        (AccessFlags::Read, ErrorKind::NotSupported),
        (AccessFlags::None, ErrorKind::InvalidValue),
    ] {
        let d = AccessDesc {
            location: Location::Gpu(0),
            flags: f,
        };
        assert_eq!(p.set_access(&[d]).unwrap_err().kind(), k, "{f:?}");
    }
    p.set_access(&[AccessDesc {
        location: Location::Gpu(1),
        flags: AccessFlags::None,
    }])
    .unwrap();
    assert_eq!(p.access(Location::Gpu(1)).unwrap(), AccessFlags::None);
    s0.free_ptr_async(a).unwrap();
    s0.free_ptr_async(b).unwrap();
    s0.synchronize().unwrap();
}

#[test]
fn no_peer_access_faults_the_peer() {
    let dev = emu("emu:mi210*2");
    let s0 = dev.create_stream(0).unwrap();
    let s1 = dev.create_stream(1).unwrap();
    let p = dev.create_mem_pool(&PoolProps::device(0)).unwrap();
    let a = s0.malloc_from_pool_async(4096, &p).unwrap().into_raw();
    s1.write_value32(a, 1, WriteValueFlags::DEFAULT).unwrap();
    assert!(
        s1.synchronize().is_err(),
        "GPU 1 has no mapping of the pool"
    );
    assert_eq!(cell(a).load(Ordering::Acquire), 0);
    s0.free_ptr_async(a).unwrap();
}

/// The `/proc/self/maps` line holding `va`: (start, end, permissions, path).
fn maps_at(va: u64) -> Option<(u64, u64, String, String)> {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("read /proc/self/maps");
    maps.lines().find_map(|l| {
        let mut f = l.split_ascii_whitespace();
        let (range, perms) = (f.next()?, f.next()?);
        let path = f.nth(3).unwrap_or("").to_string();
        let (lo, hi) = range.split_once('-')?;
        let (lo, hi) = (
            u64::from_str_radix(lo, 16).ok()?,
            u64::from_str_radix(hi, 16).ok()?,
        );
        (lo <= va && va < hi).then(|| (lo, hi, perms.to_string(), path))
    })
}

/// A pool that gave its slab back at a synchronize keeps only the slab's address range,
/// reserved PROT_NONE with nothing behind it (not the freed BO's pages), and grows again in
/// that range; the new BO's memory reads zeros from the CPU and the GPU although the
/// released one was written (KFD VRAM BOs are created with VRAM_WIPE_ON_RELEASE: the
/// kernel wipes a freed one with zeros; firmware-notes/kfd-memory.md).
#[test]
fn regrowth_reuses_the_released_range_with_wiped_memory() {
    let dev = emu("emu:mi210");
    let s = non_blocking(&dev, 0);
    let p = dev.default_mem_pool(0).unwrap();
    let host = dev.alloc(kfdrt::MemoryKind::HostPinned, 0, 4096).unwrap();
    let a = s.malloc_async(MIB as usize).unwrap();
    let va = a.va();
    let slab = p.attribute(PoolAttr::ReservedMemCurrent).unwrap();
    assert_eq!(slab, 4 * MIB, "a 1 MiB block grows a 4 MiB slab");
    s.memset(va, 0xa5, MIB).unwrap();
    s.synchronize().unwrap();
    cell(va + 8).store(0x1234_5678, Ordering::Release);
    let (lo, hi, perms, path) = maps_at(va).expect("the slab is mapped");
    assert_eq!(
        (lo, hi),
        (va, va + slab),
        "the BO's mapping covers the slab exactly"
    );
    assert!(
        perms.starts_with("rw") && path.contains("memfd"),
        "{perms} {path}"
    );
    a.free_async(&s).unwrap();
    s.synchronize().unwrap();
    assert_eq!(p.attribute(PoolAttr::ReservedMemCurrent).unwrap(), 0);
    for off in [0, MIB, slab - 4096] {
        let (lo, hi, perms, path) = maps_at(va + off).expect("the range stays reserved");
        assert_eq!(
            (lo, hi),
            (va, va + slab),
            "a mapping of its own, never merged with a neighbour (VaReservation::isolated)"
        );
        assert_eq!(
            (perms.as_str(), path.as_str()),
            ("---p", ""),
            "released: PROT_NONE anonymous, no pages of the freed BO"
        );
    }
    let b = s.malloc_async(MIB as usize).unwrap();
    assert_eq!(b.va(), va, "regrown in the kept range");
    assert_eq!(p.attribute(PoolAttr::ReservedMemCurrent).unwrap(), slab);
    assert_eq!(cell(va).load(Ordering::Acquire), 0, "CPU reads the wipe");
    assert_eq!(cell(va + 8).load(Ordering::Acquire), 0);
    assert_eq!(cell(va + MIB - 4).load(Ordering::Acquire), 0);
    host.write(0, &[0xff; 64]).unwrap();
    s.memcpy(host.va(), va, 64).unwrap();
    s.synchronize().unwrap();
    let mut out = [0xffu8; 64];
    host.read(0, &mut out).unwrap();
    assert_eq!(out, [0u8; 64], "the GPU reads the wipe too");
    b.free_async(&s).unwrap();
    s.synchronize().unwrap();
}

/// Threshold 0 (the default pool's): every synchronize gives the freed slab back to the
/// device — KFD's available memory rises by the slab again and the pool reserves nothing —
/// and the next allocation regrows the pool with memory the CPU and the GPU both read and
/// write (the regrown BO's pages are fresh, sealed only when exported).
#[test]
fn threshold_zero_release_returns_memory_and_regrowth_is_usable() {
    let dev = emu("emu:mi210");
    let s = non_blocking(&dev, 0);
    let p = dev.default_mem_pool(0).unwrap();
    let gpu_id = dev.gpu(0).unwrap().gpu_id;
    let avail = || kfdrt::kfd::ioctl::available_memory(dev.backend().as_ref(), gpu_id).unwrap();
    let before = avail();
    for round in 0..3u32 {
        let a = s.malloc_async(MIB as usize).unwrap();
        let reserved = p.attribute(PoolAttr::ReservedMemCurrent).unwrap();
        assert!(
            reserved >= MIB,
            "round {round}: grown by a slab, got {reserved}"
        );
        assert_eq!(
            before - avail(),
            reserved,
            "round {round}: KFD charges exactly the slab"
        );
        // GPU writes (memset), host reads; host writes, GPU copies it back over.
        s.memset(a.va(), 0x5a, MIB).unwrap();
        s.synchronize().unwrap();
        assert_eq!(cell(a.va() + MIB - 4).load(Ordering::Acquire), 0x5a5a_5a5a);
        cell(a.va()).store(0x1234_0000 | round, Ordering::Release);
        s.memcpy(a.va() + 64, a.va(), 4).unwrap();
        s.synchronize().unwrap();
        assert_eq!(
            cell(a.va() + 64).load(Ordering::Acquire),
            0x1234_0000 | round
        );
        a.free_async(&s).unwrap();
        s.synchronize().unwrap();
        assert_eq!(p.attribute(PoolAttr::ReservedMemCurrent).unwrap(), 0);
        assert_eq!(
            avail(),
            before,
            "round {round}: the release returned the slab"
        );
    }
}
