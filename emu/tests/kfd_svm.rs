//! SVM: SET_ATTR/GET_ATTR validation, range split and merge, GET_ATTR intersection rules,
//! PREFETCH_LOC migration (bytes move into emulated VRAM and back) with VRAM capacity
//! accounting, GPU access through the emulator's windows, CPU and engines agreeing.

mod kfd_common;

use kfd::abi::{self, SvmAttribute};
use kfd::{ioctl, Errno, KfdError};
use kfd_common::{alloc, errno, gpu_map, open, Dev};

const P: u64 = 4096;
const MIB: u64 = 1 << 20;

/// Anonymous read-write memory, 2 MiB aligned.
struct Host {
    raw: *mut core::ffi::c_void,
    raw_len: usize,
    base: u64,
}

impl Host {
    fn new(len: u64) -> Host {
        let raw_len = (len + 2 * MIB) as usize;
        // SAFETY: a fresh private anonymous mapping.
        let raw = unsafe {
            rustix::mm::mmap_anonymous(
                core::ptr::null_mut(),
                raw_len,
                rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
                rustix::mm::MapFlags::PRIVATE,
            )
        }
        .unwrap();
        let base = (raw as u64).div_ceil(2 * MIB) * 2 * MIB;
        Host { raw, raw_len, base }
    }
}

impl Drop for Host {
    fn drop(&mut self) {
        // SAFETY: ours.
        unsafe { rustix::mm::munmap(self.raw, self.raw_len).unwrap() };
    }
}

fn attr(type_: u32, value: u32) -> SvmAttribute {
    SvmAttribute { type_, value }
}

fn set(dev: &Dev, start: u64, size: u64, attrs: &[SvmAttribute]) -> Result<(), KfdError> {
    let mut a = attrs.to_vec();
    ioctl::svm(dev.b(), abi::KFD_IOCTL_SVM_OP_SET_ATTR, start, size, &mut a)
}

fn get(
    dev: &Dev,
    start: u64,
    size: u64,
    attrs: &[SvmAttribute],
) -> Result<Vec<SvmAttribute>, KfdError> {
    let mut a = attrs.to_vec();
    ioctl::svm(dev.b(), abi::KFD_IOCTL_SVM_OP_GET_ATTR, start, size, &mut a)?;
    Ok(a)
}

fn get1(dev: &Dev, start: u64, size: u64, type_: u32) -> u32 {
    get(dev, start, size, &[attr(type_, 0)]).unwrap()[0].value
}

#[test]
fn argument_errors() {
    let dev = open("emu:mi300x");
    let h = Host::new(4 * MIB);
    let g = dev.gpus[0];
    let ok = [attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g)];
    assert_eq!(
        errno(set(&dev, h.base + 12, P, &ok)),
        Errno::INVAL,
        "unaligned start"
    );
    assert_eq!(
        errno(set(&dev, h.base, P + 1, &ok)),
        Errno::INVAL,
        "unaligned size"
    );
    assert_eq!(errno(set(&dev, h.base, 0, &ok)), Errno::INVAL, "size 0");
    assert_eq!(errno(set(&dev, 0, P, &ok)), Errno::INVAL, "address 0");
    let mut a = ok.to_vec();
    assert_eq!(
        errno(ioctl::svm(dev.b(), 7, h.base, P, &mut a)),
        Errno::INVAL,
        "unknown op"
    );
    assert_eq!(
        errno(set(&dev, h.base, P, &[attr(99, 0)])),
        Errno::INVAL,
        "unknown attribute"
    );
    assert_eq!(
        errno(set(
            &dev,
            h.base,
            P,
            &[attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, 0x4242)]
        )),
        Errno::INVAL
    );
    assert_eq!(
        errno(set(
            &dev,
            h.base,
            P,
            &[attr(abi::KFD_IOCTL_SVM_ATTR_NO_ACCESS, 0)]
        )),
        Errno::INVAL
    );
    assert_eq!(
        errno(set(
            &dev,
            h.base,
            P,
            &[attr(
                abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC,
                abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED
            )]
        )),
        Errno::INVAL,
        "PREFETCH_LOC must be a GPU or system memory"
    );
    set(
        &dev,
        h.base,
        P,
        &[attr(
            abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC,
            abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED,
        )],
    )
    .unwrap();
    // Unmapped CPU memory: EFAULT, for SET and GET.
    let hole = 0x6000_0000_0000;
    assert_eq!(errno(set(&dev, hole, P, &ok)), Errno::FAULT);
    assert_eq!(errno(get(&dev, hole, P, &ok)), Errno::FAULT);
    // GET_ATTR does not take ACCESS_IN_PLACE / NO_ACCESS, nor unknown GPUs.
    assert_eq!(
        errno(get(
            &dev,
            h.base,
            P,
            &[attr(abi::KFD_IOCTL_SVM_ATTR_NO_ACCESS, g)]
        )),
        Errno::INVAL
    );
    assert_eq!(
        errno(get(
            &dev,
            h.base,
            P,
            &[attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE, g)]
        )),
        Errno::INVAL
    );
    assert_eq!(
        errno(get(
            &dev,
            h.base,
            P,
            &[attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, 0x4242)]
        )),
        Errno::INVAL
    );
}

