//! The address ranges a pool keeps for regrowth are bounded. One test alone in its binary:
//! it looks for ranges the pool gave back in `/proc/self/maps`, which a concurrent test's
//! reservation could take.

mod common;

use common::{emu, non_blocking};
use kfdrt::{PoolAttr, PoolProps};

const MIB: usize = 1 << 20;

/// Whether every page of `[va, va + len)` is reserved PROT_NONE (anonymous) right now.
fn reserved_none(va: u64, len: u64) -> bool {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("read /proc/self/maps");
    let mut cur = va;
    for l in maps.lines() {
        let mut f = l.split_ascii_whitespace();
        let (Some(range), Some(perms)) = (f.next(), f.next()) else {
            continue;
        };
        let path = f.nth(3).unwrap_or("");
        let Some((lo, hi)) = range.split_once('-') else {
            continue;
        };
        let (lo, hi) = (
            u64::from_str_radix(lo, 16).unwrap(),
            u64::from_str_radix(hi, 16).unwrap(),
        );
        if hi <= cur || lo > cur {
            continue;
        }
        if perms != "---p" || !path.is_empty() {
            return false;
        }
        cur = hi;
        if cur >= va + len {
            return true;
        }
    }
    false
}

/// Ten dedicated chunks of ten sizes released at one synchronize: the pool keeps the
/// ranges of eight (SPARE_VA_SLOTS) and gives the others back to the process; a chunk of
/// a kept size grows again in its kept range.
#[test]
fn kept_ranges_are_bounded_and_reused_by_size() {
    let dev = emu("emu:mi210");
    let s = non_blocking(&dev, 0);
    let p = dev.create_mem_pool(&PoolProps::device(0)).unwrap();
    // Dedicated classes (above 1 MiB): each its own chunk of exactly the class size.
    let sizes: Vec<usize> = [5, 6, 7, 8, 10, 12, 14, 16, 20, 24]
        .iter()
        .map(|m| m * MIB)
        .collect();
    let blocks: Vec<_> = sizes
        .iter()
        .map(|&n| s.malloc_from_pool_async(n, &p).unwrap())
        .collect();
    let ranges: Vec<(u64, u64)> = blocks.iter().map(|b| (b.va(), b.len() as u64)).collect();
    let total: u64 = sizes.iter().map(|&n| n as u64).sum();
    assert_eq!(p.attribute(PoolAttr::ReservedMemCurrent).unwrap(), total);
    for b in blocks {
        b.free_async(&s).unwrap();
    }
    s.synchronize().unwrap();
    assert_eq!(p.attribute(PoolAttr::ReservedMemCurrent).unwrap(), 0);
    let kept: Vec<bool> = ranges.iter().map(|&(va, n)| reserved_none(va, n)).collect();
    assert_eq!(
        kept.iter().filter(|&&k| k).count(),
        8,
        "ranges still reserved after the release: {kept:?}"
    );
    // Each kept range takes the next chunk of its size again.
    for (i, &(va, n)) in ranges.iter().enumerate().filter(|(i, _)| kept[*i]) {
        let b = s.malloc_from_pool_async(n as usize, &p).unwrap();
        assert_eq!(b.va(), va, "chunk {i} ({n:#x} bytes) regrown in its range");
        b.free_async(&s).unwrap();
    }
    s.synchronize().unwrap();
    assert_eq!(p.attribute(PoolAttr::ReservedMemCurrent).unwrap(), 0);
    p.destroy().unwrap();
}