#[test]
fn svm_and_bos_exclude_each_other() {
    let dev = open("emu:mi210");
    let h = Host::new(8 * MIB);
    let g = dev.gpus[0];
    set(
        &dev,
        h.base,
        2 * MIB,
        &[attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g)],
    )
    .unwrap();
    // A BO over an SVM range: EADDRINUSE.
    assert_eq!(
        errno(alloc(
            &dev,
            0,
            h.base + MIB,
            P,
            abi::KFD_IOC_ALLOC_MEM_FLAGS_GTT
        )),
        Errno::ADDRINUSE
    );
    let mut u = abi::AllocMemoryOfGpuArgs {
        va_addr: h.base + 4 * MIB,
        size: P,
        mmap_offset: h.base,
        gpu_id: g,
        flags: abi::KFD_IOC_ALLOC_MEM_FLAGS_USERPTR,
        ..Default::default()
    };
    assert_eq!(
        errno(ioctl::alloc_memory_of_gpu(dev.b(), &mut u)),
        Errno::ADDRINUSE,
        "userptr over SVM"
    );
    // An SVM range over a GPU-mapped BO: EADDRINUSE.
    let bo = alloc(
        &dev,
        0,
        h.base + 4 * MIB,
        2 * MIB,
        abi::KFD_IOC_ALLOC_MEM_FLAGS_GTT,
    )
    .unwrap();
    gpu_map(&dev, bo.handle, &[0]).unwrap();
    assert_eq!(
        errno(set(
            &dev,
            h.base + 4 * MIB,
            P,
            &[attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g)]
        )),
        Errno::ADDRINUSE
    );
    assert_eq!(
        errno(get(
            &dev,
            h.base + 5 * MIB,
            P,
            &[attr(abi::KFD_IOCTL_SVM_ATTR_GRANULARITY, 0)]
        )),
        Errno::ADDRINUSE
    );
}

#[test]
fn defaults_without_ranges() {
    let dev = open("emu:mi300x");
    let h = Host::new(2 * MIB);
    let g = dev.gpus[0];
    let v = get(
        &dev,
        h.base,
        MIB,
        &[
            attr(abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, 0),
            attr(abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, 0),
            attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g),
            attr(abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS, 0),
            attr(abi::KFD_IOCTL_SVM_ATTR_CLR_FLAGS, 0),
            attr(abi::KFD_IOCTL_SVM_ATTR_GRANULARITY, 0),
        ],
    )
    .unwrap();
    assert_eq!(v[0].value, abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED);
    assert_eq!(v[1].value, abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED);
    assert_eq!(
        v[2].type_,
        abi::KFD_IOCTL_SVM_ATTR_NO_ACCESS,
        "XNACK off: no access by default"
    );
    assert_eq!(v[3].value, kfd_emu::SVM_DEFAULT_FLAGS);
    assert_eq!(v[4].value, !kfd_emu::SVM_DEFAULT_FLAGS);
    assert_eq!(v[5].value, 9);
    // With XNACK on, every GPU may access unregistered memory, and new ranges too.
    ioctl::set_xnack_mode(dev.b(), 1).unwrap();
    assert_eq!(
        get(
            &dev,
            h.base,
            MIB,
            &[attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g)]
        )
        .unwrap()[0]
            .type_,
        abi::KFD_IOCTL_SVM_ATTR_ACCESS
    );
    set(
        &dev,
        h.base,
        MIB,
        &[attr(abi::KFD_IOCTL_SVM_ATTR_GRANULARITY, 4)],
    )
    .unwrap();
    assert_eq!(
        get(
            &dev,
            h.base,
            MIB,
            &[attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g)]
        )
        .unwrap()[0]
            .type_,
        abi::KFD_IOCTL_SVM_ATTR_ACCESS
    );
    assert!(dev.emu.gpu_memory().resolve(g, h.base, 8).is_ok());
}

#[test]
fn split_merge_and_intersection() {
    let dev = open("emu:mi210*2");
    let (g0, g1) = (dev.gpus[0], dev.gpus[1]);
    let h = Host::new(4 * MIB);
    let base = h.base;
    set(
        &dev,
        base,
        16 * P,
        &[
            attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g0),
            attr(abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, g0),
            attr(
                abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS,
                abi::KFD_IOCTL_SVM_FLAG_GPU_EXEC,
            ),
        ],
    )
    .unwrap();
    assert_eq!(dev.emu.svm_range_count(), 1);
    // Change the middle: three ranges.
    set(
        &dev,
        base + 4 * P,
        4 * P,
        &[
            attr(
                abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC,
                abi::KFD_IOCTL_SVM_LOCATION_SYSMEM,
            ),
            attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE, g1),
            attr(
                abi::KFD_IOCTL_SVM_ATTR_CLR_FLAGS,
                abi::KFD_IOCTL_SVM_FLAG_COHERENT,
            ),
            attr(abi::KFD_IOCTL_SVM_ATTR_GRANULARITY, 100),
        ],
    )
    .unwrap();
    assert_eq!(dev.emu.svm_range_count(), 3);
    // Each part on its own.
    assert_eq!(
        get1(&dev, base, 4 * P, abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC),
        g0
    );
    assert_eq!(
        get1(
            &dev,
            base + 4 * P,
            4 * P,
            abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC
        ),
        0
    );
    assert_eq!(
        get1(&dev, base + 4 * P, P, abi::KFD_IOCTL_SVM_ATTR_GRANULARITY),
        0x3f,
        "clamped to 0x3F"
    );
    // Over all: mixed locations are undefined, flags ANDed / NORed, granularity min.
    let all = get(
        &dev,
        base,
        16 * P,
        &[
            attr(abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, 0),
            attr(abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS, 0),
            attr(abi::KFD_IOCTL_SVM_ATTR_CLR_FLAGS, 0),
            attr(abi::KFD_IOCTL_SVM_ATTR_GRANULARITY, 0),
            attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g0),
            attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g1),
        ],
    )
    .unwrap();
    assert_eq!(all[0].value, abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED);
    let f = abi::KFD_IOCTL_SVM_FLAG_HOST_ACCESS | abi::KFD_IOCTL_SVM_FLAG_GPU_EXEC;
    assert_eq!(all[1].value, f, "flags set everywhere");
    assert_eq!(
        all[2].value,
        !(f | abi::KFD_IOCTL_SVM_FLAG_COHERENT),
        "flags clear everywhere"
    );
    assert_eq!(all[3].value, 9, "minimum granularity");
    assert_eq!(
        all[4].type_,
        abi::KFD_IOCTL_SVM_ATTR_ACCESS,
        "GPU 0 everywhere"
    );
    assert_eq!(
        all[5].type_,
        abi::KFD_IOCTL_SVM_ATTR_NO_ACCESS,
        "GPU 1 only in the middle"
    );
    assert_eq!(
        get(
            &dev,
            base + 5 * P,
            P,
            &[attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g1)]
        )
        .unwrap()[0]
            .type_,
        abi::KFD_IOCTL_SVM_ATTR_ACCESS_IN_PLACE
    );
    // Make the middle like the rest again: merged back into one range.
    set(
        &dev,
        base + 4 * P,
        4 * P,
        &[
            attr(abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC, g0),
            attr(abi::KFD_IOCTL_SVM_ATTR_NO_ACCESS, g1),
            attr(
                abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS,
                abi::KFD_IOCTL_SVM_FLAG_COHERENT,
            ),
            attr(abi::KFD_IOCTL_SVM_ATTR_GRANULARITY, 9),
        ],
    )
    .unwrap();
    assert_eq!(dev.emu.svm_range_count(), 1);
    assert_eq!(
        get1(&dev, base, 16 * P, abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC),
        g0
    );
    // A range straddling registered and unregistered pages: only registered ones count.
    assert_eq!(
        get1(
            &dev,
            base + 12 * P,
            8 * P,
            abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC
        ),
        g0
    );
    // Extending over a gap creates a new range with default attributes.
    set(
        &dev,
        base + 20 * P,
        2 * P,
        &[attr(abi::KFD_IOCTL_SVM_ATTR_GRANULARITY, 3)],
    )
    .unwrap();
    assert_eq!(dev.emu.svm_range_count(), 2);
    assert_eq!(
        get1(
            &dev,
            base + 20 * P,
            2 * P,
            abi::KFD_IOCTL_SVM_ATTR_PREFERRED_LOC
        ),
        abi::KFD_IOCTL_SVM_LOCATION_UNDEFINED
    );
}

#[test]
fn gpu_access_through_windows() {
    let dev = open("emu:mi300x");
    let g = dev.gpus[0];
    let h = Host::new(2 * MIB);
    let mem = dev.emu.gpu_memory();
    // SAFETY: the host buffer is mapped read-write.
    unsafe { (h.base as *mut u64).add(3).write_volatile(0x77) };
    set(
        &dev,
        h.base,
        8 * P,
        &[attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g)],
    )
    .unwrap();
    let w = mem.resolve(g, h.base + 24, 8).unwrap();
    assert_eq!(w.load_u64(h.base + 24).unwrap(), 0x77);
    w.store_u64(h.base + 32, 0x88).unwrap();
    // SAFETY: as above.
    assert_eq!(
        unsafe { (h.base as *const u64).add(4).read_volatile() },
        0x88
    );
    // Read-only for the GPU.
    set(
        &dev,
        h.base,
        8 * P,
        &[attr(
            abi::KFD_IOCTL_SVM_ATTR_SET_FLAGS,
            abi::KFD_IOCTL_SVM_FLAG_GPU_RO,
        )],
    )
    .unwrap();
    let w = mem.resolve(g, h.base, 8).unwrap();
    assert!(w.store_u64(h.base, 1).is_err());
    // Access revoked.
    set(
        &dev,
        h.base,
        8 * P,
        &[attr(abi::KFD_IOCTL_SVM_ATTR_NO_ACCESS, g)],
    )
    .unwrap();
    assert!(mem.resolve(g, h.base, 8).is_err());
    assert!(
        mem.resolve(g, h.base + 8 * P, 8).is_err(),
        "outside the range"
    );
}

#[test]
fn prefetch_migrates_with_capacity_accounting() {
    let dev = open("emu:mi210[vram=4M]");
    let d = dev.b();
    let g = dev.gpus[0];
    let h = Host::new(8 * MIB);
    for i in 0..(6 * MIB / 8) {
        // SAFETY: mapped read-write.
        unsafe {
            (h.base as *mut u64)
                .add(i as usize)
                .write_volatile(i ^ 0x5a5a)
        };
    }
    let access = attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g);
    assert_eq!(ioctl::available_memory(d, g).unwrap(), 4 * MIB);
    set(
        &dev,
        h.base,
        2 * MIB,
        &[access, attr(abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, g)],
    )
    .unwrap();
    assert_eq!(dev.emu.svm_location(h.base), Some(g));
    assert_eq!(ioctl::available_memory(d, g).unwrap(), 2 * MIB);
    assert_eq!(
        get1(&dev, h.base, 2 * MIB, abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC),
        g
    );
    // 4 MiB more do not fit: the range stays in system memory, and that is no error.
    set(
        &dev,
        h.base + 2 * MIB,
        4 * MIB,
        &[access, attr(abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, g)],
    )
    .unwrap();
    assert_eq!(dev.emu.svm_location(h.base + 2 * MIB), Some(0));
    assert_eq!(ioctl::available_memory(d, g).unwrap(), 2 * MIB);
    // Neither does a VRAM BO bigger than what is left.
    assert_eq!(
        errno(alloc(
            &dev,
            0,
            0x7000_0000,
            4 * MIB,
            abi::KFD_IOC_ALLOC_MEM_FLAGS_VRAM
        )),
        Errno::NOMEM
    );
    // Half the VRAM-resident range goes back to system memory.
    set(
        &dev,
        h.base,
        MIB,
        &[attr(abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, 0)],
    )
    .unwrap();
    assert_eq!(dev.emu.svm_location(h.base), Some(0));
    assert_eq!(dev.emu.svm_location(h.base + MIB), Some(g));
    // 1 MiB still resident; availability is reported in 2 MiB granules.
    assert_eq!(ioctl::available_memory(d, g).unwrap(), 2 * MIB);
    alloc(
        &dev,
        0,
        0x7000_0000,
        3 * MIB,
        abi::KFD_IOC_ALLOC_MEM_FLAGS_VRAM,
    )
    .map(|a| a.handle)
    .map(|h| ioctl::free_memory_of_gpu(d, h).unwrap())
    .unwrap();
    // Every byte survived, seen by the GPU and the CPU.
    let mem = dev.emu.gpu_memory();
    for i in (0..(6 * MIB / 8)).step_by(511) {
        let va = h.base + i * 8;
        assert_eq!(
            mem.resolve(g, va, 8).unwrap().load_u64(va).unwrap(),
            i ^ 0x5a5a
        );
        // SAFETY: mapped.
        assert_eq!(unsafe { (va as *const u64).read_volatile() }, i ^ 0x5a5a);
    }
    set(
        &dev,
        h.base,
        6 * MIB,
        &[attr(abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, 0)],
    )
    .unwrap();
    assert_eq!(ioctl::available_memory(d, g).unwrap(), 4 * MIB);
}

#[test]
fn prefetch_with_other_gpus_using_the_range_stays_in_system_memory() {
    let dev = open("emu:mi210*2");
    let (g0, g1) = (dev.gpus[0], dev.gpus[1]);
    let h = Host::new(2 * MIB);
    set(
        &dev,
        h.base,
        MIB,
        &[
            attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g0),
            attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g1),
            attr(abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, g0),
        ],
    )
    .unwrap();
    assert_eq!(
        dev.emu.svm_location(h.base),
        Some(0),
        "no XGMI hive: system memory"
    );
    set(
        &dev,
        h.base,
        MIB,
        &[
            attr(abi::KFD_IOCTL_SVM_ATTR_NO_ACCESS, g1),
            attr(abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, g0),
        ],
    )
    .unwrap();
    assert_eq!(dev.emu.svm_location(h.base), Some(g0));
    // Prefetch to the other GPU moves it.
    set(
        &dev,
        h.base,
        MIB,
        &[
            attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g1),
            attr(abi::KFD_IOCTL_SVM_ATTR_NO_ACCESS, g0),
            attr(abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, g1),
        ],
    )
    .unwrap();
    assert_eq!(dev.emu.svm_location(h.base), Some(g1));
    assert_eq!(ioctl::available_memory(dev.b(), g0).unwrap(), 64 << 30);
}

/// The /proc/self/maps line holding `addr`: (permissions, path).
fn mapping_of(addr: u64) -> (String, String) {
    let maps = std::fs::read_to_string("/proc/self/maps").unwrap();
    for line in maps.lines() {
        let mut f = line.split_ascii_whitespace();
        let (lo, hi) = f.next().unwrap().split_once('-').unwrap();
        let (lo, hi) = (
            u64::from_str_radix(lo, 16).unwrap(),
            u64::from_str_radix(hi, 16).unwrap(),
        );
        if (lo..hi).contains(&addr) {
            let perms = f.next().unwrap().to_owned();
            let path = f.nth(3).unwrap_or("").to_owned();
            return (perms, path);
        }
    }
    panic!("{addr:#x} is not mapped");
}

fn fill(addr: u64, len: u64, seed: u64) {
    for i in 0..len / 8 {
        // SAFETY: the callers pass mapped read-write memory.
        unsafe {
            (addr as *mut u64)
                .add(i as usize)
                .write_volatile(i.wrapping_mul(0x9e37_79b9) ^ seed)
        };
    }
}

/// `[addr, addr+len)` holds what `fill(addr, len, seed)` wrote.
fn holds(addr: u64, len: u64, seed: u64) -> bool {
    holds_from(addr, 0, len, seed)
}

/// An SDMA queue on GPU 0 of `dev` and a 2 MiB GTT staging buffer the test reads back.
struct Sdma {
    b: kfd_common::Bufs,
    q: abi::CreateQueueArgs,
    db: *mut u64,
    wptr: u64,
    staging: u64,
    fences: u32,
}

impl Sdma {
    fn new(dev: &Dev) -> Sdma {
        let b = kfd_common::bufs(dev, 0);
        let staging = b.next;
        kfd_common::gtt(dev, 0, staging, 2 * MIB);
        let mut q = kfd_common::sdma_args(dev, 0, &b);
        let db = kfd_common::create_with_doorbell(dev, &mut q);
        Sdma {
            b,
            q,
            db,
            wptr: 0,
            staging,
            fences: 0,
        }
    }

    /// Run `pkts`, then a fence into the last staging page, and wait for it.
    fn run(&mut self, dev: &Dev, pkts: &[pm4::sdma::SdmaPacket<'_>]) {
        self.fences += 1;
        let fence_va = self.staging + 2 * MIB - 8;
        let mut all = pkts.to_vec();
        all.push(pm4::sdma::SdmaPacket::Fence(pm4::sdma::Fence::new(
            fence_va,
            self.fences,
        )));
        self.wptr = kfd_common::submit_sdma(dev, &self.b, self.db, &self.q, self.wptr, &all);
        let want = self.fences;
        assert!(
            kfd_common::wait_until(|| {
                // SAFETY: the staging BO is CPU-mapped at its VA.
                let v = unsafe { (fence_va as *const u32).read_volatile() };
                v == want
            }),
            "SDMA fence {want}"
        );
        assert_eq!(
            dev.emu.queue_status(self.q.queue_id),
            Some(kfd_emu::engine::QueueStatus::Active)
        );
    }

    fn copy(&mut self, dev: &Dev, src: u64, dst: u64, bytes: u64) {
        self.run(
            dev,
            &[pm4::sdma::SdmaPacket::CopyLinear(pm4::sdma::CopyLinear {
                src,
                dst,
                bytes: bytes as u32,
                tmz: false,
                parameter: 0,
            })],
        );
    }

    fn const_fill(&mut self, dev: &Dev, dst: u64, bytes: u64, data: u32) {
        self.run(
            dev,
            &[pm4::sdma::SdmaPacket::ConstFill(pm4::sdma::ConstFill {
                dst,
                data,
                bytes: bytes as u32,
                fill_size: 2,
            })],
        );
    }
}

#[test]
fn migration_moves_bytes_and_cpu_and_engines_agree() {
    let dev = open("emu:mi210");
    let d = dev.b();
    let g = dev.gpus[0];
    let mut sdma = Sdma::new(&dev);
    let st = sdma.staging;
    let h = Host::new(2 * MIB);
    let a = h.base;
    fill(a, MIB, 1);
    let avail = ioctl::available_memory(d, g).unwrap();
    assert_eq!(
        mapping_of(a).0,
        "rw-p",
        "anonymous memory before the prefetch"
    );
    set(
        &dev,
        a,
        MIB,
        &[
            attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g),
            attr(abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, g),
        ],
    )
    .unwrap();
    assert_eq!(dev.emu.svm_location(a), Some(g));
    assert_eq!(ioctl::available_memory(d, g).unwrap(), avail - 2 * MIB);
    // The bytes moved into the GPU's VRAM, mapped shared at the same address.
    let (perms, path) = mapping_of(a);
    assert_eq!(perms, "rw-s");
    assert!(path.starts_with("/memfd:kfd-emu-svm-vram"), "{path}");
    assert!(
        holds(a, MIB, 1),
        "the CPU sees the same bytes at the same address"
    );
    // Engine reads VRAM the CPU wrote before and after the migration.
    fill(a + 64 * P, 16 * P, 2);
    sdma.copy(&dev, a, st, 64 * P);
    sdma.copy(&dev, a + 64 * P, st + 64 * P, 16 * P);
    assert!(holds(st, 64 * P, 1));
    assert!(holds(st + 64 * P, 16 * P, 2));
    // Engine writes VRAM; the CPU reads them at the range's address.
    sdma.const_fill(&dev, a + 100 * P, P, 0x5eed_f00d);
    sdma.copy(&dev, st, a + 101 * P, P);
    // SAFETY: the range is mapped read-write.
    let word = |va: u64| unsafe { (va as *const u32).read_volatile() };
    assert!((0..1024).all(|i| word(a + 100 * P + i * 4) == 0x5eed_f00d));
    assert!(holds(a + 101 * P, P, 1));

    // Back to system memory: fresh anonymous pages at the same address, every byte kept.
    set(
        &dev,
        a,
        MIB,
        &[attr(
            abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC,
            abi::KFD_IOCTL_SVM_LOCATION_SYSMEM,
        )],
    )
    .unwrap();
    assert_eq!(dev.emu.svm_location(a), Some(0));
    assert_eq!(ioctl::available_memory(d, g).unwrap(), avail);
    assert_eq!(mapping_of(a).0, "rw-p");
    assert!(holds(a, 64 * P, 1));
    assert!(holds(a + 64 * P, 16 * P, 2));
    assert!((0..1024).all(|i| word(a + 100 * P + i * 4) == 0x5eed_f00d));
    assert!(holds(a + 101 * P, P, 1));
    assert!(holds_from(a, 102 * P, MIB - 102 * P, 1), "untouched pages");
    // CPU writes system memory, the engine reads them; the engine writes, the CPU reads.
    fill(a + 200 * P, 8 * P, 3);
    sdma.copy(&dev, a + 200 * P, st + 128 * P, 8 * P);
    assert!(holds(st + 128 * P, 8 * P, 3));
    sdma.const_fill(&dev, a + 210 * P, P, 0x0bad_cafe);
    assert!((0..1024).all(|i| word(a + 210 * P + i * 4) == 0x0bad_cafe));
}

#[test]
fn partial_and_gpu_to_gpu_migrations_keep_bytes() {
    let dev = open("emu:mi210*2");
    let (g0, g1) = (dev.gpus[0], dev.gpus[1]);
    let h = Host::new(4 * MIB);
    let a = h.base;
    fill(a, 4 * MIB, 7);
    set(
        &dev,
        a,
        4 * MIB,
        &[
            attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g0),
            attr(abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, g0),
        ],
    )
    .unwrap();
    assert_eq!(dev.emu.svm_location(a), Some(g0));
    // The middle to the other GPU, then its first half back to system memory.
    set(
        &dev,
        a + MIB,
        2 * MIB,
        &[
            attr(abi::KFD_IOCTL_SVM_ATTR_NO_ACCESS, g0),
            attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g1),
            attr(abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, g1),
        ],
    )
    .unwrap();
    set(
        &dev,
        a + MIB,
        MIB,
        &[attr(abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, 0)],
    )
    .unwrap();
    let locs: Vec<_> = (0..4).map(|i| dev.emu.svm_location(a + i * MIB)).collect();
    assert_eq!(locs, [Some(g0), Some(0), Some(g1), Some(g0)]);
    assert_eq!(mapping_of(a + MIB).0, "rw-p");
    assert_eq!(mapping_of(a + 2 * MIB).0, "rw-s");
    assert!(holds(a, 4 * MIB, 7), "the CPU sees every byte");
    // Each GPU reads the pieces it may access.
    let mem = dev.emu.gpu_memory();
    for (gpu, va) in [(g0, a), (g0, a + 3 * MIB), (g1, a + MIB), (g1, a + 2 * MIB)] {
        let w = mem.resolve(gpu, va, 8).unwrap();
        let mut buf = vec![0u8; MIB as usize];
        w.read(va, &mut buf).unwrap();
        let want: Vec<u8> = (0..MIB / 8)
            .flat_map(|i| {
                let idx = (va - a) / 8 + i;
                (idx.wrapping_mul(0x9e37_79b9) ^ 7).to_ne_bytes()
            })
            .collect();
        assert!(buf == want, "GPU {gpu:#x} at {va:#x}");
    }
    // Writes through a GPU window land where the CPU reads.
    let w = mem.resolve(g1, a + 2 * MIB, 8).unwrap();
    w.store_u64(a + 2 * MIB + 8, 0x1234).unwrap();
    // SAFETY: mapped.
    assert_eq!(
        unsafe { ((a + 2 * MIB + 8) as *const u64).read_volatile() },
        0x1234
    );
    // Everything back: VRAM returned on both GPUs.
    set(
        &dev,
        a,
        4 * MIB,
        &[attr(abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, 0)],
    )
    .unwrap();
    for g in [g0, g1] {
        assert_eq!(ioctl::available_memory(dev.b(), g).unwrap(), 64 << 30);
    }
    assert_eq!(mapping_of(a + 3 * MIB).0, "rw-p");
    // SAFETY: mapped.
    assert_eq!(
        unsafe { ((a + 2 * MIB + 8) as *const u64).read_volatile() },
        0x1234
    );
    assert!(holds(a, 2 * MIB + 8, 7));
    assert!(holds_from(a, 2 * MIB + 16, 2 * MIB - 16, 7));
}

/// Like `holds`, for `[addr+off, addr+off+len)` of a buffer filled from `addr` with `seed`.
fn holds_from(addr: u64, off: u64, len: u64, seed: u64) -> bool {
    (off / 8..(off + len) / 8).all(|i| {
        // SAFETY: the callers pass mapped memory.
        let v = unsafe { (addr as *const u64).add(i as usize).read_volatile() };
        v == i.wrapping_mul(0x9e37_79b9) ^ seed
    })
}

#[test]
fn migration_leaves_replaced_and_shared_memory_alone() {
    let dev = open("emu:mi210");
    let d = dev.b();
    let g = dev.gpus[0];
    let avail = ioctl::available_memory(d, g).unwrap();
    let h = Host::new(4 * MIB);
    let a = h.base;
    let both = [
        attr(abi::KFD_IOCTL_SVM_ATTR_ACCESS, g),
        attr(abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, g),
    ];
    set(&dev, a, MIB, &both).unwrap();
    assert_eq!(dev.emu.svm_location(a), Some(g));
    // The application replaces the memory (as after munmap and a new mmap there).
    // SAFETY: our own test mapping.
    unsafe {
        rustix::mm::mmap_anonymous(
            a as *mut core::ffi::c_void,
            MIB as usize,
            rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
            rustix::mm::MapFlags::PRIVATE | rustix::mm::MapFlags::FIXED,
        )
    }
    .unwrap();
    fill(a, MIB, 9);
    set(
        &dev,
        a,
        MIB,
        &[attr(abi::KFD_IOCTL_SVM_ATTR_PREFETCH_LOC, 0)],
    )
    .unwrap();
    assert_eq!(dev.emu.svm_location(a), Some(0));
    assert_eq!(ioctl::available_memory(d, g).unwrap(), avail, "VRAM freed");
    assert!(holds(a, MIB, 9), "the new memory was not touched");

    // Shared (file) pages do not migrate (only anonymous memory does): the range stays in
    // system memory, nothing is charged, and the mapping is the application's own.
    let fd = rustix::fs::memfd_create("svm-test-shared", rustix::fs::MemfdFlags::CLOEXEC).unwrap();
    rustix::fs::ftruncate(&fd, MIB).unwrap();
    let s = a + 2 * MIB;
    // SAFETY: our own test mapping.
    unsafe {
        rustix::mm::mmap(
            s as *mut core::ffi::c_void,
            MIB as usize,
            rustix::mm::ProtFlags::READ | rustix::mm::ProtFlags::WRITE,
            rustix::mm::MapFlags::SHARED | rustix::mm::MapFlags::FIXED,
            &fd,
            0,
        )
    }
    .unwrap();
    fill(s, MIB, 4);
    set(&dev, s, MIB, &both).unwrap();
    assert_eq!(dev.emu.svm_location(s), Some(0));
    assert_eq!(ioctl::available_memory(d, g).unwrap(), avail);
    assert!(mapping_of(s).1.starts_with("/memfd:svm-test-shared"));
    let w = dev.emu.gpu_memory().resolve(g, s, 8).unwrap();
    assert_eq!(w.load_u64(s + 8).unwrap(), 0x9e37_79b9 ^ 4);
}
